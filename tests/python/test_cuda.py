"""CUDA tensors on symm's GPU heap (skipped without torch, a GPU, or symm's CUDA part):
peers' copies, every operation on the current stream against the same operation on CPU
arrays or a serial reference, MoE dispatch/combine and top-k dispatch/combine element by
element against the CPU path, capture in a CUDA graph and replay on changing data."""
import numpy as np
import pytest

import symm
from util import data, fold, me, n

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
try:
    symm._cuda.lib()
except ImportError as e:
    pytest.skip(str(e), allow_module_level=True)


def cuda(shape, dtype, tags):
    """A CUDA tensor on the heap holding data(shape, dtype, *tags)."""
    t = symm.empty(shape, dtype, device="cuda")
    t.copy_(torch.from_numpy(np.ascontiguousarray(data(shape, dtype, *tags))))
    return t


def test_empty_and_peer_on_the_gpu():
    x = cuda((4, 33), "float32", (70, me()))
    assert x.is_cuda and x.device.index == symm.cuda_device()
    symm.barrier(device="cuda")
    torch.cuda.synchronize()
    symm.barrier()
    for p in range(n()):
        np.testing.assert_array_equal(symm.peer(x, p).cpu().numpy(), data((4, 33), "float32",
                                                                          70, p))
    symm.barrier()


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16", "int64"])
@pytest.mark.parametrize("size", [1, 7, 4097, 300000])
def test_all_reduce_broadcast_reduce(dtype, size):
    for op in ("sum", "max"):
        x = cuda((size,), dtype, (71, size, me()))
        symm.all_reduce(x, op=op)
        want = fold([data(size, dtype, 71, size, p) for p in range(n())], op)
        np.testing.assert_array_equal(x.cpu().numpy(), want)
    root = n() - 1
    x = cuda((size,), dtype, (72, size, me()))
    symm.broadcast(x, src=root)
    np.testing.assert_array_equal(x.cpu().numpy(), data(size, dtype, 72, size, root))
    x = cuda((size,), dtype, (73, size, me()))
    symm.reduce(x, dst=0, op="sum")
    if me() == 0:
        np.testing.assert_array_equal(x.cpu().numpy(), fold([data(size, dtype, 73, size, p)
                                                             for p in range(n())], "sum"))
    torch.cuda.synchronize()
    symm.barrier()


@pytest.mark.parametrize("count", [1, 100, 70001])
def test_all_gather_all_to_all_reduce_scatter(count):
    inp = cuda((count,), "float32", (74, me()))
    out = symm.empty((n() * count,), "float32", device="cuda")
    symm.all_gather(out, inp)
    got = out.cpu().numpy()
    for p in range(n()):
        np.testing.assert_array_equal(got[p * count:(p + 1) * count], data(count, "float32", 74, p))
    a = cuda((n() * count,), "float32", (75, me()))
    b = symm.empty((n() * count,), "float32", device="cuda")
    symm.all_to_all(b, a)
    got = b.cpu().numpy()
    for p in range(n()):
        np.testing.assert_array_equal(got[p * count:(p + 1) * count],
                                      data(n() * count, "float32", 75, p)[me() * count:(me() + 1) * count])
    r = symm.empty((count,), "float32", device="cuda")
    symm.reduce_scatter(r, a, op="sum")
    full = fold([data(n() * count, "float32", 75, p) for p in range(n())], "sum")
    np.testing.assert_array_equal(r.cpu().numpy(), full[me() * count:(me() + 1) * count])
    torch.cuda.synchronize()
    symm.barrier()


RS_OPS = {"float32": ["sum", "prod", "min", "max"], "float16": ["sum", "max"],
          "int32": ["sum", "min", "bxor"], "int64": ["sum", "prod", "max", "band"]}


