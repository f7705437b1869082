/* test_moe_topk.c — top-k MoE dispatch and weighted combine against the serial model of
 * topk_ref.h on random routings: k = 1..8, 1..32 experts per PE, tokens with every expert
 * on one PE, tokens with none, PEs with no tokens and PEs that receive nothing, major_align
 * 0/1/16/128 and others, side payloads of several sizes, float/fp16/bf16 combines with and
 * without weights (exactly the documented float accumulation, and within rounding of a
 * double sum). Every row, source, count, offset and topk_rows entry is checked, and
 * padding is never written. The same on concurrent sub-teams of a 2-D split (with pools
 * and worker threads), on 1-PE teams; worker and parallel forms equal the plain ones; bad
 * arguments fail on every PE with a clear message and change nothing, and the team still
 * works afterwards. */
#include <pthread.h>

#include "tilemoe/topk_ref.h"

static int me, npes;
static uint64_t seed;

#define MAXTOK   48
#define MAXK     8
#define MAXRB    72
#define MAXSIDE  3
#define MAXROWS  12288 /* 8 PEs x 48 tokens x 8 slots + 32 experts x 128 padding */
#define MAXHID   40
#define SENTINEL 0xC3
#define SRC_SENT 0x5a

static uint8_t *inbuf;                   /* symmetric: MAXTOK rows of MAXRB */
static uint8_t *sidein[MAXSIDE];         /* symmetric: MAXTOK rows of MAXRB */
static uint8_t *eobuf;                   /* symmetric: MAXROWS rows of MAXHID floats */
static uint8_t *dout, *sideout[MAXSIDE]; /* local */
static uint8_t *cout;                    /* local: MAXTOK rows of MAXHID floats */
static symm_moe_src_t *osrc;             /* local: MAXROWS */

typedef struct {
    topk_case_t c;
    symm_team_t team;
    int rank;
    size_t rb, srb[MAXSIDE];
    int nside;
    symm_type_t type;
    size_t hidden;
    int weighted;
} tcase_t;

static void tcase_team(tcase_t *tc, symm_team_t team)
{
    tc->team = team;
    tc->c.n = symm_team_n_pes(team);
    tc->rank = symm_team_my_pe(team);
    for (int i = 0; i < tc->c.n; i++)
        tc->c.world[i] = symm_team_world_pe(team, i);
}

/* My input rows and side rows (the model's patterns); the rest of the buffers garbage. */
static size_t fill_input(const tcase_t *tc)
{
    size_t T = topk_ref_tokens(&tc->c, tc->rank);
    memset(inbuf, 0x11, (size_t)MAXTOK * MAXRB);
    for (size_t t = 0; t < T; t++)
        test_fill_pattern(inbuf + t * tc->rb, tc->rb, topk_ref_row_tag(&tc->c, tc->rank, t, 0));
    for (int p = 0; p < tc->nside; p++) {
        memset(sidein[p], 0x22, (size_t)MAXTOK * MAXRB);
        for (size_t t = 0; t < T; t++)
            test_fill_pattern(sidein[p] + t * tc->srb[p], tc->srb[p],
                              topk_ref_row_tag(&tc->c, tc->rank, t, 1 + p));
    }
    return T;
}

static void clear_outputs(void)
{
    memset(dout, SENTINEL, (size_t)MAXROWS * MAXRB);
    for (int p = 0; p < MAXSIDE; p++)
        memset(sideout[p], SENTINEL, (size_t)MAXROWS * MAXRB);
    memset(osrc, SRC_SENT, sizeof(symm_moe_src_t) * MAXROWS);
}

typedef struct {
    size_t counts[32], offsets[32], rows;
    int64_t trows[MAXTOK * MAXK];
} douts_t;

/* The dispatch outputs on this PE against the model (the layout outputs too when set). */
static void check_dispatch(const tcase_t *tc, const topk_routes_t *R, const douts_t *d,
                           int check_layout_outputs, const char *what)
{
    topk_got_t g = {.out = dout,
                    .rb = tc->rb,
                    .nside = tc->nside,
                    .maxrows = MAXROWS,
                    .sentinel = SENTINEL,
                    .src_sentinel = SRC_SENT};
    for (int p = 0; p < tc->nside; p++) {
        g.side_out[p] = sideout[p];
        g.srb[p] = tc->srb[p];
    }
    if (check_layout_outputs) {
        g.src = osrc;
        g.counts = d->counts;
        g.offsets = d->offsets;
        g.rows = &d->rows;
        g.trows = d->trows;
    }
    topk_ref_check_dispatch(&tc->c, R, tc->rank, &g, what);
}

