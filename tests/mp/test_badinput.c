/* test_badinput.c — every bad input of the RMA, atomic, signal and wait calls returns
 * its specific status and writes nothing: not the target (checked by every PE after a
 * barrier), not the local buffer, not the fetched/result output. */
#include "common/test_util.h"

static int me, npes;
static uint8_t *sym; /* 4096 symmetric bytes, pattern-filled */
static uint8_t local[4096];

#define PAT(pe) (0xbad0000ull + (uint64_t)(pe))

static void refill(void)
{
    test_fill_pattern(sym, 4096, PAT(me));
    test_fill_pattern(local, sizeof local, 77);
    CHECK_OK(symm_barrier_all());
}

/* Nothing changed anywhere: my symmetric copy and my local buffer. */
static void check_untouched(const char *what)
{
    CHECK_OK(symm_barrier_all());
    size_t i = test_find_pattern_mismatch(sym, 4096, PAT(me));
    CHECK_TRUE(i == (size_t)-1, "%s changed symmetric byte %zu", what, i);
    i = test_find_pattern_mismatch(local, sizeof local, 77);
    CHECK_TRUE(i == (size_t)-1, "%s changed local byte %zu", what, i);
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    symm_info_t info;
    CHECK_OK(symm_get_info(&info));
    sym = symm_malloc(4096);
    CHECK_TRUE(sym != NULL, "malloc");
    int t = (me + 1) % npes;
    int stackvar[16] = {0};
    uint8_t *other = npes > 1 ? symm_ptr(sym, t) : NULL; /* a peer's mapping: not symmetric */
    refill();

    /* ---- put / get */
    CHECK_STATUS(symm_put(NULL, local, 8, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put(stackvar, local, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put(local, local + 8, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    if (other) CHECK_STATUS(symm_put(other, local, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put(sym, local, 8, -1), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_put(sym, local, 8, npes), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_put(sym, local, 8, 1 << 30), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_put(sym, local, SIZE_MAX, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put(sym + 64, local, info.heap_size, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put(sym + 64, local, SIZE_MAX - 32, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put(sym, NULL, 8, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_nbi(sym, NULL, 8, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_nbi(stackvar, local, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_TRUE(strstr(symm_last_error(), "symm_put") != NULL, "message names the call: %s",
               symm_last_error());
    CHECK_OK(symm_put(sym, NULL, 0, t)); /* nothing to copy: fine */
    CHECK_OK(symm_put(sym + 4096, local, 0, t));
    check_untouched("bad put");
    CHECK_STATUS(symm_get(local, NULL, 8, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_get(local, stackvar, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_get(local, sym, 8, -5), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_get(local, sym, 8, npes), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_get(local, sym, SIZE_MAX, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_get(NULL, sym, 8, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_get_nbi(local, sym, SIZE_MAX / 2, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_get_nbi(NULL, sym, 1, t), SYMM_ERR_INVALID_ARG);
    CHECK_OK(symm_get(NULL, sym, 0, t));
    check_untouched("bad get");

    /* ---- typed */
    CHECK_STATUS(symm_put_typed(sym, local, 4, SYMM_TYPE_COUNT, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_typed(sym, local, 4, (symm_type_t)-1, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_get_typed(local, sym, 4, (symm_type_t)99, t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_typed(sym, local, SIZE_MAX / 4, SYMM_INT64, t), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_get_typed(local, sym, SIZE_MAX / 2 + 1, SYMM_INT16, t),
                 SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put_double((double *)sym, (double *)local, SIZE_MAX / 8 + 1, t),
                 SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put_int32((int32_t *)stackvar, (int32_t *)local, 1, t),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_get_uint16((uint16_t *)local, (uint16_t *)sym, 1, npes),
                 SYMM_ERR_PE_OUT_OF_RANGE);
    check_untouched("bad typed");

    /* ---- atomics */
    uint32_t f32 = 0x5a5a5a5a;
    uint64_t f64 = 0x5a5a5a5a5a5a5a5aull;
    uint32_t *a32 = (uint32_t *)(sym + 256);
    uint64_t *a64 = (uint64_t *)(sym + 512);
    CHECK_STATUS(symm_atomic32(SYMM_AMO_COUNT, a32, 1, 0, t, &f32), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_atomic32((symm_amo_t)-1, a32, 1, 0, t, &f32), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_atomic64((symm_amo_t)1000, a64, 1, 0, t, &f64), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_atomic32(SYMM_AMO_ADD, (uint32_t *)(sym + 257), 1, 0, t, NULL),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_atomic32(SYMM_AMO_FETCH_ADD, (uint32_t *)(sym + 258), 1, 0, t, &f32),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_ADD, (uint64_t *)(sym + 516), 1, 0, t, NULL),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_SWAP, (uint64_t *)(sym + 513), 1, 0, t, &f64),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_atomic32(SYMM_AMO_ADD, (uint32_t *)stackvar, 1, 0, t, NULL),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_SET, NULL, 1, 0, t, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_SET, a64, 1, 0, -1, NULL), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_atomic32(SYMM_AMO_SET, a32, 1, 0, npes, NULL), SYMM_ERR_PE_OUT_OF_RANGE);
    static const symm_amo_t fetching[] = {
        SYMM_AMO_FETCH,     SYMM_AMO_SWAP,     SYMM_AMO_CSWAP,    SYMM_AMO_FETCH_ADD,
        SYMM_AMO_FETCH_AND, SYMM_AMO_FETCH_OR, SYMM_AMO_FETCH_XOR};
    for (size_t i = 0; i < sizeof fetching / sizeof fetching[0]; i++) {
        CHECK_STATUS(symm_atomic32(fetching[i], a32, 0xffff, 0, t, NULL), SYMM_ERR_INVALID_ARG);
        CHECK_STATUS(symm_atomic64(fetching[i], a64, 0xffff, 0, t, NULL), SYMM_ERR_INVALID_ARG);
    }
    CHECK_TRUE(f32 == 0x5a5a5a5a && f64 == 0x5a5a5a5a5a5a5a5aull,
               "failed atomics wrote fetched");
    check_untouched("bad atomics");

    /* ---- signals and waits */
    uint64_t *sig = (uint64_t *)(sym + 1024);
    int res = 1234;
    uint64_t got = 4321;
    CHECK_STATUS(symm_put_signal(sym, local, 8, sig, 1, (symm_sigop_t)2, t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_signal(sym, local, 8, sig, 1, (symm_sigop_t)-1, t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(
        symm_put_signal(sym, local, 8, (uint64_t *)(sym + 1028), 1, SYMM_SIGNAL_SET, t),
        SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_put_signal(sym, local, 8, (uint64_t *)stackvar, 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put_signal(sym, local, 8, NULL, 1, SYMM_SIGNAL_ADD, t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_signal(stackvar, local, 8, sig, 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put_signal(sym, local, SIZE_MAX, sig, 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_put_signal(sym, NULL, 8, sig, 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_put_signal(sym, local, 8, sig, 1, SYMM_SIGNAL_SET, npes),
                 SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_put_signal_nbi(sym, local, 8, sig, 1, (symm_sigop_t)7, t),
                 SYMM_ERR_INVALID_ARG);
    check_untouched("bad put_signal");
    CHECK_STATUS(symm_signal_fetch(sig, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_signal_fetch((uint64_t *)stackvar, &got), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_signal_fetch(NULL, &got), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_signal_wait_until(sig, (symm_cmp_t)6, 0, &got), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_signal_wait_until(sig, (symm_cmp_t)-1, 0, &got), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_signal_wait_until((uint64_t *)stackvar, SYMM_CMP_EQ, 0, &got),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_wait_until_int32((int32_t *)sym, (symm_cmp_t)6, 0), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_wait_until_int64((int64_t *)sym, (symm_cmp_t)100, 0),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_wait_until_uint32((uint32_t *)stackvar, SYMM_CMP_EQ, 0),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_wait_until_uint64(NULL, SYMM_CMP_EQ, 0), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_test_int32((int32_t *)sym, (symm_cmp_t)6, 0, &res), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_test_int64((int64_t *)sym, SYMM_CMP_EQ, 0, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_test_uint32((uint32_t *)stackvar, SYMM_CMP_EQ, 0, &res),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_test_uint64(NULL, SYMM_CMP_EQ, 0, &res), SYMM_ERR_INVALID_ARG);
    /* misaligned words: the waits and tests load them atomically */
    CHECK_STATUS(symm_signal_fetch((uint64_t *)(sym + 1028), &got), SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_signal_wait_until((uint64_t *)(sym + 1025), SYMM_CMP_EQ, 0, &got),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_wait_until_int32((int32_t *)(sym + 2), SYMM_CMP_NE, 0),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_wait_until_uint64((uint64_t *)(sym + 4), SYMM_CMP_NE, 0),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_test_int64((int64_t *)(sym + 12), SYMM_CMP_EQ, 0, &res),
                 SYMM_ERR_ALIGNMENT);
    CHECK_STATUS(symm_test_uint32((uint32_t *)(sym + 1), SYMM_CMP_EQ, 0, &res),
                 SYMM_ERR_ALIGNMENT);
    CHECK_TRUE(res == 1234 && got == 4321, "failed waits wrote their outputs");
    check_untouched("bad waits");

    /* ---- team-relative forms: bad team, PE outside the team */
    symm_team_t bogus = (symm_team_t)0x123456789ll;
    CHECK_STATUS(symm_team_put(bogus, sym, local, 8, 0), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_team_get(SYMM_TEAM_INVALID, local, sym, 8, 0), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_team_put(SYMM_TEAM_WORLD, sym, local, 8, npes), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_team_get(SYMM_TEAM_WORLD, local, sym, 8, -1), SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_team_atomic32(SYMM_TEAM_WORLD, SYMM_AMO_ADD, a32, 1, 0, npes, NULL),
                 SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_STATUS(symm_team_atomic64(SYMM_TEAM_WORLD, SYMM_AMO_FETCH, a64, 1, 0, 0, NULL),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(
        symm_team_put_signal(SYMM_TEAM_WORLD, sym, local, 8, sig, 1, SYMM_SIGNAL_SET, npes),
        SYMM_ERR_PE_OUT_OF_RANGE);
    CHECK_TRUE(symm_team_ptr(SYMM_TEAM_WORLD, sym, npes) == NULL, "team_ptr out of range");
    CHECK_TRUE(symm_team_ptr(bogus, sym, 0) == NULL, "team_ptr bad team");
    CHECK_TRUE(symm_team_ptr(SYMM_TEAM_WORLD, stackvar, 0) == NULL, "team_ptr non-symmetric");
    CHECK_TRUE(symm_team_ptr(SYMM_TEAM_WORLD, sym, t) == symm_ptr(sym, t), "team_ptr");
    check_untouched("bad team RMA");

    CHECK_OK(symm_free(sym));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_badinput: OK (%d PEs)\n", npes);
    return 0;
}
