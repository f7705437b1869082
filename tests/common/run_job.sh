# run_job.sh — sourced by the test scripts that run a whole job and read what it printed
# (tests/fault/run_fault_lifecycle.sh, tests/mpi/run_mpi_launch.sh). Needs fail(), LIMIT
# (seconds a job may take) and JOB_OUT (a file for the job's output).
#
# run_job WHAT COMMAND...: runs the job with SYMM_TIMEOUT=60, far above LIMIT so that a
# job left to time out fails, under timeout(1); sets rc and elapsed (seconds), shows the
# output and the status, and fails when the job hung or took LIMIT seconds or more.
run_job() {
    what=$1
    shift
    s=$(date +%s.%N)
    SYMM_TIMEOUT=60 timeout 90 "$@" >"$JOB_OUT" 2>&1 </dev/null
    rc=$?
    e=$(date +%s.%N)
    elapsed=$(awk "BEGIN{printf \"%.2f\", $e - $s}")
    sed 's/^/  | /' "$JOB_OUT"
    echo "$what: exit status $rc after $elapsed s"
    [ "$rc" -ne 124 ] || fail "timeout(1) stopped the job: it hung"
    awk "BEGIN{exit !($elapsed < $LIMIT)}" || fail "the job took $elapsed s (limit $LIMIT s)"
}

# count TEXT: lines of the job's output holding TEXT.
count() { grep -cF -- "$1" "$JOB_OUT"; }
