/* mpi.c — the transport to PEs that share no memory with this one (other hosts, other
 * SYMM_HOSTS groups): one MPI-3 window over every PE's whole segment (mailboxes, team
 * region with the sync slots, heap), in one passive-target epoch (MPI_Win_lock_all) for
 * the whole job. Every RMA operation is complete at its target when it returns
 * (MPI_Win_flush). Words that atomics touch are only ever touched through MPI's
 * accumulate family, plain stores included (MPI_REPLACE), since MPI makes accumulates
 * atomic only against each other. The words of sync slots and rank-list mailboxes
 * (store64) travel as small messages that their owner applies to its own segment when it
 * makes progress. */
#include "transport/transport.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/runtime.h"
#include "core/wait.h"

#ifndef SYMM_HAVE_MPI

symm_status_t symm_mpi_transport_init(void)
{
    return symm_error_set(SYMM_ERR_UNSUPPORTED,
                          "PEs that share no memory need the MPI transport, and this symm was "
                          "built without MPI");
}

const symm_transport_ops_t symm_mpi_transport = {.size = sizeof(symm_transport_ops_t),
                                                 .name = "mpi"};

#else

#include <mpi.h>

/* The messages of store64 on tm.comm, which carries nothing else point to point: up to
 * TM_WORDS_MAX (displacement, value) pairs, applied in order, the last with release. */
#define TM_TAG_WORDS 0x73796d
#define TM_WORDS_MAX 8

static struct {
    MPI_Comm comm; /* a duplicate of MPI_COMM_WORLD: rank = PE */
    MPI_Win win;
    uint8_t *base; /* my segment: displacement 0 of every PE's window */
    /* Every MPI call of the transport holds it: worker threads of one PE signal at once,
     * and MPI may have been given a thread level below MPI_THREAD_MULTIPLE. */
    pthread_mutex_t lock;
    /* The receive of store64's messages, always posted (MPI_Recv_init, MPI_Start): a poll
     * is one MPI_Test, and a message lands in words without a copy through MPI's queue
     * of unexpected ones. */
    MPI_Request words_req;
    uint64_t words[2 * TM_WORDS_MAX];
    /* The window's memory model is MPI_WIN_UNIFIED: what RMA writes is in memory, and a
     * store is visible to RMA, with no MPI call but a memory fence (tm_sync_memory). */
    int unified;
    /* Channels of msg_send: tags 0 .. tag_ub but TM_TAG_WORDS. */
    uint64_t chans;
    /* msg_send's messages under way: each with its copy of the bytes, reaped when MPI
     * is done with them (tm_reap_locked). */
    struct tm_sent {
        MPI_Request req;
        void *buf;
    } * sent;
    size_t nsent, capsent;
} tm = {.comm = MPI_COMM_NULL,
        .win = MPI_WIN_NULL,
        .lock = PTHREAD_MUTEX_INITIALIZER,
        .words_req = MPI_REQUEST_NULL};

static symm_status_t mpi_err(int rc, const char *what, int pe)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    return symm_error_set(SYMM_ERR_SYSTEM, "PE %d: %s to PE %d failed: %s", symm_g.me, what, pe,
                          len ? text : "(unknown MPI error)");
}

#define TM_CHECK(call, what, pe)                                                               \
    do {                                                                                       \
        int tm_rc_ = (call);                                                                   \
        if (SYMM_UNLIKELY(tm_rc_ != MPI_SUCCESS)) return mpi_err(tm_rc_, (what), (pe));        \
    } while (0)

/* Where my address addr (in my segment) lies in every PE's window: segments have the
 * same layout on every PE. */
static inline MPI_Aint disp_of(const void *addr)
{
    return (MPI_Aint)((const uint8_t *)addr - tm.base);
}

/* This PE's loads and stores ordered against what RMA brings and takes: a full fence
 * where the window is unified (Open MPI's MPI_Win_sync is a round of progress, a third
 * of the cost of a signal), MPI_Win_sync elsewhere. */
static inline symm_status_t tm_sync_memory(void)
{
    if (SYMM_LIKELY(tm.unified)) {
        symm_cpu_fence();
        return SYMM_SUCCESS;
    }
    TM_CHECK(MPI_Win_sync(tm.win), "MPI_Win_sync", symm_g.me);
    return SYMM_SUCCESS;
}

