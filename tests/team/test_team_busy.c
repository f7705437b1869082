/* test_team_busy.c — two threads of one PE entering a collective on the same team:
 * exactly one gets SYMM_ERR_TEAM_BUSY, whose message names the team and points at
 * pools, and the other completes. Deterministic: PE 0's two threads race for a barrier
 * that cannot complete until PE 1 arrives, and PE 1 arrives only after PE 0 told it
 * (through a symmetric flag) that one of its threads has failed. Checked on WORLD, a
 * split team and a pool duplicate; distinct duplicates of a pool never conflict. */
#include <pthread.h>
#include <stdatomic.h>

#include "common/test_util.h"

static int me, npes;
static uint64_t *flag; /* symmetric; PE 1's copy is raised by PE 0 */

typedef struct {
    symm_team_t team;
    symm_status_t st;
    char msg[512];
} racer_t;

static void *racer(void *arg)
{
    racer_t *r = arg;
    r->st = symm_barrier(r->team);
    snprintf(r->msg, sizeof r->msg, "%s", symm_last_error());
    if (r->st == SYMM_ERR_TEAM_BUSY) {
        /* tell PE 1 (team member 1) that the loser has lost: now it may arrive */
        uint64_t one = 1;
        symm_status_t st =
            symm_atomic64(SYMM_AMO_ADD, flag, one, 0, symm_team_world_pe(r->team, 1), NULL);
        if (st) r->st = st;
    }
    return NULL;
}

static void busy_round(symm_team_t team, const char *name_part, int round)
{
    int my = symm_team_my_pe(team);
    if (my < 0) return;
    if (my == 0) {
        racer_t a = {team, SYMM_SUCCESS, ""}, b = {team, SYMM_SUCCESS, ""};
        pthread_t ta, tb;
        CHECK_TRUE(pthread_create(&ta, NULL, racer, &a) == 0, "thread");
        CHECK_TRUE(pthread_create(&tb, NULL, racer, &b) == 0, "thread");
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        int busy = (a.st == SYMM_ERR_TEAM_BUSY) + (b.st == SYMM_ERR_TEAM_BUSY);
        int ok = (a.st == SYMM_SUCCESS) + (b.st == SYMM_SUCCESS);
        CHECK_TRUE(busy == 1 && ok == 1, "round %d on %s: statuses %d and %d (%s / %s)", round,
                   name_part, (int)a.st, (int)b.st, a.msg, b.msg);
        const char *m = a.st == SYMM_ERR_TEAM_BUSY ? a.msg : b.msg;
        CHECK_TRUE(strstr(m, name_part) != NULL, "the busy message does not name %s: %s",
                   name_part, m);
        CHECK_TRUE(strstr(m, "pool") != NULL && strstr(m, "symm_pool_team") != NULL,
                   "the busy message does not point at pools: %s", m);
        CHECK_TRUE(strstr(m, "barrier") != NULL,
                   "the busy message does not say which "
                   "collective: %s",
                   m);
    } else {
        if (my == 1) { /* wait until PE 0's losing thread has failed */
            CHECK_OK(symm_wait_until_uint64(flag, SYMM_CMP_GE, (uint64_t)round));
        }
        CHECK_OK(symm_barrier(team));
    }
    /* the team works normally afterwards */
    CHECK_OK(symm_barrier(team));
    CHECK_OK(symm_sync(team));
}

/* Destroying a team while a thread of one member is inside a collective on it must
 * fail with TEAM_BUSY on every member (nothing freed under the running collective);
 * once the collective completes the destroy succeeds. */
static atomic_int lost;

static void *racer2(void *arg)
{
    racer_t *r = arg;
    r->st = symm_barrier(r->team);
    if (r->st == SYMM_ERR_TEAM_BUSY) atomic_store(&lost, 1);
    return NULL;
}

