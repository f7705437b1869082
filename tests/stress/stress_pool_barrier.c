/* stress_pool_barrier.c — P PEs x T threads, each thread on its own duplicate of one
 * pool: ITERS barriers each, with a small int64 sum allreduce verified against a serial
 * reference every REDUCE_EVERY iterations. Mode "overlap" adds a second pool over the
 * even PEs whose duplicates are used at the same time by extra threads, so pools of
 * overlapping groups run concurrently.
 *
 * ITERS: SYMM_STRESS_ITERS, else 10000 (1/50 of it under valgrind); the test says so
 * when it runs fewer. Measured on the 2-core CI machine: 4 PEs x 4 threads 8 s, 8 PEs x
 * 4 threads 27 s, 8 PEs x 8 threads (overlap) 37 s. */
#include <pthread.h>

#include "common/test_util.h"

#define T            4
#define NELEM        3
#define REDUCE_EVERY 10

static int me, npes;
static long iters;

typedef struct {
    symm_team_t team;
    int64_t *src, *dst; /* symmetric, NELEM each, private to this thread's duplicate */
    uint64_t tag;
    symm_status_t st;
    char err[512];
    long done;
} job_t;

static int64_t value(int pe, uint64_t tag, long it, int k)
{
    return (int64_t)(((uint64_t)pe + 1) * 1000003u + tag * 7919u + (uint64_t)it * 31u +
                     (uint64_t)k) *
           ((k & 1) ? -1 : 1);
}

static void *run(void *arg)
{
    job_t *j = arg;
    int n = symm_team_n_pes(j->team);
    for (long it = 0; it < iters; it++) {
        symm_status_t st = symm_barrier(j->team);
        if (!st && it % REDUCE_EVERY == 0) {
            for (int k = 0; k < NELEM; k++)
                j->src[k] =
                    value(symm_team_world_pe(j->team, symm_team_my_pe(j->team)), j->tag, it, k);
            st = symm_allreduce(j->team, j->dst, j->src, NELEM, SYMM_INT64, SYMM_OP_SUM);
            for (int k = 0; k < NELEM && !st; k++) {
                int64_t want = 0;
                for (int p = 0; p < n; p++)
                    want += value(symm_team_world_pe(j->team, p), j->tag, it, k);
                if (j->dst[k] != want) {
                    snprintf(j->err, sizeof j->err,
                             "allreduce on dup tag %llu, iteration %ld, "
                             "element %d: %lld, expected %lld",
                             (unsigned long long)j->tag, it, k, (long long)j->dst[k],
                             (long long)want);
                    j->st = SYMM_ERR_INVALID_ARG;
                    return NULL;
                }
            }
        }
        if (st) {
            j->st = st;
            snprintf(j->err, sizeof j->err, "iteration %ld: %s", it, symm_last_error());
            return NULL;
        }
        j->done++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int overlap = argc > 1 && strcmp(argv[1], "overlap") == 0;
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    iters = test_stress_iters(10000);
    if (me == 0 && iters != 10000)
        printf("stress_pool_barrier: %ld iterations per thread instead of 10000 (%s)\n", iters,
               getenv("SYMM_STRESS_ITERS") ? "SYMM_STRESS_ITERS" : "under valgrind");
    symm_pool_t world_pool, even_pool = SYMM_POOL_INVALID;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, T, &world_pool));
    symm_team_t even = SYMM_TEAM_INVALID;
    if (overlap) {
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &even));
        if (even != SYMM_TEAM_INVALID) CHECK_OK(symm_pool_create(even, T, &even_pool));
    }
    int64_t *buf = symm_malloc(2 * T * 2 * NELEM * sizeof(int64_t) + 64);
    CHECK_TRUE(buf != NULL, "malloc");
    job_t jobs[2 * T];
    pthread_t th[2 * T];
    int njobs = 0;
    for (int i = 0; i < T; i++, njobs++)
        jobs[njobs] = (job_t){symm_pool_team(world_pool, (size_t)i),
                              buf + njobs * 2 * NELEM,
                              buf + njobs * 2 * NELEM + NELEM,
                              (uint64_t)i,
                              SYMM_SUCCESS,
                              "",
                              0};
    if (even_pool != SYMM_POOL_INVALID)
        for (int i = 0; i < T; i++, njobs++)
            jobs[njobs] = (job_t){symm_pool_team(even_pool, (size_t)i),
                                  buf + njobs * 2 * NELEM,
                                  buf + njobs * 2 * NELEM + NELEM,
                                  100 + (uint64_t)i,
                                  SYMM_SUCCESS,
                                  "",
                                  0};
    CHECK_OK(symm_barrier_all());
    double t0 = test_now();
    for (int i = 0; i < njobs; i++)
        CHECK_TRUE(pthread_create(&th[i], NULL, run, &jobs[i]) == 0, "thread");
    for (int i = 0; i < njobs; i++)
        pthread_join(th[i], NULL);
    double dt = test_now() - t0;
    for (int i = 0; i < njobs; i++) {
        if (jobs[i].st) TEST_FAIL("thread %d: status %d: %s", i, (int)jobs[i].st, jobs[i].err);
        CHECK_EQ_I64(jobs[i].done, iters);
    }
    CHECK_OK(symm_barrier_all());
    if (even_pool != SYMM_POOL_INVALID) CHECK_OK(symm_pool_destroy(even_pool));
    if (even != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(even));
    CHECK_OK(symm_pool_destroy(world_pool));
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf("stress_pool_barrier%s: OK (%d PEs x %d threads, %ld barriers each, %.1f s, "
               "%.1f us per barrier per thread)\n",
               overlap ? " overlap" : "", npes, njobs, iters, dt, dt / (double)iters * 1e6);
    return 0;
}