/* Applies every message of store64 that has reached this PE, in the order each sender
 * sent them (MPI does not let messages of one pair overtake each other). The
 * memory sync (tm_sync_memory) before the first makes what earlier puts brought (flushed by
 * their sender before it sent the message) visible to this PE's loads before the words that
 * announce it; the last word of a message (a slot's flag) is stored with release, so whoever
 * loads it with acquire sees the words before it. A message that names no word of the
 * segment (which no symm PE sends) is dropped with a warning; so is every message where
 * apply is 0 (finalize). */
static symm_status_t tm_drain_locked(int apply)
{
    int synced = 0;
    for (;;) {
        int done = 0, count = 0;
        MPI_Status status;
        TM_CHECK(MPI_Test(&tm.words_req, &done, &status), "MPI_Test of the receive", symm_g.me);
        if (!done) return SYMM_SUCCESS;
        const uint64_t *msg = tm.words;
        int from = status.MPI_SOURCE;
        TM_CHECK(MPI_Get_count(&status, MPI_UINT64_T, &count), "MPI_Get_count", from);
        if (!apply) count = 0;
        if (count && !synced) {
            CHECK(tm_sync_memory());
            synced = 1;
        }
        for (int i = 0; i + 1 < count; i += 2) {
            uint64_t disp = msg[i];
            if (SYMM_UNLIKELY(disp % 8 || disp >= symm_g.seg_size)) {
                SYMM_WARN("PE %d: a message of PE %d names displacement %llu, outside this "
                          "PE's segment (%zu bytes); dropped",
                          symm_g.me, from, (unsigned long long)disp, symm_g.seg_size);
                break;
            }
            uint64_t *w = (uint64_t *)(tm.base + disp);
            if (i + 2 < count)
                __atomic_store_n(w, msg[i + 1], __ATOMIC_RELAXED);
            else
                __atomic_store_n(w, msg[i + 1], __ATOMIC_RELEASE);
        }
        TM_CHECK(MPI_Start(&tm.words_req), "MPI_Start of the receive", symm_g.me);
    }
}

static void tm_reap_locked(void);

/* The target side of osc/rdma may need its owner to enter MPI before an accumulate
 * completes, peers' signals arrive as messages, and a PE reads words that others wrote
 * through MPI only after a MPI_Win_sync: every wait of symm calls this between polls
 * (core/wait.h; at every poll, as signals wait for it). The drain's MPI_Test is MPI's
 * progress, and it syncs where a message came; the MPI_Win_sync for words that atomics
 * and puts wrote comes every SYMM_WAIT_PROGRESS_EVERY calls (in Open MPI it is one more
 * round of progress, a third of a poll's cost). A thread that finds another in MPI
 * leaves the work to it. */
static void tm_progress(void)
{
    static unsigned polls; /* under tm.lock */
    if (pthread_mutex_trylock(&tm.lock)) return;
    if (tm_drain_locked(1)) SYMM_WARN("%s", symm_last_error());
    if (tm.nsent) tm_reap_locked();
    if ((++polls & (SYMM_WAIT_PROGRESS_EVERY - 1)) == 0) MPI_Win_sync(tm.win);
    pthread_mutex_unlock(&tm.lock);
}

/* n bytes, in pieces that MPI's int counts can name. */
static symm_status_t tm_put_locked(void *dest, const void *src, size_t n, int pe)
{
    const uint8_t *s = src;
    for (size_t done = 0; done < n;) {
        int k = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        TM_CHECK(MPI_Put(s + done, k, MPI_BYTE, pe, disp_of((uint8_t *)dest + done), k,
                         MPI_BYTE, tm.win),
                 "MPI_Put", pe);
        done += (size_t)k;
    }
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
}

static symm_status_t tm_get_locked(void *dest, const void *src, size_t n, int pe)
{
    uint8_t *d = dest;
    for (size_t done = 0; done < n;) {
        int k = n - done > INT_MAX ? INT_MAX : (int)(n - done);
        TM_CHECK(MPI_Get(d + done, k, MPI_BYTE, pe, disp_of((const uint8_t *)src + done), k,
                         MPI_BYTE, tm.win),
                 "MPI_Get", pe);
        done += (size_t)k;
    }
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
}

/* rows rows of rb bytes, ld bytes apart, as one MPI datatype (a row at a time where a
 * count or stride does not fit MPI's int and MPI_Aint). */
