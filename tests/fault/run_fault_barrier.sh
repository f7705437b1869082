#!/bin/sh
# run_fault_barrier.sh LAUNCHER PROGRAM [symm_abort] — PE 2 of 4 aborts mid-way through
# barriers: the launcher must exit non-zero within a few seconds, its stderr must name
# PE 2 (killed by SIGABRT; or, with symm_abort, aborted with code 7 and the reason), and
# the job must leave no files in /dev/shm or /tmp.
#
# LAUNCHER is symmrun's path, or an MPI launcher with its options ("mpiexec
# --oversubscribe"): under mpirun, the rank killed by SIGABRT is named by the launcher
# (Open MPI's mpirun) or by the PE itself on its way down (MPICH's Hydra names only the
# process id, on stdout), and after symm_abort the other PEs' waits name PE 2, its code
# and reason (mpirun's own status is the first non-zero exit it sees, theirs or PE 2's;
# Hydra's may be the SIGTERM it sent the others). With SYMM_HOSTS set, the PEs form groups
# that share no memory, so none can read PE 2's note: PE 2's own report of its
# symm_abort names the code and reason, and mpirun ends the job.
#
# Where unprivileged user namespaces are allowed, the job runs with a private, empty
# tmpfs on /dev/shm, so that any file left there is the job's, whatever else runs on
# the machine (other tests, MPI jobs); elsewhere only new /dev/shm names mentioning
# "symm" count. /tmp stays shared (the build, hence the program, may live there): the
# job gets a private TMPDIR that must stay empty, and no new /tmp name may mention symm.
set -u
LAUNCHER=$1
PROG=$2
MODE=${3:-}

ulimit -c 0 # no core file from abort()
fail() { echo "run_fault_barrier: FAIL: $*" >&2; exit 1; }

priv=$(mktemp -d "${TMPDIR:-/tmp}/fault_barrier.XXXXXX") || fail "mktemp"
trap 'rm -rf "$priv"' EXIT

# LIMIT: seconds from start to the launcher's exit (an MPI launcher's start-up of 4 PEs
# alone can take seconds when other jobs keep the machine's cores busy).
case $(basename "${LAUNCHER%% *}") in
symmrun) kind=symmrun LAUNCH="$LAUNCHER --timeout 30" LIMIT=5 ;;
*) kind=mpi LAUNCH=$LAUNCHER LIMIT=20 ;;
esac

# The job; prints "rc start end" then "LEFT <names>" (private mode only).
job='s=$(date +%s.%N); timeout 60 $1 -n 4 "$2" $3 >/dev/null; rc=$?
e=$(date +%s.%N); echo "$rc $s $e"'
shm_before=$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort)
tmp_before=$(ls -A /tmp 2>/dev/null | grep -i symm | sort)
if unshare -rm sh -c 'mount -t tmpfs x /dev/shm' 2>/dev/null; then
    mode=private
    res=$(TMPDIR=$priv unshare -rm sh -c 'mount -t tmpfs symm-fault /dev/shm || exit 99
'"$job"'
sleep 0.3 # the last PE processes disappear
echo "LEFT $(ls -A /dev/shm | sed "s|^|/dev/shm/|")"' sh "$LAUNCH" "$PROG" "$MODE" 2>"$priv/err")
else
    mode=shared
    res=$(TMPDIR=$priv sh -c "$job" sh "$LAUNCH" "$PROG" "$MODE" 2>"$priv/err")
    sleep 0.3
fi
err=$(cat "$priv/err")
rm -f "$priv/err"
printf '%s\n' "$err" | sed 's/^/  | /'
set -- $(printf '%s\n' "$res" | head -1)
[ $# -eq 3 ] || fail "the job did not run ($mode mode): '$res'"
rc=$1
elapsed=$(awk "BEGIN{printf \"%.2f\", $3 - $2}")
echo "run_fault_barrier: $kind: exit status $rc after $elapsed s ($mode /dev/shm)"

[ "$rc" -ne 0 ] || fail "the launcher exited 0 although PE 2 aborted"
[ "$rc" -ne 124 ] || fail "the launcher timed out (exit 124): the job hung after the abort"
awk "BEGIN{exit !($elapsed < $LIMIT)}" || fail "the job took $elapsed s (limit $LIMIT s)"
has() { printf '%s\n' "$err" | grep -E "$1" >/dev/null; }
if [ "$kind" = symmrun ]; then
    has '^symmrun:.*PE 2' || fail "symmrun's stderr does not name PE 2"
    if [ "$MODE" = symm_abort ]; then
        [ "$rc" -eq 7 ] || fail "symmrun exited $rc, not the code 7 that PE 2 passed to symm_abort"
        has '^symmrun:.*PE 2.*code 7.*deliberate abort' ||
            fail "symmrun's stderr does not give PE 2's symm_abort code and reason"
    else
        has 'PE 2 .*(signal 6|SIGABRT|Abort)' ||
            fail "symmrun's stderr does not say PE 2 was killed by SIGABRT"
    fi
elif [ "$MODE" = symm_abort ] && [ "${SYMM_HOSTS:-1}" -gt 1 ]; then
    has 'symm pe 2\] error: symm_abort\(7\): deliberate abort' ||
        fail "PE 2 did not report its symm_abort code and reason"
elif [ "$MODE" = symm_abort ]; then
    has 'job aborted: PE 2 aborted the job \(code 7\): deliberate abort' ||
        fail "no PE's wait gave PE 2's symm_abort code and reason"
else
    has '(rank 2 |\[symm pe 2\] ).*(signal 6|SIGABRT|Abort)' ||
        fail "neither the launcher nor PE 2 says on stderr that rank 2 was killed by SIGABRT"
fi
if [ "$mode" = private ]; then
    left=$(printf '%s\n' "$res" | sed -n 's/^LEFT *//p' | sed 's/ *$//')
    [ -z "$left" ] || fail "the job left files in /dev/shm: $left"
fi
# Names that appeared (other tests running beside this one may remove theirs meanwhile).
# With a private /dev/shm the job cannot reach the machine's: only /tmp is compared.
appeared() { printf '%s\n' "$2" | grep -vxF -e "$1" -e ''; }
if [ "$mode" != private ]; then
    new=$(appeared "$shm_before" "$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort)")
    [ -z "$new" ] || fail "new symm files in /dev/shm: $new"
fi
[ -z "$(ls -A "$priv")" ] || fail "new files in TMPDIR: $(ls -A "$priv")"
new=$(appeared "$tmp_before" "$(ls -A /tmp 2>/dev/null | grep -i symm | sort)")
[ -z "$new" ] || fail "new symm files in /tmp: $new"
echo "run_fault_barrier: OK"
