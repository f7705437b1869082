#!/usr/bin/env bash
# test_symmrun_faults.sh BUILD_BIN_DIR — checks that symmrun names the PE that failed,
# stops the rest of the job within about a second, forwards signals, and leaves no
# process and no file behind. Runs the fault_exit PE program (no symm library needed).
# Prints PASS/FAIL lines; exits non-zero if any check failed.
set -u

BIN=${1:?usage: test_symmrun_faults.sh BUILD_BIN_DIR}
SYMMRUN=$BIN/symmrun
FAULT=$BIN/fault_exit
for f in "$SYMMRUN" "$FAULT"; do
    [ -x "$f" ] || { echo "FAIL: $f is missing (build it first)"; exit 1; }
done

# Scratch files go under the build directory: /tmp must not change during the test.
WORK=$(mktemp -d "$BIN/symmrun-faults.XXXXXX") || exit 1
trap 'rm -rf "$WORK"' EXIT
# Every PE gets this as an extra argument, so pgrep -f finds any PE left behind.
MARK="symmrun-fault-marker-$$-$RANDOM"
failures=0

pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# job ARGS...: runs symmrun with ARGS; sets RC, MS (wall time), and OUT, ERR (files).
job() {
    OUT=$WORK/out ERR=$WORK/err
    local t0
    t0=$(now_ms)
    "$SYMMRUN" "$@" >"$OUT" 2>"$ERR" </dev/null
    RC=$?
    MS=$(($(now_ms) - t0))
}

# expect NAME WANT_RC MAX_MS [STDERR_TEXT...]: checks the last job. WANT_RC "nonzero"
# accepts any failure status.
expect() {
    local name=$1 want=$2 max_ms=$3
    shift 3
    local ok=1
    if [ "$want" = nonzero ]; then
        [ "$RC" -ne 0 ] || { fail "$name: exit status 0, expected a failure"; ok=0; }
    elif [ "$RC" -ne "$want" ]; then
        fail "$name: exit status $RC, expected $want"
        ok=0
    fi
    if [ "$MS" -gt "$max_ms" ]; then
        fail "$name: took $MS ms, expected at most $max_ms"
        ok=0
    fi
    local text
    for text in "$@"; do
        if ! grep -qF -- "$text" "$ERR"; then
            fail "$name: stderr lacks '$text'"
            ok=0
        fi
    done
    if [ $ok = 0 ]; then
        sed 's/^/    stderr: /' "$ERR" | head -20
    else
        pass "$name ($MS ms)"
    fi
    leftovers "$name"
}

# No PE may outlive its symmrun.
leftovers() {
    local pids
    pids=$(pgrep -f -- "$MARK")
    if [ -n "$pids" ]; then
        fail "$1: processes left behind: $(echo $pids)"
        kill -KILL $pids 2>/dev/null
    fi
}

snapshot() { ls -A /dev/shm /tmp 2>/dev/null | sort; }
before_files=$(snapshot) # for the fallback check at the end

# ---------------------------------------------------------------- rendezvous
for n in 1 2 3 4 8 64; do
    job -n "$n" "$FAULT" ok "$MARK"
    expect "-n $n rendezvous" 0 20000
done
job -np 4 -- "$FAULT" ok "$MARK"
expect "-np 4 and --" 0 10000
job -n 4 "$FAULT" bye "$MARK"
expect "-n 4 bye without checks" 0 10000
# Outside symmrun the program is a 1-PE job.
t0=$(now_ms)
env -u SYMM_BOOT_FD "$FAULT" ok "$MARK" >"$WORK/out" 2>"$WORK/err"
RC=$? MS=$(($(now_ms) - t0)) ERR=$WORK/err
expect "1-PE job without symmrun" 0 5000

# ---------------------------------------------------------------- failures
job -n 8 "$FAULT" fail 2 "$MARK"
expect "PE exits 3" 3 4000 "symmrun: PE 2 exited with status 3; stopping the other 7 PEs"
saw=$(grep -c "saw abort: PE 2 exited with status 3" "$ERR")
if [ "$saw" -eq 7 ]; then
    pass "all 7 other PEs read the failure from the control page"
else
    fail "only $saw of 7 other PEs read the failure from the control page"
fi

# A PE that joined and exits 0 without bye (without symm_finalize) failed: the others
# would wait for it.
job -n 4 "$FAULT" nobye "$MARK"
expect "PEs exiting 0 without bye" 1 4000 "exited with status 0 without calling symm_finalize"
job -n 1 "$FAULT" nobye "$MARK"
expect "-n 1, exiting 0 without bye" 1 4000 \
    "symmrun: PE 0 exited with status 0 without calling symm_finalize"
job -n 4 "$FAULT" quit 1 "$MARK"
expect "PE exits 0 without bye" 1 4000 \
    "symmrun: PE 1 exited with status 0 without calling symm_finalize; stopping the other 3 PEs"
saw=$(grep -c "saw abort: PE 1 exited with status 0 without calling symm_finalize" "$ERR")
if [ "$saw" -eq 3 ]; then
    pass "all 3 other PEs read the unfinalized exit from the control page"
else
    fail "only $saw of 3 other PEs read the unfinalized exit from the control page"
fi

job -n 4 "$FAULT" crash 1 "$MARK"
expect "PE calls abort()" 134 4000 "PE 1 killed by signal 6 (Aborted)" "stopping the other 3 PEs"

job -n 4 "$FAULT" abort 3 "$MARK"
expect "PE asks symmrun to abort" 5 4000 "PE 3 aborted the job (code 5): fault_exit abort test"

job -n 3 "$FAULT" mismatch "$MARK"
expect "segment sizes differ" nonzero 4000 "segment sizes differ"

