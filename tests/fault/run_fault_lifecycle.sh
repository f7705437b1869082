#!/bin/sh
# run_fault_lifecycle.sh SYMMRUN PROGRAM CASE — init and finalize misused under symmrun
# (PROGRAM is fault_lifecycle):
#   exit0     PE 1 of 4 (and PE 0 of 1) returns from main without symm_finalize: symmrun
#             exits non-zero naming it, the other PEs' barriers fail with
#             SYMM_ERR_PE_FAILED naming it, long before SYMM_TIMEOUT=60
#   finalize  every PE finalizes and exits 0: symmrun exits 0
#   reinit    symm_init after symm_finalize fails, saying why; the job still succeeds
#   badenv    SYMM_SPIN=-1: every PE's symm_init fails naming the variable and range
#   fanin     one PE sets another SYMM_BARRIER_FANIN: every PE's symm_init fails
set -u
SYMMRUN=$1
PROG=$2
CASE=$3
LIMIT=20 # seconds any job may take (run_job)

fail() { echo "run_fault_lifecycle: FAIL: $*" >&2; exit 1; }
JOB_OUT=$(mktemp "${TMPDIR:-/tmp}/fault_lifecycle.XXXXXX") || fail "mktemp"
trap 'rm -f "$JOB_OUT"' EXIT
. "$(dirname "$0")/../common/run_job.sh"

# run NPES ARGS...: runs the job under symmrun (run_job).
run() {
    n=$1
    shift
    run_job "run_fault_lifecycle: -n $n $*" "$SYMMRUN" -n "$n" "$PROG" "$@"
}

case $CASE in
exit0)
    run 4 exit0 1
    [ "$rc" -ne 0 ] || fail "symmrun exited 0 although PE 1 never called symm_finalize"
    [ "$(count "symmrun: PE 1 exited with status 0 without calling symm_finalize")" -eq 1 ] ||
        fail "symmrun does not say that PE 1 exited without symm_finalize"
    # Every other PE either saw its barrier fail naming PE 1, or was stopped by symmrun
    # before its wait looked (it never may finish).
    [ "$(count "finished every barrier")" -eq 0 ] || fail "a PE finished every barrier"
    [ "$(grep -cE "^fault_lifecycle: PE [0-9]+: barrier [0-9]+ failed:" "$JOB_OUT")" -eq 0 ] ||
        fail "a barrier failed otherwise than with SYMM_ERR_PE_FAILED naming PE 1"
    [ "$(count "failed as expected: a PE of the job failed: job aborted: PE 1 exited with \
status 0 without calling symm_finalize")" -ge 1 ] ||
        fail "no other PE's barrier failed with SYMM_ERR_PE_FAILED naming PE 1"
    run 1 exit0 0
    [ "$rc" -ne 0 ] || fail "-n 1: symmrun exited 0 although PE 0 never called symm_finalize"
    [ "$(count "symmrun: PE 0 exited with status 0 without calling symm_finalize")" -eq 1 ] ||
        fail "-n 1: symmrun does not say that PE 0 exited without symm_finalize"
    ;;
finalize)
    run 4 finalize
    [ "$rc" -eq 0 ] || fail "symmrun exited $rc although every PE finalized"
    [ ! -s "$JOB_OUT" ] || fail "a job that finalized printed errors"
    ;;
reinit)
    run 3 reinit
    [ "$rc" -eq 0 ] || fail "symmrun exited $rc: the refused second symm_init broke the job"
    [ "$(count "symm_init after symm_finalize is not supported under symmrun")" -eq 3 ] ||
        fail "not every PE was told that symm_init after symm_finalize is not supported"
    ;;
badenv)
    export SYMM_SPIN=-1
    run 2 init
    [ "$rc" -ne 0 ] || fail "symmrun exited 0 with SYMM_SPIN=-1"
    [ "$(count "SYMM_SPIN='-1' is out of range: must be 1..1000000000")" -eq 2 ] ||
        fail "not both PEs' symm_init named SYMM_SPIN, its value and its range"
    [ "$(count "symmrun: PE ")" -ge 1 ] || fail "symmrun does not name the failed PE"
    ;;
fanin)
    run 3 fanin
    [ "$rc" -eq 0 ] || fail "the job did not end cleanly after every PE refused alike (exit $rc)"
    [ "$(count "init refused: SYMM_BARRIER_FANIN is")" -eq 3 ] ||
        fail "not every PE's symm_init refused a SYMM_BARRIER_FANIN that differs"
    ;;
*)
    fail "unknown case '$CASE'"
    ;;
esac
echo "run_fault_lifecycle: $CASE OK"
