#!/bin/sh
# run_fault_barrier.sh SYMMRUN PROGRAM [symm_abort] — PE 2 of 4 aborts mid-way through
# barriers: symmrun must exit non-zero within a few seconds, its stderr must name PE 2
# (killed by SIGABRT; or, with symm_abort, aborted with code 7 and the reason), and the
# job must leave no files in /dev/shm or /tmp.
#
# Where unprivileged user namespaces are allowed, the job runs with a private, empty
# tmpfs on /dev/shm, so that any file left there is the job's, whatever else runs on
# the machine (other tests, MPI jobs); elsewhere only new /dev/shm names mentioning
# "symm" count. /tmp stays shared (the build, hence the program, may live there): the
# job gets a private TMPDIR that must stay empty, and no new /tmp name may mention symm.
set -u
SYMMRUN=$1
PROG=$2
MODE=${3:-}
LIMIT=5 # seconds from start to symmrun's exit

ulimit -c 0 # no core file from abort()
fail() { echo "run_fault_barrier: FAIL: $*" >&2; exit 1; }

priv=$(mktemp -d "${TMPDIR:-/tmp}/fault_barrier.XXXXXX") || fail "mktemp"
trap 'rm -rf "$priv"' EXIT

# The job; prints "rc start end" then "LEFT <names>" (private mode only).
job='s=$(date +%s.%N); timeout 60 "$1" -n 4 --timeout 30 "$2" $3 >/dev/null; rc=$?
e=$(date +%s.%N); echo "$rc $s $e"'
shm_before=$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort)
tmp_before=$(ls -A /tmp 2>/dev/null | grep -i symm | sort)
if unshare -rm sh -c 'mount -t tmpfs x /dev/shm' 2>/dev/null; then
    mode=private
    res=$(TMPDIR=$priv unshare -rm sh -c 'mount -t tmpfs symm-fault /dev/shm || exit 99
'"$job"'
sleep 0.3 # the last PE processes disappear
echo "LEFT $(ls -A /dev/shm | sed "s|^|/dev/shm/|")"' sh "$SYMMRUN" "$PROG" "$MODE" 2>"$priv/err")
else
    mode=shared
    res=$(TMPDIR=$priv sh -c "$job" sh "$SYMMRUN" "$PROG" "$MODE" 2>"$priv/err")
    sleep 0.3
fi
err=$(cat "$priv/err")
rm -f "$priv/err"
printf '%s\n' "$err" | sed 's/^/  | /'
set -- $(printf '%s\n' "$res" | head -1)
[ $# -eq 3 ] || fail "the job did not run ($mode mode): '$res'"
rc=$1
elapsed=$(awk "BEGIN{printf \"%.2f\", $3 - $2}")
echo "run_fault_barrier: symmrun exit status $rc after $elapsed s ($mode /dev/shm)"

[ "$rc" -ne 0 ] || fail "symmrun exited 0 although PE 2 aborted"
[ "$rc" -ne 124 ] || fail "symmrun timed out (exit 124): the job hung after the abort"
awk "BEGIN{exit !($elapsed < $LIMIT)}" || fail "symmrun took $elapsed s (limit $LIMIT s)"
printf '%s\n' "$err" | grep -E '^symmrun:.*PE 2' >/dev/null ||
    fail "symmrun's stderr does not name PE 2"
if [ "$MODE" = symm_abort ]; then
    [ "$rc" -eq 7 ] || fail "symmrun exited $rc, not the code 7 that PE 2 passed to symm_abort"
    printf '%s\n' "$err" | grep -E '^symmrun:.*PE 2.*code 7.*deliberate abort' >/dev/null ||
        fail "symmrun's stderr does not give PE 2's symm_abort code and reason"
else
    printf '%s\n' "$err" | grep -E 'PE 2 .*(signal 6|SIGABRT|Abort)' >/dev/null ||
        fail "symmrun's stderr does not say PE 2 was killed by SIGABRT"
fi
if [ "$mode" = private ]; then
    left=$(printf '%s\n' "$res" | sed -n 's/^LEFT *//p' | sed 's/ *$//')
    [ -z "$left" ] || fail "the job left files in /dev/shm: $left"
fi
shm_after=$(ls -A /dev/shm 2>/dev/null | grep -i symm | sort)
[ "$shm_before" = "$shm_after" ] ||
    fail "new symm files in /dev/shm: $(printf '%s\n' "$shm_after" | grep -vxF "$shm_before")"
[ -z "$(ls -A "$priv")" ] || fail "new files in TMPDIR: $(ls -A "$priv")"
tmp_after=$(ls -A /tmp 2>/dev/null | grep -i symm | sort)
[ "$tmp_before" = "$tmp_after" ] ||
    fail "new symm files in /tmp: $(printf '%s\n' "$tmp_after" | grep -vxF "$tmp_before")"
echo "run_fault_barrier: OK"