@pytest.mark.parametrize("dtype", list(RS_OPS))
@pytest.mark.parametrize("count", [1, 5, 333, 1024, 70001, 300000])
@pytest.mark.parametrize("at", [0, 1])
def test_reduce_scatter_on_the_stream(dtype, count, at):
    """reduce_scatter on CUDA tensors (symm_reduce_scatter_on_stream: one round up to 4 KiB
    a member stages, the multi-block engine above) against the team-order fold of every
    member's input; at 1, both tensors start one element into the heap block (rows of no
    whole 16-byte vectors)."""
    nb = n() * count
    big_in = symm.empty((nb + 1,), dtype, device="cuda")
    big_out = symm.empty((count + 1,), dtype, device="cuda")
    inp, out = big_in[at:at + nb], big_out[at:at + count]
    mine = slice(me() * count, (me() + 1) * count)
    for k, op in enumerate(RS_OPS[dtype]):
        big_out.fill_(-7)
        inp.copy_(torch.from_numpy(data(nb, dtype, 93, count, k, me())))
        symm.reduce_scatter(out, inp, op=op)
        want = fold([data(nb, dtype, 93, count, k, p) for p in range(n())], op)
        got = big_out.cpu().numpy()
        np.testing.assert_array_equal(got[at:at + count], want[mine],
                                      err_msg="%s %s count %d" % (dtype, op, count))
        assert got[at - 1 if at else count] == -7  # nothing written beside out
    torch.cuda.synchronize()
    symm.barrier()


@pytest.mark.parametrize("count", [3, 2048, 65536 + 8])
def test_reduce_scatter_bfloat16_rounds_every_step(count):
    """bfloat16 (no NumPy type): torch's team-order fold, rounded to bfloat16 after every
    member, as symm reduces."""
    nb = n() * count

    def member(p):
        g = torch.Generator().manual_seed(9400 + 17 * count + p)
        return (torch.rand(nb, generator=g) * 8 - 4).to(torch.bfloat16)

    inp = symm.empty((nb,), torch.bfloat16, device="cuda")
    out = symm.empty((count,), torch.bfloat16, device="cuda")
    inp.copy_(member(me()))
    for op in ("sum", "max"):
        symm.reduce_scatter(out, inp, op=op)
        want = member(0)
        for p in range(1, n()):
            want = (want.float() + member(p).float()).to(torch.bfloat16) if op == "sum" \
                else torch.maximum(want, member(p))
        assert torch.equal(out.cpu(), want[me() * count:(me() + 1) * count]), op
    torch.cuda.synchronize()
    symm.barrier()


@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (64, 128), (257, 300)])
def test_tiles_on_the_gpu(shape):
    rows, cols = shape
    big = cuda((rows + 1, cols + 8), "float32", (76, me()))
    tile = big[1:, 4:4 + cols]
    ref = [data((rows + 1, cols + 8), "float32", 76, p)[1:, 4:4 + cols] for p in range(n())]
    out = symm.zeros((rows, cols + 4), "float32", device="cuda")[:, :cols]
    for root in range(n()):
        symm.tile_reduce(tile, out, root=root, op="sum")
        if me() == root:
            np.testing.assert_array_equal(out.cpu().numpy(), fold(ref, "sum"))
    symm.tile_all_reduce(tile, out, op="max")
    np.testing.assert_array_equal(out.cpu().numpy(), fold(ref, "max"))
    torch.cuda.synchronize()
    symm.barrier()


@pytest.mark.parametrize("ne,align", [(1, 1), (3, 16), (8, 0)])
def test_moe_on_the_gpu_equals_the_cpu(ne, align):
    cols, cap = 64, 8 * n() * ne * n() + ne * 16
    r = np.random.default_rng([77, ne, me()])
    splits = r.integers(0, 8, size=n() * ne)
    rows = int(splits.sum())
    mine = data((rows, cols), "float32", 78, ne, me())
    # The CPU path as the reference.
    cin = symm.empty((cap, cols), "float32", backend="numpy")
    cout = symm.empty((cap, cols), "float32", backend="numpy")
    cin[:rows] = mine
    cout[...] = 0
    cso = symm.moe_dispatch(cin, cout, splits, major_align=align)
    gin = symm.empty((cap, cols), "float32", device="cuda")
    gout = symm.zeros((cap, cols), "float32", device="cuda")
    gin[:rows] = torch.from_numpy(mine)
    gso = symm.moe_dispatch(gin, gout, torch.from_numpy(splits).cuda(), major_align=align)
    assert gso.is_cuda
    np.testing.assert_array_equal(gso.cpu().numpy(), cso)
    np.testing.assert_array_equal(gout.cpu().numpy(), cout)
    back = symm.zeros((cap, cols), "float32", device="cuda")
    res = symm.moe_combine(gout, back, gso)
    np.testing.assert_array_equal(res[0].cpu().numpy(), splits)
    np.testing.assert_array_equal(back[:rows].cpu().numpy(), mine)
    symm.cuda_check()
    symm.barrier()