static void fill_expert_out(const tcase_t *tc, const douts_t *d)
{
    topk_ref_fill_expert_out(&tc->c, tc->rank, tc->type, tc->hidden, d->rows, d->counts,
                             d->offsets, osrc, eobuf);
}

static void check_combine(const tcase_t *tc, const topk_routes_t *R, const uint8_t *out,
                          const char *what)
{
    topk_ref_check_combine(&tc->c, R, tc->rank, tc->type, tc->hidden, tc->weighted, out,
                           (size_t)MAXTOK * MAXHID * 4, SENTINEL, what);
}

static symm_moe_side_t sides_of(const tcase_t *tc, int p, int null_in)
{
    symm_moe_side_t s = {null_in ? NULL : sidein[p], sideout[p], tc->srb[p]};
    return s;
}

static const int64_t *my_idx(const tcase_t *tc, const topk_routes_t *R)
{
    return R->idx[tc->rank];
}

/* My weights, by the model (NULL when the case is unweighted). */
static const float *my_weights(const tcase_t *tc, const topk_routes_t *R, float *w)
{
    if (!tc->weighted) return NULL;
    for (size_t t = 0; t < R->tokens[tc->rank]; t++)
        for (int i = 0; i < tc->c.k; i++)
            w[t * (size_t)tc->c.k + (size_t)i] = topk_ref_weight(&tc->c, tc->rank, t, i);
    return w;
}

/* Whether this member routes any slot. */
static int routes_any(const tcase_t *tc, const topk_routes_t *R)
{
    for (size_t q = 0; q < R->tokens[tc->rank] * (size_t)tc->c.k; q++)
        if (R->idx[tc->rank][q] >= 0) return 1;
    return 0;
}

/* Dispatch then combine with the plain forms, both checked. With null_in, a member that
 * routes nothing passes in = NULL (and NULL side ins). */
static void round_trip(tcase_t *tc, int null_in)
{
    topk_routes_t R;
    topk_ref_routes(&tc->c, &R);
    size_t T = fill_input(tc);
    int nul = null_in && !routes_any(tc, &R);
    symm_moe_side_t side[MAXSIDE];
    for (int p = 0; p < tc->nside; p++)
        side[p] = sides_of(tc, p, nul);
    douts_t d;
    clear_outputs();
    CHECK_OK(symm_moe_topk_dispatch(tc->team, dout, MAXROWS, nul ? NULL : inbuf, T, tc->rb,
                                    my_idx(tc, &R), tc->c.k, tc->c.ne, tc->c.align,
                                    tc->nside ? side : NULL, tc->nside, d.counts, d.offsets,
                                    osrc, &d.rows, d.trows));
    check_dispatch(tc, &R, &d, 1, "dispatch");
    fill_expert_out(tc, &d);
    float w[MAXTOK * MAXK];
    memset(cout, SENTINEL, (size_t)MAXTOK * MAXHID * 4);
    CHECK_OK(symm_moe_topk_combine(tc->team, cout, T, d.rows ? eobuf : NULL, d.rows, tc->hidden,
                                   tc->type, my_idx(tc, &R), d.trows, my_weights(tc, &R, w),
                                   tc->c.k, tc->c.ne));
    check_combine(tc, &R, cout, "combine");
    topk_ref_routes_free(&tc->c, &R);
}

static const symm_type_t row_types[3] = {SYMM_FLOAT, SYMM_FP16, SYMM_BF16};

