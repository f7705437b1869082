/* coll.c — argument checks and the bulk copy shared by the collectives. */
#include "coll/coll.h"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define SYMM_HAVE_STREAM 1
#endif

void symm_coll_copy(void *dst, const void *src, size_t n, int nt)
{
#ifdef SYMM_HAVE_STREAM
    if (nt && n >= 4096) {
        uint8_t *d = dst;
        const uint8_t *s = src;
        size_t head = (size_t)(-(uintptr_t)d & 63); /* to a cache-line boundary */
        memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        for (; n >= 64; n -= 64, d += 64, s += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)s);
            __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
            _mm_stream_si128((__m128i *)d, a);
            _mm_stream_si128((__m128i *)(d + 16), b);
            _mm_stream_si128((__m128i *)(d + 32), c);
            _mm_stream_si128((__m128i *)(d + 48), e);
        }
        memcpy(d, s, n);
        /* streaming stores are weakly ordered: fence before anyone is told */
        _mm_sfence();
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, n);
}

symm_status_t symm_coll_check_buf(const char *fn, const char *arg, const void *p, size_t n)
{
    if (n == 0) return SYMM_SUCCESS;
    if (!p)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s is NULL with %zu bytes", fn, arg,
                              n);
    if (!symm_in_heap(p, n))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s [%p, +%zu bytes) on PE %d is not inside the symmetric "
                              "heap (allocate it with symm_malloc)",
                              fn, arg, p, n, symm_g.me);
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_mul(const char *fn, const char *what, size_t a, size_t b, size_t c,
                            size_t *out)
{
    size_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, out))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %s (%zu x %zu x %zu) overflows size_t",
                              fn, what, a, b, c);
    return SYMM_SUCCESS;
}

void symm_coll_shape(symm_team_t team, int *n, int *me)
{
    int tn = symm_team_n_pes(team), tme = symm_team_my_pe(team);
    *n = tn > 0 ? tn : 1;
    *me = tme >= 0 ? tme : 0;
}
