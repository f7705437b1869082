#!/bin/sh
# run_fault_barrier.sh SYMMRUN PROGRAM — PE 2 of 4 aborts mid-way through barriers:
# symmrun must exit non-zero within a few seconds, its stderr must name PE 2, and the
# job must leave no files in /dev/shm or the temporary directories.
set -u
SYMMRUN=$1
PROG=$2
LIMIT=5 # seconds from start to symmrun's exit

ulimit -c 0 # no core file from abort()
fail() { echo "run_fault_barrier: FAIL: $*" >&2; exit 1; }

# A private TMPDIR catches files a PE or symmrun would make through it; /tmp itself is
# shared with other jobs, so there only new names mentioning symm count.
priv=$(mktemp -d "${TMPDIR:-/tmp}/fault_barrier.XXXXXX") || fail "mktemp"
trap 'rm -rf "$priv"' EXIT
shm_before=$(ls -A /dev/shm 2>/dev/null | sort)
tmp_before=$(ls -A /tmp 2>/dev/null | grep -i symm | sort)

start=$(date +%s.%N)
err=$(TMPDIR=$priv timeout 60 "$SYMMRUN" -n 4 --timeout 30 "$PROG" 2>&1 >/dev/null)
rc=$?
end=$(date +%s.%N)
elapsed=$(awk "BEGIN{printf \"%.2f\", $end - $start}")
printf '%s\n' "$err" | sed 's/^/  | /'
echo "run_fault_barrier: symmrun exit status $rc after $elapsed s"

[ "$rc" -ne 0 ] || fail "symmrun exited 0 although PE 2 aborted"
[ "$rc" -ne 124 ] || fail "symmrun timed out (exit 124): the job hung after the abort"
awk "BEGIN{exit !($elapsed < $LIMIT)}" || fail "symmrun took $elapsed s (limit $LIMIT s)"
printf '%s\n' "$err" | grep -E '^symmrun:.*PE 2' >/dev/null ||
    fail "symmrun's stderr does not name PE 2"
printf '%s\n' "$err" | grep -E 'PE 2 .*(signal 6|SIGABRT|Abort)' >/dev/null ||
    fail "symmrun's stderr does not say PE 2 was killed by SIGABRT"
sleep 0.2 # let the last PE processes disappear
shm_after=$(ls -A /dev/shm 2>/dev/null | sort)
[ "$shm_before" = "$shm_after" ] ||
    fail "new files in /dev/shm: $(printf '%s\n' "$shm_after" | grep -vxF "$shm_before")"
[ -z "$(ls -A "$priv")" ] || fail "new files in TMPDIR: $(ls -A "$priv")"
tmp_after=$(ls -A /tmp 2>/dev/null | grep -i symm | sort)
[ "$tmp_before" = "$tmp_after" ] ||
    fail "new symm files in /tmp: $(printf '%s\n' "$tmp_after" | grep -vxF "$tmp_before")"
echo "run_fault_barrier: OK"
