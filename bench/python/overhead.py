"""overhead.py — what the Python layer adds to a call: each operation timed through the
package (symm.barrier, symm.all_reduce, ...) and as the bare libsymm call through ctypes
on the same buffers, in the same run; the difference is the package's own cost per call.
Run as one job: `symmrun -n 2 python bench/python/overhead.py [--iters N] [--reps R]`.
Prints, on PE 0, the median over reps of the per-call time in us, and the spread."""
import argparse
import ctypes
import statistics
import time

import numpy as np

import symm
from symm._lib import OPS, TEAM_WORLD, TYPES, Tile, lib


def per_call(fn, iters):
    symm.barrier()
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t) / iters * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    a = ap.parse_args()
    symm.init()
    n = symm.n_pes()
    x = symm.empty((1,), "float64")
    t = symm.empty((64, 64), "float32")
    inp = symm.empty((4 * n, 16), "float32")
    out = symm.empty((4 * n, 16), "float32")
    splits = [2] * (2 * n)
    so = np.zeros((2, 2 * n), dtype=np.int64)
    ssp = (ctypes.c_size_t * (2 * n))(*splits)
    osp = (ctypes.c_size_t * (2 * n))()
    ooff = (ctypes.c_size_t * (2 * n))()
    px, pt = x.__array_interface__["data"][0], t.__array_interface__["data"][0]
    pin, pout = inp.__array_interface__["data"][0], out.__array_interface__["data"][0]
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
    rows = []
    for name, py, c in cases:
        py_t, c_t = [], []
        for _ in range(a.reps):
            py_t.append(per_call(py, a.iters))
            c_t.append(per_call(c, a.iters))
        rows.append((name, statistics.median(c_t), statistics.median(py_t),
                     max(py_t) - min(py_t)))
    if symm.my_pe() == 0:
        print("# symm Python layer: %d PEs, %d calls x %d reps, median us per call" %
              (n, a.iters, a.reps))
        print("# %-24s %10s %10s %10s %10s" % ("call", "C(ctypes)", "Python", "added", "spread"))
        for name, c, py, spread in rows:
            print("  %-24s %10.2f %10.2f %10.2f %10.2f" % (name, c, py, py - c, spread))
    symm.finalize()


if __name__ == "__main__":
    main()