@pytest.mark.parametrize("k,ne,align", [(1, 1, 0), (4, 3, 1), (8, 2, 16)])
def test_moe_topk_on_the_gpu_equals_the_cpu(k, ne, align):
    """Top-k dispatch (tokens and a side payload) and weighted combine (float32, bfloat16)
    on CUDA tensors, bytewise as the CPU path on the same data."""
    T, H = 37, 64
    cap = n() * T * k + ne * max(align, 1)
    r = np.random.default_rng([90, k, ne, me()])
    idx = torch.from_numpy(r.integers(-1, n() * ne, size=(T, k)))
    w = torch.from_numpy(r.uniform(0, 1, size=(T, k)).astype(np.float32))
    tok = torch.from_numpy(data((T, H), "float32", 91, k, me()))
    side = torch.from_numpy(data((T, 4), "float32", 92, k, me()))
    res = {}
    ws = symm.cuda_topk_workspace(n(), ne, T, k)
    for dev in ("cpu", "cuda"):
        inp = symm.empty((T, H), "float32", device=dev, backend="torch")
        sin = symm.empty((T, 4), "float32", device=dev, backend="torch")
        inp.copy_(tok)
        sin.copy_(side)
        out = torch.zeros((cap, H), device=dev)
        sout = torch.zeros((cap, 4), device=dev)
        src = torch.full((cap, 2), -5, dtype=torch.int64, device=dev)
        d = symm.moe_topk_dispatch(inp, out, idx.to(dev), ne, major_align=align,
                                   sides=[(sin, sout)], out_src=src,
                                   workspace=ws if dev == "cuda" else None)
        backs = []
        for dt in (torch.float32, torch.bfloat16):
            eo = symm.empty((cap, H), dt, device=dev, backend="torch")
            eo.copy_((out * 3 + 1).to(dt))
            back = torch.zeros((T, H), dtype=dt, device=dev)
            symm.moe_topk_combine(eo, back, idx.to(dev), d.topk_rows, ne, topk_weights=w.to(dev),
                                  workspace=ws if dev == "cuda" else None)
            backs.append(back)
        rows = int(d.rows) if dev == "cpu" else int(d.rows.item())
        res[dev] = [x.cpu() for x in (out[:rows], sout[:rows], src[:rows], d.counts,
                                      d.offsets, d.topk_rows, *backs)]
        symm.barrier()
    symm.cuda_check()
    for a, b in zip(res["cpu"], res["cuda"]):
        assert torch.equal(a, b)
    symm.barrier()


def _ll_routes(p, T, k, ne, it):
    """PE p's routes of round it: T tokens, up to k distinct experts each (-1 for none)."""
    r = np.random.default_rng([96, k, ne, it, p])
    idx = np.full((T, k), -1, np.int64)
    for t in range(T):
        m = int(r.integers(0, min(k, n() * ne) + 1))
        idx[t, :m] = r.choice(n() * ne, size=m, replace=False)
    return idx


