#!/usr/bin/env python3
"""bench-plot.py — PNG plots from the TSV files that scripts/bench-cpu.sh writes.

usage: bench-plot.py RESULTS_DIR PLOTS_DIR [NP]
  cpu-coll-bw.png     busbw of every collective: symm vs MPI vs memcpy, per size
  cpu-teams.png       time per team: symm pool duplicate vs MPI_Comm_dup, per pool size
  cpu-tile-moe.png    tile reduce and MoE dispatch/combine: symm vs MPI
Needs matplotlib; bench-cpu.sh only calls it where matplotlib imports."""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


ROTATE_MIN = 256 << 10  # symm-bench's default --rotate-min


def load(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            p = line.rstrip("\n").split("\t")
            if len(p) < 7:
                continue
            rows.setdefault(p[1], []).append((int(p[2]), float(p[3]), float(p[6])))
    for k in rows:
        rows[k].sort()
    return rows


def size_label(v, _pos=None):
    for unit, s in (("M", 1 << 20), ("K", 1 << 10)):
        if v >= s:
            return "%d%s" % (v // s, unit)
    return "%d" % v


def setup_x(ax):
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(size_label))
    ax.grid(True, which="major", alpha=0.3)


def main():
    res, out = sys.argv[1], sys.argv[2]
    np_ = sys.argv[3] if len(sys.argv) > 3 else "2"
    os.makedirs(out, exist_ok=True)

    symm = load(os.path.join(res, "symm-coll-np%s.tsv" % np_))
    mpi = load(os.path.join(res, "mpi-coll-np%s.tsv" % np_))
    if symm:
        ops = ["broadcast", "reduce", "allreduce", "reduce_scatter", "fcollect", "alltoall",
               "alltoallv"]
        fig, axes = plt.subplots(2, 4, figsize=(18, 8))
        mem = symm.get("memcpy", [])
        for ax, op in zip(axes.flat, ops):
            for src, name, style in ((symm, "symm", "o-"), (mpi, "Open MPI", "s--")):
                pts = src.get(op, [])
                if pts:
                    ax.plot([p[0] for p in pts], [p[2] for p in pts], style, ms=3, label=name)
            if mem:
                ax.plot([p[0] for p in mem], [p[2] for p in mem], ":", color="gray",
                        label="memcpy (1 core)")
            setup_x(ax)
            ax.axvline(ROTATE_MIN, color="gray", lw=0.8, alpha=0.6)
            ax.set_yscale("log")
            ax.set_title(op)
            ax.set_xlabel("size (B)")
            ax.set_ylabel("busbw (GB/s)")
        axes.flat[-1].axis("off")
        h, lab = axes.flat[0].get_legend_handles_labels()
        axes.flat[-1].legend(h, lab, loc="center", fontsize=12)
        axes.flat[-1].text(0.5, 0.15, "vertical line: from 256 KiB up, buffers rotate\n"
                           "through 256 MiB (cold caches, both libraries)",
                           ha="center", transform=axes.flat[-1].transAxes)
        fig.suptitle("symm CPU collectives, %s PEs: bus bandwidth vs Open MPI and memcpy "
                     "(same run)" % np_)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "cpu-coll-bw.png"), dpi=90)
        plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 5))
    drew = False
    for n in ("2", "4"):
        s = load(os.path.join(res, "symm-teams-np%s.tsv" % n)).get("pool_create", [])
        m = load(os.path.join(res, "mpi-teams-np%s.tsv" % n)).get("pool_create", [])
        if s:
            ax.plot([p[0] for p in s], [p[1] / p[0] for p in s], "o-", label="symm pool, %s PEs" % n)
            drew = True
        if m:
            ax.plot([p[0] for p in m], [p[1] / p[0] for p in m], "s--",
                    label="MPI_Comm_dup, %s ranks" % n)
    if drew:
        ax.set_xscale("log", base=4)
        ax.set_yscale("log")
        ax.set_xlabel("duplicates created")
        ax.set_ylabel("time per team (us)")
        ax.grid(True, alpha=0.3)
        ax.legend()
        ax.set_title("Team creation: symm pool vs MPI_Comm_dup (same run)")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "cpu-teams.png"), dpi=90)
    plt.close(fig)

    tile_s = load(os.path.join(res, "symm-tile-np%s.tsv" % np_))
    tile_m = load(os.path.join(res, "mpi-tile-np%s.tsv" % np_))
    moe_s = load(os.path.join(res, "symm-moe-np%s.tsv" % np_))
    moe_m = load(os.path.join(res, "mpi-moe-np%s.tsv" % np_))
    # worker counts of the _par rows, from the "# workers" notes of the symm TSVs
    workers = {}
    for suite in ("tile", "moe"):
        path = os.path.join(res, "symm-%s-np%s.tsv" % (suite, np_))
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    p = line.rstrip("\n").split("\t")
                    if p[0] == "# workers" and len(p) >= 6:
                        workers.setdefault(p[2], set()).add(int(p[4]))
    if tile_s or moe_s:
        fig, axes = plt.subplots(1, 4, figsize=(18, 4.5))
        panels = (("tile_reduce", tile_s, tile_m), ("tile_allreduce", tile_s, tile_m),
                  ("dispatch", moe_s, moe_m), ("combine", moe_s, moe_m))
        for ax, (op, s, m) in zip(axes, panels):
            par = op + "_par"
            nws = sorted(workers.get(par, set()))
            par_label = "symm _par (%s worker%s per PE)" % (
                "/".join(str(x) for x in nws) or "?", "" if nws == [1] else "s")
            for name, pts, style in (("symm", s.get(op, []), "o-"),
                                     (par_label, s.get(par, []), "^-"),
                                     ("Open MPI", m.get(op, []), "s--")):
                if pts:
                    ax.plot([p[0] for p in pts], [p[2] for p in pts], style, ms=3, label=name)
            setup_x(ax)
            ax.set_title(op)
            ax.set_xlabel("size (B)")
            ax.set_ylabel("busbw (GB/s)")
            ax.legend(fontsize=8)
        fig.suptitle("symm tile reduce and MoE dispatch/combine, %s PEs, vs Open MPI" % np_)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "cpu-tile-moe.png"), dpi=90)
        plt.close(fig)
    return 0


if __name__ == "__main__":
    sys.exit(main())
