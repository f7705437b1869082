#!/bin/sh
# run_mpi_launch.sh CASE BIN MPIEXEC [LAUNCHER OPTIONS...] — symm programs started by an
# MPI launcher (BIN holds the build's programs):
#   demo     mpirun -n 4 moe_demo is one job of 4 PEs, verified
#   none     with SYMM_BOOTSTRAP=none every rank is its own 1-PE job, as asked
#   hosts    4 ranks on two hosts (played by one machine, fake_ssh.sh as the launcher's
#            ssh: Open MPI's plm_rsh_agent, Hydra's -launcher-exec): each host's PEs
#            form a group of 2 that shares no memory with the other, reached through
#            MPI one-sided communication (over TCP with Open MPI: its osc/pt2pt, which
#            Debian leaves out by default), and test_mpi_hosts passes (skipped with
#            another launcher, without namespaces, or where MPI offers no one-sided
#            communication between the two)
#   exit0    PE 1 of 4 returns from main without symm_finalize: the job ends non-zero
#            long before SYMM_TIMEOUT, PE 1 saying why (Hydra's own status could be 0)
#   reinit   symm_init after symm_finalize, where symm_init started MPI, fails saying why
#   fanin    one PE sets another SYMM_BARRIER_FANIN: every PE's symm_init refuses it, and
#            the job ends cleanly (every PE failed alike, so none is killed mid-report)
#   nompi    (a symm built without MPI) every PE's symm_init refuses the MPI launch,
#            saying symm was built without MPI
set -u
CASE=$1
BIN=$2
shift 2
LIMIT=30 # seconds any job may take
SKIP=77  # ctest's SKIP_RETURN_CODE

fail() { echo "run_mpi_launch: FAIL: $*" >&2; exit 1; }
JOB_OUT=$(mktemp "${TMPDIR:-/tmp}/mpi_launch.XXXXXX") || fail "mktemp"
trap 'rm -f "$JOB_OUT"' EXIT
. "$(dirname "$0")/../common/run_job.sh"

PROG=$BIN/fault_lifecycle
case $CASE in
demo)
    run_job "run_mpi_launch: $CASE" "$@" -n 4 "$BIN/moe_demo"
    [ "$rc" -eq 0 ] || fail "mpirun -n 4 moe_demo exited $rc"
    [ "$(count "moe_demo: 4 PEs x")" -eq 1 ] || fail "moe_demo is not one job of 4 PEs"
    [ "$(count "moe_demo: OK")" -eq 1 ] || fail "moe_demo did not verify its results"
    ;;
none)
    run_job "run_mpi_launch: $CASE" env SYMM_BOOTSTRAP=none "$@" -n 2 "$BIN/moe_demo"
    [ "$rc" -eq 0 ] || fail "two 1-PE jobs exited $rc"
    [ "$(count "moe_demo: 1 PEs x")" -eq 2 ] || fail "SYMM_BOOTSTRAP=none did not give 1-PE jobs"
    ;;
hosts)
    here=$(cd "$(dirname "$0")" && pwd)
    case $("$1" --version 2>&1) in
    *"Open MPI"* | *OpenRTE*)
        set -- "$@" --mca plm_rsh_agent "$here/fake_ssh.sh" --mca osc pt2pt,rdma,sm \
            --host fakehost1:2,fakehost2:2 ;;
    *HYDRA*) # MPICH's and Intel MPI's mpiexec
        set -- "$@" -launcher ssh -launcher-exec "$here/fake_ssh.sh" \
            -hosts fakehost1:2,fakehost2:2 ;;
    *) echo "run_mpi_launch: SKIP: playing two hosts needs Open MPI's or Hydra's ssh options"
       exit $SKIP ;;
    esac
    unshare -u true 2>/dev/null || unshare -ru true 2>/dev/null || {
        echo "run_mpi_launch: SKIP: no UTS namespace (unshare -u) to play a second host"
        exit $SKIP
    }
    LIMIT=90 # every one-sided operation over TCP waits for its target to enter MPI
    run_job "run_mpi_launch: $CASE" "$@" -n 4 "$BIN/test_mpi_hosts"
    if [ "$(count "MPI_Win_create to PE")" -gt 0 ]; then
        echo "run_mpi_launch: SKIP: this MPI has no one-sided component between its hosts"
        exit $SKIP
    fi
    [ "$rc" -eq 0 ] || fail "the job on two hosts did not end cleanly (exit $rc)"
    [ "$(count "of 4, group of 2: ok")" -eq 4 ] || fail "not every PE found its host's group"
    ;;
exit0)
    run_job "run_mpi_launch: $CASE" "$@" -n 4 "$PROG" exit0 1
    [ "$rc" -ne 0 ] || fail "the job exited 0 although PE 1 never called symm_finalize"
    [ "$(count "PE 1 returns from main")" -eq 1 ] || fail "PE 1 did not quit as planned"
    [ "$(count "PE 1 exits with status 0 without calling symm_finalize")" -eq 1 ] ||
        fail "PE 1 did not say that it left without symm_finalize"
    [ "$(count "finished every barrier")" -eq 0 ] || fail "a PE finished every barrier"
    ;;
reinit)
    run_job "run_mpi_launch: $CASE" "$@" -n 3 "$PROG" reinit
    [ "$rc" -eq 0 ] || fail "the refused second symm_init broke the job (exit $rc)"
    [ "$(count "symm_init after symm_finalize is not supported under MPI")" -eq 3 ] ||
        fail "not every PE was told why symm_init after symm_finalize is not supported"
    ;;
fanin)
    run_job "run_mpi_launch: $CASE" "$@" -n 3 "$PROG" fanin
    [ "$rc" -eq 0 ] || fail "the job did not end cleanly after every PE refused alike (exit $rc)"
    [ "$(count "init refused: SYMM_BARRIER_FANIN is")" -eq 3 ] ||
        fail "not every PE's symm_init refused a SYMM_BARRIER_FANIN that differs"
    ;;
nompi)
    run_job "run_mpi_launch: $CASE" "$@" -n 2 "$PROG" refused
    [ "$rc" -eq 0 ] || fail "the refused job did not end cleanly (exit $rc)"
    [ "$(count "but this symm was built without MPI")" -eq 2 ] ||
        fail "not every PE said symm was built without MPI"
    ;;
*)
    fail "unknown case '$CASE'"
    ;;
esac
echo "run_mpi_launch: $CASE OK"