/* A random case on team (the same on every member of it, from tag). */
static void random_case(tcase_t *tc, symm_team_t team, uint64_t tag)
{
    test_rng_t r;
    test_rng_seed(&r, test_mix(seed, tag));
    static const size_t aligns[] = {0, 1, 16, 128, 3, 7};
    static const size_t srbs[] = {1, 4, 7, 16, 56, 64};
    memset(tc, 0, sizeof *tc);
    tcase_team(tc, team);
    tc->c.tag = test_mix(seed, tag + 1);
    tc->c.k = 1 + (int)test_rng_below(&r, MAXK);
    tc->c.ne = 1 + (int)test_rng_below(&r, 32);
    tc->c.align = aligns[test_rng_below(&r, 6)];
    tc->c.maxtok = test_rng_below(&r, MAXTOK + 1);
    tc->c.empty = test_rng_below(&r, 3) == 0 ? (int)test_rng_below(&r, (uint64_t)tc->c.n) : -1;
    tc->c.deaf = test_rng_below(&r, 3) == 0 ? (int)test_rng_below(&r, (uint64_t)tc->c.n) : -1;
    tc->c.one_pe = test_rng_below(&r, 6) == 0;
    tc->c.none_every = (int)test_rng_below(&r, 4);
    tc->rb = 1 + test_rng_below(&r, MAXRB);
    tc->nside = (int)test_rng_below(&r, MAXSIDE + 1);
    for (int p = 0; p < tc->nside; p++)
        tc->srb[p] = srbs[test_rng_below(&r, 6)];
    tc->type = row_types[test_rng_below(&r, 3)];
    tc->hidden = 1 + test_rng_below(&r, MAXHID);
    tc->weighted = test_rng_below(&r, 4) != 0;
}

/* ---------------------------------------------------------------- the sweeps */
/* Every k 1..8 and ne 1..32 at least once, every alignment, every row type, then random
 * cases. */
static void test_sweep(void)
{
    for (int it = 0; it < 64; it++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 1000 + (uint64_t)it);
        if (it < 32) {
            tc.c.k = 1 + it % 8;
            tc.c.ne = 1 + it;
            tc.c.align = (size_t[]){1, 16, 128, 0}[it % 4];
            tc.type = row_types[it % 3];
        }
        round_trip(&tc, it % 2);
    }
}

/* Special routings: every expert of every token on one PE; no token routing anything;
 * every PE but one empty; nobody routing to one PE. */
static void test_special(void)
{
    for (int v = 0; v < 8; v++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 2000 + (uint64_t)v);
        tc.c.maxtok = MAXTOK;
        switch (v) {
        case 0:
        case 1:
            tc.c.one_pe = 1;
            tc.c.k = 8;
            tc.c.ne = v ? 2 : 16; /* with repeats (ne < k) and without */
            break;
        case 2:
            tc.c.none_every = 1; /* nothing routed at all */
            tc.c.align = 16;
            break;
        case 3:
            tc.c.maxtok = 0; /* no tokens anywhere */
            tc.c.align = 128;
            tc.c.ne = 32;
            break;
        case 4:
            tc.c.empty = 0;
            tc.c.deaf = tc.c.n - 1;
            break;
        case 5:
            tc.c.deaf = 0;
            tc.c.one_pe = 1;
            break;
        default:
            tc.c.k = 8;
            tc.c.ne = 32;
            tc.c.align = v == 6 ? 128 : 1;
            tc.nside = 3;
            tc.srb[0] = 1;
            tc.srb[1] = 28;
            tc.srb[2] = 64;
        }
        round_trip(&tc, 1);
    }
}

/* Concurrent sub-teams: a 2-D split of the world (rows of 2 PEs and columns), every PE
 * running its row's case and then its column's, with the plain forms and on pools with 2
 * worker threads; and 1-PE teams. */
typedef struct {
    symm_pool_t pool;
    int worker, nworkers;
    const tcase_t *tc;
    const topk_routes_t *R;
    size_t T;
    douts_t *d;
    int combine;
    const float *w;
    symm_status_t st;
} wjob_t;

static void *wjob_main(void *p)
{
    wjob_t *j = p;
    const tcase_t *tc = j->tc;
    symm_moe_side_t side[MAXSIDE];
    for (int q = 0; q < tc->nside; q++)
        side[q] = sides_of(tc, q, 0);
    int w0 = j->worker == 0;
    if (!j->combine)
        j->st = symm_moe_topk_dispatch_worker(
            j->pool, j->worker, j->nworkers, dout, MAXROWS, inbuf, j->T, tc->rb,
            j->R->idx[tc->rank], tc->c.k, tc->c.ne, tc->c.align, tc->nside ? side : NULL,
            tc->nside, w0 ? j->d->counts : NULL, w0 ? j->d->offsets : NULL, w0 ? osrc : NULL,
            w0 ? &j->d->rows : NULL, w0 ? j->d->trows : NULL);
    else
        j->st = symm_moe_topk_combine_worker(
            j->pool, j->worker, j->nworkers, cout, j->T, j->d->rows ? eobuf : NULL, j->d->rows,
            tc->hidden, tc->type, j->R->idx[tc->rank], j->d->trows, j->w, tc->c.k, tc->c.ne);
    return NULL;
}