static void busy_destroy(symm_team_t team, uint64_t round)
{
    int my = symm_team_my_pe(team), n = symm_team_n_pes(team);
    if (my < 0) return;
    pthread_t ta, tb;
    racer_t a = {team, SYMM_SUCCESS, ""}, b = {team, SYMM_SUCCESS, ""};
    if (my == 0) {
        /* one of two threads holds the team (the other one's BUSY proves it) */
        atomic_store(&lost, 0);
        CHECK_TRUE(pthread_create(&ta, NULL, racer2, &a) == 0, "thread");
        CHECK_TRUE(pthread_create(&tb, NULL, racer2, &b) == 0, "thread");
        while (!atomic_load(&lost))
            symm_quiet();
        for (int j = 1; j < n; j++)
            CHECK_OK(
                symm_atomic64(SYMM_AMO_SET, flag, round, 0, symm_team_world_pe(team, j), NULL));
    } else {
        CHECK_OK(symm_wait_until_uint64(flag, SYMM_CMP_EQ, round));
    }
    CHECK_STATUS(symm_team_destroy(team), SYMM_ERR_TEAM_BUSY);
    CHECK_TRUE(strstr(symm_last_error(), "world PE") != NULL, "destroy's BUSY message: %s",
               symm_last_error());
    CHECK_TRUE(symm_team_n_pes(team) == n, "the team was freed by a failed destroy");
    if (my == 0) {
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK_TRUE((a.st == SYMM_SUCCESS) + (b.st == SYMM_SUCCESS) == 1, "holder: %d %d",
                   (int)a.st, (int)b.st);
    } else {
        CHECK_OK(symm_barrier(team)); /* releases PE 0's holder */
    }
    CHECK_OK(symm_barrier(team));
    CHECK_OK(symm_team_destroy(team));
}

typedef struct {
    symm_pool_t pool;
    size_t dup;
    symm_status_t st;
} dup_job_t;

static void *dup_worker(void *arg)
{
    dup_job_t *j = arg;
    for (int i = 0; i < 200 && !j->st; i++)
        j->st = symm_barrier(symm_pool_team(j->pool, j->dup));
    return NULL;
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    flag = symm_calloc(1, sizeof(uint64_t));
    CHECK_TRUE(flag != NULL, "calloc");
    if (npes < 2) {
        /* a 1-PE barrier completes at once: the race cannot be held open. Check only
         * that two threads on distinct duplicates run freely. */
        printf("test_team_busy: 1 PE: the BUSY race needs 2 PEs; checking duplicates only\n");
    } else {
        int round = 0;
        busy_round(SYMM_TEAM_WORLD, "WORLD", ++round);
        busy_round(SYMM_TEAM_WORLD, "WORLD", ++round);
        symm_team_t rev;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &rev));
        /* member 1 of rev is world PE npes-2; member 0 is world npes-1 */
        CHECK_OK(symm_barrier_all());
        if (me == npes - 2) *flag = 0;
        CHECK_OK(symm_barrier_all());
        busy_round(rev, "team", 1);
        CHECK_OK(symm_barrier_all());
        symm_pool_t pool;
        CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 8, &pool));
        if (me == 1) *flag = 0;
        CHECK_OK(symm_barrier_all());
        busy_round(symm_pool_team(pool, 5), "dup 5", 1);
        CHECK_OK(symm_pool_destroy(pool));
        CHECK_OK(symm_barrier_all());
        busy_destroy(rev, 1000); /* destroys rev */
        CHECK_OK(symm_barrier_all());
        int odd_first[64], k = 0;
        for (int p = 1; p < npes; p += 2)
            odd_first[k++] = p;
        for (int p = 0; p < npes; p += 2)
            odd_first[k++] = p;
        symm_team_t shuffled;
        CHECK_OK(symm_team_create(odd_first, npes, &shuffled));
        busy_destroy(shuffled, 2000);
    }
    /* distinct duplicates from distinct threads: never BUSY */
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 4, &pool));
    dup_job_t jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (dup_job_t){pool, (size_t)i, SYMM_SUCCESS};
        CHECK_TRUE(pthread_create(&th[i], NULL, dup_worker, &jobs[i]) == 0, "thread");
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(jobs[i].st);
    }
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_free(flag));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_team_busy: OK (%d PEs)\n", npes);
    return 0;
}
