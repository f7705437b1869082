/* runtime.h — the state of this PE's world: where every PE's segment is mapped, the
 * layout of a segment, and the inline address translation that every transfer uses.
 *
 * A segment is one memfd per PE, mapped by every PE of the host:
 *   [0, hdr)                 header: team-creation mailboxes, then what the PE
 *                            published before the rendezvous (symm_pe_info_t)
 *   [team_off, +team_size)   team region: synchronisation state of teams and pools,
 *                            allocated locally by each PE (offsets exchanged at creation)
 *   [heap_off, +heap_size)   the symmetric heap: collective allocation, same offsets
 */
#ifndef SYMM_CORE_RUNTIME_H
#define SYMM_CORE_RUNTIME_H

#include <pthread.h>
#include <stdint.h>

#include "bootstrap/boot.h"
#include "core/arena.h"
#include "symm.h"

/* Mailbox for creating a team from a rank list: PE s writes into slot s of the
 * receiver's header; the receiver acknowledges in slot r of the sender's ack array.
 * Every word has one writer (transport/shm/mbox.c). */
#define SYMM_MBOX_WORDS 6 /* the most words of one message */
typedef struct symm_mbox {
    volatile uint64_t seq;       /* number of messages s has posted to this PE */
    volatile uint64_t withdrawn; /* the last of them that s took back */
    uint64_t data[SYMM_MBOX_WORDS];
} __attribute__((aligned(64))) symm_mbox_t;

typedef struct symm_mbox_ack {
    volatile uint64_t acked; /* PE r's last message of the owner << 1, | 1: taken */
    uint64_t pad[7];
} __attribute__((aligned(64))) symm_mbox_ack_t;

/* What a PE tells the others before the rendezvous, at a fixed place of its segment
 * header (symm_g.info_off): it is written into the memfd before symmrun hands the fd
 * out, so any PE that maps the segment reads it whole, without another round. */
#define SYMM_CPU_MASK_WORDS 16 /* CPUs 0..1023 */
typedef struct symm_pe_info {
    uint64_t cpu_mask[SYMM_CPU_MASK_WORDS]; /* the CPUs this PE may run on, at symm_init */
    uint64_t node_cpus;                     /* its SYMM_NODE_CPUS, 0 if unset */
    uint64_t barrier_fanin;                 /* its SYMM_BARRIER_FANIN: must agree */
} symm_pe_info_t;

/* A full fence: this thread's loads and stores on either side of it are ordered as seen
 * by other threads and processes (x86: stores already are; the fence keeps the compiler
 * and weaker CPUs honest). */
#if defined(__SANITIZE_THREAD__)
/* TSan does not model fences; a sequentially consistent RMW orders the same way. */
static inline void symm_cpu_fence(void)
{
    static int fence_word;
    __atomic_fetch_add(&fence_word, 0, __ATOMIC_SEQ_CST);
}
#else
static inline void symm_cpu_fence(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif

typedef struct symm_runtime {
    int initialized;
    int me;         /* -1 before init */
    int npes;       /* 0 before init */
    uint8_t **seg;  /* [npes] where each PE's segment is mapped here (the transport fills it);
                       NULL for a PE of another group (another host), which shares none */
    int remote_pes; /* PEs whose segment is not mapped here: reached by the MPI transport */
    int *group;     /* [npes] the lowest world rank of each PE's group (the PEs that map each
                       other's segments: a host, or a SYMM_HOSTS block); all 0 on one host */
    size_t seg_size;
    size_t info_off; /* symm_pe_info_t in every PE's header */
    size_t team_off, team_size;
    size_t heap_off, heap_size;
    symm_mbox_t *mbox;         /* [npes] in my header */
    symm_mbox_ack_t *mbox_ack; /* [npes] in my header */
    uint64_t *mbox_sent;       /* [npes] local counters */
    uint64_t *mbox_recvd;      /* [npes] */
    uint64_t *mbox_discard;    /* [npes] messages still to come for attempts given up on */
    symm_ctrl_t *ctrl;
    int ctrl_owned; /* 1: malloc'd (no symmrun) */
    symm_boot_t boot;
    symm_arena_t heap_arena; /* guarded by heap_lock */
    symm_arena_t team_arena; /* guarded by team_lock */
    pthread_mutex_t heap_lock;
    pthread_mutex_t team_lock;
    pthread_mutex_t create_lock; /* serialises rank-list team creation (mailboxes) */
    /* CPUs the PEs of this node may run on, the same number on every PE (from all PEs'
     * symm_pe_info_t): the automatic worker count of the _parallel forms divides it. */
    int node_cpus;
    /* Set by an init step whose failure every PE meets alike (it is computed from what
     * every PE reads the same): that init ends cleanly everywhere (symm_core_finalize
     * with SYMM_CORE_END_INIT_FAILED), the launcher sees no PE vanish, and every PE's
     * program gets the error. */
    int init_failed_alike;
} symm_runtime_t;

/* Every PE's heap is mapped at an address aligned to this, so that symm_align can give
 * the same offset and the requested alignment on every PE; larger alignments fail. */
#define SYMM_HEAP_ALIGN_MAX ((size_t)64 << 20)

/* PEs of one host; the segment header holds a mailbox pair for each. */
#define SYMM_MAX_PES 1024

extern symm_runtime_t symm_g;

#define SYMM_REQUIRE_INIT() SYMM_REQUIRE_INIT_FOR(__func__)
/* The same for an entry point named fn, checked by a helper it calls. */
#define SYMM_REQUIRE_INIT_FOR(fn)                                                              \
    do {                                                                                       \
        if (SYMM_UNLIKELY(!symm_g.initialized))                                                \
            return symm_error_set(SYMM_ERR_NOT_INITIALIZED,                                    \
                                  "%s called before symm_init "                                \
                                  "or after symm_finalize",                                    \
                                  (fn));                                                       \
    } while (0)

static inline uint8_t *symm_heap_base(int pe)
{
    return symm_g.seg[pe] + symm_g.heap_off;
}

/* 1 if [p, p+n) lies inside my symmetric heap, in objects or not: the coarse test. What
 * an access may touch is checked against the objects by symm_heap_check. */
static inline int symm_in_heap(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)symm_heap_base(symm_g.me);
    return a >= b && a - b <= symm_g.heap_size && n <= symm_g.heap_size - (a - b);
}

