/* test_rma.c — put/get (blocking, non-blocking, typed through every symm_put_<type>
 * wrapper) from every PE to every PE, random payloads, sizes 0..1M+3, unaligned offsets;
 * guard bytes around every target range must stay untouched; fence/quiet ordering. */
#include "common/test_util.h"

#define MAXN  ((size_t)(1u << 20) + 3)
#define GUARD 16
#define SLOT  (MAXN + 2 * GUARD + 64)

static int me, npes;
static uint8_t *rnd; /* the same random bytes on every PE */
static size_t rnd_len;

/* The payload PE src sends to PE dst in a given round: a window of the shared random
 * buffer, so every PE can recompute what every other sent. */
static const uint8_t *payload(int src, int dst, int round)
{
    size_t off = ((size_t)src * 131 + (size_t)dst * 17 + (size_t)round * 7) % (rnd_len - MAXN);
    return rnd + off;
}

static const size_t sizes[] = {0, 1, 7, 63, 64, 65, 4095, MAXN};
static const size_t offsets[] = {0, 1, 3, 8};
enum { NSIZES = sizeof sizes / sizeof sizes[0], NOFFS = sizeof offsets / sizeof offsets[0] };

/* dst: npes slots of SLOT bytes; slot s receives from PE s. */
static void put_round(uint8_t *dst, int round, int nbi)
{
    size_t n = sizes[round % NSIZES], o = offsets[(round / NSIZES) % NOFFS];
    if (n == MAXN && o > 1) return;      /* the big size at two offsets is enough */
    size_t span = GUARD + o + n + GUARD; /* what a put may touch, guards included */
    for (int s = 0; s < npes; s++)
        memset(dst + (size_t)s * SLOT, 0xEE, span);
    CHECK_OK(symm_barrier_all());
    for (int k = 0; k < npes; k++) {
        int t = (me + k) % npes;
        uint8_t *d = dst + (size_t)me * SLOT + GUARD + o;
        if (nbi)
            CHECK_OK(symm_put_nbi(d, payload(me, t, round), n, t));
        else
            CHECK_OK(symm_put(d, payload(me, t, round), n, t));
    }
    if (nbi) CHECK_OK(symm_quiet());
    CHECK_OK(symm_barrier_all());
    for (int s = 0; s < npes; s++) {
        uint8_t *slot = dst + (size_t)s * SLOT;
        CHECK_ALL_BYTES(slot, 0xEE, GUARD + o, "guard before put from PE %d (n=%zu off=%zu)", s,
                        n, o);
        CHECK_BYTES(slot + GUARD + o, payload(s, me, round), n,
                    "put%s from PE %d, n=%zu off=%zu", nbi ? "_nbi" : "", s, n, o);
        CHECK_ALL_BYTES(slot + GUARD + o + n, 0xEE, GUARD,
                        "guard after put from PE %d (n=%zu off=%zu)", s, n, o);
    }
    CHECK_OK(symm_barrier_all());
}

static void get_round(uint8_t *src, int round, int nbi)
{
    size_t n = sizes[round % NSIZES], o = offsets[(round / NSIZES) % NOFFS];
    if (n == MAXN && o > 1) return;
    /* my copy holds, at slot 0, what PE me "offers" to each reader: payload(me, reader) is
     * too many windows, so the reader r reads window payload(me, 0, round) at offset o */
    memcpy(src + GUARD + o, payload(me, 0, round), n);
    CHECK_OK(symm_barrier_all());
    uint8_t *buf = malloc(n + 2 * GUARD + 8);
    for (int k = 0; k < npes; k++) {
        int t = (me + npes - k) % npes;
        memset(buf, 0xCC, n + 2 * GUARD + 8);
        uint8_t *d = buf + GUARD + (size_t)(k & 7); /* unaligned local side too */
        if (nbi) {
            CHECK_OK(symm_get_nbi(d, src + GUARD + o, n, t));
            CHECK_OK(symm_quiet());
        } else {
            CHECK_OK(symm_get(d, src + GUARD + o, n, t));
        }
        CHECK_ALL_BYTES(buf, 0xCC, GUARD + (size_t)(k & 7), "get guard before");
        CHECK_BYTES(d, payload(t, 0, round), n, "get%s from PE %d, n=%zu off=%zu",
                    nbi ? "_nbi" : "", t, n, o);
        CHECK_ALL_BYTES(d + n, 0xCC, GUARD + 8 - (size_t)(k & 7), "get guard after");
    }
    free(buf);
    CHECK_OK(symm_barrier_all());
}