@pytest.mark.parametrize("k,ne,sym", [(1, 1, True), (4, 3, False), (8, 2, True)])
def test_moe_topk_low_latency(k, ne, sym):
    """The low-latency top-k pair (DeepEP's layout), eager (also as torch ops) and replayed
    from a CUDA graph on new routes, rows and weights: every received row is its source's token (out_src
    says which), every (expert, source) region holds exactly the tokens routed there, and
    the weighted combine equals the packed form's on the same data, bit for bit. sym: the
    combine's input symmetric (read in place) or not (pushed)."""
    T, H, N = 29, 64, n()
    mt, rows = T, N * ne * T
    dev = "cuda"
    inp = torch.zeros((T, H), device=dev)
    idx = torch.full((T, k), -1, dtype=torch.int64, device=dev)  # no routes until round 0
    w = torch.zeros((T, k), device=dev)
    out = symm.zeros((rows, H), "float32", device=dev)
    cnt = symm.zeros((N * ne,), "int64", device=dev)
    src = symm.zeros((rows, 2), "int64", device=dev)
    eo = symm.zeros((rows, H), "bfloat16", device=dev) if sym else \
        torch.zeros((rows, H), dtype=torch.bfloat16, device=dev)
    back = torch.zeros((T, H), dtype=torch.bfloat16, device=dev)
    ws = symm.cuda_topk_ll_workspace(N, ne, mt, k, H, "bfloat16")
    pws = symm.cuda_topk_workspace(N, ne, T, k)
    pin = symm.empty((T, H), "float32", device=dev)
    pout = torch.zeros((N * T * k, H), device=dev)
    peo = symm.empty((N * T * k, H), "bfloat16", device=dev)
    pback = torch.zeros((T, H), dtype=torch.bfloat16, device=dev)

    def layer(ops=False):
        if ops:  # the torch custom ops (team 0: the world)
            torch.ops.symm.moe_topk_dispatch_ll(inp, out, idx, ne, mt, [], [], cnt, src, ws, 0)
        else:
            symm.moe_topk_dispatch_ll(inp, out, idx, ne, mt, cnt, src, ws)
        eo.copy_((out * 3 + 1).to(torch.bfloat16))
        if ops:
            torch.ops.symm.moe_topk_combine_ll(eo, back, idx, w, ne, mt, cnt, src, ws, 0)
        else:
            symm.moe_topk_combine_ll(eo, back, idx, ne, mt, cnt, src, ws, topk_weights=w)

    layer()  # the first call on the world makes its GPU state: not in a capture
    torch.cuda.synchronize()
    symm.barrier()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            layer()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    symm.barrier()
    for it in range(4):
        routes = [_ll_routes(p, T, k, ne, it) for p in range(N)]
        toks = [data((T, H), "float32", 97, it, p) for p in range(N)]
        inp.copy_(torch.from_numpy(toks[me()]))
        idx.copy_(torch.from_numpy(routes[me()]))
        wts = np.random.default_rng([98, it, me()]).uniform(0, 1, size=(T, k))
        w.copy_(torch.from_numpy(wts.astype(np.float32)))
        torch.cuda.synchronize()
        symm.barrier()
        if it % 2:
            g.replay()
        else:
            layer(ops=it == 2)
        torch.cuda.synchronize()
        symm.cuda_check()
        c, sr, o = cnt.cpu().numpy(), src.cpu().numpy(), out.cpu().numpy()
        sr32 = sr.view(np.int32).reshape(rows, 4)
        for e in range(ne):
            for sp in range(N):
                want = sorted(t for t in range(T) if me() * ne + e in routes[sp][t])
                reg = (e * N + sp) * mt
                assert c[e * N + sp] == len(want), (it, e, sp)
                got = []
                for r in range(reg, reg + len(want)):
                    t, slot = int(sr[r, 1]), int(sr32[r, 1])
                    assert sr32[r, 0] == sp and routes[sp][t, slot] == me() * ne + e, (it, r)
                    np.testing.assert_array_equal(o[r], toks[sp][t])
                    got.append(t)
                assert sorted(got) == want, (it, e, sp)
        symm.barrier()
        # the packed pair on the same data
        pin.copy_(inp)
        d = symm.moe_topk_dispatch(pin, pout, idx, ne, workspace=pws)
        peo.copy_((pout * 3 + 1).to(torch.bfloat16))
        symm.moe_topk_combine(peo, pback, idx, d.topk_rows, ne, topk_weights=w, workspace=pws)
        torch.cuda.synchronize()
        assert torch.equal(back, pback), it
        symm.barrier()
    symm.cuda_check()
    symm.barrier()


