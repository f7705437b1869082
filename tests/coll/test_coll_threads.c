/* test_coll_threads.c — concurrent collectives: T threads per PE, thread i on duplicate i
 * of one pool, run different collectives at the same time (thread i runs kind i mod K:
 * allreduce, broadcast, fcollect, alltoallv), many iterations over sizes on both sides of
 * the small/large threshold, every result checked against a serial reference. Then two
 * threads of one PE on the SAME team: one waits inside an allreduce for a peer that is
 * held back until the other thread has been refused with SYMM_ERR_TEAM_BUSY. */
#include <pthread.h>
#include <stdatomic.h>

#include "common/test_util.h"
#include "team/team.h"

#define T    4
#define K    4
#define MAXB (256u << 10)

static int W, NW, iters;
static uint64_t seed;
static symm_pool_t pool;
static uint8_t *S[T], *D[T];

static void gen(uint8_t *b, size_t n, uint64_t tag, int w)
{
    test_rng_t r;
    test_rng_seed(&r, seed ^ (tag * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)w << 48));
    test_fill_random(&r, b, n);
}

typedef struct {
    int id;
    uint8_t *ref, *tmp;
} worker_t;

static const size_t sizes[] = {8, 1, 40, 3000, 17, 24000, 0, 999};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void *worker(void *arg)
{
    worker_t *wk = arg;
    int id = wk->id;
    symm_team_t team = symm_pool_team(pool, (size_t)id);
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team);
    uint8_t *s = S[id], *d = D[id], *ref = wk->ref, *tmp = wk->tmp;
    for (int it = 0; it < iters; it++) {
        size_t sz = sizes[(size_t)(it + id) % NSIZES];
        uint64_t tag = (uint64_t)id << 32 | (uint64_t)it;
        size_t len = 0; /* bytes of d to compare */
        memset(d, 0xee, MAXB);
        switch (id % K) {
        case 0: { /* allreduce, int64 sum */
            size_t count = sz / 8 ? sz / 8 : 1;
            gen(s, count * 8, tag, W);
            CHECK_OK(symm_allreduce(team, d, s, count, SYMM_INT64, SYMM_OP_SUM));
            memset(ref, 0, count * 8);
            for (int j = 0; j < n; j++) {
                gen(tmp, count * 8, tag, symm_team_world_pe(team, j));
                for (size_t i = 0; i < count; i++) {
                    uint64_t a, b;
                    memcpy(&a, ref + 8 * i, 8);
                    memcpy(&b, tmp + 8 * i, 8);
                    a += b;
                    memcpy(ref + 8 * i, &a, 8);
                }
            }
            len = count * 8;
            break;
        }
        case 1: { /* broadcast from a rotating root */
            int root = it % n;
            gen(s, sz, tag, W);
            CHECK_OK(symm_broadcast(team, d, s, sz, root));
            gen(ref, sz, tag, symm_team_world_pe(team, root));
            len = sz;
            break;
        }
        case 2: { /* fcollect */
            size_t b = sz / (size_t)n;
            gen(s, b, tag, W);
            CHECK_OK(symm_fcollect(team, d, s, b));
            for (int j = 0; j < n; j++)
                gen(ref + (size_t)j * b, b, tag, symm_team_world_pe(team, j));
            len = b * (size_t)n;
            break;
        }
        default: { /* alltoallv: member i sends member j (i + 2j + it) % 5 * sz/16 bytes */
            size_t sc[64], rc[64], rd[64], unit = sz / 16 + 1, at = 0, sd[64];
            for (int j = 0; j < n; j++) {
                sc[j] = (size_t)((me + 2 * j + it) % 5) * unit;
                sd[j] = at;
                at += sc[j];
            }
            gen(s, at, tag, W);
            for (int j = 0; j < n; j++) {
                size_t jat = 0, jd = 0, cnt = (size_t)((j + 2 * me + it) % 5) * unit;
                for (int k = 0; k < n; k++) {
                    if (k == me) jd = jat;
                    jat += (size_t)((j + 2 * k + it) % 5) * unit;
                }
                gen(tmp, jat, tag, symm_team_world_pe(team, j));
                memcpy(ref + len, tmp + jd, cnt);
                len += cnt;
            }
            CHECK_OK(symm_alltoallv(team, d, MAXB, s, sc, sd, 1, rc, rd));
            for (int j = 0; j < n; j++)
                CHECK_EQ_U64(rc[j], (size_t)((j + 2 * me + it) % 5) * unit);
            break;
        }
        }
        CHECK_BYTES(d, ref, len, "thread %d kind %d iteration %d size %zu", id, id % K, it, sz);
        CHECK_ALL_BYTES(d + len, 0xee, 64, "thread %d iteration %d: past the result", id, it);
    }
    return NULL;
}

