/* test_team_errors.c — bad input to the team and pool calls: non-members, out-of-range
 * start/stride/size, empty and negative sizes, bad rank lists, destroyed teams and
 * pools used again, destroying WORLD/NODE or a pool duplicate, pool handles used as
 * teams and the reverse, guessed handles (the internal team's among them), handles kept
 * over many creations, NULL outputs. Each returns its specific status, writes no output,
 * and leaves the world usable (a barrier after every group). */
#include "common/test_util.h"

static int me, npes;

#define SENTINEL ((symm_team_t)0x7777)

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    symm_info_t info0, info1;
    CHECK_OK(symm_get_info(&info0));
    symm_team_t t = SENTINEL, t2 = SENTINEL;

    /* ---- guessed handles: the next ones after NODE, the largest, others of the form
     * n << 40. None is live (nothing was created yet); a call on one is refused,
     * and heap allocation (which agrees on an internal world team) still works after. */
    static const symm_team_t guesses[] = {SYMM_TEAM_NODE * 2,
                                          SYMM_TEAM_NODE * 3,
                                          SYMM_TEAM_NODE + 1,
                                          SYMM_TEAM_NODE * 2 + 1,
                                          SYMM_TEAM_NODE | ((symm_team_t)1 << 24),
                                          INT64_MAX,
                                          INT64_MAX - 1,
                                          (symm_team_t)2 << 40,
                                          (symm_team_t)3 << 40,
                                          (symm_team_t)1 << 62};
    uint64_t *sbuf = symm_malloc(2 * sizeof *sbuf);
    CHECK_TRUE(sbuf != NULL, "symm_malloc: %s", symm_last_error());
    for (size_t i = 0; i < sizeof guesses / sizeof guesses[0]; i++) {
        symm_team_t g = guesses[i];
        char buf[96];
        CHECK_STATUS(symm_barrier(g), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_sync(g), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_allreduce(g, sbuf, sbuf + 1, 1, SYMM_UINT64, SYMM_OP_SUM),
                     SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_pool_grow(g, 2), SYMM_ERR_TEAM_INVALID);
        CHECK_EQ_I64(symm_team_n_pes(g), -1);
        CHECK_EQ_I64(symm_team_my_pe(g), -1);
        CHECK_EQ_I64(symm_team_world_pe(g, 0), -1);
        CHECK_EQ_I64(symm_team_translate_pe(SYMM_TEAM_WORLD, 0, g), -1);
        CHECK_EQ_U64(symm_pool_size(g), 0);
        CHECK_TRUE(symm_pool_team(g, 0) == SYMM_TEAM_INVALID, "pool_team of 0x%llx",
                   (unsigned long long)g);
        CHECK_TRUE(strstr(symm_team_describe(g, buf, sizeof buf), "invalid") != NULL,
                   "describe(0x%llx) = %s", (unsigned long long)g, buf);
    }
    /* a team's handle with the pool bit is no pool: it cannot be grown or destroyed */
    CHECK_STATUS(symm_pool_grow(SYMM_TEAM_WORLD | ((symm_team_t)1 << 24), 4),
                 SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_pool_destroy(SYMM_TEAM_NODE | ((symm_team_t)1 << 24)),
                 SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_I64(symm_team_n_pes(SYMM_TEAM_WORLD), npes);
    CHECK_OK(symm_barrier(SYMM_TEAM_NODE));
    for (int k = 0; k < 3; k++) {
        uint64_t *a = symm_calloc(16, sizeof *a);
        CHECK_TRUE(a != NULL, "symm_calloc after guessed handles: %s", symm_last_error());
        for (int i = 0; i < 16; i++)
            CHECK_EQ_U64(a[i], 0);
        CHECK_OK(symm_free(a));
    }
    CHECK_OK(symm_free(sbuf));
    CHECK_OK(symm_barrier_all());

    /* ---- split arguments (every PE passes the same bad ones: no one waits) */
    static const int bad[][3] = {{0, 1, 0},  {0, 1, -1}, {-1, 1, 1}, {0, 0, 2},  {0, 1, 1000},
                                 {0, 2, 64}, {1, -1, 3}, {0, -1, 2}, {0, 1, 65}, {70, 1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int start = bad[i][0], stride = bad[i][1], size = bad[i][2];
        if (start == 70) start = npes; /* start just past the end */
        if (size == 65) size = npes + 1;
        CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, start, stride, size, &t),
                     SYMM_ERR_INVALID_ARG);
        CHECK_TRUE(t == SENTINEL, "failed split wrote its output");
    }
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, 0, npes, 2, &t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, npes - 1, 1, 2, &t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, 0, INT32_MAX, 3, &t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, 0, INT32_MIN, 2, &t),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, 1, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_strided(SYMM_TEAM_INVALID, 0, 1, 1, &t),
                 SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_team_split_2d(SYMM_TEAM_WORLD, 0, &t, &t2), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_2d(SYMM_TEAM_WORLD, -3, &t, &t2), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_2d(SYMM_TEAM_WORLD, 1, NULL, &t2), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_2d(SYMM_TEAM_WORLD, 1, &t, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_split_2d((symm_team_t)0x55555555, 1, &t, &t2),
                 SYMM_ERR_TEAM_INVALID);
    CHECK_TRUE(t == SENTINEL && t2 == SENTINEL, "failed splits wrote outputs");
    CHECK_OK(symm_barrier_all());

    /* ---- rank lists */
    int all[64], notme[64], nn = 0;
    for (int i = 0; i < npes; i++) {
        all[i] = i;
        if (i != me) notme[nn++] = i;
    }
    CHECK_STATUS(symm_team_create(NULL, 1, &t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_create(all, 0, &t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_create(all, -2, &t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_create(all, npes, NULL), SYMM_ERR_INVALID_ARG);
    int big[65];
    for (int i = 0; i < 65; i++)
        big[i] = i % npes;
    CHECK_STATUS(symm_team_create(big, npes + 1, &t), SYMM_ERR_INVALID_ARG);
    int dup_list[2] = {me, me};
    CHECK_STATUS(symm_team_create(dup_list, 2, &t), SYMM_ERR_INVALID_ARG);
    int oor[2] = {me, npes};
    if (npes >= 2) CHECK_STATUS(symm_team_create(oor, 2, &t), SYMM_ERR_PE_OUT_OF_RANGE);
    int neg[1] = {-1};
    CHECK_STATUS(symm_team_create(neg, 1, &t), SYMM_ERR_PE_OUT_OF_RANGE);
    if (nn > 0) {
        CHECK_STATUS(symm_team_create(notme, nn, &t), SYMM_ERR_NOT_MEMBER);
        CHECK_STATUS(symm_pool_get("notme", notme, nn, 2, &t), SYMM_ERR_NOT_MEMBER);
    }
    CHECK_TRUE(t == SENTINEL, "failed create wrote its output");
    CHECK_OK(symm_barrier_all());

    /* ---- destroyed team used again */
    symm_team_t half;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, (npes + 1) / 2, &half));
    if (half != SYMM_TEAM_INVALID) {
        CHECK_OK(symm_barrier(half));
        CHECK_OK(symm_team_destroy(half));
        CHECK_STATUS(symm_barrier(half), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_sync(half), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_team_destroy(half), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_team_split_strided(half, 0, 1, 1, &t), SYMM_ERR_TEAM_INVALID);
        CHECK_STATUS(symm_pool_create(half, 2, &t), SYMM_ERR_TEAM_INVALID);
        uint64_t x = 0;
        CHECK_STATUS(symm_team_put(half, &x, &x, 8, 0), SYMM_ERR_TEAM_INVALID);
        CHECK_EQ_I64(symm_team_my_pe(half), -1);
        CHECK_EQ_I64(symm_team_n_pes(half), -1);
        CHECK_EQ_I64(symm_team_world_pe(half, 0), -1);
        CHECK_EQ_I64(symm_team_translate_pe(half, 0, SYMM_TEAM_WORLD), -1);
        CHECK_EQ_I64(symm_team_translate_pe(SYMM_TEAM_WORLD, 0, half), -1);
        /* a new team made afterwards does not resurrect the old handle */
        symm_team_t again;
        int one[1] = {me};
        CHECK_OK(symm_team_create(one, 1, &again));
        CHECK_TRUE(again != half, "the old handle names the new team");
        CHECK_STATUS(symm_barrier(half), SYMM_ERR_TEAM_INVALID);
        CHECK_OK(symm_team_destroy(again));
    }
    CHECK_OK(symm_barrier_all());

    /* ---- predefined teams and pool duplicates cannot be destroyed */
    CHECK_STATUS(symm_team_destroy(SYMM_TEAM_WORLD), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_destroy(SYMM_TEAM_NODE), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_team_destroy(SYMM_TEAM_INVALID), SYMM_ERR_TEAM_INVALID);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_barrier(SYMM_TEAM_NODE));
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 4, &pool));
    CHECK_STATUS(symm_team_destroy(symm_pool_team(pool, 1)), SYMM_ERR_INVALID_ARG);
    /* a pool handle used as a team, and a team handle used as a pool */
    CHECK_STATUS(symm_barrier(pool), SYMM_ERR_TEAM_INVALID);
    CHECK_TRUE(strstr(symm_last_error(), "pool") != NULL,
               "message does not say it is a pool: %s", symm_last_error());
    CHECK_STATUS(symm_team_destroy(pool), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_team_split_strided(pool, 0, 1, 1, &t), SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_I64(symm_team_my_pe(pool), -1);
    CHECK_EQ_I64(symm_team_n_pes(pool), -1);
    CHECK_STATUS(symm_pool_grow(SYMM_TEAM_WORLD, 8), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_pool_destroy(SYMM_TEAM_WORLD), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_pool_destroy(symm_pool_team(pool, 0)), SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_U64(symm_pool_size(SYMM_TEAM_WORLD), 0);
    CHECK_TRUE(symm_pool_team(SYMM_TEAM_WORLD, 0) == SYMM_TEAM_INVALID, "pool_team of a team");
    CHECK_STATUS(symm_pool_create(SYMM_TEAM_WORLD, 0, &t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_create(SYMM_TEAM_WORLD, 2, NULL), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_create(pool, 2, &t), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_pool_create(SYMM_TEAM_WORLD, (size_t)1 << 40, &t), SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_pool_grow(pool, (size_t)1 << 40), SYMM_ERR_INVALID_ARG);
    CHECK_TRUE(t == SENTINEL, "failed pool calls wrote outputs");
    CHECK_EQ_U64(symm_pool_size(pool), 4);
    CHECK_OK(symm_barrier(symm_pool_team(pool, 3)));
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_STATUS(symm_pool_destroy(pool), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_pool_grow(pool, 8), SYMM_ERR_TEAM_INVALID);
    CHECK_STATUS(symm_barrier(symm_pool_team(pool, 0)), SYMM_ERR_TEAM_INVALID);
    CHECK_OK(symm_barrier_all());

    /* ---- a stale handle of a destroyed pool duplicate, kept from before */
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
    symm_team_t d1 = symm_pool_team(pool, 1);
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_STATUS(symm_barrier(d1), SYMM_ERR_TEAM_INVALID);
    CHECK_EQ_I64(symm_team_my_pe(d1), -1);
    CHECK_OK(symm_barrier_all());

    /* ---- a destroyed pool's handles: no duplicate, no size, no description */
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    CHECK_TRUE(symm_pool_team(pool | 1, 0) == SYMM_TEAM_INVALID, "a pool handle with "
                                                                 "duplicate bits resolves");
    symm_pool_t gone = pool;
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_TRUE(symm_pool_team(gone, 0) == SYMM_TEAM_INVALID, "pool_team of a destroyed pool");
    CHECK_TRUE(symm_pool_team(gone, 2) == SYMM_TEAM_INVALID, "pool_team of a destroyed pool");
    CHECK_EQ_U64(symm_pool_size(gone), 0);
    {
        char buf[96];
        CHECK_TRUE(strstr(symm_team_describe(gone, buf, sizeof buf), "invalid") != NULL,
                   "describe of a destroyed pool: %s", buf);
    }
    CHECK_OK(symm_barrier_all());

    /* ---- handles kept over many creations: more than 2^17, so that handles which
     * repeat that soon (a 7-bit generation over a 1024-deep reuse queue) fail. One-PE
     * teams (no communication); no handle value may come back, and the first one stays
     * refused while later teams live. */
    {
        enum { MANY = 140000 };
        int one[1] = {me};
        symm_team_t first = SYMM_TEAM_INVALID, live = SYMM_TEAM_INVALID;
        for (long k = 0; k < MANY; k++) {
            symm_team_t h;
            CHECK_OK(symm_team_create(one, 1, &h));
            CHECK_TRUE(h >= 0 && h != first,
                       "creation %ld got handle 0x%llx, the first "
                       "one's",
                       k, (unsigned long long)h);
            if (k == 0) first = h;
            if (k % 4096 == 4095) { /* keep one alive for a while */
                if (live != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(live));
                live = h;
            } else {
                CHECK_OK(symm_team_destroy(h));
            }
            if (k % 1024 == 1023) {
                CHECK_STATUS(symm_barrier(first), SYMM_ERR_TEAM_INVALID);
                CHECK_EQ_I64(symm_team_n_pes(first), -1);
            }
        }
        CHECK_EQ_I64(symm_team_n_pes(live), 1);
        CHECK_OK(symm_barrier(live));
        CHECK_OK(symm_team_destroy(live));
        CHECK_STATUS(symm_barrier(first), SYMM_ERR_TEAM_INVALID);
    }
    CHECK_OK(symm_barrier_all());

    /* ---- many teams alive at once (the handle table grows under them): each still
     * answers for itself; destroyed ones are refused while the rest live on */
    {
        enum { NLIVE = 2500 };
        int one[1] = {me};
        symm_team_t *h = malloc(NLIVE * sizeof *h);
        CHECK_TRUE(h != NULL, "malloc");
        for (int k = 0; k < NLIVE; k++) {
            CHECK_OK(symm_team_create(one, 1, &h[k]));
            for (int j = 0; j < k; j += 97)
                CHECK_TRUE(h[j] != h[k], "teams %d and %d share handle 0x%llx", j, k,
                           (unsigned long long)h[k]);
        }
        for (int k = 0; k < NLIVE; k += 2)
            CHECK_OK(symm_team_destroy(h[k]));
        for (int k = 0; k < NLIVE; k++) {
            if (k % 2 == 0) {
                CHECK_STATUS(symm_barrier(h[k]), SYMM_ERR_TEAM_INVALID);
                CHECK_EQ_I64(symm_team_n_pes(h[k]), -1);
            } else {
                CHECK_OK(symm_barrier(h[k]));
                CHECK_EQ_I64(symm_team_n_pes(h[k]), 1);
                CHECK_EQ_I64(symm_team_world_pe(h[k], 0), me);
            }
        }
        for (int k = 1; k < NLIVE; k += 2)
            CHECK_OK(symm_team_destroy(h[k]));
        for (int k = 0; k < NLIVE; k++)
            CHECK_EQ_I64(symm_team_my_pe(h[k]), -1);
        free(h);
    }
    CHECK_OK(symm_barrier_all());

    /* ---- members calling different collectives on one team: COLL_MISMATCH on every
     * member, naming another; the team is then destroyed (through its control
     * duplicate, which the mismatch did not touch) */
    if (npes >= 2) {
        symm_team_t mm;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &mm));
        symm_status_t st = me == 0 ? symm_barrier(mm) : symm_sync(mm);
        CHECK_TRUE(st == SYMM_ERR_COLL_MISMATCH, "barrier vs sync: status %d (%s)", (int)st,
                   symm_last_error());
        CHECK_TRUE(strstr(symm_last_error(), "(world ") != NULL, "mismatch names no PE: %s",
                   symm_last_error());
        CHECK_OK(symm_team_destroy(mm));
        CHECK_OK(symm_barrier_all());
    }

    CHECK_OK(symm_get_info(&info1));
    CHECK_TRUE(info1.team_heap_used == info0.team_heap_used, "team region leaked: %zu vs %zu",
               info1.team_heap_used, info0.team_heap_used);
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_team_errors: OK (%d PEs)\n", npes);
    return 0;
}