def test_moe_topk_low_latency_bad_arguments():
    """Bad arguments are refused before anything is enqueued, naming what is wrong."""
    ws = symm.cuda_topk_ll_workspace(n(), 2, 4, 2)
    out = symm.zeros((n() * 2 * 4, 8), "float32", device="cuda")
    cnt = symm.zeros((n() * 2,), "int64", device="cuda")
    src = symm.zeros((n() * 2 * 4, 2), "int64", device="cuda")
    inp = torch.zeros((4, 8), device="cuda")
    idx = torch.full((4, 2), -1, dtype=torch.int64, device="cuda")
    with pytest.raises(ValueError, match="out has"):
        symm.moe_topk_dispatch_ll(inp, out[:3], idx, 2, 4, cnt, src, ws)
    with pytest.raises(ValueError, match="out_counts"):
        symm.moe_topk_dispatch_ll(inp, out, idx, 2, 4, cnt[:1], src, ws)
    with pytest.raises(ValueError, match="out_src"):
        symm.moe_topk_dispatch_ll(inp, out, idx, 2, 4, cnt, src.to(torch.int32), ws)
    with pytest.raises(ValueError, match="CUDA tensors only"):
        symm.moe_topk_dispatch_ll(inp.cpu(), out.cpu(), idx, 2, 4, cnt, src, ws)
    with pytest.raises(TypeError, match="dtype"):
        symm.cuda_topk_ll_workspace(n(), 2, 4, 2, 8, "int32")
    symm.moe_topk_dispatch_ll(inp, out, idx, 2, 4, cnt, src, ws)  # still works
    torch.cuda.synchronize()
    symm.cuda_check()
    symm.barrier()


def test_all_reduce_in_a_cuda_graph():
    x = symm.empty((4096,), "float32", device="cuda")
    x.fill_(1)
    symm.all_reduce(x)  # the first call on a team makes its GPU state: not in a capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s):
            symm.all_reduce(x)
    torch.cuda.current_stream().wait_stream(s)
    for it in range(20):
        x.copy_(torch.from_numpy(data(4096, "float32", 79, it, me())))
        g.replay()
        want = fold([data(4096, "float32", 79, it, p) for p in range(n())], "sum")
        np.testing.assert_array_equal(x.cpu().numpy(), want)
    symm.cuda_check()
    symm.barrier()


def test_prepared_all_reduce_and_barrier():
    """symm.prepare: nothing issued by prepare itself; each call of the prepared all_reduce
    on fresh data equals the serial fold."""
    x = cuda((3001,), "float32", (93, 99, me()))
    p = symm.prepare(symm.all_reduce, x, op="max")
    b = symm.prepare(symm.barrier, device="cuda")
    torch.cuda.synchronize()
    np.testing.assert_array_equal(x.cpu().numpy(), data(3001, "float32", 93, 99, me()))
    symm.barrier()
    for it in range(5):
        x.copy_(torch.from_numpy(data(3001, "float32", 93, it, me())))
        assert p() is x
        b()
        want = fold([data(3001, "float32", 93, it, q) for q in range(n())], "max")
        np.testing.assert_array_equal(x.cpu().numpy(), want)
    symm.cuda_check()
    symm.barrier()


def test_prepared_moe_follows_device_splits():
    """A prepared dispatch and combine read their splits on the device at each call: new
    splits and rows each time, against the CPU path on the same data."""
    ne, align, cols = 3, 4, 16
    cap = 8 * n() * ne * n() + ne * align
    gin = symm.empty((cap, cols), "float32", device="cuda")
    gout = symm.zeros((cap, cols), "float32", device="cuda")
    back = symm.zeros((cap, cols), "float32", device="cuda")
    gsp = torch.zeros(n() * ne, dtype=torch.int64, device="cuda")
    gso = torch.zeros((2, n() * ne), dtype=torch.int64, device="cuda")
    gso2 = torch.zeros((2, n() * ne), dtype=torch.int64, device="cuda")
    d = symm.prepare(symm.moe_dispatch, gin, gout, gsp, gso, major_align=align)
    c = symm.prepare(symm.moe_combine, gout, back, gso, gso2)
    cin = symm.empty((cap, cols), "float32", backend="numpy")
    cout = symm.empty((cap, cols), "float32", backend="numpy")
    for it in range(4):
        r = np.random.default_rng([94, it, me()])
        splits = r.integers(0, 8, size=n() * ne)
        rows = int(splits.sum())
        mine = data((rows, cols), "float32", 95, it, me())
        cin[:rows] = mine
        cout[...] = 0
        cso = symm.moe_dispatch(cin, cout, splits, major_align=align)
        gin[:rows] = torch.from_numpy(mine)
        gout.zero_()
        gsp.copy_(torch.from_numpy(splits))
        torch.cuda.synchronize()
        symm.barrier()
        assert d() is gso
        c()
        np.testing.assert_array_equal(gso.cpu().numpy(), cso)
        np.testing.assert_array_equal(gout.cpu().numpy(), cout)
        np.testing.assert_array_equal(gso2[0].cpu().numpy(), splits)
        np.testing.assert_array_equal(back[:rows].cpu().numpy(), mine)
        symm.barrier()
    symm.cuda_check()


