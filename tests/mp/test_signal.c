/* test_signal.c — put_signal (SET and ADD, blocking and nbi, world and team forms),
 * signal_wait_until under all six comparisons with a real wait (the sender is the left
 * neighbour), signal_fetch, and wait_until / test on int32, int64, uint32, uint64 with
 * signed/unsigned edge values; test_* checked exhaustively against a serial model. */
#include "common/test_util.h"

static int me, npes, left, right;

static int cmp_model(symm_cmp_t c, long double a, long double b)
{
    switch (c) {
    case SYMM_CMP_EQ:
        return a == b;
    case SYMM_CMP_NE:
        return a != b;
    case SYMM_CMP_GT:
        return a > b;
    case SYMM_CMP_GE:
        return a >= b;
    case SYMM_CMP_LT:
        return a < b;
    case SYMM_CMP_LE:
        return a <= b;
    }
    return -1;
}

/* Each round: the receiver's signal starts at `init`; the left neighbour puts data and
 * updates the signal (op, value); the receiver waits with (cmp, target), which holds
 * only after the update, then checks data and signal. */
typedef struct {
    uint64_t init;
    symm_sigop_t op;
    uint64_t value;
    symm_cmp_t cmp;
    uint64_t target;
    uint64_t final;
} sig_case_t;

static const sig_case_t cases[] = {
    {0, SYMM_SIGNAL_SET, 42, SYMM_CMP_EQ, 42, 42},
    {5, SYMM_SIGNAL_SET, 6, SYMM_CMP_NE, 5, 6},
    {10, SYMM_SIGNAL_ADD, 1, SYMM_CMP_GT, 10, 11},
    {10, SYMM_SIGNAL_ADD, 5, SYMM_CMP_GE, 15, 15},
    {1000, SYMM_SIGNAL_SET, 3, SYMM_CMP_LT, 4, 3},
    {1000, SYMM_SIGNAL_SET, 4, SYMM_CMP_LE, 4, 4},
    {0xfffffffffffffff0ull, SYMM_SIGNAL_ADD, 0x20, SYMM_CMP_LT, 0x100, 0x10}, /* wraps */
    {7, SYMM_SIGNAL_SET, UINT64_MAX, SYMM_CMP_GT, 0x8000000000000000ull, UINT64_MAX},
};

static void signal_rounds(uint8_t *data, uint64_t *sig, symm_team_t team)
{
    size_t ncases = sizeof cases / sizeof cases[0];
    for (int round = 0; round < 3 * (int)ncases; round++) {
        const sig_case_t *c = &cases[round % ncases];
        int mode = round / (int)ncases; /* 0 put_signal, 1 nbi + quiet, 2 team form */
        size_t n = (size_t)(round * 997) % 5000;
        *sig = c->init;
        memset(data, 0, 5000);
        CHECK_OK(symm_barrier_all());
        uint8_t *payload = malloc(n + 1);
        test_fill_pattern(payload, n, (uint64_t)(me * 100 + round));
        if (mode == 0)
            CHECK_OK(symm_put_signal(data, payload, n, sig, c->value, c->op, right));
        else if (mode == 1) {
            CHECK_OK(symm_put_signal_nbi(data, payload, n, sig, c->value, c->op, right));
            CHECK_OK(symm_quiet());
        } else {
            int tr = symm_team_translate_pe(SYMM_TEAM_WORLD, right, team);
            CHECK_OK(symm_team_put_signal(team, data, payload, n, sig, c->value, c->op, tr));
        }
        free(payload);
        uint64_t got = 0;
        CHECK_OK(symm_signal_wait_until(sig, c->cmp, c->target, &got));
        CHECK_TRUE(got == c->final, "round %d: signal %llu, expected %llu", round,
                   (unsigned long long)got, (unsigned long long)c->final);
        CHECK_TRUE(test_find_pattern_mismatch(data, n, (uint64_t)(left * 100 + round)) ==
                       (size_t)-1,
                   "round %d: data not visible when the signal was", round);
        uint64_t f = 0;
        CHECK_OK(symm_signal_fetch(sig, &f));
        CHECK_EQ_U64(f, c->final);
        CHECK_OK(symm_signal_wait_until(sig, c->cmp, c->target, NULL));
        CHECK_OK(symm_barrier_all());
    }
    /* ADD from every PE to PE 0 at once: the signal counts them all */
    *sig = 0;
    CHECK_OK(symm_barrier_all());
    for (int i = 0; i < 100; i++)
        CHECK_OK(
            symm_put_signal(data + 8 * me, &i, 4, sig, (uint64_t)me + 1, SYMM_SIGNAL_ADD, 0));
    if (me == 0) {
        uint64_t total = 100ull * (uint64_t)npes * (uint64_t)(npes + 1) / 2, got;
        CHECK_OK(symm_signal_wait_until(sig, SYMM_CMP_EQ, total, &got));
        CHECK_EQ_U64(got, total);
        for (int p = 0; p < npes; p++)
            CHECK_EQ_I64(*(int *)(data + 8 * p), 99);
    }
    CHECK_OK(symm_barrier_all());
}