/* 0 if [p, p+n) lies inside one live object of my symmetric heap (as allocated: its size
 * is the size asked, not rounded up); else records, naming fn and arg, SYMM_ERR_OVERFLOW
 * for a range that starts in an object and runs past its end (with the object's bounds)
 * or SYMM_ERR_NOT_SYMMETRIC for an address in no live object (freed, never allocated, or
 * outside the heap: callers test symm_in_heap first where they report that otherwise).
 * n == 0 needs only p in the heap. Lock-free; a repeat on this thread's last object
 * costs a few loads. */
symm_status_t symm_heap_check(const char *fn, const char *arg, const void *p, size_t n);

/* SYMM_HEAP_PREFAULT: maps [off, +size) of every PE's heap in this process now, so the
 * first collective on a new object pays no page fault per page and peer. */
void symm_heap_prefault(uint64_t off, size_t size);

/* Why the heap arena found no room for size bytes at align (caller holds heap_lock):
 * records SYMM_ERR_ALIGNMENT or SYMM_ERR_NO_MEMORY with fn's name and returns it. */
symm_status_t symm_heap_no_room(const char *fn, size_t size, size_t align);

/* The two objects this thread's last symm_heap_check calls found, and the heap index's
 * seq then: while seq has not moved, no object was freed or allocated, so both are still
 * live with the same bounds. Two, because a put with signal checks two objects a call.
 * The initial-exec model makes a hit a load off the thread pointer rather than a
 * __tls_get_addr call; the 40 bytes fit in the static TLS that glibc keeps for libraries
 * loaded with dlopen. */
typedef struct symm_heap_last {
    uint64_t seq;
    struct {
        uintptr_t base;
        uint64_t size;
    } e[2]; /* e[0] the latest found */
} symm_heap_last_t;
extern _Thread_local symm_heap_last_t symm_heap_last
    __attribute__((tls_model("initial-exec"), visibility("hidden")));

/* 1 if [p, p+n) lies inside an object of symm_heap_last: the hot path of the checks,
 * which may skip every other test of p on a hit (p is then in the heap, not NULL). */
static inline int symm_heap_hit(const void *p, size_t n)
{
    const symm_heap_last_t *c = &symm_heap_last;
    if (c->seq != __atomic_load_n(&symm_g.heap_arena.seq, __ATOMIC_ACQUIRE)) return 0;
    for (int k = 0; k < 2; k++) {
        uintptr_t d = (uintptr_t)p - c->e[k].base;
        if (d < c->e[k].size && n <= c->e[k].size - d) return 1;
    }
    return 0;
}

/* Team region offsets <-> addresses. */
static inline void *symm_team_region_ptr(int pe, uint64_t off)
{
    return symm_g.seg[pe] + symm_g.team_off + off;
}

/* The bottom layer's part of symm_init: configuration, the rendezvous, every PE's
 * segment mapped, the allocators; sets symm_g.initialized. On failure nothing is left.
 * symm_core_finalize undoes it: CLEAN tells the launcher this PE finalized, FAILED
 * (a finalize whose last barrier failed) leaves the launcher's connection as it is,
 * INIT_FAILED (a higher layer's init failed) makes the exit read as a failure. */
typedef enum {
    SYMM_CORE_END_CLEAN,
    SYMM_CORE_END_FAILED,
    SYMM_CORE_END_INIT_FAILED
} symm_core_end_t;
symm_status_t symm_core_init(void);
void symm_core_finalize(symm_core_end_t how);
/* Closes the segment and control fds the bootstrap handed out, once mapped. */
void symm_core_boot_fds_close(void);

/* Validates a symmetric range and a PE; records the error with the caller's name. */
symm_status_t symm_check_remote(const char *fn, const void *addr, size_t n, int pe);

/* Team-region allocation (local to this PE, thread-safe), cleared to zero. */
symm_status_t symm_team_region_alloc(size_t size, uint64_t *off_out);
/* The same, left as the last user left it: scratch inside the segment (the MPI
 * transport's window), where a get into it is one copy (Open MPI's osc/rdma moves a
 * get into memory outside the window through a bounce buffer, about 14x slower). */
int symm_team_region_scratch(size_t size, uint64_t *off_out); /* -1: no room (no message) */
void symm_team_region_free(uint64_t off);

#endif
