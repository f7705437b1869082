/* wait.c — the slow path of waiting (see wait.h). */
#include "core/wait.h"

#include <sched.h>
#include <time.h>

#include "core/runtime.h"

uint64_t symm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void (*symm_wait_progress)(void);
uint32_t symm_wait_progress_mask = SYMM_WAIT_PROGRESS_EVERY - 1;

symm_status_t symm_wait_slow(symm_wait_t *w)
{
    if (symm_wait_progress) symm_wait_progress();
    /* The clock is read at most every 64 polls: a wait that yields costs ~1 us per
     * poll, so this still notices a failure or timeout within a millisecond. */
    if (w->t0_ns == 0) {
        w->t0_ns = w->last_ns = symm_now_ns();
    } else if ((w->iter & 63) == 0) {
        w->last_ns = symm_now_ns();
    }
    symm_ctrl_t *ctrl = symm_g.ctrl;
    if (ctrl && SYMM_UNLIKELY(__atomic_load_n(&ctrl->abort, __ATOMIC_ACQUIRE)))
        return symm_error_set(SYMM_ERR_PE_FAILED, "job aborted: %s", ctrl->message);
    uint64_t waited = w->last_ns - w->t0_ns;
    if (SYMM_UNLIKELY((double)waited * 1e-9 > symm_config.timeout)) return SYMM_ERR_TIMEOUT;
    if (waited < (uint64_t)symm_config.yield_us * 1000u) {
        sched_yield();
    } else {
        /* Long waits back off to at least 1 ms between polls: with hundreds of PEs on a
         * few cores, fast pollers would starve the very PEs (and symmrun) they wait for.
         * SYMM_SLEEP_US is below one second (config.h), as tv_nsec must be. */
        long us = (long)symm_config.sleep_us;
        if (waited > 100000000ull && us < 1000L) us = 1000L;
        struct timespec ts = {0, us * 1000L};
        nanosleep(&ts, NULL);
        w->last_ns = symm_now_ns();
    }
    return SYMM_SUCCESS;
}
