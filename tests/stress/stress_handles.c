/* stress_handles.c — CYCLES creations and destructions of split teams, rank-list teams
 * and small pools, with stale handles probed throughout: every handle a PE is given is
 * new on it (none comes back, which would make an old handle name a new object), calls
 * on the last RING destroyed handles and on a sample of old ones are refused, and live
 * teams still give right barriers and allreduces of random data.
 * CYCLES: SYMM_STRESS_ITERS, else 1000000 (1/50 under valgrind): well past 2^17, so that
 * handles which repeat that soon (a 7-bit generation over a 1024-deep reuse queue) fail. */
#include "common/test_util.h"

#define LIVE_MAX  8   /* objects alive at once */
#define RING      64  /* last destroyed handles, probed every cycle */
#define OLD_MAX   512 /* a sample of handles destroyed long ago */
#define OLD_EVERY 2003
#define COUNT_MAX 64 /* allreduce elements */

typedef struct {
    int used, is_pool, n;
    int members[64];  /* world ranks in team order */
    symm_team_t team; /* a team, or a pool's duplicate; SYMM_TEAM_INVALID if not a member */
    symm_pool_t pool; /* a pool, else SYMM_POOL_INVALID */
    size_t ndups;
} obj_t;

typedef struct {
    symm_team_t team;
    symm_pool_t pool;
} stale_t;

/* Every handle this PE was given: open addressing on 2^bits slots, 0 free (WORLD, never
 * inserted, is 0). */
static uint64_t *seen;
static uint64_t seen_mask, seen_count;

static void seen_insert(int64_t h, long cycle)
{
    uint64_t k = (uint64_t)h, i = (k * 0x9e3779b97f4a7c15ull) >> 20;
    CHECK_TRUE(h > 0, "cycle %ld: handle 0x%llx is not positive", cycle, (unsigned long long)h);
    for (;; i++) {
        uint64_t *e = &seen[i & seen_mask];
        CHECK_TRUE(*e != k, "cycle %ld: handle 0x%llx given out again (%llu handles before)",
                   cycle, (unsigned long long)h, (unsigned long long)seen_count);
        if (!*e) {
            *e = k;
            seen_count++;
            return;
        }
    }
}