job -n 4 --timeout 1 "$FAULT" hang "$MARK"
expect "--timeout 1" 124 3500 "symmrun: job timed out after 1 s; stopping 4 PEs"

# ---------------------------------------------------------------- signals
# fd_targets PID: what the process's fds above stdin/out/err point at.
fd_targets() {
    local f
    for f in /proc/"$1"/fd/*; do
        [ "${f##*/}" -gt 2 ] 2>/dev/null && readlink "$f"
    done
}

# signal_job SIG WANT_RC: starts a sleeping job, checks its PEs hold only memfds, sends
# SIG to symmrun and checks that the whole job is gone quickly.
signal_job() {
    local sig=$1 want=$2 name="SIG$1 to symmrun"
    "$SYMMRUN" -n 4 "$FAULT" sleep "$MARK" >"$WORK/out" 2>"$WORK/err" </dev/null &
    local run=$! pes=""
    for _ in $(seq 100); do
        pes=$(pgrep -P "$run" -f -- "$MARK")
        # Up and through the rendezvous: the last PE started holds the control page.
        if [ "$(echo "$pes" | wc -w)" -eq 4 ] &&
            fd_targets "$(echo "$pes" | tail -1)" | grep -q memfd:symm-ctrl; then
            break
        fi
        sleep 0.1
    done
    local pe targets
    pe=$(echo "$pes" | head -1)
    # The 4 segments and the control page must be memfds, never files in /dev/shm or
    # /tmp. Files this script holds too (ctest's log...) were inherited, not made.
    targets=$(fd_targets "$pe" | grep -vxF -f <(fd_targets $$))
    if [ -z "$pe" ]; then
        fail "$name: the PEs did not start"
    elif echo "$targets" | grep -qE '^(/dev/shm|/tmp)/'; then
        fail "$name: a PE holds a file in /dev/shm or /tmp: $(echo $targets)"
    elif [ "$(echo "$targets" | grep -c '^/memfd:')" -ne 5 ]; then
        fail "$name: a PE holds $(echo "$targets" | grep -c '^/memfd:') memfds, expected 5"
    else
        pass "the 4 segments and the control page are memfds in the PEs"
    fi
    local t0
    t0=$(now_ms)
    kill -"$sig" "$run"
    wait "$run"
    RC=$? MS=$(($(now_ms) - t0)) ERR=$WORK/err
    expect "$name" "$want" 2000 "interrupted by SIG$sig"
}
signal_job INT 130
signal_job TERM 143

# ---------------------------------------------------------------- usage errors
job -n 2 "/nonexistent/prog-$MARK"
expect "missing program" 127 2000 "cannot run '/nonexistent/prog-$MARK': No such file or directory"
job -n 2 "prog-not-in-path-$MARK"
expect "program not in PATH" 127 2000 "No such file or directory"
job -n 2
expect "no program" nonzero 2000 "no program to run"
job "$FAULT" ok
expect "no -n" nonzero 2000 "missing -n"
for bad in 0 -1 abc 4x 1000000; do
    job -n "$bad" "$FAULT" ok "$MARK"
    expect "-n $bad" nonzero 2000 "bad number of PEs"
done
for bad in 0 -1 0.0005 nan -nan inf 1e300 10000001 5s; do
    job -n 2 --timeout "$bad" "$FAULT" ok "$MARK"
    expect "--timeout $bad" 2 2000 "bad --timeout '$bad' (expected seconds from 0.001 to"
done
job -n 2 --timeout 1e7 "$FAULT" ok "$MARK"
expect "--timeout 1e7" 0 10000

# ---------------------------------------------------------------- leftovers
# Other processes on the machine may write to /tmp at any time, so a few jobs run again
# in a private mount namespace with empty tmpfs mounts on /tmp and /dev/shm: whatever is
# in them afterwards was left by symmrun or its PEs. The binaries are reached through a
# directory fd, since BUILD_BIN_DIR may itself be under the hidden /tmp.
private_jobs='
exec 9<"$1" || exit 99
b=/proc/$$/fd/9 m=$2
mount -t tmpfs symm-test-tmp /tmp && mount -t tmpfs symm-test-shm /dev/shm || exit 99
{
    "$b/symmrun" -n 4 "$b/fault_exit" ok "$m"
    "$b/symmrun" -n 4 "$b/fault_exit" fail 1 "$m"
    "$b/symmrun" -n 4 "$b/fault_exit" crash 2 "$m"
    "$b/symmrun" -n 3 "$b/fault_exit" abort 0 "$m"
    "$b/symmrun" -n 3 "$b/fault_exit" mismatch "$m"
    "$b/symmrun" -n 2 --timeout 0.5 "$b/fault_exit" hang "$m"
} >/dev/null 2>&1 </dev/null
ls -A /tmp /dev/shm | grep -v -e "^/" -e "^\$"
exit 0
'
private_left=$(unshare --mount --propagation private bash -c "$private_jobs" _ "$BIN" "$MARK" 2>/dev/null)
private_rc=$?
leftovers "jobs in a private /tmp"
if [ $private_rc -eq 0 ]; then
    if [ -n "$private_left" ]; then
        fail "jobs left files in /dev/shm or /tmp: $(echo $private_left)"
    else
        pass "no files left in a private /dev/shm and /tmp"
    fi
else
    # No mount namespace here (not root, no user namespaces): compare the real
    # directories from before and after this whole test instead.
    after_files=$(snapshot)
    new_files=$(comm -13 <(echo "$before_files") <(echo "$after_files"))
    if [ -n "$new_files" ]; then
        fail "new files in /dev/shm or /tmp (another process may have made them): $(echo $new_files)"
    else
        pass "no new files in /dev/shm or /tmp"
    fi
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all symmrun fault checks passed"
