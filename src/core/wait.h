/* wait.h — how every wait of symm makes progress when PEs outnumber cores: spin a
 * little, then yield the CPU, then sleep between polls; and how it ends: after
 * SYMM_TIMEOUT seconds, or as soon as symmrun reports a failed PE. The caller polls its
 * condition and calls symm_wait_pause() between polls; a non-zero status means give up
 * (the caller then says which PEs never arrived). */
#ifndef SYMM_CORE_WAIT_H
#define SYMM_CORE_WAIT_H

#include <stdint.h>

#include "core/config.h"
#include "core/log.h"

typedef struct symm_wait {
    uint32_t iter;
    uint64_t t0_ns;   /* first slow-path call */
    uint64_t last_ns; /* last clock read */
} symm_wait_t;

#define SYMM_WAIT_INIT                                                                         \
    {                                                                                          \
        0, 0, 0                                                                                \
    }

static inline void symm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

uint64_t symm_now_ns(void);
/* Set by a transport whose remote writes need this PE to enter it now and then (MPI's
 * target-side progress, the messages that carry peers' signals, and a sync before local
 * loads see what peers wrote): every wait calls it at every poll whose count has the bits
 * of symm_wait_progress_mask clear while it spins, and at every poll once it yields. NULL
 * while no PE is remote: the waits of one host then test a counter's low bits against
 * the mask (SYMM_WAIT_PROGRESS_EVERY - 1 there) and load nothing more. */
extern void (*symm_wait_progress)(void);
#define SYMM_WAIT_PROGRESS_EVERY 64
/* A power of two less one; 0 (progress at every poll) where a peer's signal reaches this
 * PE only when it makes progress (the MPI transport). */
extern uint32_t symm_wait_progress_mask;
/* A poll that runs the progress function counts this many towards SYMM_SPIN: it costs
 * about as much as that many plain polls (an MPI_Test, against a pause instruction), so a
 * wait spins about as long before it yields with remote PEs as without, and a PE whose
 * awaited peer is descheduled gives up its core after tens of microseconds, not
 * hundreds. */
#define SYMM_WAIT_PROGRESS_POLLS 16
/* Yields or sleeps; returns SYMM_ERR_TIMEOUT or SYMM_ERR_PE_FAILED (message recorded
 * for PE_FAILED only: the caller knows whom it waited for) or SYMM_SUCCESS. */
symm_status_t symm_wait_slow(symm_wait_t *w);

/* SYMM_SPIN is at least 1 (config.h): a negative one cast to uint32_t would spin for
 * billions of polls before the first look at the clock, outliving SYMM_TIMEOUT. */
static inline symm_status_t symm_wait_pause(symm_wait_t *w)
{
    if (SYMM_LIKELY(++w->iter < (uint32_t)symm_config.spin)) {
        if (SYMM_UNLIKELY((w->iter & symm_wait_progress_mask) == 0) && symm_wait_progress) {
            symm_wait_progress();
            w->iter += SYMM_WAIT_PROGRESS_POLLS - 1;
        }
        symm_cpu_relax();
        return SYMM_SUCCESS;
    }
    return symm_wait_slow(w);
}

/* Seconds waited so far (for messages). */
static inline double symm_wait_elapsed(const symm_wait_t *w)
{
    return w->t0_ns ? (double)(symm_now_ns() - w->t0_ns) * 1e-9 : 0.0;
}

/* Comparison used by wait_until, test and signal_wait_until. */
#define SYMM_CMP_EVAL(cmp, a, b)                                                               \
    ((cmp) == SYMM_CMP_EQ   ? (a) == (b)                                                       \
     : (cmp) == SYMM_CMP_NE ? (a) != (b)                                                       \
     : (cmp) == SYMM_CMP_GT ? (a) > (b)                                                        \
     : (cmp) == SYMM_CMP_GE ? (a) >= (b)                                                       \
     : (cmp) == SYMM_CMP_LT ? (a) < (b)                                                        \
                            : (a) <= (b))

#endif
