/* test_team_create.c — teams from rank lists in shuffled order (symm_team_create),
 * made by their members only while the other PEs run barriers on another team at the
 * same time; numbering checked against the list; a put/get ring on each new team;
 * mismatched lists; every PE's creation in its own thread concurrently with a
 * collective on another team in another thread. */
#include <pthread.h>

#include "common/test_util.h"

static int me, npes;

static void shuffle(int *a, int n, test_rng_t *r)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)test_rng_below(r, (uint64_t)i + 1), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static int index_in(const int *a, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v) return i;
    return -1;
}

static void check_list_team(symm_team_t t, const int *list, int n, const char *what)
{
    int mine = index_in(list, n, me);
    CHECK_TRUE(symm_team_my_pe(t) == mine, "%s: my_pe %d, list position %d", what,
               symm_team_my_pe(t), mine);
    CHECK_TRUE(symm_team_n_pes(t) == n, "%s: n_pes", what);
    for (int j = 0; j < n; j++) {
        CHECK_TRUE(symm_team_world_pe(t, j) == list[j], "%s: world_pe(%d) = %d, list says %d",
                   what, j, symm_team_world_pe(t, j), list[j]);
        CHECK_TRUE(symm_team_translate_pe(t, j, SYMM_TEAM_WORLD) == list[j], "%s: translate",
                   what);
    }
    for (int w = 0; w < npes; w++)
        CHECK_TRUE(symm_team_translate_pe(SYMM_TEAM_WORLD, w, t) == index_in(list, n, w),
                   "%s: translate world %d", what, w);
}

/* A ring on team t: each member puts its tag to the next member's slot, barrier,
 * checks what the previous one sent, and gets it back from the previous one. */
static void ring(symm_team_t t, uint64_t *buf, uint64_t tag)
{
    int n = symm_team_n_pes(t), my = symm_team_my_pe(t);
    int next = (my + 1) % n, prev = (my + n - 1) % n;
    uint64_t v = tag * 1000 + (uint64_t)symm_team_world_pe(t, my);
    CHECK_OK(symm_team_put(t, &buf[0], &v, 8, next));
    CHECK_OK(symm_barrier(t));
    uint64_t want = tag * 1000 + (uint64_t)symm_team_world_pe(t, prev);
    CHECK_TRUE(buf[0] == want, "ring on team: got %llu from member %d, expected %llu",
               (unsigned long long)buf[0], prev, (unsigned long long)want);
    uint64_t g = 0;
    CHECK_OK(symm_team_get(t, &g, &buf[0], 8, next));
    CHECK_TRUE(g == v, "team_get from member %d", next);
    CHECK_OK(symm_barrier(t));
}

typedef struct {
    symm_team_t team;
    int iters;
    symm_status_t st;
} barrier_job_t;

static void *barrier_thread(void *arg)
{
    barrier_job_t *j = arg;
    for (int i = 0; i < j->iters && !j->st; i++)
        j->st = symm_barrier(j->team);
    return NULL;
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    symm_info_t info0, info1;
    CHECK_OK(symm_get_info(&info0));
    uint64_t *buf = symm_calloc(8, sizeof(uint64_t)); /* slot 0 for S teams, 4 for C teams */
    CHECK_TRUE(buf != NULL, "calloc");
    test_rng_t r;
    test_rng_seed(&r, test_seed()); /* the same lists on every PE */
    int iters = npes <= 4 ? 60 : 40;
    for (int it = 0; it < iters; it++) {
        /* S: a random subset in random order; C: the others, also shuffled */
        int perm[64], s[64], c[64], ns, nc;
        for (int i = 0; i < npes; i++)
            perm[i] = i;
        shuffle(perm, npes, &r);
        ns = 1 + (int)test_rng_below(&r, (uint64_t)npes);
        nc = npes - ns;
        memcpy(s, perm, (size_t)ns * sizeof(int));
        memcpy(c, perm + ns, (size_t)nc * sizeof(int));
        int in_s = index_in(s, ns, me) >= 0;
        char what[64];
        snprintf(what, sizeof what, "iteration %d (%d of %d)", it, ns, npes);
        symm_team_t tc = SYMM_TEAM_INVALID, ts = SYMM_TEAM_INVALID;
        if (!in_s) {
            /* C makes its team first, then runs barriers on it while S creates */
            CHECK_OK(symm_team_create(c, nc, &tc));
            check_list_team(tc, c, nc, what);
            for (int i = 0; i < 10; i++)
                CHECK_OK(symm_barrier(tc));
            ring(tc, buf + 4, (uint64_t)it);
        } else {
            CHECK_OK(symm_team_create(s, ns, &ts));
            check_list_team(ts, s, ns, what);
            ring(ts, buf, (uint64_t)it);
            if (it % 4 == 0) { /* a pool over a rank list too */
                symm_pool_t p;
                CHECK_OK(symm_pool_create(ts, 3, &p));
                for (size_t i = 0; i < 3; i++) {
                    symm_team_t d = symm_pool_team(p, i);
                    check_list_team(d, s, ns, "pool over a rank-list team");
                    CHECK_OK(symm_barrier(d));
                }
                CHECK_OK(symm_pool_destroy(p));
            }
        }
        if (ts != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(ts));
        if (tc != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(tc));
    }
    CHECK_OK(symm_barrier_all());

    /* creation in one thread while another thread of the same PE runs barriers on WORLD:
     * every PE makes the team of its pair {me^1, me} (in that order) */
    if (npes >= 2) {
        barrier_job_t job = {SYMM_TEAM_WORLD, 200, SYMM_SUCCESS};
        pthread_t th;
        CHECK_TRUE(pthread_create(&th, NULL, barrier_thread, &job) == 0, "thread");
        int partner = me ^ 1;
        for (int rep = 0; rep < 20; rep++) {
            if (partner < npes) {
                int list[2] = {partner, me};
                if (me & 1) { /* both must pass the same order: the odd one's view */
                    list[0] = me;
                    list[1] = partner;
                }
                symm_team_t t;
                CHECK_OK(symm_team_create(list, 2, &t));
                check_list_team(t, list, 2, "pair team");
                CHECK_OK(symm_sync(t));
                CHECK_OK(symm_team_destroy(t));
            } else {
                int list[1] = {me};
                symm_team_t t;
                CHECK_OK(symm_team_create(list, 1, &t));
                CHECK_OK(symm_barrier(t));
                CHECK_OK(symm_team_destroy(t));
            }
        }
        pthread_join(th, NULL);
        CHECK_OK(job.st);
        /* members that pass different orders: MISMATCH on both, no team */
        if (partner < npes) {
            int list[2] = {me, partner}; /* each puts itself first: the lists differ */
            symm_team_t t = 777;
            CHECK_STATUS(symm_team_create(list, 2, &t), SYMM_ERR_MISMATCH);
            CHECK_TRUE(t == 777, "failed create wrote its output");
        }
        CHECK_OK(symm_barrier_all());
    }
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_get_info(&info1));
    CHECK_TRUE(info1.team_heap_used == info0.team_heap_used, "team region leaked: %zu vs %zu",
               info1.team_heap_used, info0.team_heap_used);
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_team_create: OK (%d PEs)\n", npes);
    return 0;
}
