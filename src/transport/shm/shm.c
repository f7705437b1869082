/* shm.c — the shared-memory transport's ops table: every operation is a load, store,
 * copy or atomic through the peer pointer of shm.h, since every PE is mapped here. */
#include "transport/shm/shm.h"
#include "core/log.h"
#include "transport/transport.h"

static void *shm_ptr(const void *addr, int pe)
{
    return symm_shm_ptr(addr, pe);
}

static symm_status_t shm_put(void *dest, const void *src, size_t n, int pe)
{
    symm_shm_put(dest, src, n, pe);
    return SYMM_SUCCESS;
}

static symm_status_t shm_get(void *dest, const void *src, size_t n, int pe)
{
    symm_shm_get(dest, src, n, pe);
    return SYMM_SUCCESS;
}

/* The fetch-and-operate family on a peer's word of type T, for both widths (compare-and-
 * swap has its own entry). */
#define SHM_FETCH_OP(T, name, amo)                                                             \
    static symm_status_t name(symm_amo_t op, T *dest, T value, int pe, T *old_out)             \
    {                                                                                          \
        T old;                                                                                 \
        if (op == SYMM_AMO_CSWAP || amo(op, (T *)symm_shm_ptr(dest, pe), value, 0, &old))      \
            return symm_error_set(SYMM_ERR_INVALID_ARG, "shm %s: operation %d (use cswap)",    \
                                  #name, (int)op);                                             \
        if (old_out) *old_out = old;                                                           \
        return SYMM_SUCCESS;                                                                   \
    }
SHM_FETCH_OP(uint64_t, shm_fetch_op64, symm_shm_amo64)
SHM_FETCH_OP(uint32_t, shm_fetch_op32, symm_shm_amo32)

static symm_status_t shm_cswap64(uint64_t *dest, uint64_t cond, uint64_t value, int pe,
                                 uint64_t *old_out)
{
    uint64_t old = cond;
    __atomic_compare_exchange_n((uint64_t *)symm_shm_ptr(dest, pe), &old, value, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (old_out) *old_out = old;
    return SYMM_SUCCESS;
}

static symm_status_t shm_cswap32(uint32_t *dest, uint32_t cond, uint32_t value, int pe,
                                 uint32_t *old_out)
{
    uint32_t old = cond;
    __atomic_compare_exchange_n((uint32_t *)symm_shm_ptr(dest, pe), &old, value, 0,
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    if (old_out) *old_out = old;
    return SYMM_SUCCESS;
}

static symm_status_t shm_store64(uint64_t *const *dest, const uint64_t *value, int n, int pe)
{
    for (int i = 0; i < n; i++)
        __atomic_store_n((uint64_t *)symm_shm_ptr(dest[i], pe), value[i], __ATOMIC_RELEASE);
    return SYMM_SUCCESS;
}

static symm_status_t shm_get_rows(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                                  size_t rb, size_t rows, int pe)
{
    const uint8_t *s = symm_shm_ptr(src, pe);
    for (size_t r = 0; r < rows; r++)
        memcpy((uint8_t *)dest + r * dest_ld, s + r * src_ld, rb);
    return SYMM_SUCCESS;
}

static symm_status_t shm_put_rows(void *dest, size_t dest_ld, const void *src, size_t src_ld,
                                  size_t rb, size_t rows, int pe)
{
    uint8_t *d = symm_shm_ptr(dest, pe);
    for (size_t r = 0; r < rows; r++)
        memcpy(d + r * dest_ld, (const uint8_t *)src + r * src_ld, rb);
    return SYMM_SUCCESS;
}

static symm_status_t shm_swap64(uint64_t *dest, uint64_t value, int pe, uint64_t *old_out)
{
    uint64_t old =
        __atomic_exchange_n((uint64_t *)symm_shm_ptr(dest, pe), value, __ATOMIC_SEQ_CST);
    if (old_out) *old_out = old;
    return SYMM_SUCCESS;
}

static symm_status_t shm_put_signal(void *dest, const void *src, size_t n, uint64_t *sig,
                                    uint64_t value, symm_sigop_t op, int pe)
{
    symm_shm_put(dest, src, n, pe);
    uint64_t *s = symm_shm_ptr(sig, pe);
    if (op == SYMM_SIGNAL_SET)
        __atomic_store_n(s, value, __ATOMIC_RELEASE);
    else
        __atomic_fetch_add(s, value, __ATOMIC_RELEASE);
    return SYMM_SUCCESS;
}

static symm_status_t shm_signal(uint64_t *sig, uint64_t value, symm_sigop_t op, int pe)
{
    return shm_put_signal(NULL, NULL, 0, sig, value, op, pe);
}

static symm_status_t shm_fence(void)
{
    symm_shm_fence();
    return SYMM_SUCCESS;
}

const symm_transport_ops_t symm_shm_transport = {
    .size = sizeof(symm_transport_ops_t),
    .name = "shm",
    .init = symm_shm_init,
    .finalize = symm_shm_finalize,
    .map = symm_shm_segment_map,
    .unmap = symm_shm_segment_unmap,
    .ptr = shm_ptr,
    .put = shm_put,
    .get = shm_get,
    .fetch_op64 = shm_fetch_op64,
    .cswap64 = shm_cswap64,
    .swap64 = shm_swap64,
    .store64 = shm_store64,
    .put_signal = shm_put_signal,
    .signal = shm_signal,
    /* stores through mapped memory complete in program order once fenced */
    .fence = shm_fence,
    .quiet = shm_fence,
    .flush = shm_fence,
    .fetch_op32 = shm_fetch_op32,
    .cswap32 = shm_cswap32,
    .get_rows = shm_get_rows,
    .put_rows = shm_put_rows,
};
