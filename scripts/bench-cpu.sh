#!/usr/bin/env bash
# bench-cpu.sh — the CPU benchmarks of symm against their MPI anchor, in one run: builds
# what is missing, then for every suite runs symm-bench-mpi (under mpirun) and right after
# it symm-bench (under symmrun) with the MPI rows as anchor, so that each table carries a
# ratio column measured on the same machine minutes apart. Writes the tables and a
# machine-readable summary (summary.tsv) to $OUT (default build/bench-results).
#
#   scripts/bench-cpu.sh                 # everything: teams at 2 and 4 PEs, the rest at 2
#   scripts/bench-cpu.sh --quick         # tiny sizes (seconds): a smoke run
#   scripts/bench-cpu.sh coll tile       # only these suites
#   EXTRA="--reps 11 --max 16M" scripts/bench-cpu.sh coll
#   scripts/bench-cpu.sh --hosts coll    # symm under mpirun, every PE its own host
#   NP=4 HOSTS=2 scripts/bench-cpu.sh --hosts coll   # 2 hosts x 2 PEs
#   scripts/bench-cpu.sh --layouts coll  # 4 PEs: 4 hosts x 1 against 2 hosts x 2, and MPI
# --hosts runs symm-bench under mpirun instead of symmrun, its PEs in SYMM_HOSTS groups that
# share no memory (HOSTS, default the PE count: every PE its own host), so that every byte
# between them goes through the MPI transport; the MPI anchor is the same run as ever.
# --layouts runs the suites at 4 PEs under mpirun ROUNDS times (3), each round the MPI
# anchor, then symm with every PE its own host (SYMM_HOSTS=4), then 2 hosts x 2 PEs
# (SYMM_HOSTS=2), and prints per operation and size the median time of each layout.
# Environment: BUILD (build dir), OUT (results dir; bench-results-hosts with --hosts),
# NP (PEs, 2), TEAMS_NP ("2 4"), HOSTS (the groups of --hosts),
# EXTRA (options passed to both programs), PLOTS (directory for PNG plots; needs
# python3 with matplotlib, skipped otherwise), MPIRUN (the MPI launcher, mpirun),
# SYMM_GIT_REV (the revision to record where the tree is not a git checkout).
# scripts/bench-report.py $OUT prints the Markdown tables of docs/PERFORMANCE.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
OUT_SET=${OUT:-}
OUT=${OUT:-$BUILD/bench-results}
NP=${NP:-2}
TEAMS_NP=${TEAMS_NP:-"2 4"}
EXTRA=${EXTRA:-}
MPIRUN=${MPIRUN:-mpirun}
PLOTS=${PLOTS:-$OUT/plots}

suites=()
quick=""
hosts=0
layouts=0
ROUNDS=${ROUNDS:-3}
for a in "$@"; do
    case "$a" in
    --quick) quick=--quick ;;
    --hosts) hosts=1 ;;
    --layouts) hosts=1; layouts=1; NP=4 ;;
    teams | coll | tile | moe) suites+=("$a") ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "bench-cpu.sh: unknown argument $a (teams coll tile moe --quick --hosts --layouts)" >&2; exit 2 ;;
    esac
