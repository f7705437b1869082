/* test_team_rma.c — team-relative put, get, put_signal, atomics and symm_team_ptr on
 * teams whose numbering differs from the world's (reversed, strided, shuffled rank
 * list, a pool duplicate): every member addresses every other by team number; results
 * are checked by world rank. */
#include "common/test_util.h"

static int me, npes;

static void exercise(symm_team_t t, uint8_t *data, uint64_t *sig, uint64_t *ctr, int round)
{
    if (t == SYMM_TEAM_INVALID) return;
    int n = symm_team_n_pes(t), my = symm_team_my_pe(t);
    CHECK_TRUE(n >= 1 && my >= 0, "member");
    size_t len = 1 + (size_t)round * 37 % 300;
    /* slot j of data receives from team member j */
    memset(data, 0, 64 * 512);
    *sig = 0;
    ctr[0] = 0;
    ctr[1] = 0;
    CHECK_OK(symm_barrier(t));
    for (int k = 0; k < n; k++) {
        int dst = (my + k) % n;
        uint8_t src[512];
        test_fill_pattern(src, len,
                          (uint64_t)(round * 10000 + symm_team_world_pe(t, my) * 100 +
                                     symm_team_world_pe(t, dst)));
        if (k % 2)
            CHECK_OK(symm_team_put(t, data + (size_t)my * 512, src, len, dst));
        else
            CHECK_OK(symm_team_put_signal(t, data + (size_t)my * 512, src, len, sig, 1,
                                          SYMM_SIGNAL_ADD, dst));
        uint64_t f = 0;
        CHECK_OK(symm_team_atomic64(t, SYMM_AMO_FETCH_ADD, ctr, (uint64_t)my + 1, 0, dst, &f));
        CHECK_OK(symm_team_atomic32(t, SYMM_AMO_ADD, (uint32_t *)(ctr + 1), 1, 0, dst, NULL));
        void *p = symm_team_ptr(t, data, dst);
        CHECK_TRUE(p == symm_ptr(data, symm_team_world_pe(t, dst)), "team_ptr(%d)", dst);
    }
    uint64_t nsig = (uint64_t)(n + 1) / 2; /* members that used put_signal to me */
    CHECK_OK(symm_signal_wait_until(sig, SYMM_CMP_GE, nsig, NULL));
    CHECK_OK(symm_barrier(t));
    for (int j = 0; j < n; j++) {
        uint8_t want[512];
        test_fill_pattern(want, len,
                          (uint64_t)(round * 10000 + symm_team_world_pe(t, j) * 100 +
                                     symm_team_world_pe(t, my)));
        CHECK_BYTES(data + (size_t)j * 512, want, len, "team put from member %d (world %d)", j,
                    symm_team_world_pe(t, j));
    }
    CHECK_EQ_U64(*sig, nsig);
    CHECK_EQ_U64(*ctr, (uint64_t)n * (uint64_t)(n + 1) / 2);
    CHECK_EQ_U64(*(uint32_t *)(ctr + 1), (uint32_t)n);
    /* get from every member what it received from me */
    for (int j = 0; j < n; j++) {
        uint8_t got[512], want[512];
        CHECK_OK(symm_team_get(t, got, data + (size_t)my * 512, len, j));
        test_fill_pattern(want, len,
                          (uint64_t)(round * 10000 + symm_team_world_pe(t, my) * 100 +
                                     symm_team_world_pe(t, j)));
        CHECK_BYTES(got, want, len, "team get from member %d", j);
    }
    CHECK_OK(symm_barrier(t));
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    uint8_t *data = symm_malloc(64 * 512);
    uint64_t *sig = symm_malloc(64), *ctr = symm_malloc(64);
    CHECK_TRUE(data && sig && ctr, "malloc");
    symm_team_t rev, even, list, row, col;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &rev));
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &even));
    CHECK_OK(symm_team_split_2d(SYMM_TEAM_WORLD, 2, &row, &col));
    int ranks[64];
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    for (int i = 0; i < npes; i++)
        ranks[i] = i;
    for (int i = npes - 1; i > 0; i--) {
        int j = (int)test_rng_below(&r, (uint64_t)i + 1), x = ranks[i];
        ranks[i] = ranks[j];
        ranks[j] = x;
    }
    CHECK_OK(symm_team_create(ranks, npes, &list));
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(rev, 4, &pool));
    for (int round = 0; round < 6; round++) {
        exercise(SYMM_TEAM_WORLD, data, sig, ctr, round);
        exercise(rev, data, sig, ctr, round);
        CHECK_OK(symm_barrier_all());
        exercise(even, data, sig, ctr, round); /* odd PEs skip: not members */
        CHECK_OK(symm_barrier_all());
        exercise(list, data, sig, ctr, round);
        exercise(row, data, sig, ctr, round);
        CHECK_OK(symm_barrier_all());
        exercise(col, data, sig, ctr, round);
        exercise(symm_pool_team(pool, (size_t)round % 4), data, sig, ctr, round);
        CHECK_OK(symm_barrier_all());
    }
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_team_destroy(list));
    CHECK_OK(symm_team_destroy(row));
    CHECK_OK(symm_team_destroy(col));
    if (even != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(even));
    CHECK_OK(symm_team_destroy(rev));
    CHECK_OK(symm_free(ctr));
    CHECK_OK(symm_free(sig));
    CHECK_OK(symm_free(data));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_team_rma: OK (%d PEs)\n", npes);
    return 0;
}
