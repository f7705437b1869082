/* test_list_omit.c — a rank list that leaves out a member which lists this PE
 * (SYMM_TIMEOUT=1). PEs 0..n-2 list every PE; PE n-1 leaves out PE 0. That breaks the
 * rule that the members of a creation take part in it alike, so the creation and the
 * next ones between PE 0 and PE n-1 may fail; what must hold is that no PE ever
 * succeeds alone: every attempt fails everywhere, or succeeds everywhere with a working
 * team. Statuses meet on PE 0 through puts on WORLD. */
#include "common/test_util.h"

#define ATTEMPTS 4

static uint64_t word(int a, int i, int pe)
{
    test_rng_t r;
    test_rng_seed(&r, ((uint64_t)a << 40) ^ ((uint64_t)i << 20) ^ (uint64_t)pe ^ 0x9e3779b9u);
    return test_rng_next(&r);
}

int main(void)
{
    setenv("SYMM_TIMEOUT", "1", 1); /* the pauses below are sized for it */
    TEST_INIT();
    int me = symm_my_pe(), n = symm_n_pes();
    if (n < 3) {
        printf("test_list_omit: needs 3 PEs or more (has %d); nothing to check\n", n);
        TEST_FINALIZE();
        return 0;
    }
    int64_t *st_all = symm_calloc((size_t)(ATTEMPTS + 1) * (size_t)n, sizeof(int64_t));
    uint64_t *src = symm_malloc(32 * sizeof(uint64_t)),
             *dst = symm_malloc(32 * sizeof(uint64_t));
    CHECK_TRUE(st_all && src && dst, "allocation");
    int *list = malloc((size_t)n * sizeof *list), ln = 0;
    for (int i = 0; i < n; i++)
        if (!(me == n - 1 && i == 0)) list[ln++] = i;
    for (int a = 0; a <= ATTEMPTS; a++) {
        symm_team_t t = SYMM_TEAM_INVALID;
        double t0 = test_now();
        symm_status_t st = symm_team_create(list, ln, &t);
        if (!st) { /* a team that exists must work: a checked sum on random words */
            int tn = symm_team_n_pes(t), tm = symm_team_my_pe(t);
            for (int i = 0; i < 32; i++)
                src[i] = word(a, i, tm);
            st = symm_allreduce(t, dst, src, 32, SYMM_UINT64, SYMM_OP_SUM);
            for (int i = 0; i < 32 && !st; i++) {
                uint64_t want = 0;
                for (int p = 0; p < tn; p++)
                    want += word(a, i, p);
                CHECK_TRUE(dst[i] == want, "attempt %d: word %d of the sum", a, i);
            }
            symm_status_t d = symm_team_destroy(t);
            if (!st) st = d;
        }
        int64_t mine = (int64_t)st;
        CHECK_OK(symm_put(&st_all[a * n + me], &mine, sizeof mine, 0));
        for (int i = 0; i < n; i++)
            list[i] = i; /* the later attempts list everyone */
        ln = n;
        /* a member that times out takes SYMM_TIMEOUT: the others must not time out
         * waiting for it in the barrier */
        double left = 1.6 - (test_now() - t0);
        if (left > 0) usleep((useconds_t)(left * 1e6));
        CHECK_OK(symm_barrier_all());
    }
    if (me == 0)
        for (int a = 0; a <= ATTEMPTS; a++) {
            int ok = 0;
            for (int i = 0; i < n; i++)
                ok += st_all[a * n + i] == 0;
            printf("attempt %d: %d of %d PEs succeeded\n", a, ok, n);
            CHECK_TRUE(ok == 0 || ok == n, "attempt %d: %d of %d PEs succeeded alone", a, ok,
                       n);
            if (a == 0) CHECK_TRUE(ok == 0, "the inconsistent lists succeeded");
        }
    CHECK_OK(symm_barrier_all());
    free(list);
    symm_free(dst);
    symm_free(src);
    symm_free(st_all);
    TEST_FINALIZE();
    return 0;
}