/* The worker forms (own threads: nw workers) and the parallel ones (nw, 0: automatic) on
 * pool, against the model. */
static void forms_round_trip(tcase_t *tc, symm_pool_t pool, int nw_threads, int nw_par)
{
    topk_routes_t R;
    topk_ref_routes(&tc->c, &R);
    size_t T = fill_input(tc);
    douts_t d;
    float w[MAXTOK * MAXK];
    const float *wp = my_weights(tc, &R, w);
    /* worker threads */
    clear_outputs();
    wjob_t proto = {.pool = pool, .tc = tc, .R = &R, .T = T, .d = &d, .w = wp};
    TEST_RUN_WORKERS(wjob_t, proto, nw_threads, wjob_main);
    check_dispatch(tc, &R, &d, 1, "dispatch_worker");
    fill_expert_out(tc, &d);
    memset(cout, SENTINEL, (size_t)MAXTOK * MAXHID * 4);
    proto.combine = 1;
    TEST_RUN_WORKERS(wjob_t, proto, nw_threads, wjob_main);
    check_combine(tc, &R, cout, "combine_worker");
    /* parallel */
    symm_moe_side_t side[MAXSIDE];
    for (int p = 0; p < tc->nside; p++)
        side[p] = sides_of(tc, p, 0);
    douts_t d2;
    clear_outputs();
    CHECK_OK(symm_moe_topk_dispatch_parallel(pool, nw_par, dout, MAXROWS, inbuf, T, tc->rb,
                                             my_idx(tc, &R), tc->c.k, tc->c.ne, tc->c.align,
                                             tc->nside ? side : NULL, tc->nside, d2.counts,
                                             d2.offsets, osrc, &d2.rows, d2.trows));
    check_dispatch(tc, &R, &d2, 1, "dispatch_parallel");
    fill_expert_out(tc, &d2);
    memset(cout, SENTINEL, (size_t)MAXTOK * MAXHID * 4);
    CHECK_OK(symm_moe_topk_combine_parallel(pool, nw_par, cout, T, d2.rows ? eobuf : NULL,
                                            d2.rows, tc->hidden, tc->type, my_idx(tc, &R),
                                            d2.trows, wp, tc->c.k, tc->c.ne));
    check_combine(tc, &R, cout, "combine_parallel");
    topk_ref_routes_free(&tc->c, &R);
}

static void test_workers(void)
{
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    for (int it = 0; it < 6; it++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 3000 + (uint64_t)it);
        tc.c.maxtok = MAXTOK;
        forms_round_trip(&tc, pool, 1 + it, it == 5 ? 0 : 1 + (it * 3) % 8);
    }
    CHECK_OK(symm_pool_destroy(pool));
}

static void test_sub_teams(void)
{
    symm_team_t row = SYMM_TEAM_INVALID, col = SYMM_TEAM_INVALID, solo;
    CHECK_OK(symm_team_split_2d(SYMM_TEAM_WORLD, 2, &row, &col));
    CHECK_OK(symm_team_create(&me, 1, &solo));
    const symm_team_t teams[3] = {row, col, solo};
    for (int ti = 0; ti < 3; ti++) {
        symm_team_t team = teams[ti];
        /* the case of this team: tagged by its first member, so that concurrent teams run
         * different cases */
        uint64_t tag = 4000 + (uint64_t)ti * 100 + (uint64_t)symm_team_world_pe(team, 0) * 7;
        for (int it = 0; it < 4; it++) {
            tcase_t tc;
            random_case(&tc, team, tag + (uint64_t)it);
            round_trip(&tc, it % 2);
        }
        symm_pool_t pool;
        CHECK_OK(symm_pool_create(team, 3, &pool));
        tcase_t tc;
        random_case(&tc, team, tag + 50);
        tc.c.maxtok = MAXTOK;
        forms_round_trip(&tc, pool, 2, 3);
        CHECK_OK(symm_pool_destroy(pool));
    }
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_team_destroy(solo));
    CHECK_OK(symm_team_destroy(row));
    CHECK_OK(symm_team_destroy(col));
}

