/* stress_big_pool.c — a pool of 65,536 duplicates of the world: created in O(1)
 * rounds, barriers and a verified allreduce on a random sample of ~200 duplicates (the
 * same sample on every PE), then 4 threads at once on 4 distinct sampled duplicates, a
 * growth, and destruction that returns the whole team region. Repeated REPS times
 * (SYMM_STRESS_ITERS, default 3; 1 under valgrind). */
#include <pthread.h>

#include "common/test_util.h"

#define NDUPS  65536
#define SAMPLE 200
#define T      4

typedef struct {
    symm_pool_t pool;
    size_t dups[8];
    symm_status_t st;
} job_t;

static void *run(void *arg)
{
    job_t *j = arg;
    for (int round = 0; round < 20 && !j->st; round++)
        for (int k = 0; k < 8 && !j->st; k++)
            j->st = symm_barrier(symm_pool_team(j->pool, j->dups[k]));
    return NULL;
}

static size_t team_used(void)
{
    symm_info_t i;
    CHECK_OK(symm_get_info(&i));
    return i.team_heap_used;
}

int main(void)
{
    CHECK_OK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    long reps = test_env_long("SYMM_STRESS_ITERS", test_under_valgrind() ? 1 : 3);
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    size_t used0 = team_used();
    int64_t *red = symm_malloc(4 * sizeof(int64_t));
    CHECK_TRUE(red != NULL, "malloc");
    double tcreate = 0, tdestroy = 0;
    for (long rep = 0; rep < reps; rep++) {
        symm_pool_t p;
        double t0 = test_now();
        CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, NDUPS, &p));
        tcreate += test_now() - t0;
        CHECK_EQ_U64(symm_pool_size(p), NDUPS);
        CHECK_TRUE(team_used() >= used0 + (size_t)NDUPS * (size_t)npes * 8,
                   "65536 duplicates take only %zu bytes of team region", team_used() - used0);
        size_t sample[SAMPLE];
        for (int k = 0; k < SAMPLE; k++)
            sample[k] = k == 0 ? 0 : k == 1 ? NDUPS - 1 : (size_t)test_rng_below(&r, NDUPS);
        for (int k = 0; k < SAMPLE; k++) {
            symm_team_t d = symm_pool_team(p, sample[k]);
            CHECK_TRUE(d != SYMM_TEAM_INVALID, "duplicate %zu", sample[k]);
            CHECK_TRUE(symm_team_my_pe(d) == me && symm_team_n_pes(d) == npes,
                       "numbering of "
                       "duplicate %zu",
                       sample[k]);
            CHECK_OK(symm_barrier(d));
            if (k % 20 == 0) {
                red[0] = me + 1;
                red[1] = (int64_t)sample[k] * (me + 1);
                CHECK_OK(symm_allreduce(d, red + 2, red, 2, SYMM_INT64, SYMM_OP_SUM));
                int64_t s = (int64_t)npes * (npes + 1) / 2;
                CHECK_EQ_I64(red[2], s);
                CHECK_EQ_I64(red[3], (int64_t)sample[k] * s);
            }
        }
        /* threads on distinct duplicates at once (indices distinct across threads) */
        job_t jobs[T];
        pthread_t th[T];
        for (int i = 0; i < T; i++) {
            jobs[i].pool = p;
            jobs[i].st = SYMM_SUCCESS;
            for (int k = 0; k < 8; k++)
                jobs[i].dups[k] = sample[(size_t)(k * T + i) % SAMPLE] * T % NDUPS + (size_t)i;
        }
        for (int i = 0; i < T; i++)
            CHECK_TRUE(pthread_create(&th[i], NULL, run, &jobs[i]) == 0, "thread");
        for (int i = 0; i < T; i++) {
            pthread_join(th[i], NULL);
            CHECK_OK(jobs[i].st);
        }
        CHECK_OK(symm_pool_grow(p, NDUPS + 1000));
        CHECK_OK(symm_barrier(symm_pool_team(p, NDUPS + 999)));
        CHECK_OK(symm_barrier(symm_pool_team(p, 12345)));
        t0 = test_now();
        CHECK_OK(symm_pool_destroy(p));
        tdestroy += test_now() - t0;
        CHECK_TRUE(team_used() == used0, "team region %zu after destroy, %zu before",
                   team_used(), used0);
        CHECK_TRUE(symm_pool_team(p, 5) == SYMM_TEAM_INVALID, "destroyed pool");
    }
    CHECK_OK(symm_free(red));
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf(
            "stress_big_pool: OK (%d PEs, %ld x %d duplicates; create %.1f ms, destroy %.1f ms "
            "on average)\n",
            npes, reps, NDUPS, tcreate / (double)reps * 1e3, tdestroy / (double)reps * 1e3);
    return 0;
}
