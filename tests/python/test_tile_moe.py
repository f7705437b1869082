"""Tile reduce (rooted, all, multi-root; plain and on a pool's workers) on 2-D views with
ld > cols, and MoE dispatch/combine and the 1-D all-to-all-v against a serial model of
PyTorch's layout, on random splits."""
import numpy as np
import pytest

import symm
from util import data, fold, me, n, rng

SHAPES = [(1, 1), (5, 3), (33, 17), (64, 129)]


@pytest.fixture(scope="module")
def pool():
    p = symm.WORLD.pool(4)
    yield p
    p.destroy()


def views(rows, cols, dtype, tag):
    """A tile (rows, cols) at column 2 of a wider symmetric array, filled with this PE's
    data, and a symmetric out tile of the same shape inside another array."""
    big = symm.empty((rows + 1, cols + 5), dtype)
    big[...] = -7
    tile = big[1:, 2:2 + cols]
    tile[...] = data((rows, cols), dtype, 30, tag, me())
    out_big = symm.zeros((rows, cols + 3), dtype)
    return big, tile, out_big[:, :cols]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("use_pool", [False, True])
def test_tile_reduce_rooted(shape, use_pool, pool):
    rows, cols = shape
    for root in range(n()):
        for dtype, op in (("float32", "sum"), ("int32", "max"), ("float16", "min")):
            big, tile, out = views(rows, cols, dtype, root)
            out[...] = 5
            symm.barrier()
            kw = {"pool": pool, "workers": 0 if root % 2 else 2} if use_pool else {}
            symm.tile_reduce(tile, out, root=root, op=op, **kw)
            if me() == root:
                want = fold([data(shape, dtype, 30, root, p) for p in range(n())], op)
                np.testing.assert_array_equal(out, want)
            else:
                assert (out == 5).all()
            assert (big[0] == -7).all() and (big[:, :2] == -7).all()
            symm.barrier()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("use_pool", [False, True])
def test_tile_all_reduce(shape, use_pool, pool):
    kw = {"pool": pool, "workers": 3} if use_pool else {}
    big, tile, out = views(*shape, "float64", 40)
    symm.barrier()
    symm.tile_all_reduce(tile, out, op="sum", **kw)
    want = fold([data(shape, "float64", 30, 40, p) for p in range(n())], "sum")
    np.testing.assert_array_equal(out, want)
    symm.barrier()
    symm.tile_all_reduce(tile, **kw)  # in place
    np.testing.assert_array_equal(tile, want)


@pytest.mark.parametrize("use_pool", [False, True])
def test_multi_root_tile_reduce(use_pool, pool):
    k = min(n(), 3)
    roots = [(n() - 1 - j) % n() for j in range(k)]
    shapes = [(3 + j, 5 + 2 * j) for j in range(k)]
    arrays = [symm.empty((r + 2, c + 1), "int64") for r, c in shapes]
    tiles = []
    for j, (r, c) in enumerate(shapes):
        arrays[j][...] = -1
        arrays[j][:r, 1:] = data((r, c), "int64", 31, j, me())
        tiles.append(arrays[j][:r, 1:])
    out = symm.zeros((8, 16), "int64")
    mine = roots.index(me()) if me() in roots else None
    out_tile = None if mine is None else out[:shapes[mine][0], :shapes[mine][1]]
    symm.barrier()
    kw = {"pool": pool, "workers": 2} if use_pool else {}
    symm.multi_root_tile_reduce(tiles, out_tile, roots, op="sum", **kw)
    if mine is not None:
        want = fold([data(shapes[mine], "int64", 31, mine, p) for p in range(n())], "sum")
        np.testing.assert_array_equal(out_tile, want)
    symm.barrier()


def test_tile_errors():
    x = symm.empty((4, 4), "float32")
    with pytest.raises(ValueError, match="2-D"):
        symm.tile_reduce(x[0], x, root=0)
    with pytest.raises(ValueError, match="contiguous rows"):
        symm.tile_all_reduce(x[:, ::2])
    with pytest.raises(TypeError):
        symm.tile_all_reduce(x, symm.empty((4, 4), "float64"))
    with pytest.raises(symm.SymmError) as e:
        symm.tile_reduce(x, x, root=n())
    assert e.value.status < 0
    symm.barrier()


# ------------------------------------------------------------------ MoE
def model_splits(s, ne, tag, maxr=4):
    """Member s's dispatch splits: n*ne entries, about a third of them 0."""
    r = rng(50, tag, ne, s)
    sp = r.integers(1, maxr + 1, size=n() * ne)
    sp[r.integers(0, 3, size=n() * ne) == 0] = 0
    return sp


def model_rows(s, ne, tag, cols, dtype):
    rows = int(model_splits(s, ne, tag).sum())
    return data((rows, cols), dtype, 51, tag, ne, s)


