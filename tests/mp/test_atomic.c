/* test_atomic.c — every atomic operation on 32 and 64 bits: a serial phase where one PE
 * at a time runs a random sequence of every op against a model of the target word
 * (fetched values and final value checked exactly), and concurrent phases where all PEs
 * hit one word: fetch-add totals, distinct fetched values, one cswap winner, and/or/xor
 * with random masks. */
#include "common/test_util.h"

static int me, npes;

#define FETCHING(op)                                                                           \
    ((op) == SYMM_AMO_FETCH || (op) == SYMM_AMO_SWAP || (op) == SYMM_AMO_CSWAP ||              \
     (op) == SYMM_AMO_FETCH_ADD || (op) == SYMM_AMO_FETCH_AND || (op) == SYMM_AMO_FETCH_OR ||  \
     (op) == SYMM_AMO_FETCH_XOR)

/* The model: the new value of *dest and what the op fetches. */
#define MODEL_(T)                                                                              \
    static T model_##T(symm_amo_t op, T *cur, T value, T cond)                                 \
    {                                                                                          \
        T old = *cur;                                                                          \
        switch (op) {                                                                          \
        case SYMM_AMO_FETCH:                                                                   \
            break;                                                                             \
        case SYMM_AMO_SET:                                                                     \
        case SYMM_AMO_SWAP:                                                                    \
            *cur = value;                                                                      \
            break;                                                                             \
        case SYMM_AMO_CSWAP:                                                                   \
            if (old == cond) *cur = value;                                                     \
            break;                                                                             \
        case SYMM_AMO_ADD:                                                                     \
        case SYMM_AMO_FETCH_ADD:                                                               \
            *cur = (T)(old + value);                                                           \
            break;                                                                             \
        case SYMM_AMO_AND:                                                                     \
        case SYMM_AMO_FETCH_AND:                                                               \
            *cur = old & value;                                                                \
            break;                                                                             \
        case SYMM_AMO_OR:                                                                      \
        case SYMM_AMO_FETCH_OR:                                                                \
            *cur = old | value;                                                                \
            break;                                                                             \
        case SYMM_AMO_XOR:                                                                     \
        case SYMM_AMO_FETCH_XOR:                                                               \
            *cur = old ^ value;                                                                \
            break;                                                                             \
        default:                                                                               \
            TEST_FAIL("bad op %d", (int)op);                                                   \
        }                                                                                      \
        return old;                                                                            \
    }
MODEL_(uint32_t)
MODEL_(uint64_t)