static int rows_type(size_t rows, size_t rb, size_t ld, MPI_Datatype *t)
{
    if (rows > INT_MAX || rb > INT_MAX || ld > (size_t)INT64_MAX / 2) return 0;
    if (MPI_Type_create_hvector((int)rows, (int)rb, (MPI_Aint)ld, MPI_BYTE, t) != MPI_SUCCESS)
        return 0;
    if (MPI_Type_commit(t) != MPI_SUCCESS) {
        MPI_Type_free(t);
        return 0;
    }
    return 1;
}

/* One strided transfer: get (local dest <- pe's src) or put (pe's dest <- local src). */
static symm_status_t tm_rows_locked(int get, void *dest, size_t dest_ld, const void *src,
                                    size_t src_ld, size_t rb, size_t rows, int pe)
{
    if (!rows || !rb) return SYMM_SUCCESS;
    MPI_Datatype dt, st;
    if (!rows_type(rows, rb, dest_ld, &dt)) goto by_row;
    if (!rows_type(rows, rb, src_ld, &st)) {
        MPI_Type_free(&dt);
        goto by_row;
    }
    int rc = get ? MPI_Get(dest, 1, dt, pe, disp_of(src), 1, st, tm.win)
                 : MPI_Put(src, 1, st, pe, disp_of(dest), 1, dt, tm.win);
    MPI_Type_free(&dt);
    MPI_Type_free(&st);
    TM_CHECK(rc, get ? "MPI_Get of rows" : "MPI_Put of rows", pe);
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
by_row:
    for (size_t r = 0; r < rows; r++) {
        uint8_t *d = (uint8_t *)dest + r * dest_ld;
        const uint8_t *s = (const uint8_t *)src + r * src_ld;
        CHECK(get ? tm_get_locked(d, s, rb, pe) : tm_put_locked(d, s, rb, pe));
    }
    return SYMM_SUCCESS;
}

static MPI_Op amo_op(symm_amo_t op)
{
    switch (op) {
    case SYMM_AMO_FETCH:
        return MPI_NO_OP;
    case SYMM_AMO_SET:
    case SYMM_AMO_SWAP:
        return MPI_REPLACE;
    case SYMM_AMO_ADD:
    case SYMM_AMO_FETCH_ADD:
        return MPI_SUM;
    case SYMM_AMO_AND:
    case SYMM_AMO_FETCH_AND:
        return MPI_BAND;
    case SYMM_AMO_OR:
    case SYMM_AMO_FETCH_OR:
        return MPI_BOR;
    case SYMM_AMO_XOR:
    case SYMM_AMO_FETCH_XOR:
        return MPI_BXOR;
    default:
        return MPI_OP_NULL;
    }
}

/* A fetch-and-operate on one word of type ty (value and old of its size). */
static symm_status_t tm_fetch_op_locked(symm_amo_t op, void *dest, const void *value,
                                        MPI_Datatype ty, int pe, void *old)
{
    if (amo_op(op) == MPI_OP_NULL)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "mpi fetch_op: operation %d (use cswap)",
                              (int)op);
    TM_CHECK(MPI_Fetch_and_op(value, old, ty, pe, disp_of(dest), amo_op(op), tm.win),
             "MPI_Fetch_and_op", pe);
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
}

/* A 64-bit compare-and-swap on this PE's own word is a CPU one under Open MPI: its
 * osc/rdma crashes on a 64-bit MPI_Compare_and_swap to the calling rank (the BTL atomic is
 * sent to an endpoint that does not exist for oneself). Its 64-bit atomics are carried out
 * by the target's CPU (the shared-memory BTL's, or the active messages that emulate them
 * where a BTL has none), so a CPU compare-and-swap is atomic with them. Its 32-bit ones
 * take the target's accumulate lock, then get and put, which a CPU atomic would race:
 * those, to oneself too, go through MPI like everyone else's. */