def test_prepared_topk_equals_the_plain_calls():
    """Prepared top-k dispatch and weighted combine on new routings, weights and rows at
    each call, bytewise as the plain calls on the same data."""
    T, H, k, ne = 29, 32, 4, 2
    cap = n() * T * k + ne
    ws = symm.cuda_topk_workspace(n(), ne, T, k)
    inp = symm.empty((T, H), "float32", device="cuda")
    idx = torch.zeros((T, k), dtype=torch.int64, device="cuda")
    w = torch.zeros((T, k), dtype=torch.float32, device="cuda")
    outs = [torch.zeros((cap, H), device="cuda") for _ in range(2)]
    meta = [[torch.zeros(s, dtype=torch.int64, device="cuda") for s in ((ne,), (ne,), (1,),
                                                                        (T, k))]
            for _ in range(2)]
    eo = symm.empty((cap, H), "float32", device="cuda")
    backs = [torch.zeros((T, H), device="cuda") for _ in range(2)]

    def dispatch(j):
        return symm.moe_topk_dispatch(inp, outs[j], idx, ne, major_align=1,
                                      out_counts=meta[j][0], out_offsets=meta[j][1],
                                      out_rows=meta[j][2], topk_rows=meta[j][3], workspace=ws)

    def combine(j):
        return symm.moe_topk_combine(eo, backs[j], idx, meta[j][3], ne, topk_weights=w,
                                     workspace=ws)

    pd = symm.prepare(dispatch, 1)
    pc = symm.prepare(combine, 1)
    for it in range(4):
        r = np.random.default_rng([96, it, me()])
        idx.copy_(torch.from_numpy(r.integers(-1, n() * ne, size=(T, k))))
        w.copy_(torch.from_numpy(r.uniform(0, 1, size=(T, k)).astype(np.float32)))
        inp.copy_(torch.from_numpy(data((T, H), "float32", 97, it, me())))
        for o in outs:
            o.zero_()
        torch.cuda.synchronize()
        symm.barrier()
        dispatch(0)
        eo.copy_(outs[0] * 2 - 1)
        torch.cuda.synchronize()
        symm.barrier()
        combine(0)
        torch.cuda.synchronize()
        symm.barrier()
        assert pd().topk_rows is meta[1][3]
        pc()
        torch.cuda.synchronize()
        rows = int(meta[0][2].item())
        assert rows == int(meta[1][2].item())
        assert torch.equal(outs[0][:rows], outs[1][:rows])
        for a, b in zip(meta[0], meta[1]):
            assert torch.equal(a, b)
        assert torch.equal(backs[0], backs[1])
        symm.barrier()
    symm.cuda_check()


def test_prepare_refuses_what_it_would_copy():
    gin = symm.empty((64, 8), "float32", device="cuda")
    gout = symm.empty((64, 8), "float32", device="cuda")
    with pytest.raises(ValueError, match="copied an argument"):
        symm.prepare(symm.moe_dispatch, gin, gout, [1] * n())  # splits as a list
    with pytest.raises(ValueError, match="CUDA tensors"):
        symm.prepare(symm.all_reduce, np.zeros(3))
    symm.barrier()


def test_errors_on_the_gpu():
    local = torch.zeros(16, device="cuda")
    with pytest.raises(symm.SymmError) as e:
        symm.all_reduce(local)
    assert e.value.name == "SYMM_ERR_NOT_SYMMETRIC"
    with pytest.raises(ValueError):
        symm.empty(3, "float32", device="cuda", backend="numpy")
    inp = symm.empty((n() * 16,), "float32", device="cuda")
    out = symm.empty((16,), "float32", device="cuda")
    with pytest.raises(symm.SymmError) as e:
        symm.reduce_scatter(local, inp)  # every member's output is off the heap
    assert e.value.name == "SYMM_ERR_NOT_SYMMETRIC"
    with pytest.raises(symm.SymmError) as e:
        symm.reduce_scatter(out, inp, op="bxor")  # no bitwise op on floats
    assert e.value.name == "SYMM_ERR_INVALID_ARG"
    with pytest.raises(ValueError):
        symm.reduce_scatter(out[:15], inp)
    symm.barrier()
