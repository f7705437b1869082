/* test_pool.c — team pools and the registry: creation over the world and over
 * sub-teams, duplicates number like their team, a sample of duplicates synchronises,
 * growth (also while other threads run barriers on existing duplicates), destroy
 * returns the team region; symm_pool_get creates once, returns the same handle, grows,
 * refuses the same name with other ranks; symm_pool_release. */
#include <pthread.h>

#include "common/test_util.h"

static int me, npes;

static size_t team_used(void)
{
    symm_info_t i;
    CHECK_OK(symm_get_info(&i));
    return i.team_heap_used;
}

static void check_dup_like(symm_team_t d, symm_team_t parent, const char *what)
{
    CHECK_TRUE(d != SYMM_TEAM_INVALID, "%s: invalid duplicate", what);
    CHECK_TRUE(symm_team_my_pe(d) == symm_team_my_pe(parent), "%s: my_pe %d vs %d", what,
               symm_team_my_pe(d), symm_team_my_pe(parent));
    CHECK_TRUE(symm_team_n_pes(d) == symm_team_n_pes(parent), "%s: n_pes", what);
    for (int j = 0; j < symm_team_n_pes(parent); j++) {
        CHECK_TRUE(symm_team_world_pe(d, j) == symm_team_world_pe(parent, j), "%s: world_pe",
                   what);
        CHECK_TRUE(symm_team_translate_pe(d, j, parent) == j, "%s: translate to parent", what);
        CHECK_TRUE(symm_team_translate_pe(parent, j, d) == j, "%s: translate from parent",
                   what);
    }
}

typedef struct {
    symm_pool_t pool;
    size_t dup;
    volatile int *stop;
    int iters;
    symm_status_t st;
    int done;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    symm_team_t t = symm_pool_team(w->pool, w->dup);
    for (int i = 0; i < w->iters && !w->st; i++) {
        w->st = symm_barrier(t);
        w->done++;
    }
    return NULL;
}

static void test_pool_basic(symm_team_t parent, size_t n, test_rng_t *r)
{
    if (parent == SYMM_TEAM_INVALID) return;
    size_t used0 = team_used();
    symm_pool_t p = 0;
    CHECK_OK(symm_pool_create(parent, n, &p));
    CHECK_TRUE(p != SYMM_POOL_INVALID, "pool handle");
    CHECK_EQ_U64(symm_pool_size(p), n);
    CHECK_TRUE(team_used() > used0, "a pool takes team region");
    CHECK_TRUE(symm_pool_team(p, n) == SYMM_TEAM_INVALID, "dup n exists");
    CHECK_TRUE(symm_pool_team(p, SIZE_MAX) == SYMM_TEAM_INVALID, "dup SIZE_MAX exists");
    /* a sample of duplicates; the same indices on every member (same seed stream) */
    for (int k = 0; k < 12; k++) {
        size_t i = k == 0 ? 0 : k == 1 ? n - 1 : (size_t)test_rng_below(r, n);
        symm_team_t d = symm_pool_team(p, i);
        CHECK_TRUE(symm_pool_team(p, i) == d, "symm_pool_team is stable");
        check_dup_like(d, parent, "pool duplicate");
        CHECK_OK(symm_barrier(d));
        CHECK_OK(symm_sync(d));
        char buf[128];
        symm_team_describe(d, buf, sizeof buf);
        CHECK_TRUE(strstr(buf, "dup") != NULL, "describe of a duplicate: %s", buf);
    }
    /* distinct duplicates are distinct teams */
    if (n >= 2) CHECK_TRUE(symm_pool_team(p, 0) != symm_pool_team(p, 1), "dups 0 and 1 equal");
    CHECK_OK(symm_pool_destroy(p));
    CHECK_EQ_U64(symm_pool_size(p), 0);
    CHECK_TRUE(symm_pool_team(p, 0) == SYMM_TEAM_INVALID, "dup of a destroyed pool");
    CHECK_EQ_U64(team_used(), used0);
}

static void test_grow_concurrent(void)
{
    enum { T = 3 };
    size_t used0 = team_used();
    symm_pool_t p;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, T, &p));
    volatile int stop = 0;
    worker_t w[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){p, (size_t)i, &stop, 300, SYMM_SUCCESS, 0};
        CHECK_TRUE(pthread_create(&th[i], NULL, worker, &w[i]) == 0, "thread");
    }
    /* grow several times while the workers run barriers on duplicates 0..T-1 */
    size_t sizes[] = {T + 1, T + 5, T + 5, T + 100, 1000, 999};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        CHECK_OK(symm_pool_grow(p, sizes[k]));
        size_t want = sizes[k] > T ? sizes[k] : T;
        if (k == 5) want = 1000; /* never shrinks */
        CHECK_EQ_U64(symm_pool_size(p), want);
        /* a new duplicate works at once */
        symm_team_t d = symm_pool_team(p, want - 1);
        check_dup_like(d, SYMM_TEAM_WORLD, "grown duplicate");
        CHECK_OK(symm_barrier(d));
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(w[i].st);
        CHECK_EQ_I64(w[i].done, 300);
    }
    /* every duplicate, old and new, still works */
    for (size_t i = 0; i < symm_pool_size(p); i += 37)
        CHECK_OK(symm_barrier(symm_pool_team(p, i)));
    CHECK_OK(symm_pool_destroy(p));
    CHECK_EQ_U64(team_used(), used0);
}

/* Creating and destroying teams and pools while other threads of every PE run
 * barriers on duplicates of another pool: neither side waits for the other. */
