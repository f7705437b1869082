/* rma.c — put, get, atomics, signals and point-to-point waits on the CPU transport,
 * world-relative (the team-relative forms are in lib/team_rma.c). Every call validates
 * its arguments first and changes nothing when they are wrong. A PE whose segment is not
 * mapped here (another host or group) is reached through symm_transport_remote(); in such
 * a job the 64-bit atomics and signals go that way for every PE, so that no word is
 * touched by CPU atomics and MPI's at once. */
#include <string.h>

#include "core/wait.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

/* arg names the symmetric argument in messages. A range outside the heap is refused as
 * it always was (running past the heap's end is an overflow); one inside it must lie in
 * one live object. */
__attribute__((noinline)) static symm_status_t
check_remote_slow(const char *fn, const char *arg, const void *addr, size_t n)
{
    if (SYMM_UNLIKELY(!addr))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: symmetric address %s is NULL", fn,
                              arg);
    if (SYMM_UNLIKELY(!symm_in_heap(addr, n))) {
        if (symm_in_heap(addr, 0))
            return symm_error_set(SYMM_ERR_OVERFLOW,
                                  "%s: %s, %zu bytes at %p, runs past the "
                                  "end of the symmetric heap",
                                  fn, arg, n, addr);
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC, "%s: %s %p is not a symmetric address",
                              fn, arg, addr);
    }
    return symm_heap_check(fn, arg, addr, n);
}

/* The hot path: a range in one of the objects this thread checked last passes at once. */
static inline __attribute__((always_inline)) symm_status_t
check_remote(const char *fn, const char *arg, const void *addr, size_t n, int pe)
{
    SYMM_REQUIRE_INIT();
    if (SYMM_UNLIKELY(pe < 0 || pe >= symm_g.npes))
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: PE %d outside 0..%d", fn, pe,
                              symm_g.npes - 1);
    if (SYMM_LIKELY(symm_heap_hit(addr, n))) return SYMM_SUCCESS;
    return check_remote_slow(fn, arg, addr, n);
}

symm_status_t symm_check_remote(const char *fn, const void *addr, size_t n, int pe)
{
    return check_remote(fn, "addr", addr, n, pe);
}

static inline symm_status_t check_local(const char *fn, const void *p, size_t n)
{
    if (SYMM_UNLIKELY(!p && n))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: local buffer is NULL", fn);
    return SYMM_SUCCESS;
}

symm_status_t symm_put(void *dest, const void *src, size_t nbytes, int pe)
{
    CHECK(check_remote(__func__, "dest", dest, nbytes, pe));
    CHECK(check_local(__func__, src, nbytes));
    if (SYMM_UNLIKELY(!symm_g.seg[pe]))
        return symm_transport_remote()->put(dest, src, nbytes, pe);
    symm_shm_put(dest, src, nbytes, pe);
    return SYMM_SUCCESS;
}

symm_status_t symm_get(void *dest, const void *src, size_t nbytes, int pe)
{
    CHECK(check_remote(__func__, "src", src, nbytes, pe));
    CHECK(check_local(__func__, dest, nbytes));
    if (SYMM_UNLIKELY(!symm_g.seg[pe]))
        return symm_transport_remote()->get(dest, src, nbytes, pe);
    symm_shm_get(dest, src, nbytes, pe);
    return SYMM_SUCCESS;
}

/* On shared memory a copy completes when it returns, so the non-blocking forms are the
 * blocking ones; quiet is then only an ordering fence. */
symm_status_t symm_put_nbi(void *dest, const void *src, size_t nbytes, int pe)
{
    return symm_put(dest, src, nbytes, pe);
}

symm_status_t symm_get_nbi(void *dest, const void *src, size_t nbytes, int pe)
{
    return symm_get(dest, src, nbytes, pe);
}

static symm_status_t typed_bytes(const char *fn, size_t count, symm_type_t type, size_t *out)
{
    *out = 0;
    size_t es = symm_type_size(type);
    if (!es) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid type %d", fn, (int)type);
    if (count > SIZE_MAX / es)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu elements overflow", fn, count);
    *out = count * es;
    return SYMM_SUCCESS;
}

symm_status_t symm_put_typed(void *dest, const void *src, size_t count, symm_type_t type,
                             int pe)
{
    size_t n;
    CHECK(typed_bytes(__func__, count, type, &n));
    return symm_put(dest, src, n, pe);
}

symm_status_t symm_get_typed(void *dest, const void *src, size_t count, symm_type_t type,
                             int pe)
{
    size_t n;
    CHECK(typed_bytes(__func__, count, type, &n));
    return symm_get(dest, src, n, pe);
}

symm_status_t symm_fence(void)
{
    SYMM_REQUIRE_INIT();
    symm_shm_fence();
    return SYMM_SUCCESS;
}

symm_status_t symm_quiet(void)
{
    SYMM_REQUIRE_INIT();
    symm_shm_fence();
    return SYMM_SUCCESS;
}