#ifdef OPEN_MPI
#define TM_CSWAP64_SELF_BY_CPU 1
#else
#define TM_CSWAP64_SELF_BY_CPU 0
#endif
static symm_status_t tm_cswap_locked(void *dest, const void *cond, const void *value,
                                     MPI_Datatype ty, int pe, void *old)
{
    if (TM_CSWAP64_SELF_BY_CPU && pe == symm_g.me && ty == MPI_UINT64_T) {
        uint64_t c = *(const uint64_t *)cond;
        __atomic_compare_exchange_n((uint64_t *)dest, &c, *(const uint64_t *)value, 0,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        *(uint64_t *)old = c;
        return SYMM_SUCCESS;
    }
    TM_CHECK(MPI_Compare_and_swap(value, cond, old, ty, pe, disp_of(dest), tm.win),
             "MPI_Compare_and_swap", pe);
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
}

/* The words of a sync slot or a mailbox, which only their one writer ever stores and only
 * their owner loads, as one message of (displacement, value) pairs per TM_WORDS_MAX words,
 * which the owner applies in order when it drains (tm_drain_locked): one MPI_Send of a few
 * dozen bytes where RMA would take a put and a flush per ordered word (each a system call of
 * about 2 us over Open MPI's shared-memory BTL without xpmem), and nothing that waits
 * for the target to enter MPI (a message this small goes eagerly; under MPICH even a put
 * waits for it), so a late member holds nobody inside MPI past its SYMM_TIMEOUT. Every RMA
 * operation of this transport is complete at its target on return, so data that a signal
 * announces is there before the message leaves; the memory sync first makes this PE's own
 * stores (data that peers will get) visible to the window's remote readers. */
static symm_status_t tm_store64_locked(uint64_t *const *dest, const uint64_t *value, int n,
                                       int pe)
{
    CHECK(tm_sync_memory());
    for (int i = 0; i < n; i += TM_WORDS_MAX) {
        uint64_t msg[2 * TM_WORDS_MAX];
        int k = n - i < TM_WORDS_MAX ? n - i : TM_WORDS_MAX;
        for (int j = 0; j < k; j++) {
            msg[2 * j] = (uint64_t)disp_of(dest[i + j]);
            msg[2 * j + 1] = value[i + j];
        }
        TM_CHECK(MPI_Send(msg, 2 * k, MPI_UINT64_T, pe, TM_TAG_WORDS, tm.comm), "MPI_Send", pe);
    }
    return SYMM_SUCCESS;
}

static symm_status_t tm_signal_locked(uint64_t *sig, uint64_t value, symm_sigop_t op, int pe)
{
    TM_CHECK(MPI_Accumulate(&value, 1, MPI_UINT64_T, pe, disp_of(sig), 1, MPI_UINT64_T,
                            op == SYMM_SIGNAL_ADD ? MPI_SUM : MPI_REPLACE, tm.win),
             "MPI_Accumulate", pe);
    TM_CHECK(MPI_Win_flush(pe, tm.win), "MPI_Win_flush", pe);
    return SYMM_SUCCESS;
}

/* The put is flushed before the signal starts: whoever sees the signal sees the data. */
static symm_status_t tm_put_signal_locked(void *dest, const void *src, size_t n, uint64_t *sig,
                                          uint64_t value, symm_sigop_t op, int pe)
{
    CHECK(tm_put_locked(dest, src, n, pe));
    return tm_signal_locked(sig, value, op, pe);
}

static symm_status_t tm_quiet_locked(void)
{
    TM_CHECK(MPI_Win_flush_all(tm.win), "MPI_Win_flush_all", -1);
    return SYMM_SUCCESS;
}

/* Also the reader's side: the words that peers sent by store64 are applied here. */
static symm_status_t tm_flush_locked(void)
{
    CHECK(tm_drain_locked(1));
    TM_CHECK(MPI_Win_sync(tm.win), "MPI_Win_sync", symm_g.me);
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- messages */
static inline int chan_tag(uint64_t chan)
{
    return (int)(chan < TM_TAG_WORDS ? chan : chan + 1);
}

/* Frees what MPI has finished sending (in any order; the rest keep theirs). */
static void tm_reap_locked(void)
{
    size_t k = 0;
    for (size_t i = 0; i < tm.nsent; i++) {
        int done = 0;
        if (MPI_Test(&tm.sent[i].req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
        if (done)
            free(tm.sent[i].buf);
        else
            tm.sent[k++] = tm.sent[i];
    }
    tm.nsent = k;
}

/* A copy of the bytes goes out with MPI_Isend: the caller neither waits for the receiver
 * (both sides of an exchange send before they receive) nor keeps its buffer. */
static symm_status_t tm_msg_send_locked(const void *buf, size_t n, int pe, uint64_t chan)
{
    if (chan > tm.chans || n > INT_MAX)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "PE %d: a message of %zu bytes on channel %llu to PE %d (at most "
                              "%d bytes on channels up to %llu)",
                              symm_g.me, n, (unsigned long long)chan, pe, INT_MAX,
                              (unsigned long long)tm.chans);
    if (tm.nsent) tm_reap_locked();
    if (tm.nsent == tm.capsent) {
        size_t cap = tm.capsent ? 2 * tm.capsent : 16;
        struct tm_sent *a = realloc(tm.sent, cap * sizeof *a);
        if (!a)
            return symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: no memory for a message to PE %d",
                                  symm_g.me, pe);
        tm.sent = a;
        tm.capsent = cap;
    }
    void *copy = malloc(n ? n : 1);
    if (!copy)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: no memory for %zu bytes to PE %d",
                              symm_g.me, n, pe);
    memcpy(copy, buf, n);
    MPI_Request req;
    int rc = MPI_Isend(copy, (int)n, MPI_BYTE, pe, chan_tag(chan), tm.comm, &req);
    if (rc != MPI_SUCCESS) {
        free(copy);
        return mpi_err(rc, "MPI_Isend", pe);
    }
    tm.sent[tm.nsent++] = (struct tm_sent){req, copy};
    return SYMM_SUCCESS;
}

static int tm_msg_recv_locked(void *buf, size_t cap, size_t *n, int pe, uint64_t chan,
                              symm_status_t *st)
{
    int found = 0, count = 0;
    MPI_Message msg;
    MPI_Status status;
    int rc = MPI_Improbe(pe, chan_tag(chan), tm.comm, &found, &msg, &status);
    if (rc == MPI_SUCCESS && !found) return 0;
    if (rc == MPI_SUCCESS) rc = MPI_Get_count(&status, MPI_BYTE, &count);
    if (rc != MPI_SUCCESS) {
        *st = mpi_err(rc, "MPI_Improbe", pe);
        return 0;
    }
    if ((size_t)count > cap) {
        /* taken whole: a truncated receive is an error that MPICH treats as fatal */
        void *drop = malloc((size_t)count);
        MPI_Mrecv(drop ? drop : buf, drop ? count : 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        free(drop);
        *st = symm_error_set(SYMM_ERR_SYSTEM,
                             "PE %d: a message of %d bytes from PE %d on channel %llu, where "
                             "at most %zu were expected; dropped",
                             symm_g.me, count, pe, (unsigned long long)chan, cap);
        return 1;
    }
    if ((rc = MPI_Mrecv(buf, count, MPI_BYTE, &msg, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
        *st = mpi_err(rc, "MPI_Mrecv", pe);
        return 0;
    }
    *n = (size_t)count;
    return 1;
}

/* The table's entries: each operation under tm.lock. */
#define TM_LOCKED(call)                                                                        \
    do {                                                                                       \
        pthread_mutex_lock(&tm.lock);                                                          \
        symm_status_t tm_st_ = (call);                                                         \
        pthread_mutex_unlock(&tm.lock);                                                        \
        return tm_st_;                                                                         \
    } while (0)

static symm_status_t tm_put(void *dest, const void *src, size_t n, int pe)
{
    TM_LOCKED(tm_put_locked(dest, src, n, pe));
}

static symm_status_t tm_get(void *dest, const void *src, size_t n, int pe)
{
    TM_LOCKED(tm_get_locked(dest, src, n, pe));
}

static symm_status_t tm_get_rows(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                                 size_t rb, size_t rows, int pe)
{
    TM_LOCKED(tm_rows_locked(1, dest, dest_ld, src, src_ld, rb, rows, pe));
}

static symm_status_t tm_put_rows(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                                 size_t rb, size_t rows, int pe)
{
    TM_LOCKED(tm_rows_locked(0, dest, dest_ld, src, src_ld, rb, rows, pe));
}

static symm_status_t tm_fetch_op64(symm_amo_t op, uint64_t *dest, uint64_t value, int pe,
                                   uint64_t *old_out)
{
    uint64_t old = 0;
    pthread_mutex_lock(&tm.lock);
    symm_status_t st = tm_fetch_op_locked(op, dest, &value, MPI_UINT64_T, pe, &old);
    pthread_mutex_unlock(&tm.lock);
    if (!st && old_out) *old_out = old;
    return st;
}

static symm_status_t tm_fetch_op32(symm_amo_t op, uint32_t *dest, uint32_t value, int pe,
                                   uint32_t *old_out)
{
    uint32_t old = 0;
    pthread_mutex_lock(&tm.lock);
    symm_status_t st = tm_fetch_op_locked(op, dest, &value, MPI_UINT32_T, pe, &old);
    pthread_mutex_unlock(&tm.lock);
    if (!st && old_out) *old_out = old;
    return st;
}

static symm_status_t tm_cswap64(uint64_t *dest, uint64_t cond, uint64_t value, int pe,
                                uint64_t *old_out)
{
    uint64_t old = 0;
    pthread_mutex_lock(&tm.lock);
    symm_status_t st = tm_cswap_locked(dest, &cond, &value, MPI_UINT64_T, pe, &old);
    pthread_mutex_unlock(&tm.lock);
    if (!st && old_out) *old_out = old;
    return st;
}

static symm_status_t tm_cswap32(uint32_t *dest, uint32_t cond, uint32_t value, int pe,
                                uint32_t *old_out)
{
    uint32_t old = 0;
    pthread_mutex_lock(&tm.lock);
    symm_status_t st = tm_cswap_locked(dest, &cond, &value, MPI_UINT32_T, pe, &old);
    pthread_mutex_unlock(&tm.lock);
    if (!st && old_out) *old_out = old;
    return st;
}

static symm_status_t tm_swap64(uint64_t *dest, uint64_t value, int pe, uint64_t *old_out)
{
    return tm_fetch_op64(SYMM_AMO_SWAP, dest, value, pe, old_out);
}

static symm_status_t tm_store64(uint64_t *const *dest, const uint64_t *value, int n, int pe)
{
    TM_LOCKED(tm_store64_locked(dest, value, n, pe));
}

static symm_status_t tm_signal(uint64_t *sig, uint64_t value, symm_sigop_t op, int pe)
{
    TM_LOCKED(tm_signal_locked(sig, value, op, pe));
}

static symm_status_t tm_put_signal(void *dest, const void *src, size_t n, uint64_t *sig,
                                   uint64_t value, symm_sigop_t op, int pe)
{
    TM_LOCKED(tm_put_signal_locked(dest, src, n, sig, value, op, pe));
}

static symm_status_t tm_quiet(void)
{
    TM_LOCKED(tm_quiet_locked());
}

static symm_status_t tm_flush(void)
{
    TM_LOCKED(tm_flush_locked());
}

static symm_status_t tm_msg_send(const void *buf, size_t n, int pe, uint64_t chan)
{
    TM_LOCKED(tm_msg_send_locked(buf, n, pe, chan));
}

static int tm_msg_recv(void *buf, size_t cap, size_t *n, int pe, uint64_t chan,
                       symm_status_t *st)
{
    pthread_mutex_lock(&tm.lock);
    int got = tm_msg_recv_locked(buf, cap, n, pe, chan, st);
    pthread_mutex_unlock(&tm.lock);
    return got;
}

static uint64_t tm_msg_chans(void)
{
    return tm.chans;
}

static void *tm_ptr(const void *addr, int pe)
{
    (void)addr, (void)pe;
    return NULL;
}

/* Collective over the job: every PE exposes its whole segment. */
symm_status_t symm_mpi_transport_init(void)
{
    int rc;
    tm.base = symm_g.seg[symm_g.me];
    MPI_Aint size = (MPI_Aint)symm_g.seg_size;
    if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &tm.comm)) != MPI_SUCCESS)
        return mpi_err(rc, "MPI_Comm_dup", symm_g.me);
    MPI_Comm_set_errhandler(tm.comm, MPI_ERRORS_RETURN);
    if ((rc = MPI_Win_create(tm.base, size, 1, MPI_INFO_NULL, tm.comm, &tm.win)) !=
        MPI_SUCCESS) {
        MPI_Comm_free(&tm.comm);
        char why[MPI_MAX_ERROR_STRING + 64];
        mpi_err(rc, "MPI_Win_create", symm_g.me);
        snprintf(why, sizeof why, "%s", symm_last_error());
        /* Open MPI 4's osc/rdma needs an RDMA-capable BTL between the PEs (vader on one
         * host, InfiniBand), and its osc/pt2pt (one-sided over TCP) refuses
         * MPI_THREAD_MULTIPLE and is left out by some distributions' defaults. */
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "%s (PEs of other hosts or groups are reached by MPI one-sided "
                              "communication, which this MPI library offers on none of its "
                              "networks between these PEs; with Open MPI over TCP, run with "
                              "--mca osc pt2pt,rdma,sm and an MPI thread level below "
                              "MPI_THREAD_MULTIPLE)",
                              why);
    }
    MPI_Win_set_errhandler(tm.win, MPI_ERRORS_RETURN);
    int *model = NULL, found = 0;
    if (MPI_Win_get_attr(tm.win, MPI_WIN_MODEL, &model, &found) == MPI_SUCCESS && found &&
        model)
        tm.unified = *model == MPI_WIN_UNIFIED;
    if ((rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, tm.win)) != MPI_SUCCESS) {
        MPI_Win_free(&tm.win);
        MPI_Comm_free(&tm.comm);
        return mpi_err(rc, "MPI_Win_lock_all", symm_g.me);
    }
    if ((rc = MPI_Recv_init(tm.words, 2 * TM_WORDS_MAX, MPI_UINT64_T, MPI_ANY_SOURCE,
                            TM_TAG_WORDS, tm.comm, &tm.words_req)) != MPI_SUCCESS ||
        (rc = MPI_Start(&tm.words_req)) != MPI_SUCCESS) {
        if (tm.words_req != MPI_REQUEST_NULL) MPI_Request_free(&tm.words_req);
        MPI_Win_unlock_all(tm.win);
        MPI_Win_free(&tm.win);
        MPI_Comm_free(&tm.comm);
        return mpi_err(rc, "posting the receive of signals", symm_g.me);
    }
    /* MPI_TAG_UB is at least 32767 (MPI 3.1, 8.1.2); one tag is store64's. */
    int *tag_ub = NULL;
    found = 0;
    if (MPI_Comm_get_attr(tm.comm, MPI_TAG_UB, &tag_ub, &found) != MPI_SUCCESS || !found ||
        !tag_ub || *tag_ub < 32767)
        tm.chans = 32766;
    else
        tm.chans = (uint64_t)*tag_ub - 1;
    symm_wait_progress = tm_progress;
    symm_wait_progress_mask = 0;
    return SYMM_SUCCESS;
}

