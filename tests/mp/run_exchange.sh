#!/bin/sh
# run_exchange.sh PROGRAM N MODE — starts N processes of test_exchange as torchrun starts
# its workers (each alone, with RANK and WORLD_SIZE; no symmrun), gives them a directory
# for their allgather, and checks each mode's outcome:
#   ok       every PE exits 0 and says ok
#   badnpes  every PE refuses the start, naming the mismatch, within seconds
#   failing  PE 1's allgather fails: PE 1 gives the caller's status, the others name PE 1
#   abort    PE 1 calls symm_abort(7): the others' waits end naming PE 1, code and reason
#   netns    PE N-1 runs in its own network namespace (unshare -n, where allowed): every PE
#            refuses the start, naming the hosts
#   badarg   bad exchanges are refused before anything happens, then the start works
# In every mode nothing is left in the job's TMPDIR, nor anything named symm in /dev/shm.
set -u
PROG=$1
N=$2
MODE=$3
LIMIT=30 # seconds for the whole job
fail() { echo "run_exchange: FAIL ($MODE): $*" >&2; exit 1; }

dir=$(mktemp -d "${TMPDIR:-/tmp}/exchange.XXXXXX") || fail "mktemp"
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/x" "$dir/tmp" || fail "mkdir"
# Other jobs may come and go in /dev/shm meanwhile: only names that mention symm count.
shm_before=$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort)

if [ "$MODE" = netns ] && ! unshare -n true 2>/dev/null; then
    echo "run_exchange: SKIP: unshare -n is not allowed here"
    exit 0
fi
pmode=$MODE
[ "$MODE" = netns ] && pmode=ok

start=$(date +%s)
pids=""
r=0
while [ $r -lt "$N" ]; do
    wrap=""
    [ "$MODE" = netns ] && [ $r -eq $((N - 1)) ] && wrap="unshare -n"
    RANK=$r WORLD_SIZE=$N SYMM_TEST_XDIR=$dir/x TMPDIR=$dir/tmp SYMM_TIMEOUT=20 \
        timeout $LIMIT $wrap "$PROG" "$pmode" >"$dir/out.$r" 2>"$dir/err.$r" &
    pids="$pids $!"
    r=$((r + 1))
done
r=0
for p in $pids; do
    wait "$p"
    echo $? >"$dir/rc.$r"
    r=$((r + 1))
done
elapsed=$(($(date +%s) - start))

r=0
while [ $r -lt "$N" ]; do
    sed "s/^/  PE $r | /" "$dir/out.$r" "$dir/err.$r"
    r=$((r + 1))
done
echo "run_exchange: $MODE: $N PEs in $elapsed s"
[ "$elapsed" -lt $LIMIT ] || fail "the job took $elapsed s"

rc() { cat "$dir/rc.$1"; }
out() { cat "$dir/out.$1" "$dir/err.$1"; }
r=0
while [ $r -lt "$N" ]; do
    case $MODE in
    ok | badarg)
        [ "$(rc $r)" -eq 0 ] || fail "PE $r exited $(rc $r)"
        out $r | grep -q "PE $r of $N: ok" || fail "PE $r did not say ok"
        ;;
    badnpes)
        [ "$(rc $r)" -eq 0 ] || fail "PE $r exited $(rc $r)"
        if [ $r -eq 1 ]; then
            out $r | grep -q "PE 1 refused:.*comes from PE 0 of $N " || fail "PE 1 does not name PE 0's npes"
        else
            out $r | grep -q "PE $r refused:.*comes from PE 1 of $((N + 1)) " ||
                fail "PE $r does not name PE 1's npes"
        fi
        ;;
    failing)
        [ "$(rc $r)" -eq 0 ] || fail "PE $r exited $(rc $r)"
        if [ $r -eq 1 ]; then
            out $r | grep -q "PE 1 refused: PE 1: the caller's allgather of the rendezvous hello failed (it returned 5)" ||
                fail "PE 1 does not give its allgather's status"
        else
            out $r | grep -q "PE $r refused: PE $r: the rendezvous failed on PE 1" ||
                fail "PE $r does not name PE 1"
        fi
        ;;
    abort)
        if [ $r -eq 1 ]; then
            [ "$(rc $r)" -eq 7 ] || fail "PE 1 exited $(rc $r), not 7"
        else
            [ "$(rc $r)" -eq 3 ] || fail "PE $r exited $(rc $r), not 3 (a failed barrier)"
            out $r | grep -q "PE 1 aborted the job (code 7): deliberate abort" ||
                fail "PE $r does not name PE 1, its code and reason"
        fi
        ;;
    netns)
        [ "$(rc $r)" -ne 0 ] || fail "PE $r started although PE $((N - 1)) is in another namespace"
        out $r | grep -q "not all on one host.*(PE $((N - 1)))" || fail "PE $r does not name the hosts"
        ;;
    esac
    r=$((r + 1))
done
# only names that appeared count: other jobs may remove theirs meanwhile
left=$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort | grep -vxF -e "$shm_before" -e '')
[ -z "$left" ] || fail "files left in /dev/shm: $left"
[ -z "$(ls -A "$dir/tmp")" ] || fail "files left in TMPDIR: $(ls -A "$dir/tmp")"
echo "run_exchange: OK"