/* ---------------------------------------------------------------- failures */
/* A call expected to fail with want on every PE, the message naming bad_pe on the others
 * (or saying what on the bad one); nothing written. */
static void expect_fail(symm_status_t st, symm_status_t want, int bad_pe, const char *says,
                        const char *what)
{
    CHECK_TRUE(st == want, "%s: status %d (%s), expected %d (%s): %s", what, (int)st,
               symm_strerror(st), (int)want, symm_strerror(want), symm_last_error());
    if (bad_pe < 0 || me == bad_pe) {
        if (says)
            CHECK_TRUE(strstr(symm_last_error(), says) != NULL, "%s: message says '%s': %s",
                       what, says, symm_last_error());
    } else {
        char pe[48];
        snprintf(pe, sizeof pe, "PE %d (world", bad_pe);
        CHECK_TRUE(strstr(symm_last_error(), pe) != NULL, "%s: message names PE %d: %s", what,
                   bad_pe, symm_last_error());
    }
}

static void check_untouched(const douts_t *d, const char *what)
{
    CHECK_ALL_BYTES(dout, SENTINEL, (size_t)MAXROWS * MAXRB, "%s: out written", what);
    CHECK_ALL_BYTES(sideout[0], SENTINEL, (size_t)MAXROWS * MAXRB, "%s: side out written",
                    what);
    CHECK_ALL_BYTES(osrc, SRC_SENT, sizeof(symm_moe_src_t) * MAXROWS, "%s: out_src written",
                    what);
    CHECK_ALL_BYTES(d, 0x77, sizeof *d, "%s: counts, offsets, rows or topk_rows written", what);
}