/* Collective too: MPI_Win_free waits for every PE, after finalize's last barrier. */
static void tm_finalize(void)
{
    symm_wait_progress = NULL;
    symm_wait_progress_mask = SYMM_WAIT_PROGRESS_EVERY - 1;
    if (tm.win != MPI_WIN_NULL) {
        MPI_Win_unlock_all(tm.win);
        MPI_Win_free(&tm.win);
    }
    /* Signals that no wait took (a poison after a member gave up), dropped: every PE has
     * sent all of its own by now, as MPI_Win_free waited for every PE. */
    if (tm.words_req != MPI_REQUEST_NULL) {
        if (tm_drain_locked(0)) SYMM_WARN("%s", symm_last_error());
        MPI_Cancel(&tm.words_req);
        MPI_Wait(&tm.words_req, MPI_STATUS_IGNORE);
        MPI_Request_free(&tm.words_req);
    }
    /* Messages that no receiver took (a call that failed between its send and the
     * receive): let go; their bytes stay with MPI. */
    if (tm.nsent) tm_reap_locked();
    for (size_t i = 0; i < tm.nsent; i++)
        MPI_Request_free(&tm.sent[i].req);
    free(tm.sent);
    tm.sent = NULL;
    tm.nsent = tm.capsent = 0;
    tm.chans = 0;
    if (tm.comm != MPI_COMM_NULL) MPI_Comm_free(&tm.comm);
    tm.base = NULL;
}

const symm_transport_ops_t symm_mpi_transport = {
    .size = sizeof(symm_transport_ops_t),
    .name = "mpi",
    .init = symm_mpi_transport_init,
    .finalize = tm_finalize,
    .ptr = tm_ptr,
    .put = tm_put,
    .get = tm_get,
    .fetch_op64 = tm_fetch_op64,
    .cswap64 = tm_cswap64,
    .swap64 = tm_swap64,
    .store64 = tm_store64,
    .put_signal = tm_put_signal,
    .signal = tm_signal,
    .fence = tm_quiet,
    .quiet = tm_quiet,
    .flush = tm_flush,
    .fetch_op32 = tm_fetch_op32,
    .cswap32 = tm_cswap32,
    .get_rows = tm_get_rows,
    .put_rows = tm_put_rows,
    .msg_send = tm_msg_send,
    .msg_recv = tm_msg_recv,
    .msg_chans = tm_msg_chans,
};

#endif