/* wait_until on each integer type: the left neighbour stores a value (by put, or by an
 * atomic for the 32/64-bit unsigned ones) that makes the comparison true. */
static void wait_rounds(uint8_t *buf)
{
    int32_t *i32 = (int32_t *)buf;
    int64_t *i64 = (int64_t *)(buf + 64);
    uint32_t *u32 = (uint32_t *)(buf + 128);
    uint64_t *u64 = (uint64_t *)(buf + 192);
    for (int round = 0; round < 6; round++) {
        symm_cmp_t c = (symm_cmp_t)round;
        /* initial and stored values such that only the stored one satisfies (c, target) */
        static const int64_t s_init[6] = {0, 5, -10, -10, 10, 10};
        static const int64_t s_store[6] = {-7, -5, 3, -3, -1, -3};
        static const int64_t s_target[6] = {-7, 5, 0, -3, 0, -3};
        static const uint64_t u_init[6] = {0, 5, 1, 1, UINT64_MAX, UINT64_MAX};
        static const uint64_t u_store[6] = {0x80000001u, 6, 0x80000000u,
                                            0x80000000u, 1, 0x7fffffffu};
        static const uint64_t u_target[6] = {0x80000001u, 5, 0x7fffffffu,
                                             0x80000000u, 2, 0x7fffffffu};
        *i32 = (int32_t)s_init[round];
        *i64 = s_init[round] * 1000000000000ll;
        *u32 = (uint32_t)(u_init[round] & 0xffffffffu);
        *u64 = u_init[round] == UINT64_MAX ? UINT64_MAX : u_init[round] << 32;
        int res = -1;
        CHECK_OK(symm_test_int32(i32, c, (int32_t)s_target[round], &res));
        CHECK_TRUE(res == 0, "test_int32 true before the store (cmp %d)", round);
        CHECK_OK(symm_test_uint64(u64, c, u_target[round] << 32, &res));
        CHECK_TRUE(res == 0, "test_uint64 true before the store (cmp %d)", round);
        CHECK_OK(symm_barrier_all());
        int32_t v32 = (int32_t)s_store[round];
        int64_t v64 = s_store[round] * 1000000000000ll;
        CHECK_OK(symm_put_int32(i32, &v32, 1, right));
        CHECK_OK(symm_put_int64(i64, &v64, 1, right));
        CHECK_OK(symm_atomic32(SYMM_AMO_SET, u32, (uint32_t)u_store[round], 0, right, NULL));
        CHECK_OK(
            symm_atomic64(SYMM_AMO_SWAP, u64, u_store[round] << 32, 0, right, &(uint64_t){0}));
        CHECK_OK(symm_wait_until_int32(i32, c, (int32_t)s_target[round]));
        CHECK_OK(symm_wait_until_int64(i64, c, s_target[round] * 1000000000000ll));
        CHECK_OK(symm_wait_until_uint32(u32, c, (uint32_t)u_target[round]));
        CHECK_OK(symm_wait_until_uint64(u64, c, u_target[round] << 32));
        CHECK_EQ_I64(*i32, v32);
        CHECK_EQ_I64(*i64, v64);
        CHECK_EQ_U64(*u32, (uint32_t)u_store[round]);
        CHECK_EQ_U64(*u64, u_store[round] << 32);
        CHECK_OK(symm_test_int64(i64, c, s_target[round] * 1000000000000ll, &res));
        CHECK_TRUE(res == 1, "test_int64 after the store (cmp %d)", round);
        CHECK_OK(symm_test_uint32(u32, c, (uint32_t)u_target[round], &res));
        CHECK_TRUE(res == 1, "test_uint32 after the store (cmp %d)", round);
        CHECK_OK(symm_barrier_all());
    }
    /* test_* against the model over a grid of values, all four types */
    static const int64_t sv[] = {INT32_MIN, -2, -1, 0, 1, 2, INT32_MAX};
    static const uint64_t uv[] = {0, 1, 2, 0x7fffffffu, 0x80000000u, 0xffffffffu};
    int n = 0;
    for (int c = 0; c < 6; c++) {
        for (size_t a = 0; a < 7; a++)
            for (size_t b = 0; b < 7; b++) {
                int res = -1;
                *i32 = (int32_t)sv[a];
                CHECK_OK(symm_test_int32(i32, (symm_cmp_t)c, (int32_t)sv[b], &res));
                CHECK_TRUE(res == cmp_model((symm_cmp_t)c, sv[a], sv[b]),
                           "test_int32 %lld %d %lld", (long long)sv[a], c, (long long)sv[b]);
                *i64 = sv[a] * 4294967296ll;
                CHECK_OK(symm_test_int64(i64, (symm_cmp_t)c, sv[b] * 4294967296ll, &res));
                CHECK_TRUE(res == cmp_model((symm_cmp_t)c, sv[a], sv[b]), "test_int64");
                n += 2;
            }
        for (size_t a = 0; a < 6; a++)
            for (size_t b = 0; b < 6; b++) {
                int res = -1;
                *u32 = (uint32_t)uv[a];
                CHECK_OK(symm_test_uint32(u32, (symm_cmp_t)c, (uint32_t)uv[b], &res));
                CHECK_TRUE(res == cmp_model((symm_cmp_t)c, uv[a], uv[b]),
                           "test_uint32 %llu %d %llu", (unsigned long long)uv[a], c,
                           (unsigned long long)uv[b]);
                *u64 = uv[a] << 32 | uv[a];
                CHECK_OK(symm_test_uint64(u64, (symm_cmp_t)c, uv[b] << 32 | uv[b], &res));
                CHECK_TRUE(res == cmp_model((symm_cmp_t)c, uv[a], uv[b]), "test_uint64");
                /* an already-true condition returns at once */
                if (res)
                    CHECK_OK(symm_wait_until_uint64(u64, (symm_cmp_t)c, uv[b] << 32 | uv[b]));
                n += 2;
            }
    }
    CHECK_TRUE(n == 6 * (49 + 36) * 2, "%d checks", n);
    CHECK_OK(symm_barrier_all());
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    left = (me + npes - 1) % npes;
    right = (me + 1) % npes;
    uint8_t *data = symm_malloc(8192);
    uint64_t *sig = symm_malloc(64);
    uint8_t *buf = symm_malloc(256);
    CHECK_TRUE(data && sig && buf, "malloc");
    /* the team form runs on a team that numbers the world backwards */
    symm_team_t rev;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &rev));
    signal_rounds(data, sig, rev);
    wait_rounds(buf);
    CHECK_OK(symm_team_destroy(rev));
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_free(sig));
    CHECK_OK(symm_free(data));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_signal: OK (%d PEs)\n", npes);
    return 0;
}