static void probe(const stale_t *s, int64_t *buf, long cycle, int deep)
{
    CHECK_STATUS(symm_barrier(s->team), SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_I64(symm_team_n_pes(s->team), -1);
    if (s->pool != SYMM_POOL_INVALID) {
        CHECK_TRUE(symm_pool_team(s->pool, 0) == SYMM_TEAM_INVALID,
                   "cycle %ld: stale pool 0x%llx gives a duplicate", cycle,
                   (unsigned long long)s->pool);
        CHECK_EQ_U64(symm_pool_size(s->pool), 0);
    }
    if (!deep) return;
    CHECK_STATUS(symm_allreduce(s->team, buf, buf + COUNT_MAX, 1, SYMM_INT64, SYMM_OP_SUM),
                 SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_I64(symm_team_my_pe(s->team), -1);
    CHECK_EQ_I64(symm_team_world_pe(s->team, 0), -1);
    CHECK_EQ_I64(symm_team_translate_pe(SYMM_TEAM_WORLD, 0, s->team), -1);
    char d[96];
    CHECK_TRUE(strstr(symm_team_describe(s->team, d, sizeof d), "invalid") != NULL,
               "cycle %ld: stale handle described as %s", cycle, d);
}

/* A barrier and an allreduce (sum of int64, random data from a per-cycle seed that
 * every member can recompute) on a live team. */
static void use_live(const obj_t *o, int64_t *buf, long cycle, test_rng_t *shared)
{
    size_t count = 1 + (size_t)test_rng_below(shared, COUNT_MAX);
    uint64_t seed = test_rng_next(shared);
    if (o->team == SYMM_TEAM_INVALID) return; /* not a member */
    int me = symm_team_my_pe(o->team);
    CHECK_EQ_I64(symm_team_n_pes(o->team), o->n);
    CHECK_TRUE(me >= 0 && o->members[me] == symm_my_pe(), "cycle %ld: my_pe %d", cycle, me);
    CHECK_OK(symm_barrier(o->team));
    int64_t want[COUNT_MAX] = {0};
    for (int j = 0; j < o->n; j++) {
        test_rng_t r;
        test_rng_seed(&r, seed ^ ((uint64_t)j << 32));
        for (size_t i = 0; i < count; i++) {
            int64_t v = (int64_t)(test_rng_next(&r) >> 20) - ((int64_t)1 << 43);
            want[i] += v;
            if (j == me) buf[COUNT_MAX + i] = v;
        }
    }
    CHECK_OK(symm_allreduce(o->team, buf, buf + COUNT_MAX, count, SYMM_INT64, SYMM_OP_SUM));
    for (size_t i = 0; i < count; i++)
        CHECK_TRUE(buf[i] == want[i],
                   "cycle %ld: allreduce[%zu] of %zu on %d PEs: %lld, "
                   "want %lld",
                   cycle, i, count, o->n, (long long)buf[i], (long long)want[i]);
}

static int is_member(const obj_t *o, int pe)
{
    for (int i = 0; i < o->n; i++)
        if (o->members[i] == pe) return 1;
    return 0;
}

static void create(obj_t *o, int kind, test_rng_t *shared, long cycle)
{
    int me = symm_my_pe(), npes = symm_n_pes();
    memset(o, 0, sizeof *o);
    o->used = 1;
    o->team = SYMM_TEAM_INVALID;
    o->pool = SYMM_POOL_INVALID;
    if (kind == 0) { /* split of WORLD, any stride sign */
        int size = 1 + (int)test_rng_below(shared, (uint64_t)npes);
        int stride = 1;
        if (size > 1)
            stride += (int)test_rng_below(shared, (uint64_t)((npes - 1) / (size - 1)));
        int span = (size - 1) * stride;
        int start = (int)test_rng_below(shared, (uint64_t)(npes - span));
        if (test_rng_below(shared, 2)) {
            start += span;
            stride = -stride;
        }
        o->n = size;
        for (int k = 0; k < size; k++)
            o->members[k] = start + k * stride;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, start, stride, size, &o->team));
        CHECK_TRUE((o->team != SYMM_TEAM_INVALID) == is_member(o, me),
                   "cycle %ld: split gave 0x%llx", cycle, (unsigned long long)o->team);
    } else if (kind == 1) { /* rank list in random order: only its members call */
        int list[64];
        for (int i = 0; i < npes; i++)
            list[i] = i;
        for (int i = npes - 1; i > 0; i--) {
            int j = (int)test_rng_below(shared, (uint64_t)i + 1), x = list[i];
            list[i] = list[j];
            list[j] = x;
        }
        o->n = 1 + (int)test_rng_below(shared, (uint64_t)npes);
        memcpy(o->members, list, (size_t)o->n * sizeof(int));
        if (is_member(o, me)) CHECK_OK(symm_team_create(o->members, o->n, &o->team));
    } else { /* pool of WORLD */
        o->is_pool = 1;
        o->n = npes;
        for (int i = 0; i < npes; i++)
            o->members[i] = i;
        o->ndups = 1 + (size_t)test_rng_below(shared, 4);
        CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, o->ndups, &o->pool));
        CHECK_EQ_U64(symm_pool_size(o->pool), o->ndups);
        o->team = symm_pool_team(o->pool, (size_t)test_rng_below(shared, o->ndups));
        seen_insert(o->pool, cycle);
        seen_insert(symm_pool_team(o->pool, 0), cycle);
        return;
    }
    if (o->team != SYMM_TEAM_INVALID) seen_insert(o->team, cycle);
}