void *symm_ptr(const void *addr, int pe)
{
    if (!symm_g.initialized || pe < 0 || pe >= symm_g.npes || !symm_g.seg[pe] ||
        !symm_in_heap(addr, 1))
        return NULL;
    return symm_shm_ptr(addr, pe);
}

/* ---------------------------------------------------------------- atomics */
#define SYMM_AMO_BODY(T)                                                                       \
    {                                                                                          \
        if (SYMM_UNLIKELY((unsigned)op >= SYMM_AMO_COUNT))                                     \
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid operation %d", __func__,  \
                                  (int)op);                                                    \
        CHECK(check_remote(__func__, "dest", dest, sizeof(T), pe));                            \
        if (SYMM_UNLIKELY((uintptr_t)dest % sizeof(T)))                                        \
            return symm_error_set(SYMM_ERR_ALIGNMENT, "%s: %p is not %zu-byte aligned",        \
                                  __func__, (void *)dest, sizeof(T));                          \
        int fetching = op == SYMM_AMO_FETCH || op == SYMM_AMO_SWAP || op == SYMM_AMO_CSWAP ||  \
                       op == SYMM_AMO_FETCH_ADD || op == SYMM_AMO_FETCH_AND ||                 \
                       op == SYMM_AMO_FETCH_OR || op == SYMM_AMO_FETCH_XOR;                    \
        if (SYMM_UNLIKELY(fetching && !fetched))                                               \
            return symm_error_set(SYMM_ERR_INVALID_ARG,                                        \
                                  "%s: fetching operation %d "                                 \
                                  "needs a result pointer",                                    \
                                  __func__, (int)op);                                          \
        if (SYMM_UNLIKELY(symm_g.remote_pes))                                                  \
            return REMOTE(op, dest, value, cond, pe, fetching ? fetched : NULL);               \
        T old = 0;                                                                             \
        LOCAL(op, (T *)symm_shm_ptr(dest, pe), value, cond, &old);                             \
        if (fetched && fetching) *fetched = old;                                               \
        return SYMM_SUCCESS;                                                                   \
    }

/* An atomic through the remote transport, for any PE of a job with remote PEs (SET too:
 * an accumulate, not a put, so that the word sees MPI's atomics only). */
#define SYMM_AMO_REMOTE(T, bits)                                                               \
    static symm_status_t amo##bits##_remote(symm_amo_t op, T *dest, T value, T cond, int pe,   \
                                            T *fetched)                                        \
    {                                                                                          \
        const symm_transport_ops_t *t = symm_transport_remote();                               \
        T old = 0;                                                                             \
        symm_status_t st = op == SYMM_AMO_CSWAP                                                \
                               ? t->cswap##bits(dest, cond, value, pe, &old)                   \
                               : t->fetch_op##bits(op, dest, value, pe, &old);                 \
        if (!st && fetched) *fetched = old;                                                    \
        return st;                                                                             \
    }
SYMM_AMO_REMOTE(uint32_t, 32)
SYMM_AMO_REMOTE(uint64_t, 64)

#define REMOTE amo32_remote
#define LOCAL  symm_shm_amo32
symm_status_t symm_atomic32(symm_amo_t op, uint32_t *dest, uint32_t value, uint32_t cond,
                            int pe, uint32_t *fetched) SYMM_AMO_BODY(uint32_t)
#undef REMOTE
#undef LOCAL
#define REMOTE amo64_remote
#define LOCAL  symm_shm_amo64
    symm_status_t symm_atomic64(symm_amo_t op, uint64_t *dest, uint64_t value, uint64_t cond,
                                int pe, uint64_t *fetched) SYMM_AMO_BODY(uint64_t)
#undef REMOTE
#undef LOCAL

    /* ---------------------------------------------------------------- signals */
    static symm_status_t
    signal_update(const char *fn, uint64_t *sig_addr, symm_sigop_t sigop, int pe)
{
    if (sigop != SYMM_SIGNAL_SET && sigop != SYMM_SIGNAL_ADD)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid signal operation %d", fn,
                              (int)sigop);
    CHECK(check_remote(fn, "sig_addr", sig_addr, sizeof *sig_addr, pe));
    if ((uintptr_t)sig_addr % 8)
        return symm_error_set(SYMM_ERR_ALIGNMENT, "%s: signal %p is not 8-byte aligned", fn,
                              (void *)sig_addr);
    return SYMM_SUCCESS;
}