/* ---- SYMM_ERR_TEAM_BUSY, deterministically: on world ranks 0 and 1 only. */
static uint64_t *go;
static symm_team_t pair;
static atomic_int a_done;

static void *busy_holder(void *arg)
{
    (void)arg;
    /* waits inside the collective until PE 1 comes, which is after the refusal */
    CHECK_OK(symm_allreduce(pair, D[0], S[0], 5, SYMM_INT32, SYMM_OP_SUM));
    atomic_store(&a_done, 1);
    return NULL;
}

static void busy_test(void)
{
    if (NW < 2) {
        printf("test_coll_threads: TEAM_BUSY part needs 2 PEs, skipped\n");
        return;
    }
    int ranks[2] = {0, 1};
    if (W < 2) CHECK_OK(symm_team_create(ranks, 2, &pair));
    for (int i = 0; i < 5; i++)
        ((int32_t *)S[0])[i] = (int32_t)(W * 100 + i);
    if (W == 0) {
        pthread_t th;
        pthread_create(&th, NULL, busy_holder, NULL);
        symm_pool_obj_t *p;
        symm_dup_t *dup;
        CHECK_OK(symm_team_lookup("test", pair, &p, &dup));
        while (!atomic_load(&dup->busy))
            usleep(100); /* the holder is inside */
        CHECK_TRUE(!atomic_load(&a_done), "the allreduce finished without PE 1");
        CHECK_STATUS(symm_allreduce(pair, D[1], S[1], 5, SYMM_INT32, SYMM_OP_SUM),
                     SYMM_ERR_TEAM_BUSY);
        CHECK_TRUE(strstr(symm_last_error(), "pool") != NULL, "message points at pools: %s",
                   symm_last_error());
        CHECK_STATUS(symm_barrier(pair), SYMM_ERR_TEAM_BUSY);
        CHECK_STATUS(symm_fcollect(pair, D[1], S[1], 8), SYMM_ERR_TEAM_BUSY);
        CHECK_OK(symm_atomic64(SYMM_AMO_SET, go, 1, 0, 1, NULL)); /* release PE 1 */
        pthread_join(th, NULL);
    } else if (W == 1) {
        CHECK_OK(symm_wait_until_uint64(go, SYMM_CMP_EQ, 1));
        CHECK_OK(symm_allreduce(pair, D[0], S[0], 5, SYMM_INT32, SYMM_OP_SUM));
    }
    if (W < 2) {
        for (int i = 0; i < 5; i++)
            CHECK_EQ_I64(((int32_t *)D[0])[i], 100 + 2 * i);
        CHECK_OK(symm_team_destroy(pair));
    }
}

int main(void)
{
    TEST_INIT();
    W = symm_my_pe();
    NW = symm_n_pes();
    seed = test_seed();
    iters = (int)test_env_long("SYMM_TEST_ITERS", 100);
    CHECK_TRUE(NW <= 64, "up to 64 PEs");
    for (int i = 0; i < T; i++) {
        S[i] = symm_malloc(MAXB);
        D[i] = symm_malloc(MAXB);
        CHECK_TRUE(S[i] && D[i], "buffers");
    }
    go = symm_calloc(1, sizeof *go);
    CHECK_TRUE(go != NULL, "flag");
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, T, &pool));

    double t0 = test_now();
    pthread_t th[T];
    worker_t wk[T];
    for (int i = 0; i < T; i++) {
        wk[i] = (worker_t){i, malloc(MAXB), malloc(MAXB)};
        CHECK_TRUE(wk[i].ref && wk[i].tmp, "memory");
        CHECK_TRUE(pthread_create(&th[i], NULL, worker, &wk[i]) == 0, "pthread_create");
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        free(wk[i].ref);
        free(wk[i].tmp);
    }
    double t1 = test_now();
    CHECK_OK(symm_barrier_all());
    busy_test();
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_pool_destroy(pool));
    if (W == 0)
        printf("test_coll_threads: %d PEs x %d threads x %d iterations in %.2f s: OK\n", NW, T,
               iters, t1 - t0);
    TEST_FINALIZE();
    return 0;
}