static void test_bad_input(void)
{
    tcase_t tc;
    random_case(&tc, SYMM_TEAM_WORLD, 5000);
    tc.c.maxtok = MAXTOK;
    tc.c.empty = -1;
    tc.c.none_every = 0;
    tc.c.k = 4;
    tc.c.ne = 3;
    tc.nside = 1;
    tc.srb[0] = 8;
    tc.rb = 16;
    topk_routes_t R;
    topk_ref_routes(&tc.c, &R);
    size_t T = fill_input(&tc);
    CHECK_TRUE(T > 0, "tokens");
    const int64_t *idx = my_idx(&tc, &R);
    int64_t bad_idx[MAXTOK * MAXK];
    memcpy(bad_idx, idx, sizeof(int64_t) * T * 4);
    symm_moe_side_t side[1] = {sides_of(&tc, 0, 0)};
    douts_t d;
    symm_team_t W = SYMM_TEAM_WORLD;
    int last = npes - 1;
    clear_outputs();
    memset(&d, 0x77, sizeof d);
#define DISPATCH(out_, cap_, in_, T_, rb_, idx_, k_, ne_, side_, nside_)                       \
    symm_moe_topk_dispatch(W, out_, cap_, in_, T_, rb_, idx_, k_, ne_, tc.c.align, side_,      \
                           nside_, d.counts, d.offsets, osrc, &d.rows, d.trows)
    /* arguments every PE passes alike */
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 0, 3, side, 1), SYMM_ERR_INVALID_ARG,
                -1, "k = 0", "k 0");
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, SYMM_MOE_TOPK_MAX + 1, 3, side, 1),
                SYMM_ERR_INVALID_ARG, -1, "k = 33", "k too big");
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 0, side, 1), SYMM_ERR_INVALID_ARG,
                -1, "ne = 0", "ne 0");
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 0, idx, 4, 3, side, 1), SYMM_ERR_INVALID_ARG,
                -1, "row_bytes is 0", "row_bytes 0");
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 3, side, SYMM_MOE_SIDE_MAX + 1),
                SYMM_ERR_INVALID_ARG, -1, "nside", "nside too big");
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 3, NULL, 1), SYMM_ERR_INVALID_ARG,
                -1, "nside", "side NULL");
    symm_moe_side_t zero = {sidein[0], sideout[0], 0};
    expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 3, &zero, 1),
                SYMM_ERR_INVALID_ARG, -1, "side[0].row_bytes is 0", "side row_bytes 0");
    /* a bad expert id on the last PE only: every PE fails, naming it */
    bad_idx[T * 4 - 1] = (int64_t)npes * 3;
    expect_fail(
        DISPATCH(dout, MAXROWS, inbuf, T, 16, me == last ? bad_idx : idx, 4, 3, side, 1),
        SYMM_ERR_INVALID_ARG, last, "neither -1 nor a global expert", "expert too big");
    bad_idx[T * 4 - 1] = -2;
    expect_fail(
        DISPATCH(dout, MAXROWS, inbuf, T, 16, me == last ? bad_idx : idx, 4, 3, side, 1),
        SYMM_ERR_INVALID_ARG, last, "= -2", "expert -2");
    bad_idx[T * 4 - 1] = idx[T * 4 - 1];
    /* in NULL while routing; in not symmetric; out overlapping an in; side in NULL */
    int routes = routes_any(&tc, &R);
    if (routes) {
        expect_fail(DISPATCH(dout, MAXROWS, me == 0 ? NULL : inbuf, T, 16, idx, 4, 3, side, 1),
                    SYMM_ERR_INVALID_ARG, 0, "in is NULL", "in NULL");
        uint8_t *local = malloc((size_t)MAXTOK * 16);
        expect_fail(DISPATCH(dout, MAXROWS, me == 0 ? local : inbuf, T, 16, idx, 4, 3, side, 1),
                    SYMM_ERR_NOT_SYMMETRIC, 0, "not inside one symmetric object", "in local");
        free(local);
        symm_moe_side_t sn = {NULL, sideout[0], 8};
        expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 3, me == 0 ? &sn : side, 1),
                    SYMM_ERR_INVALID_ARG, 0, "side[0].in is NULL", "side in NULL");
        symm_moe_side_t so = {sidein[0], inbuf + 16, 8};
        expect_fail(DISPATCH(dout, MAXROWS, inbuf, T, 16, idx, 4, 3, me == 0 ? &so : side, 1),
                    SYMM_ERR_INVALID_ARG, 0, "side[0].out [", "side out over in");
    }
    /* out NULL with a capacity */
    expect_fail(DISPATCH(me == last ? NULL : dout, MAXROWS, inbuf, T, 16, idx, 4, 3, side, 1),
                SYMM_ERR_INVALID_ARG, last, "out is NULL", "out NULL");
    /* the last PE's output one row short: every PE fails, naming it */
    size_t cnt[32], start[32];
    size_t need = topk_ref_layout(&tc.c, &R, last, cnt, start, NULL, -1, NULL);
    expect_fail(
        DISPATCH(dout, me == last ? need - 1 : MAXROWS, inbuf, T, 16, idx, 4, 3, side, 1),
        SYMM_ERR_OVERFLOW, -1, NULL, "one row short");
    {
        char want[64];
        snprintf(want, sizeof want, "PE %d (world %d) needs %zu rows", last, last, need);
        CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "short output: names it: %s",
                   symm_last_error());
    }
    /* worker forms: a count beyond the pool */
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(W, 2, &pool));
    expect_fail(symm_moe_topk_dispatch_parallel(pool, 3, dout, MAXROWS, inbuf, T, 16, idx, 4, 3,
                                                tc.c.align, side, 1, d.counts, d.offsets, osrc,
                                                &d.rows, d.trows),
                SYMM_ERR_INVALID_ARG, -1, "nworkers = 3", "parallel nworkers");
    check_untouched(&d, "failed dispatches");
    /* the team still works, exactly enough capacity included */
    CHECK_OK(DISPATCH(dout, me == last ? need : MAXROWS, inbuf, T, 16, idx, 4, 3, side, 1));
    check_dispatch(&tc, &R, &d, 1, "dispatch after failures");

    /* combine */
    fill_expert_out(&tc, &d);
    douts_t keep = d;
    int64_t bad_rows[MAXTOK * MAXK];
    memcpy(bad_rows, d.trows, sizeof(int64_t) * T * 4);
    memset(cout, SENTINEL, (size_t)MAXTOK * MAXHID * 4);