static void test_create_destroy_concurrent(void)
{
    enum { T = 2 };
    size_t used0 = team_used();
    symm_pool_t busy;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, T, &busy));
    volatile int stop = 0;
    worker_t w[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        w[i] = (worker_t){busy, (size_t)i, &stop, 400, SYMM_SUCCESS, 0};
        CHECK_TRUE(pthread_create(&th[i], NULL, worker, &w[i]) == 0, "thread");
    }
    for (int k = 0; k < 40; k++) {
        symm_team_t t;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &t));
        symm_pool_t p;
        CHECK_OK(symm_pool_create(t, 1 + (size_t)k % 5, &p));
        CHECK_OK(symm_barrier(symm_pool_team(p, (size_t)k % (1 + (size_t)k % 5))));
        CHECK_OK(symm_pool_destroy(p));
        CHECK_OK(symm_team_destroy(t));
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_OK(w[i].st);
    }
    CHECK_OK(symm_pool_destroy(busy));
    CHECK_EQ_U64(team_used(), used0);
}

static void test_registry(void)
{
    size_t used0 = team_used();
    int all[64], even[64], ne = 0;
    for (int i = 0; i < npes; i++) {
        all[i] = i;
        if (i % 2 == 0) even[ne++] = i;
    }
    symm_pool_t a = 0, b = 0, c = 0;
    CHECK_OK(symm_pool_get("world", all, npes, 4, &a));
    CHECK_EQ_U64(symm_pool_size(a), 4);
    CHECK_OK(symm_pool_get("world", all, npes, 2, &b));
    CHECK_TRUE(a == b, "second get returned another handle");
    CHECK_EQ_U64(symm_pool_size(a), 4);
    CHECK_OK(symm_pool_get("world", all, npes, 9, &b));
    CHECK_TRUE(a == b, "growing get returned another handle");
    CHECK_EQ_U64(symm_pool_size(a), 9);
    check_dup_like(symm_pool_team(a, 8), SYMM_TEAM_WORLD, "registry duplicate");
    CHECK_OK(symm_barrier(symm_pool_team(a, 8)));
    char buf[128];
    symm_team_describe(symm_pool_team(a, 3), buf, sizeof buf);
    CHECK_TRUE(strstr(buf, "world") != NULL, "describe names the registry pool: %s", buf);
    /* the same name with other ranks: refused, nothing changes */
    symm_pool_t x = 4242;
    if (npes > 1) {
        CHECK_STATUS(symm_pool_get("world", all, npes - 1, 4, &x), SYMM_ERR_NAME_CONFLICT);
        CHECK_TRUE(strstr(symm_last_error(), "world") != NULL, "message names it: %s",
                   symm_last_error());
        int rev[64];
        for (int i = 0; i < npes; i++)
            rev[i] = npes - 1 - i;
        CHECK_STATUS(symm_pool_get("world", rev, npes, 4, &x), SYMM_ERR_NAME_CONFLICT);
        CHECK_TRUE(x == 4242, "failed get wrote its output");
        CHECK_EQ_U64(symm_pool_size(a), 9);
    }
    /* a registry pool over the even PEs, asked for by them only */
    if (me % 2 == 0) {
        CHECK_OK(symm_pool_get("even", even, ne, 3, &c));
        CHECK_EQ_U64(symm_pool_size(c), 3);
        CHECK_EQ_I64(symm_team_n_pes(symm_pool_team(c, 2)), ne);
        CHECK_EQ_I64(symm_team_my_pe(symm_pool_team(c, 2)), me / 2);
        CHECK_OK(symm_barrier(symm_pool_team(c, 1)));
        symm_pool_t c2;
        CHECK_OK(symm_pool_get("even", even, ne, 1, &c2));
        CHECK_TRUE(c == c2, "even: another handle");
        /* destroy must go through release */
        CHECK_STATUS(symm_pool_destroy(c), SYMM_ERR_INVALID_ARG);
        CHECK_OK(symm_pool_release("even"));
        CHECK_EQ_U64(symm_pool_size(c), 0);
        CHECK_STATUS(symm_pool_release("even"), SYMM_ERR_NOT_FOUND);
    } else {
        CHECK_STATUS(symm_pool_get("even", even, ne, 3, &c), SYMM_ERR_NOT_MEMBER);
    }
    CHECK_STATUS(symm_pool_release("never made"), SYMM_ERR_NOT_FOUND);
    CHECK_STATUS(symm_pool_release(NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_get(NULL, all, npes, 1, &x), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_get("", all, npes, 1, &x), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_get("z", all, npes, 0, &x), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_get("z", all, 0, 1, &x), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_get("z", all, npes, 1, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_OK(symm_pool_release("world"));
    CHECK_EQ_U64(symm_pool_size(a), 0);
    /* the name can be used again, now with other ranks */
    if (me % 2 == 0) {
        CHECK_OK(symm_pool_get("world", even, ne, 2, &c));
        CHECK_EQ_I64(symm_team_n_pes(symm_pool_team(c, 0)), ne);
        CHECK_OK(symm_pool_release("world"));
    }
    CHECK_OK(symm_barrier_all());
    CHECK_EQ_U64(team_used(), used0);
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    size_t used0 = team_used();
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    static const size_t ns[] = {1, 2, 7, 64, 1000, 65536};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        test_pool_basic(SYMM_TEAM_WORLD, ns[i], &r);
    symm_team_t odd, rev;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 1 % npes, 2, npes / 2 > 0 ? npes / 2 : 1,
                                     &odd));
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, -1, npes, &rev));
    test_rng_t r2 = r;
    test_pool_basic(odd, 5, &r); /* odd PEs only; the others skip */
    test_pool_basic(rev, 33, &r2);
    if (odd != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(odd));
    CHECK_OK(symm_team_destroy(rev));
    test_grow_concurrent();
    test_create_destroy_concurrent();
    test_registry();
    CHECK_EQ_U64(team_used(), used0);
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_pool: OK (%d PEs)\n", npes);
    return 0;
}