/* Typed puts and gets through the inline wrappers, for every type. */
static void typed_round(uint8_t *dst, int round)
{
    size_t counts[] = {0, 1, 3, 17, 1000};
    size_t count = counts[round % 5];
#define TYPED_(e, name, ctype)                                                                 \
    {                                                                                          \
        size_t es = sizeof(ctype), bytes = count * es;                                         \
        CHECK_TRUE(symm_type_size(e) == es, "type size of %s", #name);                         \
        memset(dst, 0xEE, (size_t)npes * 8192);                                                \
        CHECK_OK(symm_barrier_all());                                                          \
        for (int k = 0; k < npes; k++) {                                                       \
            int t = (me + k) % npes;                                                           \
            ctype *d = (ctype *)(dst + (size_t)me * 8192 + 64);                                \
            ctype *s = malloc(bytes + es);                                                     \
            memcpy(s, payload(me, t, round + (int)e), bytes);                                  \
            CHECK_OK(symm_put_##name(d, s, count, t));                                         \
            free(s);                                                                           \
        }                                                                                      \
        CHECK_OK(symm_barrier_all());                                                          \
        for (int s = 0; s < npes; s++) {                                                       \
            uint8_t *slot = dst + (size_t)s * 8192;                                            \
            CHECK_ALL_BYTES(slot, 0xEE, 64, "typed %s guard", #name);                          \
            CHECK_BYTES(slot + 64, payload(s, me, round + (int)e), bytes,                      \
                        "symm_put_%s of %zu from PE %d", #name, count, s);                     \
            CHECK_ALL_BYTES(slot + 64 + bytes, 0xEE, 64, "typed %s guard after", #name);       \
        }                                                                                      \
        /* get it back from each PE: its slot for me holds my payload to it */                 \
        for (int t = 0; t < npes; t++) {                                                       \
            ctype *g = malloc(bytes + es);                                                     \
            CHECK_OK(symm_get_##name(g, (ctype *)(dst + (size_t)me * 8192 + 64), count, t));   \
            CHECK_BYTES(g, payload(me, t, round + (int)e), bytes, "symm_get_%s from PE %d",    \
                        #name, t);                                                             \
            free(g);                                                                           \
        }                                                                                      \
        CHECK_OK(symm_barrier_all());                                                          \
    }
    SYMM_FOREACH_TYPE(TYPED_)
#undef TYPED_
    /* the generic typed calls with each enum value */
    for (int ty = 0; ty < SYMM_TYPE_COUNT; ty++) {
        size_t es = symm_type_size((symm_type_t)ty);
        int t = (me + 1) % npes;
        CHECK_OK(symm_barrier_all());
        CHECK_OK(symm_put_typed(dst + (size_t)me * 8192 + 64 + es, payload(me, t, ty), 5,
                                (symm_type_t)ty, t));
        CHECK_OK(symm_barrier_all());
        int s = (me + npes - 1) % npes;
        CHECK_BYTES(dst + (size_t)s * 8192 + 64 + es, payload(s, me, ty), 5 * es,
                    "symm_put_typed(%s)", symm_type_name((symm_type_t)ty));
        uint8_t g[64];
        CHECK_OK(symm_get_typed(g, dst + (size_t)me * 8192 + 64 + es, 5, (symm_type_t)ty, t));
        CHECK_BYTES(g, payload(me, t, ty), 5 * es, "symm_get_typed(%s)",
                    symm_type_name((symm_type_t)ty));
    }
    CHECK_OK(symm_barrier_all());
}

/* Fence: data then flag to the right neighbour; whoever sees the flag sees the data. */
static void fence_round(uint8_t *data, uint64_t *flag, int round)
{
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    size_t n = 4096 + (size_t)round;
    CHECK_OK(symm_put(data, payload(me, right, round), n, right));
    CHECK_OK(symm_fence());
    uint64_t v = (uint64_t)round + 1;
    CHECK_OK(symm_put(flag, &v, sizeof v, right));
    CHECK_OK(symm_wait_until_uint64(flag, SYMM_CMP_EQ, (uint64_t)round + 1));
    CHECK_BYTES(data, payload(left, me, round), n, "data before the fenced flag, round %d",
                round);
    CHECK_OK(symm_barrier_all());
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    rnd_len = 2 * MAXN + 4096;
    rnd = malloc(rnd_len);
    test_fill_random(&r, rnd, rnd_len);

    uint8_t *dst = symm_malloc((size_t)npes * SLOT);
    CHECK_TRUE(dst != NULL, "symm_malloc(%zu)", (size_t)npes * SLOT);
    int rounds = NSIZES * NOFFS;
    for (int round = 0; round < rounds; round++) {
        put_round(dst, round, round & 1);
        put_round(dst, round, !(round & 1));
    }
    for (int round = 0; round < rounds; round++)
        get_round(dst, round, round & 1);
    for (int round = 0; round < 5; round++)
        typed_round(dst, round);
    uint64_t *flag = symm_calloc(1, sizeof(uint64_t));
    CHECK_TRUE(flag != NULL, "calloc");
    for (int round = 0; round < 50; round++)
        fence_round(dst, flag, round);
    CHECK_OK(symm_free(flag));
    CHECK_OK(symm_free(dst));
    free(rnd);
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_rma: OK (%d PEs)\n", npes);
    return 0;
}
