"""overhead.py — what the Python layer adds to a call: each operation timed through the
package (symm.barrier, symm.all_reduce, ...) and as the bare libsymm call through ctypes
on the same buffers, in the same run; the difference is the package's own cost per call.
Run as one job: `symmrun -n 2 python bench/python/overhead.py [--iters N] [--reps R]`.
Prints, on PE 0, the median over reps of the per-call time in us (--best: the fastest
rep), and the spread of the package's.

--backend numpy|torch: the host calls on NumPy arrays (the default) or torch CPU tensors;
torch adds the torch.ops.symm custom op of all_reduce (the dispatcher's cost).
--cuda: the stream calls on CUDA tensors against the bare symm_*_on_stream calls with the
stream handle read once: the host time to issue a call (needs a GPU and torch); and the
same calls made ready once by symm.prepare ("prepared ..." rows), issued again.
--cuda-stub: the same CUDA cases without a GPU, to see the Python layer's own time: a
stub libsymm_cuda whose every function returns at once (built here with cc), CPU tensors
that say they are on CUDA device 0, and the C functions behind torch's current-device and
current-stream queries replaced by functions that return at once. What remains is the
package's work per call over the same stubs."""
import argparse
import ctypes
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import symm
from symm import _arrays, _cuda
from symm._lib import MOE_SIDE_MAX, OPS, TEAM_WORLD, TYPES, MoeSide, Tile, lib


def per_call(fn, iters, batch, sync):
    """us per call of fn over iters calls, timed in batches of at most `batch` calls with
    sync() (not timed) between them, so that a stream's queue never fills."""
    symm.barrier()
    sync()
    total, left = 0.0, iters
    while left > 0:
        b = min(batch, left)
        t = time.perf_counter()
        for _ in range(b):
            fn()
        total += time.perf_counter() - t
        sync()
        left -= b
    return total / iters * 1e6


def ptr(a):
    return _arrays.info(a).ptr


def cpu_cases(n, backend):
    x = symm.empty((1,), "float64", backend=backend)
    t = symm.empty((64, 64), "float32", backend=backend)
    inp = symm.empty((4 * n, 16), "float32", backend=backend)
    out = symm.empty((4 * n, 16), "float32", backend=backend)
    splits = [2] * (2 * n)
    so = np.zeros((2, 2 * n), dtype=np.int64)
    ssp = (ctypes.c_size_t * (2 * n))(*splits)
    osp = (ctypes.c_size_t * (2 * n))()
    ooff = (ctypes.c_size_t * (2 * n))()
    px, pt, pin, pout = ptr(x), ptr(t), ptr(inp), ptr(out)
    tile = Tile(pt, 64, 64, 64)
    f64, f32, add = TYPES["float64"], TYPES["float32"], OPS["sum"]
    cases = [
        ("barrier", lambda: symm.barrier(), lambda: lib.symm_barrier(TEAM_WORLD)),
        ("all_reduce 8 B", lambda: symm.all_reduce(x),
         lambda: lib.symm_allreduce(TEAM_WORLD, px, px, 1, f64, add)),
        ("tile_all_reduce 64x64", lambda: symm.tile_all_reduce(t),
         lambda: lib.symm_tile_allreduce(TEAM_WORLD, tile, tile, f32, add)),
        ("moe_dispatch 2 experts", lambda: symm.moe_dispatch(inp, out, splits, so),
         lambda: lib.symm_moe_dispatch(TEAM_WORLD, pout, 4 * n, pin, ssp, 2, 64, 1, osp, ooff,
                                       None)),
    ]
    if backend == "torch":
        import torch
        importlib.import_module("symm.torch_ops")  # registers torch.ops.symm
        cases.append(("torch.ops.symm.all_reduce_", lambda: torch.ops.symm.all_reduce_(
            x, "sum", 0), lambda: lib.symm_allreduce(TEAM_WORLD, px, px, 1, f64, add)))
    return cases


