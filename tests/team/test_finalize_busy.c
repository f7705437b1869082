/* test_finalize_busy.c — symm_finalize while another thread of the PE is inside a
 * collective: on every PE one thread waits in a barrier on a pool duplicate for a thread
 * of another PE that is held back (PE h's on duplicate 2, every other PE's on duplicate
 * 1). Every PE then calls symm_finalize: it refuses with SYMM_ERR_TEAM_BUSY and changes
 * nothing (WORLD works, the waiting barriers complete once the held threads are let
 * go); after that, finalize succeeds. */
#include <pthread.h>
#include <stdatomic.h>

#include "common/test_util.h"

static int me, npes, holdout;
static symm_pool_t pool;
static atomic_int entering, go;
static symm_status_t thread_status[2] = {SYMM_ERR_SYSTEM, SYMM_ERR_SYSTEM};

/* Thread w (0, 1) enters a barrier on duplicate w + 1. The holdout's thread 0 and every
 * other PE's thread 1 wait for go; the other one enters at once (and waits there). */
static void *worker(void *arg)
{
    int w = (int)(intptr_t)arg;
    int held = (me == holdout) == (w == 0);
    if (held)
        while (!atomic_load(&go))
            usleep(1000);
    else
        atomic_store(&entering, 1);
    thread_status[w] = symm_barrier(symm_pool_team(pool, (size_t)w + 1));
    return NULL;
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    holdout = npes - 1;
    uint64_t *src = symm_calloc(8, sizeof(uint64_t)), *dst = symm_calloc(8, sizeof(uint64_t));
    CHECK_TRUE(src && dst, "calloc");
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    CHECK_OK(symm_barrier_all());

    pthread_t th[2];
    for (int w = 0; w < 2; w++)
        CHECK_TRUE(pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w) == 0,
                   "pthread_create");
    if (npes >= 2) {
        symm_team_t busy = symm_pool_team(pool, me == holdout ? 2 : 1);
        while (!atomic_load(&entering))
            usleep(1000);
        /* the thread claims its duplicate right after raising the flag; give it time,
         * then check that it is inside (a second caller gets TEAM_BUSY, harmlessly) */
        usleep(100 * 1000);
        CHECK_STATUS(symm_sync(busy), SYMM_ERR_TEAM_BUSY);
        CHECK_STATUS(symm_finalize(), SYMM_ERR_TEAM_BUSY);
        CHECK_TRUE(strstr(symm_last_error(), "finalize") != NULL,
                   "the message does not name the call: %s", symm_last_error());
        CHECK_TRUE(symm_initialized() && symm_my_pe() == me && symm_n_pes() == npes,
                   "a refused finalize changed the PE");
        /* nothing changed: WORLD works */
        for (int i = 0; i < 8; i++)
            src[i] = (uint64_t)(me + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
        CHECK_OK(symm_allreduce(SYMM_TEAM_WORLD, dst, src, 8, SYMM_UINT64, SYMM_OP_XOR));
        for (int i = 0; i < 8; i++) {
            uint64_t want = 0;
            for (int j = 0; j < npes; j++)
                want ^= (uint64_t)(j + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)i;
            CHECK_EQ_U64(dst[i], want);
        }
    }
    atomic_store(&go, 1);
    for (int w = 0; w < 2; w++) {
        CHECK_TRUE(pthread_join(th[w], NULL) == 0, "pthread_join");
        CHECK_OK(thread_status[w]); /* the barriers finalize refused under completed */
    }

    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_free(dst));
    CHECK_OK(symm_free(src));
    CHECK_OK(symm_finalize());
    CHECK_TRUE(!symm_initialized(), "still initialized after finalize");
    if (me == 0) printf("test_finalize_busy: OK (%d PEs)\n", npes);
    return 0;
}