symm_status_t symm_put_signal(void *dest, const void *src, size_t nbytes, uint64_t *sig_addr,
                              uint64_t signal, symm_sigop_t sigop, int pe)
{
    CHECK(signal_update(__func__, sig_addr, sigop, pe));
    CHECK(check_remote(__func__, "dest", dest, nbytes, pe));
    CHECK(check_local(__func__, src, nbytes));
    if (SYMM_UNLIKELY(symm_g.remote_pes)) {
        /* Data by load/store where it can go so, the signal always through MPI */
        const symm_transport_ops_t *t = symm_transport_remote();
        if (symm_g.seg[pe]) {
            symm_shm_put(dest, src, nbytes, pe);
            symm_shm_fence();
            return t->signal(sig_addr, signal, sigop, pe);
        }
        return t->put_signal(dest, src, nbytes, sig_addr, signal, sigop, pe);
    }
    symm_shm_put(dest, src, nbytes, pe);
    /* Release: whoever sees the signal sees the data. */
    uint64_t *s = symm_shm_ptr(sig_addr, pe);
    if (sigop == SYMM_SIGNAL_SET)
        __atomic_store_n(s, signal, __ATOMIC_RELEASE);
    else
        __atomic_fetch_add(s, signal, __ATOMIC_RELEASE);
    return SYMM_SUCCESS;
}

symm_status_t symm_put_signal_nbi(void *dest, const void *src, size_t nbytes,
                                  uint64_t *sig_addr, uint64_t signal, symm_sigop_t sigop,
                                  int pe)
{
    return symm_put_signal(dest, src, nbytes, sig_addr, signal, sigop, pe);
}

/* Waits and tests read the word with an atomic load, which a misaligned address would
 * split (and UBSan rejects). */
static inline symm_status_t check_aligned(const char *fn, const void *p, size_t size)
{
    if (SYMM_UNLIKELY((uintptr_t)p % size))
        return symm_error_set(SYMM_ERR_ALIGNMENT, "%s: %p is not %zu-byte aligned", fn, p,
                              size);
    return SYMM_SUCCESS;
}

symm_status_t symm_signal_fetch(const uint64_t *sig_addr, uint64_t *value_out)
{
    CHECK(check_remote(__func__, "sig_addr", sig_addr, 8, symm_g.me));
    CHECK(check_aligned(__func__, sig_addr, 8));
    if (!value_out)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: value_out is NULL", __func__);
    if (symm_wait_progress) symm_wait_progress();
    *value_out = __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
    return SYMM_SUCCESS;
}

/* The waits below are the same loop for each integer type. */
#define SYMM_WAIT_UNTIL_BODY(T, fn, ivar, cmp, value, out)                                     \
    {                                                                                          \
        CHECK(check_remote(fn, "ivar", ivar, sizeof(T), symm_g.me));                           \
        CHECK(check_aligned(fn, ivar, sizeof(T)));                                             \
        if ((unsigned)(cmp) > SYMM_CMP_LE)                                                     \
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid comparison %d", fn,       \
                                  (int)(cmp));                                                 \
        symm_wait_t w = SYMM_WAIT_INIT;                                                        \
        T v;                                                                                   \
        while (v = __atomic_load_n(ivar, __ATOMIC_ACQUIRE), !SYMM_CMP_EVAL(cmp, v, value)) {   \
            symm_status_t st = symm_wait_pause(&w);                                            \
            if (st == SYMM_ERR_TIMEOUT)                                                        \
                return symm_error_set(st,                                                      \
                                      "%s: the value at %p never compared true "               \
                                      "(%.1f s, SYMM_TIMEOUT)",                                \
                                      fn, (void *)(ivar), symm_wait_elapsed(&w));              \
            if (st) return st;                                                                 \
        }                                                                                      \
        if (out) *(T *)(out) = v;                                                              \
        return SYMM_SUCCESS;                                                                   \
    }

symm_status_t symm_signal_wait_until(uint64_t *sig_addr, symm_cmp_t cmp, uint64_t value,
                                     uint64_t *value_out)
    SYMM_WAIT_UNTIL_BODY(uint64_t, __func__, sig_addr, cmp, value, value_out)

#define SYMM_WAIT_TEST_(name, T)                                                               \
    symm_status_t symm_wait_until_##name(T *ivar, symm_cmp_t cmp, T value)                     \
        SYMM_WAIT_UNTIL_BODY(T, __func__, ivar, cmp, value, (T *)NULL)                         \
            symm_status_t symm_test_##name(T *ivar, symm_cmp_t cmp, T value, int *result_out)  \
    {                                                                                          \
        CHECK(check_remote(__func__, "ivar", ivar, sizeof(T), symm_g.me));                     \
        CHECK(check_aligned(__func__, ivar, sizeof(T)));                                       \
        if ((unsigned)cmp > SYMM_CMP_LE)                                                       \
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid comparison %d", __func__, \
                                  (int)cmp);                                                   \
        if (!result_out)                                                                       \
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: result_out is NULL", __func__);   \
        if (symm_wait_progress) symm_wait_progress();                                          \
        T v = __atomic_load_n(ivar, __ATOMIC_ACQUIRE);                                         \
        *result_out = SYMM_CMP_EVAL(cmp, v, value);                                            \
        return SYMM_SUCCESS;                                                                   \
    }
        SYMM_WAIT_TEST_(int32, int32_t) SYMM_WAIT_TEST_(int64, int64_t)
            SYMM_WAIT_TEST_(uint32, uint32_t) SYMM_WAIT_TEST_(uint64, uint64_t)