#define COMBINE(out_, in_, rows_, hid_, ty_, trows_, k_)                                       \
    symm_moe_topk_combine(W, out_, T, in_, rows_, hid_, ty_, idx, trows_, NULL, k_, 3)
    const void *eo = d.rows ? eobuf : NULL;
    expect_fail(COMBINE(cout, eo, d.rows, tc.hidden, SYMM_INT32, d.trows, 4),
                SYMM_ERR_INVALID_ARG, -1, "not a combine row type", "combine int32");
    expect_fail(COMBINE(cout, eo, d.rows, 0, tc.type, d.trows, 4), SYMM_ERR_INVALID_ARG, -1,
                "hidden is 0", "combine hidden 0");
    expect_fail(COMBINE(cout, eo, d.rows, tc.hidden, tc.type, d.trows, 0), SYMM_ERR_INVALID_ARG,
                -1, "k = 0", "combine k 0");
    /* a row beyond its member's in, on the last PE only */
    size_t q = 0;
    while (q < T * 4 && idx[q] < 0)
        q++;
    int last_routes = 0;
    {
        const int64_t *li = R.idx[last];
        for (size_t x = 0; x < R.tokens[last] * 4; x++)
            last_routes |= li[x] >= 0;
    }
    if (last_routes) {
        if (me == last) {
            int64_t j = idx[q] / 3;
            size_t rows_j = topk_ref_layout(&tc.c, &R, (int)j, cnt, start, NULL, -1, NULL);
            bad_rows[q] = (int64_t)rows_j;
        }
        expect_fail(
            COMBINE(cout, eo, d.rows, tc.hidden, tc.type, me == last ? bad_rows : d.trows, 4),
            SYMM_ERR_INVALID_ARG, last, "topk_rows[", "combine row beyond in");
        if (me == last) bad_rows[q] = -5;
        expect_fail(
            COMBINE(cout, eo, d.rows, tc.hidden, tc.type, me == last ? bad_rows : d.trows, 4),
            SYMM_ERR_INVALID_ARG, last, "= -5", "combine negative row");
    }
    /* out overlapping in */
    if (d.rows && T)
        expect_fail(COMBINE(eobuf, eo, d.rows, tc.hidden, tc.type, d.trows, 4),
                    SYMM_ERR_INVALID_ARG, -1, "overlaps in", "combine out over in");
    CHECK_ALL_BYTES(cout, SENTINEL, (size_t)MAXTOK * MAXHID * 4, "failed combines wrote out");
    expect_fail(symm_moe_topk_combine_parallel(pool, 3, cout, T, eo, d.rows, tc.hidden, tc.type,
                                               idx, d.trows, NULL, 4, 3),
                SYMM_ERR_INVALID_ARG, -1, "nworkers = 3", "combine parallel nworkers");
    CHECK_OK(symm_pool_destroy(pool));
    /* the team still works */
    tc.weighted = 0;
    CHECK_OK(COMBINE(cout, eo, keep.rows, tc.hidden, tc.type, keep.trows, 4));
    check_combine(&tc, &R, cout, "combine after failures");
#undef COMBINE
#undef DISPATCH
    topk_ref_routes_free(&tc.c, &R);
}

int main(void)
{
    TEST_INIT();
    me = symm_my_pe();
    npes = symm_n_pes();
    seed = test_seed();
    CHECK_TRUE(npes <= 8, "at most 8 PEs (the buffers are sized for them)");
    inbuf = symm_malloc((size_t)MAXTOK * MAXRB);
    for (int p = 0; p < MAXSIDE; p++) {
        sidein[p] = symm_malloc((size_t)MAXTOK * MAXRB);
        sideout[p] = malloc((size_t)MAXROWS * MAXRB);
        CHECK_TRUE(sidein[p] && sideout[p], "allocation");
    }
    eobuf = symm_malloc((size_t)MAXROWS * MAXHID * 4);
    dout = malloc((size_t)MAXROWS * MAXRB);
    cout = malloc((size_t)MAXTOK * MAXHID * 4);
    osrc = malloc(sizeof(symm_moe_src_t) * MAXROWS);
    CHECK_TRUE(inbuf && eobuf && dout && cout && osrc, "allocation");
    test_sweep();
    test_special();
    test_workers();
    test_sub_teams();
    test_bad_input();
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_free(eobuf));
    for (int p = MAXSIDE - 1; p >= 0; p--) {
        CHECK_OK(symm_free(sidein[p]));
        free(sideout[p]);
    }
    CHECK_OK(symm_free(inbuf));
    free(dout);
    free(cout);
    free(osrc);
    if (me == 0) printf("test_moe_topk: %d PEs OK\n", npes);
    TEST_FINALIZE();
    return 0;
}
