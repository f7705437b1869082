"""With torch (skipped where it cannot be imported): symmetric tensors through DLPack,
bfloat16, operations on tensors, and the torch.ops.symm custom ops, eager and under
torch.compile."""
import numpy as np
import pytest

import symm
from util import me, n

torch = pytest.importorskip("torch")


def tdata(shape, dtype, *tags):
    g = torch.Generator().manual_seed(hash((20240607,) + tags) & 0x7FFFFFFF)
    return (torch.rand(shape, generator=g) * 8 - 4).to(dtype)


def test_empty_gives_tensors_on_the_heap():
    for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8):
        x = symm.empty((3, 5), dt, backend="torch")
        assert isinstance(x, torch.Tensor) and x.dtype == dt and x.shape == (3, 5)
        x.copy_(tdata((3, 5), dt, 1, me()))
        symm.barrier()
        for p in range(n()):
            y = symm.peer(x, p)
            assert isinstance(y, torch.Tensor)
            assert torch.equal(y, tdata((3, 5), dt, 1, p))
        symm.barrier()
    z = symm.zeros(7, "bfloat16", backend="torch")
    assert not z.any()


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float32"])
def test_all_reduce_tensors_rounds_every_step(dt):
    dtype = getattr(torch, dt)
    x = symm.empty((1001,), dtype, backend="torch")
    x.copy_(tdata((1001,), dtype, 2, me()))
    symm.all_reduce(x)
    want = tdata((1001,), dtype, 2, 0)
    for p in range(1, n()):
        want = (want.float() + tdata((1001,), dtype, 2, p).float()).to(dtype)
    assert torch.equal(x, want)


def test_custom_ops_eager_and_compiled():
    x = symm.empty((64,), torch.float32, backend="torch")
    x.fill_(me() + 1)
    torch.ops.symm.all_reduce_(x, "sum", 0)
    assert (x == n() * (n() + 1) / 2).all()

    def step(t):
        torch.ops.symm.all_reduce_(t, "max", 0)
        return t * 2

    compiled = torch.compile(step, backend="eager", fullgraph=True)
    x.fill_(me())
    out = compiled(x)
    assert (x == n() - 1).all() and (out == 2 * (n() - 1)).all()


def test_moe_with_int64_split_tensors():
    ne, cols = 2, 4
    g = np.random.default_rng([7, me()])
    splits = torch.from_numpy(g.integers(0, 3, size=n() * ne).astype(np.int64))
    rows = int(splits.sum())
    inp = symm.empty((3 * n() * ne, cols), torch.bfloat16, backend="torch")
    out = symm.empty((3 * n() * ne * n() + ne * 4, cols), torch.bfloat16, backend="torch")
    back = symm.empty(inp.shape, torch.bfloat16, backend="torch")
    inp[:rows] = tdata((rows, cols), torch.bfloat16, 3, me())
    so = torch.empty((2, n() * ne), dtype=torch.int64)
    torch.ops.symm.all_to_all_vdev_2d(inp, out, splits, so, 0, 4)
    res = torch.zeros((2, n() * ne), dtype=torch.int64)
    torch.ops.symm.all_to_all_vdev_2d_offset(out, back, so, res, 0)
    assert torch.equal(res[0], splits)
    assert torch.equal(back[:rows], inp[:rows])
    symm.barrier()


@pytest.mark.parametrize("dt", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_tiles_fold_in_float_and_round_once(dt):
    dtype = getattr(torch, dt)
    rows, cols = 9, 37
    x = symm.empty((rows, cols + 3), dtype, backend="torch")
    assert x.dtype == dtype
    tile = x[:, 1:1 + cols]
    tile.copy_(tdata((rows, cols), torch.float32, 5, me()).to(dtype))
    out = symm.empty((rows, cols), dtype, backend="torch")
    symm.tile_all_reduce(tile, out, op="sum")
    want = sum(tdata((rows, cols), torch.float32, 5, p).to(dtype).float() for p in range(n()))
    assert torch.equal(out.view(torch.uint8), want.to(dtype).view(torch.uint8))
    # The other reductions refuse fp8, on every member alike.
    flat = symm.empty((16,), dtype, backend="torch")
    with pytest.raises(symm.SymmError):
        symm.all_reduce(flat)
    symm.barrier()


def test_moe_topk_custom_ops():
    """torch.ops.symm.moe_topk_dispatch / _combine on CPU tensors: bf16 tokens with an fp32
    side payload, the dispatch bytewise as the plain call's, and a bf16 weighted combine of
    expert outputs 2 x token, exact in float and rounded once."""
    ne, k, T, H = 2, 3, 6, 8
    g = torch.Generator().manual_seed(11 + me())
    idx = torch.randint(-1, n() * ne, (T, k), generator=g)
    w = torch.randint(1, 257, (T, k), generator=g).float() / 256
    inp = symm.empty((T, H), torch.bfloat16, backend="torch")
    inp.copy_((torch.randint(-128, 128, (T, H), generator=g).float() / 16).to(torch.bfloat16))
    sin = symm.empty((T, 2), torch.float32, backend="torch")
    sin.copy_(torch.rand((T, 2), generator=g))
    cap = n() * T * k  # the most rows any PE can receive (major_align 0)
    out, sout = torch.zeros((cap, H), dtype=torch.bfloat16), torch.zeros((cap, 2))
    counts, offs = torch.empty(ne, dtype=torch.int64), torch.empty(ne, dtype=torch.int64)
    rows, trows = torch.empty(1, dtype=torch.int64), torch.empty((T, k), dtype=torch.int64)
    torch.ops.symm.moe_topk_dispatch(inp, out, idx, ne, 0, [sin], [sout], counts, offs, rows,
                                     trows, 0)
    out2, sout2 = torch.zeros_like(out), torch.zeros_like(sout)
    ref = symm.moe_topk_dispatch(inp, out2, idx, ne, sides=[(sin, sout2)])
    assert torch.equal(out, out2) and torch.equal(sout, sout2)
    assert torch.equal(counts, ref.counts) and torch.equal(offs, ref.offsets)
    assert int(rows[0]) == ref.rows and torch.equal(trows, ref.topk_rows)
    eo = symm.empty((cap, H), torch.bfloat16, backend="torch")
    eo.copy_(out * 2)
    back = torch.full((T, H), 7.0, dtype=torch.bfloat16)
    symm.barrier()
    torch.ops.symm.moe_topk_combine(eo, back, idx, trows, w, ne, -1, 0)
    want = 2 * inp.float() * (w * (idx >= 0)).sum(1, keepdim=True)
    assert torch.equal(back, want.to(torch.bfloat16))
    symm.barrier()