def stub_library(folder):
    """A libsymm_cuda whose every function returns at once: 0 (success), 4096 for the
    workspace sizes, a static buffer for symm_gpu_malloc, 1 for symm_cuda_initialized."""
    ret = {"symm_cuda_a2a_workspace_bytes": "4096", "symm_cuda_moe_topk_workspace_bytes": "4096",
           "symm_gpu_malloc": "(long long)(void *)stub_heap", "symm_cuda_initialized": "1"}
    src = ["static char stub_heap[4096];"]
    for name in _cuda._PROTOS:
        src.append("long long %s(void) { return %s; }" % (name, ret.get(name, "0")))
    c, so = os.path.join(folder, "stub.c"), os.path.join(folder, "libsymm_cuda_stub.so")
    with open(c, "w") as f:
        f.write("\n".join(src) + "\n")
    subprocess.check_call([os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-o", so, c])
    return so


def fake_cuda(torch):
    """CPU tensors that say they are on CUDA device 0, and torch's CUDA queries that the
    package makes (current device, current stream) as functions that return at once: a
    real tensor's is_cuda, get_device() and device are C getters of like cost. .to()
    leaves the device alone (no copy to a GPU that is not there)."""
    torch.Tensor.is_cuda = True
    torch.Tensor.get_device = lambda self: 0
    cuda0 = torch.device("cuda", 0)
    torch.Tensor.device = property(lambda self: cuda0)
    to = torch.Tensor.to

    def to_here(self, *args, **kw):
        kw.pop("device", None)
        return to(self, *args, **kw)

    torch.Tensor.to = to_here
    torch.cuda._initialized = True
    torch._C._cuda_getDevice = int
    torch._C._cuda_getCurrentRawStream = abs
    torch._C._cuda_getCurrentStream = lambda device: (0, device, 1)

    class Stream:  # torch.cuda.Stream's Python __new__ over a C object, without CUDA
        def __new__(cls, stream_id=0, device_index=0, device_type=1):
            s = object.__new__(cls)
            s.cuda_stream = stream_id
            return s

    torch.cuda.Stream = Stream


def cuda_cases(n, stub):
    import torch
    importlib.import_module("symm.torch_ops")  # registers torch.ops.symm
    dev = "cpu" if stub else "cuda"
    backend = "torch"

    def empty(shape, dtype):
        return symm.empty(shape, dtype, device=dev, backend=backend)

    def local(shape, dtype, fill=0):
        return torch.full(shape, fill, dtype=dtype, device=dev)

    ne, rows, cols, T, k, H, S = 2, 4, 16, 8, 2, 64, 4
    x = empty((1,), "float64")
    t = empty((64, 64), "float32")
    to = empty((64, 64), "float32")
    rs_in, rs_out = empty((16 * n,), "float32"), empty((16,), "float32")
    cap = rows * n * ne * n + ne
    inp, out, back = empty((rows * n * ne, cols), "float32"), empty((cap, cols), "float32"), \
        empty((rows * n * ne, cols), "float32")
    splits = local((n * ne,), torch.int64, 1)
    so, so2 = local((2, n * ne), torch.int64), local((2, n * ne), torch.int64)
    tx, tout = empty((T, H), torch.bfloat16), local((n * T * k, H), torch.bfloat16)
    sc, sout = empty((T, S), "float32"), local((n * T * k, S), torch.float32)
    eo, tback = empty((n * T * k, H), torch.bfloat16), local((T, H), torch.bfloat16)
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(-1, n * ne, (T, k), generator=g).to(dev)
    w = torch.rand((T, k), generator=g).to(dev)
    cnt, off, nrows = local((ne,), torch.int64), local((ne,), torch.int64), local((1,),
                                                                                 torch.int64)
    trows = local((T, k), torch.int64)
    if stub:
        ws = symm.empty((4096,), "uint8", backend="torch")
        symm._cuda.init()
        fake_cuda(torch)
        s = 0
    else:
        ws = symm.cuda_topk_workspace(n, ne, T, k)
        s = torch.cuda.current_stream().cuda_stream
    c = _cuda.lib()
    p = _cuda.stream_pool(TEAM_WORLD)
    f64, f32, bf16, add = TYPES["float64"], TYPES["float32"], TYPES["bfloat16"], OPS["sum"]
    px, pt, pto, prs_in, prs_out = ptr(x), ptr(t), ptr(to), ptr(rs_in), ptr(rs_out)
    tile, otile = Tile(pt, 64, 64, 64), Tile(pto, 64, 64, 64)
    pin, pout, pback = ptr(inp), ptr(out), ptr(back)
    psp, pso, pso2, pws = splits.data_ptr(), so.data_ptr(), so2.data_ptr(), _cuda.workspace(n, ne)
    kk = n * ne
    side = (MoeSide * MOE_SIDE_MAX)()
    side[0] = MoeSide(ptr(sc), sout.data_ptr(), S * 4)
    ptws = ws.data_ptr()
    ptout, ptx, pidx, pcnt, poff = tout.data_ptr(), ptr(tx), idx.data_ptr(), cnt.data_ptr(), \
        off.data_ptr()
    pnrows, ptrows, ptback, peo, pw = nrows.data_ptr(), trows.data_ptr(), tback.data_ptr(), \
        ptr(eo), w.data_ptr()
    tb = symm.barrier
    cases = [
        ("barrier(device=cuda)", lambda: tb(device="cuda"),
         lambda: c.symm_barrier_on_stream(TEAM_WORLD, s)),
        ("broadcast 8 B", lambda: symm.broadcast(x),
         lambda: c.symm_broadcast_on_stream(TEAM_WORLD, px, px, 8, 0, s)),
        ("all_reduce 8 B", lambda: symm.all_reduce(x),
         lambda: c.symm_allreduce_on_stream(TEAM_WORLD, px, px, 1, f64, add, s)),
        ("reduce_scatter 64 B", lambda: symm.reduce_scatter(rs_out, rs_in),
         lambda: c.symm_reduce_scatter_on_stream(TEAM_WORLD, prs_out, prs_in, 16, f32, add, s)),
        ("tile_all_reduce 64x64", lambda: symm.tile_all_reduce(t),
         lambda: c.symm_tile_allreduce_on_stream(p, tile, tile, f32, add, 0, s)),
        ("tile_reduce 64x64", lambda: symm.tile_reduce(t, to),
         lambda: c.symm_tile_reduce_on_stream(p, otile, tile, f32, add, 0, 0, s)),
        ("moe_dispatch 2 experts", lambda: symm.moe_dispatch(inp, out, splits, so),
         lambda: c.symm_moe_dispatch_on_stream(p, pout, cap, pin, rows * n * ne, psp, ne,
                                               cols * 4, 1, pso, pso + 8 * kk, None, pws, 0,
                                               s)),
        ("moe_combine 2 experts", lambda: symm.moe_combine(out, back, so, so2),
         lambda: c.symm_moe_combine_on_stream(p, pback, rows * n * ne, pout, cap, pso,
                                              pso + 8 * kk, ne, cols * 4, pso2, pso2 + 8 * kk,
                                              None, pws, 0, s)),
        ("moe_topk_dispatch k=2", lambda: symm.moe_topk_dispatch(
            tx, tout, idx, ne, sides=[(sc, sout)], out_counts=cnt, out_offsets=off,
            topk_rows=trows, out_rows=nrows, workspace=ws),
         lambda: c.symm_moe_topk_dispatch_on_stream(
            p, ptout, n * T * k, ptx, T, H * 2, pidx, k, ne, 0, side, 1, pcnt, poff, None,
            pnrows, ptrows, ptws, 0, s)),
        ("moe_topk_combine k=2", lambda: symm.moe_topk_combine(
            eo, tback, idx, trows, ne, topk_weights=w, workspace=ws),
         lambda: c.symm_moe_topk_combine_on_stream(
            p, ptback, T, peo, n * T * k, H, bf16, pidx, ptrows, pw, k, ne, ptws, 0, s)),
    ]
    cases.append(("torch.ops.symm.all_reduce_", lambda: torch.ops.symm.all_reduce_(
        x, "sum", 0), lambda: c.symm_allreduce_on_stream(TEAM_WORLD, px, px, 1, f64, add, s)))
    # The same calls made ready once by symm.prepare, then issued again.
    for name, py, cf in list(cases):
        if name.split(" ")[0] in ("all_reduce", "tile_all_reduce", "moe_dispatch", "moe_combine",
                                  "moe_topk_dispatch", "moe_topk_combine"):
            cases.append(("prepared " + name, symm.prepare(py), cf))
    # Not a symm call: torch.cuda.current_stream().cuda_stream against the raw query the
    # package makes (_cuda.stream()) in the C column.
    cases.append(("(current stream query)", lambda: torch.cuda.current_stream().cuda_stream,
                  _cuda.stream))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--backend", choices=("numpy", "torch"), default="numpy")
    ap.add_argument("--best", action="store_true",
                    help="the fastest repetition instead of the median (a shared machine)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--cuda", action="store_true", help="CUDA tensors on the GPU")
    mode.add_argument("--cuda-stub", action="store_true",
                      help="the CUDA code path over stubs, without a GPU")
    a = ap.parse_args()
    tmp = None
    if a.cuda_stub:
        if _cuda._state["lib"] is not None:
            sys.exit("overhead.py: libsymm_cuda is loaded already")
        tmp = tempfile.TemporaryDirectory()
        os.environ["SYMM_CUDA_LIBRARY"] = stub_library(tmp.name)
    symm.init(cuda=a.cuda)
    n = symm.n_pes()
    sync, batch = (lambda: None), a.iters
    if a.cuda:
        import torch
        torch.cuda.set_device(symm.cuda_device())
        sync, batch = torch.cuda.synchronize, 100
        what = "CUDA tensors, stream calls"
        cases = cuda_cases(n, False)
    elif a.cuda_stub:
        what = "the CUDA code path over stub C calls (no GPU)"
        cases = cuda_cases(n, True)
    else:
        what = "%s arrays, host calls" % a.backend
        cases = cpu_cases(n, a.backend)
    rows = []
    for name, py, c in cases:
        py(), c()
        py_t, c_t = [], []
        for _ in range(a.reps):
            py_t.append(per_call(py, a.iters, batch, sync))
            c_t.append(per_call(c, a.iters, batch, sync))
        stat = min if a.best else statistics.median
        rows.append((name, stat(c_t), stat(py_t), max(py_t) - min(py_t)))
    if a.cuda:
        symm.cuda_check()
    if symm.my_pe() == 0:
        print("# symm Python layer: %s; %d PEs, %d calls x %d reps, %s us per call" %
              (what, n, a.iters, a.reps, "fastest" if a.best else "median"))
        print("# %-28s %10s %10s %10s %10s" % ("call", "C(ctypes)", "Python", "added", "spread"))
        for name, c, py, spread in rows:
            print("  %-28s %10.2f %10.2f %10.2f %10.2f" % (name, c, py, py - c, spread))
    symm.finalize()


if __name__ == "__main__":
    main()