static void serial_phase(uint32_t *w32, uint64_t *w64, test_rng_t *r)
{
    for (int actor = 0; actor < npes; actor++) {
        CHECK_OK(symm_barrier_all());
        if (me != actor) continue;
        for (int k = 0; k < npes; k++) {
            int t = (me + k) % npes;
            uint32_t m32;
            uint64_t m64;
            CHECK_OK(symm_get(&m32, w32, 4, t));
            CHECK_OK(symm_get(&m64, w64, 8, t));
            for (int i = 0; i < 400; i++) {
                symm_amo_t op = (symm_amo_t)(i < 2 * SYMM_AMO_COUNT
                                                 ? i % SYMM_AMO_COUNT
                                                 : (int)test_rng_below(r, SYMM_AMO_COUNT));
                uint64_t v = test_rng_next(r),
                         c = test_rng_below(r, 3) ? m64 : test_rng_next(r);
                uint32_t c32 = test_rng_below(r, 3) ? m32 : (uint32_t)c;
                uint32_t f32 = 0xdeadbeefu, want32 = model_uint32_t(op, &m32, (uint32_t)v, c32);
                CHECK_OK(symm_atomic32(op, w32, (uint32_t)v, c32, t,
                                       FETCHING(op) || (i & 1) ? &f32 : NULL));
                if (FETCHING(op))
                    CHECK_TRUE(f32 == want32,
                               "atomic32 op %d on PE %d fetched 0x%x, model 0x%x", (int)op, t,
                               f32, want32);
                else
                    CHECK_TRUE(f32 == 0xdeadbeefu, "non-fetching atomic32 op %d wrote fetched",
                               (int)op);
                uint64_t f64 = 0xdeadbeefull, want64 = model_uint64_t(op, &m64, v, c);
                CHECK_OK(
                    symm_atomic64(op, w64, v, c, t, FETCHING(op) || (i & 1) ? &f64 : NULL));
                if (FETCHING(op))
                    CHECK_TRUE(f64 == want64,
                               "atomic64 op %d on PE %d fetched 0x%llx, model 0x%llx", (int)op,
                               t, (unsigned long long)f64, (unsigned long long)want64);
                else
                    CHECK_TRUE(f64 == 0xdeadbeefull, "non-fetching atomic64 wrote fetched");
                if (i % 50 == 0) { /* the word itself agrees with the model */
                    uint32_t g32;
                    uint64_t g64;
                    CHECK_OK(symm_get(&g32, w32, 4, t));
                    CHECK_OK(symm_get(&g64, w64, 8, t));
                    CHECK_EQ_U64(g32, m32);
                    CHECK_EQ_U64(g64, m64);
                }
            }
            uint32_t g32;
            uint64_t g64;
            CHECK_OK(symm_get(&g32, w32, 4, t));
            CHECK_OK(symm_get(&g64, w64, 8, t));
            CHECK_EQ_U64(g32, m32);
            CHECK_EQ_U64(g64, m64);
        }
    }
    CHECK_OK(symm_barrier_all());
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void concurrent_phase(uint32_t *w32, uint64_t *w64, uint64_t *fetched, uint64_t seed)
{
    enum { K = 500 };
    for (int t = 0; t < npes; t++) {
        /* fetch-add: start near the 32-bit wrap; every PE adds (me+1) K times */
        uint32_t start32 = 0xffffff00u - (uint32_t)t;
        uint64_t start64 = 0xfffffffffffff000ull + (uint64_t)t;
        if (me == t) {
            *w32 = start32;
            *w64 = start64;
        }
        CHECK_OK(symm_barrier_all());
        for (int i = 0; i < K; i++) {
            uint32_t f32;
            uint64_t f64;
            CHECK_OK(symm_atomic32(SYMM_AMO_FETCH_ADD, w32, (uint32_t)me + 1, 0, t, &f32));
            CHECK_OK(symm_atomic64(SYMM_AMO_FETCH_ADD, w64, (uint64_t)me + 1, 0, t, &f64));
            fetched[i] = f64 - start64;
            if (i & 1) CHECK_OK(symm_atomic64(SYMM_AMO_ADD, w64, 0, 0, t, NULL));
        }
        CHECK_OK(symm_barrier_all());
        uint64_t total = (uint64_t)K * (uint64_t)npes * (uint64_t)(npes + 1) / 2;
        uint32_t g32;
        uint64_t g64;
        CHECK_OK(symm_get(&g32, w32, 4, t));
        CHECK_OK(symm_get(&g64, w64, 8, t));
        CHECK_EQ_U64(g32, (uint32_t)(start32 + (uint32_t)total));
        CHECK_EQ_U64(g64, start64 + total);
        /* my fetched values are distinct, increasing, and below the total */
        qsort(fetched, K, sizeof *fetched, cmp_u64);
        for (int i = 0; i < K; i++) {
            CHECK_TRUE(fetched[i] < total, "fetched offset %llu >= total %llu",
                       (unsigned long long)fetched[i], (unsigned long long)total);
            CHECK_TRUE(i == 0 || fetched[i] >= fetched[i - 1] + (uint64_t)me + 1,
                       "fetched values %llu and %llu overlap",
                       (unsigned long long)fetched[i - 1], (unsigned long long)fetched[i]);
        }
        CHECK_OK(symm_barrier_all());

        /* cswap race: exactly one PE wins each of 20 rounds */
        for (int round = 0; round < 20; round++) {
            if (me == t) { /* by atomics: across groups MPI's atomics see only their own */
                CHECK_OK(symm_atomic32(SYMM_AMO_SET, w32, 0, 0, t, NULL));
                CHECK_OK(symm_atomic64(SYMM_AMO_SET, w64, 7, 0, t, NULL));
            }
            CHECK_OK(symm_barrier_all());
            uint32_t f32 = 1;
            uint64_t f64 = 0;
            CHECK_OK(symm_atomic32(SYMM_AMO_CSWAP, w32, (uint32_t)me + 100, 0, t, &f32));
            CHECK_OK(symm_atomic64(SYMM_AMO_CSWAP, w64, (uint64_t)me << 40, 7, t, &f64));
            uint32_t won = f32 == 0;
            CHECK_TRUE(won || f32 == 1 || (f32 >= 100 && f32 < 100 + (uint32_t)npes),
                       "cswap fetched %u", f32);
            CHECK_OK(symm_barrier_all());
            uint32_t g32;
            uint64_t g64;
            CHECK_OK(symm_get(&g32, w32, 4, t));
            CHECK_OK(symm_get(&g64, w64, 8, t));
            CHECK_TRUE((g32 == (uint32_t)me + 100) == won, "cswap32 winner: word %u, I %s", g32,
                       won ? "won" : "lost");
            CHECK_TRUE((g64 == (uint64_t)me << 40) == (f64 == 7), "cswap64 winner");
            CHECK_OK(symm_barrier_all());
        }

        /* and / or / xor with random masks from every PE at once */
        test_rng_t r;
        test_rng_seed(&r, seed + (uint64_t)t);
        uint64_t init = test_rng_next(&r), m_and = ~0ull, m_or = 0, m_xor = 0, mine[3] = {0};
        for (int p = 0; p < npes; p++) {
            uint64_t a =
                test_rng_next(&r) | test_rng_next(&r) | test_rng_next(&r); /* mostly 1s */
            uint64_t o = test_rng_next(&r) & test_rng_next(&r) & test_rng_next(&r);
            uint64_t x = test_rng_next(&r);
            m_and &= a;
            m_or |= o;
            m_xor ^= x;
            if (p == me) {
                mine[0] = a;
                mine[1] = o;
                mine[2] = x;
            }
        }
        static const symm_amo_t ops[3][2] = {{SYMM_AMO_AND, SYMM_AMO_FETCH_AND},
                                             {SYMM_AMO_OR, SYMM_AMO_FETCH_OR},
                                             {SYMM_AMO_XOR, SYMM_AMO_FETCH_XOR}};
        for (int k = 0; k < 3; k++) {
            for (int fetch = 0; fetch < 2; fetch++) {
                if (me == t) {
                    *w64 = init;
                    *w32 = (uint32_t)(init >> 16);
                }
                CHECK_OK(symm_barrier_all());
                uint64_t f64;
                uint32_t f32;
                CHECK_OK(symm_atomic64(ops[k][fetch], w64, mine[k], 0, t, fetch ? &f64 : NULL));
                CHECK_OK(symm_atomic32(ops[k][fetch], w32, (uint32_t)(mine[k] >> 3), 0, t,
                                       fetch ? &f32 : NULL));
                CHECK_OK(symm_barrier_all());
                uint64_t want = k == 0 ? init & m_and : k == 1 ? init | m_or : init ^ m_xor;
                uint32_t i32 = (uint32_t)(init >> 16);
                uint32_t want32 = k == 0   ? i32 & (uint32_t)(m_and >> 3)
                                  : k == 1 ? i32 | (uint32_t)(m_or >> 3)
                                           : i32 ^ (uint32_t)(m_xor >> 3);
                uint64_t g64;
                uint32_t g32;
                CHECK_OK(symm_get(&g64, w64, 8, t));
                CHECK_OK(symm_get(&g32, w32, 4, t));
                CHECK_EQ_U64(g64, want);
                CHECK_EQ_U64(g32, want32);
                CHECK_OK(symm_barrier_all());
            }
        }
    }
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_rng_t r;
    test_rng_seed(&r, test_seed() + (uint64_t)me * 1000003);
    uint64_t *words = symm_malloc(256);
    uint64_t *fetched = malloc(1000 * sizeof *fetched);
    CHECK_TRUE(words != NULL, "malloc");
    uint32_t *w32 = (uint32_t *)(words + 1) + 1; /* 4-aligned, not 8-aligned */
    uint64_t *w64 = words + 4;
    *w32 = (uint32_t)test_rng_next(&r);
    *w64 = test_rng_next(&r);
    serial_phase(w32, w64, &r);
    concurrent_phase(w32, w64, fetched, test_seed());
    free(fetched);
    CHECK_OK(symm_free(words));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_atomic: OK (%d PEs)\n", npes);
    return 0;
}
