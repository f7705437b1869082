/* coll.c — argument checks and the bulk copy shared by the collectives. */
#include "coll/coll.h"

#include "core/wait.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define SYMM_HAVE_STREAM 1

/* The streaming copy moves 256 bytes a step to a 64-byte aligned destination. On the
 * first step in each 4 KiB page of the source it prefetches the first 512 bytes of the
 * next page: the hardware prefetchers stop at page boundaries, so a cold source would
 * otherwise start every page with a full memory latency (and a page walk). Measured with
 * 2 PEs copying at once on the 2-core Xeon VM (half of each 64 MiB from the peer, as
 * MoE combine does): SSE2 streaming 8.3 GB/s, AVX-512 9.1, AVX-512 with the next-page
 * prefetch 10.6, AVX2 with it 9.8 (prefetching a whole page, or two pages ahead, is
 * slower). */
#define NT_STEP  256
#define NT_PAGE  4096
#define NT_AHEAD 512
#define NT_PREFETCH_NEXT_PAGE(s, end)                                                          \
    do {                                                                                       \
        if (((uintptr_t)(s) & (NT_PAGE - 1)) < NT_STEP && (s) + NT_PAGE + NT_AHEAD <= (end))   \
            for (int k_ = 0; k_ < NT_AHEAD; k_ += 64)                                          \
                _mm_prefetch((const char *)(s) + NT_PAGE + k_, _MM_HINT_T0);                   \
    } while (0)

/* Each copies n / NT_STEP whole steps. */
__attribute__((target("avx512f"))) static void nt_steps_avx512(uint8_t *d, const uint8_t *s,
                                                               size_t n)
{
    const uint8_t *end = s + n;
    for (; n >= NT_STEP; n -= NT_STEP, d += NT_STEP, s += NT_STEP) {
        NT_PREFETCH_NEXT_PAGE(s, end);
        __m512i a = _mm512_loadu_si512(s), b = _mm512_loadu_si512(s + 64);
        __m512i c = _mm512_loadu_si512(s + 128), e = _mm512_loadu_si512(s + 192);
        _mm512_stream_si512((void *)d, a);
        _mm512_stream_si512((void *)(d + 64), b);
        _mm512_stream_si512((void *)(d + 128), c);
        _mm512_stream_si512((void *)(d + 192), e);
    }
}

__attribute__((target("avx2"))) static void nt_steps_avx2(uint8_t *d, const uint8_t *s,
                                                          size_t n)
{
    const uint8_t *end = s + n;
    for (; n >= NT_STEP; n -= NT_STEP, d += NT_STEP, s += NT_STEP) {
        NT_PREFETCH_NEXT_PAGE(s, end);
        for (int h = 0; h < NT_STEP; h += 128) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(s + h));
            __m256i b = _mm256_loadu_si256((const __m256i *)(s + h + 32));
            __m256i c = _mm256_loadu_si256((const __m256i *)(s + h + 64));
            __m256i e = _mm256_loadu_si256((const __m256i *)(s + h + 96));
            _mm256_stream_si256((__m256i *)(d + h), a);
            _mm256_stream_si256((__m256i *)(d + h + 32), b);
            _mm256_stream_si256((__m256i *)(d + h + 64), c);
            _mm256_stream_si256((__m256i *)(d + h + 96), e);
        }
    }
}

static void nt_steps_sse2(uint8_t *d, const uint8_t *s, size_t n)
{
    const uint8_t *end = s + n;
    for (; n >= NT_STEP; n -= NT_STEP, d += NT_STEP, s += NT_STEP) {
        NT_PREFETCH_NEXT_PAGE(s, end);
        for (int h = 0; h < NT_STEP; h += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(s + h));
            __m128i b = _mm_loadu_si128((const __m128i *)(s + h + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(s + h + 32));
            __m128i e = _mm_loadu_si128((const __m128i *)(s + h + 48));
            _mm_stream_si128((__m128i *)(d + h), a);
            _mm_stream_si128((__m128i *)(d + h + 16), b);
            _mm_stream_si128((__m128i *)(d + h + 32), c);
            _mm_stream_si128((__m128i *)(d + h + 48), e);
        }
    }
}

typedef void (*nt_steps_fn_t)(uint8_t *d, const uint8_t *s, size_t n);

/* The widest form this CPU (and OS) runs, chosen once. A valgrind CPU reports no
 * AVX-512, so it gets the AVX2 form. */
static nt_steps_fn_t nt_steps(void)
{
    static nt_steps_fn_t chosen;
    nt_steps_fn_t f = __atomic_load_n(&chosen, __ATOMIC_RELAXED);
    if (f) return f;
    __builtin_cpu_init();
    f = __builtin_cpu_supports("avx512f") ? nt_steps_avx512
        : __builtin_cpu_supports("avx2")  ? nt_steps_avx2
                                          : nt_steps_sse2;
    __atomic_store_n(&chosen, f, __ATOMIC_RELAXED);
    return f;
}
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
        size_t body = n / NT_STEP * NT_STEP;
        nt_steps()(d, s, body);
        memcpy(d + body, s + body, n - body);
        /* streaming stores are weakly ordered: fence before anyone is told */
        _mm_sfence();
        return;
    }
