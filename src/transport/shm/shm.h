/* shm.h — the CPU transport's hot path: every PE's segment is mapped in every process,
 * so a remote access is a load or store through a translated pointer. */
#ifndef SYMM_TRANSPORT_SHM_H
#define SYMM_TRANSPORT_SHM_H

#include <string.h>

#include "core/runtime.h"

static inline void *symm_shm_ptr(const void *addr, int pe) { return symm_seg_ptr(addr, pe); }

static inline void symm_shm_put(void *dest, const void *src, size_t n, int pe)
{
    if (n) memcpy(symm_seg_ptr(dest, pe), src, n); /* src may be NULL when n is 0 */
}

static inline void symm_shm_get(void *dest, const void *src, size_t n, int pe)
{
    if (n) memcpy(dest, symm_seg_ptr(src, pe), n); /* dest may be NULL when n is 0 */
}

/* Stores by this thread become visible to other PEs in program order (x86: already so;
 * the fence keeps the compiler and weaker CPUs honest). */
#if defined(__SANITIZE_THREAD__)
/* TSan does not model fences; a sequentially consistent RMW orders the same way. */
static inline void symm_shm_fence(void)
{
    static int fence_word;
    __atomic_fetch_add(&fence_word, 0, __ATOMIC_SEQ_CST);
}
#else
static inline void symm_shm_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif

#endif
