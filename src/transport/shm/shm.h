/* shm.h — the CPU transport's hot path: every PE's segment is mapped in every process,
 * so a remote access is a load or store through a translated pointer. Algorithms call
 * these directly for members whose reach bit is set; the ops table (shm.c) wraps them
 * for the rest of the library. */
#ifndef SYMM_TRANSPORT_SHM_H
#define SYMM_TRANSPORT_SHM_H

#include <string.h>

#include "core/runtime.h"

/* My address of an object in my segment -> the same object in pe's segment. */
static inline void *symm_shm_ptr(const void *addr, int pe)
{
    return symm_g.seg[pe] + ((const uint8_t *)addr - symm_g.seg[symm_g.me]);
}

static inline void symm_shm_put(void *dest, const void *src, size_t n, int pe)
{
    if (n) memcpy(symm_shm_ptr(dest, pe), src, n); /* src may be NULL when n is 0 */
}

static inline void symm_shm_get(void *dest, const void *src, size_t n, int pe)
{
    if (n) memcpy(dest, symm_shm_ptr(src, pe), n); /* dest may be NULL when n is 0 */
}

/* Stores by this thread become visible to other PEs in program order (symm_cpu_fence). */
static inline void symm_shm_fence(void)
{
    symm_cpu_fence();
}

/* Atomic op on a word p this process reaches by load/store (for both widths): *old_out
 * gets the word's old value (0 where op reads nothing); 0, or -1 for an op it does not
 * know. The public atomics (rma.c) and the ops table (shm.c) share it. */
#define SYMM_SHM_AMO(T, name)                                                                  \
    static inline int name(symm_amo_t op, T *p, T value, T cond, T *old_out)                   \
    {                                                                                          \
        T old = 0;                                                                             \
        switch (op) {                                                                          \
        case SYMM_AMO_FETCH:                                                                   \
            old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                        \
            break;                                                                             \
        case SYMM_AMO_SET:                                                                     \
            __atomic_store_n(p, value, __ATOMIC_SEQ_CST);                                      \
            break;                                                                             \
        case SYMM_AMO_SWAP:                                                                    \
            old = __atomic_exchange_n(p, value, __ATOMIC_SEQ_CST);                             \
            break;                                                                             \
        case SYMM_AMO_CSWAP:                                                                   \
            old = cond;                                                                        \
            __atomic_compare_exchange_n(p, &old, value, 0, __ATOMIC_SEQ_CST,                   \
                                        __ATOMIC_SEQ_CST);                                     \
            break;                                                                             \
        case SYMM_AMO_ADD:                                                                     \
        case SYMM_AMO_FETCH_ADD:                                                               \
            old = __atomic_fetch_add(p, value, __ATOMIC_SEQ_CST);                              \
            break;                                                                             \
        case SYMM_AMO_AND:                                                                     \
        case SYMM_AMO_FETCH_AND:                                                               \
            old = __atomic_fetch_and(p, value, __ATOMIC_SEQ_CST);                              \
            break;                                                                             \
        case SYMM_AMO_OR:                                                                      \
        case SYMM_AMO_FETCH_OR:                                                                \
            old = __atomic_fetch_or(p, value, __ATOMIC_SEQ_CST);                               \
            break;                                                                             \
        case SYMM_AMO_XOR:                                                                     \
        case SYMM_AMO_FETCH_XOR:                                                               \
            old = __atomic_fetch_xor(p, value, __ATOMIC_SEQ_CST);                              \
            break;                                                                             \
        default:                                                                               \
            return -1;                                                                         \
        }                                                                                      \
        *old_out = old;                                                                        \
        return 0;                                                                              \
    }
SYMM_SHM_AMO(uint64_t, symm_shm_amo64)
SYMM_SHM_AMO(uint32_t, symm_shm_amo32)

/* Segments (segment.c): init maps every PE's segment, reads what each published in its
 * header and places the mailboxes; finalize unmaps them. */
symm_status_t symm_shm_init(void);
void symm_shm_finalize(void);
symm_status_t symm_shm_segment_map(int pe);
void symm_shm_segment_unmap(int pe);

/* Mailboxes (rank-list team creation). Caller holds create_lock. send posts one message
 * to pe (waiting until pe consumed the previous one); poll takes the next message from
 * pe if there is one: SYMM_MBOX_MESSAGE (data filled), SYMM_MBOX_WITHDRAWN (the sender
 * gave up on it before it was taken) or SYMM_MBOX_NONE. withdraw takes back this PE's
 * last message to pe if pe has not taken it (1) or not (0); abandon says that the next
 * message from pe belongs to an attempt this PE gave up on: poll drops it. */
#define SYMM_MBOX_NONE      0
#define SYMM_MBOX_MESSAGE   1
#define SYMM_MBOX_WITHDRAWN 2
symm_status_t symm_mbox_send(int pe, const uint64_t *data, int nwords);
int symm_mbox_poll(int pe, uint64_t *data, int nwords);
int symm_mbox_withdraw(int pe);
void symm_mbox_abandon(int pe);

#endif