def model_dispatch(ne, tag, align):
    """What member me receives: per (e, s) the rows, splits and offsets (e*n + s)."""
    splits = np.zeros(ne * n(), dtype=np.int64)
    offsets = np.zeros(ne * n(), dtype=np.int64)
    blocks = {}
    for s in range(n()):
        sp = model_splits(s, ne, tag)
        start = np.concatenate([[0], np.cumsum(sp)])
        for e in range(ne):
            k = me() * ne + e
            splits[e * n() + s] = sp[k]
            blocks[(e, s)] = (s, start[k], sp[k])
    at = 0
    for e in range(ne):
        seg = at
        for s in range(n()):
            offsets[e * n() + s] = at
            at += splits[e * n() + s]
        length = at - seg
        if align:
            at = seg + max(-(-length // align) * align, align)
    return splits, offsets, at, blocks


@pytest.mark.parametrize("ne", [1, 2, 5])
@pytest.mark.parametrize("align", [1, 4, 0])
@pytest.mark.parametrize("use_pool", [False, True])
def test_moe_dispatch_combine(ne, align, use_pool, pool):
    tag, cols, dtype = ne * 10 + align, 6, "float32"
    cap = 4 * n() * ne * n() + ne * 8
    inp = symm.empty((cap, cols), dtype)
    out = symm.empty((cap, cols), dtype)
    back = symm.empty((cap, cols), dtype)
    mine = model_rows(me(), ne, tag, cols, dtype)
    inp[:len(mine)] = mine
    out[...] = -3
    kw = {"pool": pool, "workers": 0} if use_pool else {}
    so = symm.all_to_all_vdev_2d(inp, out, model_splits(me(), ne, tag), major_align=align, **kw)
    splits, offsets, total, blocks = model_dispatch(ne, tag, align)
    assert so.dtype == np.int64 and so.shape == (2, ne * n())
    np.testing.assert_array_equal(so[0], splits)
    np.testing.assert_array_equal(so[1], offsets)
    written = np.zeros(cap, dtype=bool)
    for (e, s), (src, start, count) in blocks.items():
        o = offsets[e * n() + s]
        np.testing.assert_array_equal(out[o:o + count],
                                      model_rows(src, ne, tag, cols, dtype)[start:start + count])
        written[o:o + count] = True
    assert (out[~written] == -3).all()  # padding and the rest untouched
    assert total <= cap

    # Combine: back to every member's input, in the original order.
    back[...] = 9
    res = np.zeros((2, ne * n()), dtype=np.int64)
    got = symm.all_to_all_vdev_2d_offset(out, back, so, res, **kw)
    assert got is res
    np.testing.assert_array_equal(res[0], model_splits(me(), ne, tag))
    np.testing.assert_array_equal(res[1], np.concatenate([[0], np.cumsum(res[0])[:-1]]))
    np.testing.assert_array_equal(back[:len(mine)], mine)
    assert (back[len(mine):] == 9).all()
    symm.barrier()


def test_moe_output_too_small_fails_everywhere():
    ne, tag = 2, 77
    inp = symm.empty((64 * n(), 4), "int32")
    out = symm.empty((64 * n(), 4), "int32")
    mine = model_rows(me(), ne, tag, 4, "int32")
    inp[:len(mine)] = mine
    small = out[:1] if me() == n() - 1 else out
    with pytest.raises(symm.SymmError) as e:
        symm.moe_dispatch(inp, small, model_splits(me(), ne, tag, maxr=8), major_align=16)
    assert e.value.name == "SYMM_ERR_OVERFLOW"
    assert "PE %d" % (n() - 1) in str(e.value) or "member" in str(e.value)
    with pytest.raises(ValueError, match="shape"):
        symm.moe_dispatch(inp, out, [1] * (n() * ne), np.zeros((2, 1), dtype=np.int64))
    # A negative count on one PE fails the call on every PE, that PE saying why.
    bad = [-1 if me() == 0 else 1] * (n() * ne)
    with pytest.raises(symm.SymmError) as e:
        symm.moe_dispatch(inp, out, bad)
    assert me() != 0 or "negative" in str(e.value)
    symm.barrier()


def test_all_to_all_vdev():
    tag, cols = 5, 3
    sp = [int(v) for v in rng(60, me()).integers(0, 6, size=n())]
    inp = symm.empty((6 * n(), cols), "uint8")
    out = symm.empty((6 * n(), cols), "uint8")
    rows = data((sum(sp), cols), "uint8", 61, tag, me())
    inp[:sum(sp)] = rows
    so = symm.all_to_all_vdev(inp, out, np.array(sp))
    at = 0
    for s in range(n()):
        ssp = [int(v) for v in rng(60, s).integers(0, 6, size=n())]
        start = sum(ssp[:me()])
        assert so[0][s] == ssp[me()] and so[1][s] == at
        src = data((sum(ssp), cols), "uint8", 61, tag, s)
        np.testing.assert_array_equal(out[at:at + ssp[me()]], src[start:start + ssp[me()]])
        at += ssp[me()]