int main(void)
{
    CHECK_OK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    CHECK_TRUE(npes <= 64, "at most 64 PEs");
    long cycles = test_stress_iters(1000000);
    if (me == 0 && cycles != 1000000)
        printf("stress_handles: %ld cycles instead of 1000000\n", cycles);
    int bits = 12;
    while (bits < 30 && ((uint64_t)1 << bits) < 4 * (uint64_t)cycles)
        bits++;
    seen_mask = ((uint64_t)1 << bits) - 1;
    seen = calloc(seen_mask + 1, sizeof *seen);
    CHECK_TRUE(seen != NULL, "handle set of 2^%d", bits);
    int64_t *buf = symm_malloc(2 * COUNT_MAX * sizeof *buf);
    CHECK_TRUE(buf != NULL, "symm_malloc: %s", symm_last_error());

    test_rng_t shared, mine;
    test_rng_seed(&shared, test_seed()); /* the same choices on every PE */
    test_rng_seed(&mine, test_seed() ^ (0x1234567ull * (uint64_t)(me + 1)));
    obj_t live[LIVE_MAX] = {{0}};
    stale_t ring[RING], old[OLD_MAX];
    long nring = 0, nold = 0, ndestroyed = 0, nlive_checks = 0, nprobes = 0;
    double t0 = test_now();
    for (long c = 0; c < cycles; c++) {
        /* create into a free place, or replace a random live object */
        int k = (int)test_rng_below(&shared, LIVE_MAX);
        obj_t *o = &live[k];
        if (o->used) {
            if (o->team != SYMM_TEAM_INVALID || o->is_pool) {
                stale_t s = {o->team, o->pool};
                if (o->is_pool)
                    CHECK_OK(symm_pool_destroy(o->pool));
                else
                    CHECK_OK(symm_team_destroy(o->team));
                ring[nring++ % RING] = s;
                if (ndestroyed++ % OLD_EVERY == 0) old[nold++ % OLD_MAX] = s;
            }
            o->used = 0;
        }
        /* A quarter of the time the place stays empty: the live set varies. */
        if (test_rng_below(&shared, 4) != 0)
            create(o, (int)test_rng_below(&shared, 3), &shared, c);
        /* stale handles: a few of the recent ones, one old one */
        long avail = nring < RING ? nring : RING;
        for (int p = 0; p < 3 && avail > 0; p++, nprobes++)
            probe(&ring[test_rng_below(&mine, (uint64_t)avail)], buf, c, p == 0 && c % 16 == 0);
        if (nold > 0) {
            probe(&old[c % (nold < OLD_MAX ? nold : OLD_MAX)], buf, c, 0);
            nprobes++;
        }
        /* now and then, a live object still works */
        if (test_rng_below(&shared, 64) == 0) {
            obj_t *l = &live[test_rng_below(&shared, LIVE_MAX)];
            if (l->used) {
                use_live(l, buf, c, &shared);
                nlive_checks += l->team != SYMM_TEAM_INVALID;
            }
        }
        /* rank-list teams let non-members run ahead; keep every PE within a bound */
        if (c % 1024 == 1023) CHECK_OK(symm_barrier_all());
    }
    for (int k = 0; k < LIVE_MAX; k++) {
        obj_t *o = &live[k];
        if (!o->used) continue;
        if (o->is_pool)
            CHECK_OK(symm_pool_destroy(o->pool));
        else if (o->team != SYMM_TEAM_INVALID)
            CHECK_OK(symm_team_destroy(o->team));
    }
    CHECK_OK(symm_barrier_all());
    for (long i = 0; i < (nold < OLD_MAX ? nold : OLD_MAX); i++)
        probe(&old[i], buf, -1, 1);
    double dt = test_now() - t0;
    CHECK_OK(symm_free(buf));
    free(seen);
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf("stress_handles: OK (%d PEs, %ld cycles, %.1f s; PE 0: %llu handles, all new, "
               "%ld destroyed, %ld stale probes, %ld live checks)\n",
               npes, cycles, dt, (unsigned long long)seen_count, ndestroyed, nprobes,
               nlive_checks);
    return 0;
}