done
if [ $hosts = 1 ]; then OUT=${OUT_SET:-$BUILD/bench-results-hosts}; PLOTS=$OUT/plots; fi
[ ${#suites[@]} -eq 0 ] && suites=(teams coll tile moe)

# ---------------------------------------------------------------- build
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DSYMM_CUDA=off -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" -j"$(nproc)" --target symmrun symm-bench >/dev/null
# symm-bench-mpi exists only where CMake found MPI: no target, no anchor
cmake --build "$BUILD" -j"$(nproc)" --target symm-bench-mpi >/dev/null 2>&1 || true
SYMMRUN=$BUILD/bin/symmrun
SBENCH=$BUILD/bin/symm-bench
MBENCH=$BUILD/bin/symm-bench-mpi
have_mpi=0
if [ -x "$MBENCH" ] && command -v "$MPIRUN" >/dev/null 2>&1; then have_mpi=1; fi
if [ $hosts = 1 ] && [ $have_mpi = 0 ]; then
    echo "bench-cpu.sh: --hosts runs symm under $MPIRUN, which (or symm-bench-mpi) is missing" >&2
    exit 2
fi
# The MPI's name and version: Open MPI's first line, or the version line of MPICH's Hydra.
mpi_name() {
    "$MPIRUN" --version 2>&1 | awk 'NR == 1 { first = $0 }
        /Open MPI/ { print; done = 1; exit }
        /HYDRA/ { hydra = 1 } hydra && /Version:/ { print "MPICH (Hydra) " $2; done = 1; exit }
        END { if (!done) print first }'
}
mpi_flags=()
if [ $have_mpi = 1 ] && "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
    mpi_flags+=(--oversubscribe --bind-to none)
    if [ "$(id -u)" = 0 ]; then mpi_flags+=(--allow-run-as-root); fi
fi

# Room for every suite's buffers at their default rotation up to 4 PEs (moe needs about
# (PEs + 2) x 256 MiB); in a smaller heap symm-bench rotates through less, then skips the
# largest sizes, and says so in its output.
export SYMM_HEAP_SIZE=${SYMM_HEAP_SIZE:-2G}

mkdir -p "$OUT"
SUMMARY=$OUT/summary.tsv
{
    echo "# symm CPU benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n), $(nproc) CPUs,"\
         "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p'),"\
         "git ${SYMM_GIT_REV:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')}"
    echo "# anchor: $([ $have_mpi = 1 ] && mpi_name || echo none)"
    echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews both sides)"
    [ $hosts = 1 ] && echo "# symm: under $MPIRUN, SYMM_HOSTS=${HOSTS:-the PE count} (PEs in groups that share no memory)"
    printf "np\tsuite\top\tsize\tmedian_us\tmin_us\tmax_us\textra\tanchor_us\tratio\n"
} >"$SUMMARY"

run_suite() { # suite np [reuse: keep the anchor already measured]
    local suite=$1 np=$2 tag="$1-np$2" reuse=${3:-}
    local mtsv=$OUT/mpi-$tag.tsv stsv=$OUT/symm-$tag.tsv
    [ -z "$reuse" ] && rm -f "$mtsv"
    rm -f "$stsv"
    echo "================================================================ $suite, $np PEs (load $(cut -d' ' -f1 /proc/loadavg))"
    if [ -n "$reuse" ]; then
        echo "# anchor: $mtsv, measured earlier in this run"
    elif [ $have_mpi = 1 ]; then
        echo "\$ $MPIRUN -np $np ${mpi_flags[*]} symm-bench-mpi $suite $quick $EXTRA"
        "$MPIRUN" -np "$np" "${mpi_flags[@]}" "$MBENCH" "$suite" $quick $EXTRA --tsv "$mtsv" |
            tee "$OUT/mpi-$tag.txt"
    else
        echo "# no MPI anchor (symm-bench-mpi or $MPIRUN missing): ratio columns are nan"
    fi
    echo
    if [ $hosts = 1 ]; then
        local k=${HOSTS:-$np}
        echo "\$ SYMM_HOSTS=$k $MPIRUN -np $np ${mpi_flags[*]} symm-bench $suite $quick $EXTRA --anchor $mtsv"
        SYMM_HOSTS=$k "$MPIRUN" -np "$np" "${mpi_flags[@]}" "$SBENCH" "$suite" $quick $EXTRA \
            --anchor "$mtsv" --tsv "$stsv" | tee "$OUT/symm-$tag.txt"
    else
        echo "\$ symmrun -n $np symm-bench $suite $quick $EXTRA --anchor $mtsv"
        "$SYMMRUN" -n "$np" "$SBENCH" "$suite" $quick $EXTRA --anchor "$mtsv" --tsv "$stsv" |
            tee "$OUT/symm-$tag.txt"
    fi
    echo
    # rows get the PE count in front; notes ("# workers ...") pass as they are
    [ -f "$stsv" ] && sed "/^#/!s/^/$np\t/" "$stsv" >>"$SUMMARY"
    # memcpy and anything else only the MPI side measured stay in its own file
    return 0
}

# --layouts: the rounds, then the comparison of the layouts (median over the rounds).
if [ $layouts = 1 ]; then
    status=0
    for s in "${suites[@]}"; do
        for r in $(seq 1 "$ROUNDS"); do
            reuse=""
            for k in 4 2; do
                HOSTS=$k run_suite "$s" "$NP" $reuse >>"$OUT/layouts-$s.log" || status=1
                reuse=reuse
                mv "$OUT/symm-$s-np$NP.tsv" "$OUT/symm-$s-h$k-r$r.tsv"
            done
            mv "$OUT/mpi-$s-np$NP.tsv" "$OUT/mpi-$s-r$r.tsv"
        done
        python3 - "$OUT" "$s" "$ROUNDS" <<'PY' | tee "$OUT/layouts-$s.txt"
import statistics, sys
out, suite, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
def rows(path):
    t = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if line.startswith("#") or len(f) < 4: continue
        t[(f[1], int(f[2]))] = float(f[3])
    return t
runs = {k: [rows(f"{out}/{k}-r{r}.tsv") for r in range(1, rounds + 1)]
        for k in (f"symm-{suite}-h4", f"symm-{suite}-h2", f"mpi-{suite}")}
h4, h2, mpi = runs[f"symm-{suite}-h4"], runs[f"symm-{suite}-h2"], runs[f"mpi-{suite}"]
print(f"# {suite}, 4 PEs, median time (us) over {rounds} rounds; speedup = 4 x 1 / 2 x 2")
print("# op              size    4x1(us)    2x2(us)    MPI(us)  speedup  2x2/MPI")
for key in sorted(h2[0], key=lambda k: (k[0] != "barrier", k[0], k[1])):
    if key[0] == "memcpy" or not all(key in r for r in h4 + h2): continue
    a = statistics.median(r[key] for r in h4)
    b = statistics.median(r[key] for r in h2)
    m = [r[key] for r in mpi if key in r]
    m = statistics.median(m) if m else float("nan")
    print(f"{key[0]:<14} {key[1]:>8} {a:>10.1f} {b:>10.1f} {m:>10.1f} {a / b:>8.2f} {b / m:>8.2f}")
PY
    done
    echo "layouts: $OUT/layouts-*.txt"
    exit $status
fi

status=0
for s in "${suites[@]}"; do
    if [ "$s" = teams ]; then
        for np in $TEAMS_NP; do run_suite teams "$np" || status=1; done
    else
        run_suite "$s" "$NP" || status=1
    fi
done

echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$SUMMARY"
echo "summary: $SUMMARY"
if [ -z "$quick" ] && python3 -c "import matplotlib" >/dev/null 2>&1; then
    python3 "$ROOT/scripts/bench-plot.py" "$OUT" "$PLOTS" "$NP" && echo "plots: $PLOTS"
fi
exit $status
