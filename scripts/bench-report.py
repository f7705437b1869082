#!/usr/bin/env python3
"""bench-report.py — Markdown tables (for docs/PERFORMANCE.md) from the TSV files that
scripts/bench-cpu.sh writes, with each target of the CPU benchmarks checked.

usage: bench-report.py RESULTS_DIR [NP]"""
import math
import os
import sys


def load(path):
    rows = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                p = line.rstrip("\n").split("\t")
                if len(p) >= 9:
                    rows[(p[1], int(p[2]))] = dict(us=float(p[3]), lo=float(p[4]), hi=float(p[5]),
                                                    extra=float(p[6]), anchor=float(p[7]),
                                                    ratio=float(p[8]))
    return rows


def load_workers(path):
    """The "# workers" notes of the _par rows: {op: {size: (count, how)}}."""
    notes = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                p = line.rstrip("\n").split("\t")
                if p[0] == "# workers" and len(p) >= 6:
                    notes.setdefault(p[2], {})[int(p[3])] = (int(p[4]), p[5])
    return notes


def sz(v):
    for u, s in (("M", 1 << 20), ("K", 1 << 10)):
        if v >= s and v % s == 0:
            return "%d %siB" % (v // s, u)
    return "%d B" % v


def f(v, fmt="%.2f"):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else fmt % v


def verdict(ok):
    return "**met**" if ok else "**missed**"


def main():
    res = sys.argv[1]
    np_ = sys.argv[2] if len(sys.argv) > 2 else "2"
    out = []
    w = out.append

    # ---- teams
    for n in ("2", "4"):
        t = load(os.path.join(res, "symm-teams-np%s.tsv" % n))
        if not t:
            continue
        w("\n#### Pools of duplicates, %s PEs\n" % n)
        w("| duplicates | symm create (us) | symm per team (us) | symm destroy (us) | team heap per duplicate (B) | MPI_Comm_dup per team (us) | ratio MPI/symm per team |")
        w("|---:|---:|---:|---:|---:|---:|---:|")
        for (op, k), r in sorted(t.items(), key=lambda x: x[0][1]):
            if op != "pool_create":
                continue
            d = t.get(("pool_destroy", k), {}).get("us")
            w("| %d | %s | %s | %s | %s | %s | %s |" % (
                k, f(r["us"]), f(r["us"] / k, "%.4f"), f(d), f(r["extra"], "%.1f"),
                f(r["anchor"] / k if not math.isnan(r["anchor"]) else None, "%.2f"),
                f(r["ratio"], "%.0f")))
        w("\n| plain team over all %s PEs | symm create (us) | symm destroy (us) | MPI create (us) | MPI free (us) | ratio MPI/symm (create) |" % n)
        w("|---|---:|---:|---:|---:|---:|")
        for how, mpi in (("split", "MPI_Comm_split"), ("list", "MPI_Comm_create_group")):
            c, d = t.get((how + "_create", int(n))), t.get((how + "_destroy", int(n)))
            if c:
                w("| %s (vs %s) | %s | %s | %s | %s | %s |" % (
                    "split_strided" if how == "split" else "rank list", mpi, f(c["us"]),
                    f(d["us"] if d else None), f(c["anchor"]), f(d["anchor"] if d else None),
                    f(c["ratio"], "%.1f")))
        w("\n| duplicates in use at once (1 thread each per PE) | symm barrier (us) | symm barriers/s (all threads) | MPI barrier (us) | MPI barriers/s | ratio MPI/symm |")
        w("|---:|---:|---:|---:|---:|---:|")
        for (op, k), r in sorted(t.items(), key=lambda x: x[0][1]):
            if op == "barrier_conc":
                an = r["anchor"]
                w("| %d | %s | %s | %s | %s | %s |" % (
                    k, f(r["us"], "%.3f"), f(r["extra"], "%.3g"), f(an, "%.3f"),
                    f(k * 1e6 / an if not math.isnan(an) else None, "%.3g"), f(r["ratio"], "%.1f")))

    # ---- collectives
    c = load(os.path.join(res, "symm-coll-np%s.tsv" % np_))
    if c:
        ops = ["broadcast", "reduce", "allreduce", "reduce_scatter", "fcollect", "alltoall",
               "alltoallv"]
        w("\n#### Latency, %s PEs (OSU style, us; ratio = symm/MPI, lower is better)\n" % np_)
        w("| operation | 8 B symm | 8 B MPI | ratio | 4 KiB symm | 4 KiB MPI | ratio |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        b = c.get(("barrier", 0))
        if b:
            w("| barrier | %s | %s | %s | | | |" % (f(b["us"], "%.3f"), f(b["anchor"], "%.3f"),
                                                  f(b["us"] / b["anchor"], "%.2f")))
        for op in ops:
            r8, r4 = c.get((op, 8)), c.get((op, 4096))
            if r8 and r4:
                w("| %s | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |" % (
                    op, r8["us"], r8["anchor"], r8["us"] / r8["anchor"], r4["us"], r4["anchor"],
                    r4["us"] / r4["anchor"]))
        sizes = [1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26]
        w("\n#### Bandwidth, %s PEs: symm busbw in GB/s (ratio symm/MPI busbw)\n" % np_)
        w("| operation | " + " | ".join(sz(s) for s in sizes) + " | min ratio 64 KiB-64 MiB |")
        w("|---|" + "---:|" * (len(sizes) + 1))
        mins = {}
        for op in ops:
            cells, rmin = [], None
            for (o, k), r in c.items():
                if o == op and (1 << 16) <= k <= (1 << 26):
                    rmin = r["ratio"] if rmin is None else min(rmin, r["ratio"])
            for s in sizes:
                r = c.get((op, s))
                cells.append("%s (%s)" % (f(r["extra"]), f(r["ratio"])) if r else "")
            mins[op] = rmin
            w("| %s | %s | %s |" % (op, " | ".join(cells), f(rmin)))
        mem = {k: r["extra"] for (o, k), r in c.items() if o == "memcpy"}
        w("| memcpy (1 core) | " + " | ".join(f(mem.get(s)) for s in sizes) + " | |")
        w("\n#### Targets, %s PEs\n" % np_)
        if b:
            w("- barrier latency at most half of MPI's: %.3f / %.3f us = %.2f: %s" % (
                b["us"], b["anchor"], b["us"] / b["anchor"], verdict(b["us"] <= 0.5 * b["anchor"])))
        r8 = c.get(("allreduce", 8))
        if r8:
            w("- 8-byte allreduce latency at most half of MPI's: %.3f / %.3f us = %.2f: %s" % (
                r8["us"], r8["anchor"], r8["us"] / r8["anchor"],
                verdict(r8["us"] <= 0.5 * r8["anchor"])))
        for op in ops:
            if mins.get(op) is None:
                continue
            bad = sorted(k for (o, k), r in c.items()
                         if o == op and (1 << 16) <= k <= (1 << 26) and r["ratio"] < 1)
            w("- %s at least MPI's bandwidth from 64 KiB to 64 MiB: min ratio %.2f: %s%s" % (
                op, mins[op], verdict(not bad),
                "" if not bad else " (below 1 at " + ", ".join(
                    "%s: %.2f" % (sz(k), c[(op, k)]["ratio"]) for k in bad) + ")"))
        for op in ("reduce", "allreduce", "reduce_scatter"):
            big = [(k, r["extra"] / mem[k]) for (o, k), r in c.items()
                   if o == op and k >= (1 << 22) and k in mem]
            if big:
                worst = min(x[1] for x in big)
                w("- large %s (4-64 MiB) at least half of memcpy bandwidth: busbw/memcpy >= %.2f: %s"
                  % (op, worst, verdict(worst >= 0.5)))

    # ---- tile and moe
    for suite, title in (("tile", "Tile reduce"), ("moe", "MoE dispatch/combine")):
        t = load(os.path.join(res, "symm-%s-np%s.tsv" % (suite, np_)))
        if not t:
            continue
        sizes = sorted({k for (_, k) in t})
        opsl = []
        for (o, _) in t:
            if o not in opsl:
                opsl.append(o)
        w("\n#### %s, %s PEs: symm busbw in GB/s (ratio = MPI time / symm time; target >= 1.5)\n"
          % (title, np_))
        w("| operation | " + " | ".join(sz(s) for s in sizes) + " | min ratio | target |")
        w("|---|" + "---:|" * (len(sizes) + 2))
        for o in opsl:
            cells = []
            rs = []
            for s in sizes:
                r = t.get((o, s))
                cells.append("%s (%s)" % (f(r["extra"]), f(r["ratio"])) if r else "")
                if r:
                    rs.append(r["ratio"])
            w("| %s | %s | %.2f | %s |" % (o, " | ".join(cells), min(rs),
                                          "met" if min(rs) >= 1.5 else "missed"))
        notes = load_workers(os.path.join(res, "symm-%s-np%s.tsv" % (suite, np_)))
        for o in opsl:
            if o not in notes:
                continue
            counts = sorted({c for c, _ in notes[o].values()})
            how = sorted({h for _, h in notes[o].values()})
            if len(counts) == 1:
                what = "%d worker%s per PE at every size" % (counts[0], "" if counts[0] == 1 else "s")
            else:
                what = "workers per PE by size: " + ", ".join(
                    "%s: %d" % (sz(k), notes[o][k][0]) for k in sorted(notes[o]))
            w("\n`%s`: %s (%s)." % (o, what, "/".join(
                "automatic, nworkers = 0" if h == "automatic" else "--workers" for h in how)))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