#endif
    (void)nt;
    memcpy(dst, src, n);
}

/* A range in one of the objects this thread checked last passes at once; one not inside
 * the heap keeps its own message; inside it, it must lie in one live object
 * (symm_heap_check: overflow past the object's end, or no object there). */
symm_status_t symm_coll_check_buf(const char *fn, const char *arg, const void *p, size_t n)
{
    if (n == 0 || SYMM_LIKELY(symm_heap_hit(p, n))) return SYMM_SUCCESS;
    if (!p)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s is NULL with %zu bytes", fn, arg,
                              n);
    if (!symm_in_heap(p, n))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s [%p, +%zu bytes) on PE %d is not inside the symmetric "
                              "heap (allocate it with symm_malloc)",
                              fn, arg, p, n, symm_g.me);
    return symm_heap_check(fn, arg, p, n);
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

/* ---------------------------------------------------------------- far members */
/* The first failure of a transfer becomes this member's failure, told to every member in
 * the call's next episode; later transfers of the call are skipped. */
static int far_failed(symm_coll_t *c, symm_status_t st)
{
    if (SYMM_LIKELY(!st)) return 0;
    if (!c->local) c->local = st;
    return 1;
}

void symm_coll_far_get(symm_coll_t *c, void *dst, const void *addr, size_t n, int j)
{
    if (c->local) return;
    far_failed(c, symm_transport_remote()->get(dst, addr, n, c->world[j]));
}

void symm_coll_far_put(symm_coll_t *c, void *addr, const void *src, size_t n, int j)
{
    if (c->local) return;
    far_failed(c, symm_transport_remote()->put(addr, src, n, c->world[j]));
}

void symm_coll_far_get_rows(symm_coll_t *c, void *dst, size_t dst_ld, const void *addr,
                            size_t src_ld, size_t rb, size_t rows, int j)
{
    if (c->local) return;
    far_failed(
        c, symm_transport_remote()->get_rows(dst, dst_ld, addr, src_ld, rb, rows, c->world[j]));
}

void symm_coll_far_put_rows(symm_coll_t *c, void *addr, size_t dst_ld, const void *src,
                            size_t src_ld, size_t rb, size_t rows, int j)
{
    if (c->local) return;
    far_failed(
        c, symm_transport_remote()->put_rows(addr, dst_ld, src, src_ld, rb, rows, c->world[j]));
}

int symm_coll_met_poison(const symm_coll_t *c)
{
    for (int j = 0; j < c->n; j++)
        if (__atomic_load_n(&c->dup->mine[j].flag, __ATOMIC_ACQUIRE) == SYMM_FLAG_POISON)
            return 1;
    return 0;
}

/* The channel of messages to member j: this duplicate's block in j's team region, in
 * slots. */
static uint64_t far_chan(const symm_coll_t *c, int j)
{
    return (c->dup->chunk->member_off[j] + c->dup->block) / sizeof(symm_sync_slot_t);
}

int symm_coll_far_msgs(const symm_coll_t *c, int j)
{
    const symm_transport_ops_t *t = symm_transport_remote();
    return t && t->msg_send && far_chan(c, j) <= t->msg_chans();
}

void symm_coll_far_send(symm_coll_t *c, int j, const void *buf, size_t n)
{
    if (c->local) return;
    far_failed(c, symm_transport_remote()->msg_send(buf, n, c->world[j], far_chan(c, j)));
}

symm_status_t symm_coll_far_recv(symm_coll_t *c, int j, const uint64_t want[2], void *buf,
                                 size_t n)
{
    const symm_transport_ops_t *t = symm_transport_remote();
    uint64_t chan = far_chan(c, c->me);
    symm_wait_t w = SYMM_WAIT_INIT;
    for (;;) {
        size_t got = 0;
        symm_status_t st = SYMM_SUCCESS;
        if (t->msg_recv(buf, n, &got, c->world[j], chan, &st)) {
            uint64_t head[2];
            if (st || got != n || n < sizeof head) continue; /* an earlier call's */
            memcpy(head, buf, sizeof head);
            if (head[0] == want[0] && head[1] == want[1]) return SYMM_SUCCESS;
            continue;
        }
        if (SYMM_UNLIKELY(st)) {
            far_failed(c, st);
            return st;
        }
        if (SYMM_UNLIKELY(symm_coll_met_poison(c))) {
            st = symm_coll_sync(c);
            far_failed(c, st ? st : SYMM_ERR_TEAM_BROKEN);
            return c->local;
        }
        if (SYMM_UNLIKELY(st = symm_wait_pause(&w))) {
            st = symm_coll_wait_fail(c, j, st, symm_wait_elapsed(&w));
            far_failed(c, st);
            return st;
        }
    }
}
