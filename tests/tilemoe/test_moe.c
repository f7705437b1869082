/* test_moe.c — all_to_all_v, MoE dispatch and combine against a serial model on random
 * splits (zeros included), 1..16 experts per PE, several alignments and row widths:
 * splits, offsets, alignment and every row checked; dispatch then combine gives back the
 * input exactly (also from scrambled, padded offsets); padding is never written; the same
 * on two concurrent sub-teams (even and odd PEs); worker and parallel forms with 1..8
 * workers and the automatic count equal the plain form, and the automatic count follows
 * its documented rule on every PE alike; an output that would overflow on one PE fails on all
 * and writes nothing; bad arguments fail and change nothing; a PE that sends nothing may
 * pass in = NULL (one that does fails everywhere), and members may pass different objects
 * (at different offsets) as in, in every form. Every PE can compute any PE's splits and
 * rows (seeded by its world rank), so the model needs no communication. */
#include <pthread.h>
#include <sched.h>

#include "common/test_util.h"

static int me, npes;
static uint64_t seed;

#define MAXROWS   1024
#define MAXRB     64
#define BUF_BYTES ((size_t)MAXROWS * MAXRB)
#define SENTINEL  0xC3

static uint8_t *inbuf, *dout, *cout, *scram; /* symmetric, BUF_BYTES each */
static uint8_t *plain_out;                   /* local copy for worker comparisons */
static uint8_t *alt;                         /* symmetric, 2 x BUF_BYTES: another in */

typedef struct {
    symm_team_t team;
    int n, rank; /* team size and my number */
    int world[64];
    int ne;
    size_t align, rb;
    uint64_t it; /* iteration tag */
    int maxr;    /* rows per (receiver, expert): 0..maxr */
    int mute;    /* member that sends no rows in dispatch (-1, as cfg_team sets: none) */
    int deaf;    /* member that receives no rows in dispatch (-1: none) */
} cfg_t;

/* Splits of team member s: n*ne entries, about a third of them 0. */
static void model_splits(const cfg_t *c, int s, size_t *sp)
{
    test_rng_t r;
    test_rng_seed(&r, test_mix(test_mix(seed, c->it), (uint64_t)c->world[s]));
    for (int k = 0; k < c->n * c->ne; k++) {
        sp[k] = test_rng_below(&r, 3) == 0 ? 0 : 1 + test_rng_below(&r, (uint64_t)c->maxr);
        if (s == c->mute || k / c->ne == c->deaf) sp[k] = 0;
    }
}

static uint64_t row_tag(const cfg_t *c, int s, size_t idx)
{
    return test_mix(test_mix(c->it, (uint64_t)c->world[s] + 1000), idx);
}

static size_t fill_input(const cfg_t *c, size_t *splits)
{
    model_splits(c, c->rank, splits);
    size_t rows = 0;
    for (int k = 0; k < c->n * c->ne; k++)
        rows += splits[k];
    CHECK_TRUE(rows <= MAXROWS, "input rows %zu", rows);
    memset(inbuf, 0x11, BUF_BYTES);
    for (size_t i = 0; i < rows; i++)
        test_fill_pattern(inbuf + i * c->rb, c->rb, row_tag(c, c->rank, i));
    return rows;
}

/* The dispatch the model expects on member me: splits, offsets (e*n + s) and total. */
static size_t model_dispatch(const cfg_t *c, size_t *esplit, size_t *eoff, size_t *srcoff)
{
    size_t sp[64 * 16];
    int n = c->n, ne = c->ne;
    for (int s = 0; s < n; s++) {
        model_splits(c, s, sp);
        size_t run = 0;
        for (int k = 0; k < n * ne; k++) {
            int j = k / ne, e = k % ne;
            if (j == c->rank) {
                esplit[e * n + s] = sp[k];
                srcoff[e * n + s] = run;
            }
            run += sp[k];
        }
    }
    size_t pos = 0;
    for (int e = 0; e < ne; e++) {
        size_t start = pos;
        for (int s = 0; s < n; s++) {
            eoff[e * n + s] = pos;
            pos += esplit[e * n + s];
        }
        if (c->align) {
            size_t len = pos - start;
            size_t alen = (len + c->align - 1) / c->align * c->align;
            pos = start + (alen ? alen : c->align);
        }
    }
    return pos;
}

static void check_dispatch(const cfg_t *c, const uint8_t *out, const size_t *osplit,
                           const size_t *ooff, size_t orows, const char *what)
{
    size_t esplit[64 * 16], eoff[64 * 16], srcoff[64 * 16];
    int n = c->n, ne = c->ne;
    size_t total = model_dispatch(c, esplit, eoff, srcoff);
    CHECK_TRUE(orows == total, "%s: out_rows %zu, model %zu (ne %d align %zu)", what, orows,
               total, ne, c->align);
    uint8_t *written = calloc(total ? total : 1, 1);
    uint8_t want[MAXRB];
    for (int k = 0; k < n * ne; k++) {
        CHECK_TRUE(osplit[k] == esplit[k] && ooff[k] == eoff[k],
                   "%s: split/offset %d = %zu/%zu, model %zu/%zu (ne %d align %zu)", what, k,
                   osplit[k], ooff[k], esplit[k], eoff[k], ne, c->align);
        int e = k / n, s = k % n;
        if (c->align && s == 0) CHECK_TRUE(eoff[k] % c->align == 0, "aligned start");
        (void)e;
        for (size_t r = 0; r < esplit[k]; r++) {
            test_fill_pattern(want, c->rb, row_tag(c, s, srcoff[k] + r));
            CHECK_BYTES(out + (eoff[k] + r) * c->rb, want, c->rb,
                        "%s: expert %d source %d row %zu (ne %d align %zu rb %zu)", what, e, s,
                        r, ne, c->align, c->rb);
            written[eoff[k] + r] = 1;
        }
    }
    /* padding and everything past the layout are untouched */
    for (size_t i = 0; i < MAXROWS; i++)
        if (i >= total || !written[i])
            CHECK_ALL_BYTES(out + i * c->rb, SENTINEL, c->rb, "%s: padding row %zu written",
                            what, i);
    free(written);
}

/* Combine of dout (as dispatch left it, or from in_offsets) must give back my input. */
static void check_combine(const cfg_t *c, const size_t *my_splits, size_t in_rows,
                          const size_t *csplit, const size_t *coff, size_t crows,
                          const char *what)
{
    size_t run = 0;
    for (int k = 0; k < c->n * c->ne; k++) {
        CHECK_TRUE(csplit[k] == my_splits[k] && coff[k] == run,
                   "%s: combine split/offset %d = %zu/%zu, want %zu/%zu", what, k, csplit[k],
                   coff[k], my_splits[k], run);
        run += my_splits[k];
    }
    CHECK_TRUE(crows == in_rows, "%s: combine rows %zu, want %zu", what, crows, in_rows);
    CHECK_BYTES(cout, inbuf, in_rows * c->rb, "%s: combine did not give back the input", what);
    CHECK_ALL_BYTES(cout + in_rows * c->rb, SENTINEL, BUF_BYTES - in_rows * c->rb,
                    "%s: combine wrote past its rows", what);
}

/* One dispatch + combine round trip with the plain forms. */
static void round_trip(const cfg_t *c, int scramble)
{
    size_t splits[64 * 16], osplit[64 * 16], ooff[64 * 16], csplit[64 * 16], coff[64 * 16];
    size_t orows = 0, crows = 0;
    size_t in_rows = fill_input(c, splits);
    memset(dout, SENTINEL, BUF_BYTES);
    memset(cout, SENTINEL, BUF_BYTES);
    CHECK_OK(symm_moe_dispatch(c->team, dout, MAXROWS, inbuf, splits, c->ne, c->rb, c->align,
                               osplit, ooff, &orows));
    check_dispatch(c, dout, osplit, ooff, orows, "dispatch");
    if (!scramble) {
        CHECK_OK(symm_moe_combine(c->team, cout, MAXROWS, dout, osplit, ooff, c->ne, c->rb,
                                  csplit, coff, &crows));
    } else {
        /* Segments moved to reversed order with gaps of (k % 3) rows between them. */
        int ns = c->n * c->ne;
        size_t soff[64 * 16], pos = 1;
        memset(scram, 0x77, BUF_BYTES);
        for (int k = ns - 1; k >= 0; k--) {
            soff[k] = pos;
            memcpy(scram + pos * c->rb, dout + ooff[k] * c->rb, osplit[k] * c->rb);
            pos += osplit[k] + (size_t)(k % 3);
        }
        CHECK_TRUE(pos <= MAXROWS, "scrambled layout fits");
        CHECK_OK(symm_barrier(c->team));
        CHECK_OK(symm_moe_combine(c->team, cout, MAXROWS, scram, osplit, soff, c->ne, c->rb,
                                  csplit, coff, &crows));
    }
    check_combine(c, splits, in_rows, csplit, coff, crows, scramble ? "scrambled" : "plain");
}

static void cfg_team(cfg_t *c, symm_team_t team)
{
    c->team = team;
    c->n = symm_team_n_pes(team);
    c->rank = symm_team_my_pe(team);
    for (int i = 0; i < c->n; i++)
        c->world[i] = symm_team_world_pe(team, i);
    c->mute = c->deaf = -1;
}

static void test_dispatch_combine(void)
{
    static const struct {
        int ne;
        size_t align, rb;
        int maxr;
    } cases[] = {{1, 1, 8, 5},   {1, 0, 12, 4}, {3, 4, 5, 3}, {2, 7, 24, 6}, {16, 1, 8, 2},
                 {16, 16, 3, 2}, {5, 0, 64, 3}, {4, 2, 1, 4}, {7, 3, 40, 2}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg_t c = {.ne = cases[i].ne,
                   .align = cases[i].align,
                   .rb = cases[i].rb,
                   .maxr = cases[i].maxr,
                   .it = 100 + i};
        cfg_team(&c, SYMM_TEAM_WORLD);
        round_trip(&c, 0);
        c.it += 1000;
        round_trip(&c, 1);
    }
}

/* Random parameters (the same on every PE): ne 1..16, align 0..9, rows of 1..64 bytes. */
static void test_random_sweep(void)
{
    test_rng_t r;
    test_rng_seed(&r, test_mix(seed, 4242));
    for (int it = 0; it < 40; it++) {
        cfg_t c = {.ne = 1 + (int)test_rng_below(&r, 16),
                   .align = test_rng_below(&r, 10),
                   .rb = 1 + test_rng_below(&r, 64),
                   .maxr = 1 + (int)test_rng_below(&r, 5),
                   .it = 3000 + (uint64_t)it};
        cfg_team(&c, SYMM_TEAM_WORLD);
        round_trip(&c, it % 4 == 3);
    }
}

/* So many experts that n*n*ne exceeds what members check locally: the needs then travel
 * in a second exchange. Sparse splits (a few rows per PE) keep it small. */
static size_t sparse_split(int p, size_t nsplit, size_t k)
{
    for (int j = 0; j < 5; j++)
        if (k == ((size_t)p * 7919 + (size_t)j * 104729) % nsplit)
            return 1 + (size_t)(p + j) % 3;
    return 0;
}

static void test_large_ne(void)
{
    int ne = 65536 / (npes * npes) + 1;
    size_t nsplit = (size_t)npes * (size_t)ne, rb = 12;
    size_t *sp = calloc(nsplit, sizeof(size_t)), *os = malloc(nsplit * sizeof(size_t));
    size_t *oo = malloc(nsplit * sizeof(size_t)), *cs = malloc(nsplit * sizeof(size_t));
    size_t *co = malloc(nsplit * sizeof(size_t)), rows = 0, crows = 0, in_rows = 0;
    CHECK_TRUE(sp && os && oo && cs && co, "allocation");
    for (size_t k = 0; k < nsplit; k++)
        in_rows += sp[k] = sparse_split(me, nsplit, k);
    for (size_t i = 0; i < in_rows; i++)
        test_fill_pattern(inbuf + i * rb, rb, 9000 + (uint64_t)me * 100 + i);
    /* the model: rows for my expert e from source s, packed expert-major */
    size_t need = 0;
    for (int e = 0; e < ne; e++)
        for (int s = 0; s < npes; s++)
            need += sparse_split(s, nsplit, (size_t)me * (size_t)ne + (size_t)e);
    memset(dout, SENTINEL, BUF_BYTES);
    if (npes > 1 || need > 0) {
        int short_pe = npes - 1;
        size_t cap = me == short_pe ? (need ? need - 1 : 0) : MAXROWS;
        symm_status_t st =
            symm_moe_dispatch(SYMM_TEAM_WORLD, dout, cap, inbuf, sp, ne, rb, 0, os, oo, &rows);
        /* the last PE may receive nothing (need 0): then every output fits */
        int short_need = 0;
        for (int e = 0; e < ne; e++)
            for (int s = 0; s < npes; s++)
                short_need +=
                    (int)sparse_split(s, nsplit, (size_t)short_pe * (size_t)ne + (size_t)e);
        if (short_need) {
            CHECK_STATUS(st, SYMM_ERR_OVERFLOW);
            CHECK_ALL_BYTES(dout, SENTINEL, BUF_BYTES, "large ne: failed dispatch wrote out");
        } else {
            CHECK_OK(st);
        }
    }
    memset(dout, SENTINEL, BUF_BYTES);
    CHECK_OK(
        symm_moe_dispatch(SYMM_TEAM_WORLD, dout, MAXROWS, inbuf, sp, ne, rb, 0, os, oo, &rows));
    CHECK_EQ_U64(rows, need);
    /* where source s keeps the rows for my expert e: its packed prefix, [e*n + s] */
    size_t *srcoff = malloc(nsplit * sizeof(size_t));
    CHECK_TRUE(srcoff != NULL, "allocation");
    for (int s = 0; s < npes; s++) {
        size_t run = 0;
        for (size_t q = 0; q < nsplit; q++) {
            if (q / (size_t)ne == (size_t)me)
                srcoff[(q % (size_t)ne) * (size_t)npes + (size_t)s] = run;
            run += sparse_split(s, nsplit, q);
        }
    }
    size_t pos = 0;
    uint8_t want[MAXRB];
    for (int e = 0; e < ne; e++)
        for (int s = 0; s < npes; s++) {
            size_t k = (size_t)e * (size_t)npes + (size_t)s;
            size_t cnt = sparse_split(s, nsplit, (size_t)me * (size_t)ne + (size_t)e);
            CHECK_TRUE(os[k] == cnt && oo[k] == pos, "large ne: split/offset %zu", k);
            size_t src = srcoff[k];
            for (size_t r = 0; r < cnt; r++) {
                test_fill_pattern(want, rb, 9000 + (uint64_t)s * 100 + src + r);
                CHECK_BYTES(dout + (pos + r) * rb, want, rb, "large ne: row of expert %d", e);
            }
            pos += cnt;
        }
    memset(cout, SENTINEL, BUF_BYTES);
    CHECK_OK(
        symm_moe_combine(SYMM_TEAM_WORLD, cout, MAXROWS, dout, os, oo, ne, rb, cs, co, &crows));
    CHECK_EQ_U64(crows, in_rows);
    CHECK_BYTES(cout, inbuf, in_rows * rb, "large ne: combine did not give back the input");
    CHECK_TRUE(!memcmp(cs, sp, nsplit * sizeof(size_t)), "large ne: combine splits");
    free(srcoff);
    free(sp);
    free(os);
    free(oo);
    free(cs);
    free(co);
}

/* 1-D: in_splits[j] rows to j, packed in source order at the receiver. */
static void test_all_to_all_v(void)
{
    for (int it = 0; it < 4; it++) {
        cfg_t c = {.ne = 1,
                   .align = 0,
                   .rb = (size_t)(4 + it * 7),
                   .maxr = 6,
                   .it = 500 + (uint64_t)it};
        cfg_team(&c, SYMM_TEAM_WORLD);
        size_t splits[64], os[64], oo[64], rows = 0;
        fill_input(&c, splits);
        memset(dout, SENTINEL, BUF_BYTES);
        CHECK_OK(symm_all_to_all_v(SYMM_TEAM_WORLD, dout, MAXROWS, inbuf, splits, c.rb, os, oo,
                                   &rows));
        check_dispatch(&c, dout, os, oo, rows, "all_to_all_v"); /* ne 1, align 0: same model */
    }
}

/* Even and odd PEs dispatch and combine on their own teams at the same time. */
static void test_sub_teams(void)
{
    symm_team_t even = SYMM_TEAM_INVALID, odd = SYMM_TEAM_INVALID;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 2, (npes + 1) / 2, &even));
    if (npes >= 2) CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 1, 2, npes / 2, &odd));
    symm_team_t mine = me % 2 ? odd : even;
    for (int it = 0; it < 3; it++) {
        cfg_t c = {.ne = me % 2 ? 3 : 2 + it,
                   .align = me % 2 ? 4 : 1,
                   .rb = me % 2 ? 12 : 20,
                   .maxr = 4,
                   .it = 700 + (uint64_t)it * 10 + (uint64_t)(me % 2)};
        cfg_team(&c, mine);
        round_trip(&c, it == 2);
    }
    /* the same with three workers per PE on a pool of each sub-team */
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(mine, 3, &pool));
    for (int it = 0; it < 2; it++) {
        cfg_t c = {.ne = me % 2 ? 6 : 1 + it,
                   .align = me % 2 ? 0 : 3,
                   .rb = me % 2 ? 7 : 16,
                   .maxr = 5,
                   .it = 750 + (uint64_t)it * 10 + (uint64_t)(me % 2)};
        cfg_team(&c, mine);
        size_t splits[64 * 16], os[64 * 16], oo[64 * 16], rows, cs[64 * 16], co[64 * 16], crows;
        size_t in_rows = fill_input(&c, splits);
        memset(dout, SENTINEL, BUF_BYTES);
        memset(cout, SENTINEL, BUF_BYTES);
        CHECK_OK(symm_moe_dispatch_parallel(pool, 3, dout, MAXROWS, inbuf, splits, c.ne, c.rb,
                                            c.align, os, oo, &rows));
        check_dispatch(&c, dout, os, oo, rows, "sub-team parallel dispatch");
        CHECK_OK(symm_moe_combine_parallel(pool, 3, cout, MAXROWS, dout, os, oo, c.ne, c.rb, cs,
                                           co, &crows));
        check_combine(&c, splits, in_rows, cs, co, crows, "sub-team parallel combine");
    }
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_barrier_all());
    if (even != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(even));
    if (odd != SYMM_TEAM_INVALID) CHECK_OK(symm_team_destroy(odd));
}

/* ---------------------------------------------------------------- workers */
typedef struct {
    symm_pool_t pool;
    int worker, nworkers, combine, one_d; /* dispatch, combine or (one_d) all_to_all_v */
    const cfg_t *c;
    const void *in;
    const size_t *splits, *offs;
    size_t *osplit, *ooff, *orows;
    symm_status_t st;
} wjob_t;

static void *wjob_main(void *p)
{
    wjob_t *j = p;
    const cfg_t *c = j->c;
    if (j->one_d)
        j->st =
            symm_all_to_all_v_worker(j->pool, j->worker, j->nworkers, dout, MAXROWS, j->in,
                                     j->splits, c->rb, j->worker ? NULL : j->osplit,
                                     j->worker ? NULL : j->ooff, j->worker ? NULL : j->orows);
    else if (!j->combine)
        j->st = symm_moe_dispatch_worker(
            j->pool, j->worker, j->nworkers, dout, MAXROWS, j->in, j->splits, c->ne, c->rb,
            c->align, j->worker ? NULL : j->osplit, j->worker ? NULL : j->ooff,
            j->worker ? NULL : j->orows);
    else
        j->st = symm_moe_combine_worker(j->pool, j->worker, j->nworkers, cout, MAXROWS, j->in,
                                        j->splits, j->offs, c->ne, c->rb, j->osplit, j->ooff,
                                        j->orows);
    return NULL;
}

static void test_workers(void)
{
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    cfg_t c = {.ne = 5, .align = 4, .rb = 36, .maxr = 7, .it = 900};
    cfg_team(&c, SYMM_TEAM_WORLD);
    size_t splits[64 * 16], os[64 * 16], oo[64 * 16], rows;
    size_t cs[64 * 16], co[64 * 16], crows;
    size_t in_rows = fill_input(&c, splits);
    memset(dout, SENTINEL, BUF_BYTES);
    CHECK_OK(symm_moe_dispatch(SYMM_TEAM_WORLD, dout, MAXROWS, inbuf, splits, c.ne, c.rb,
                               c.align, os, oo, &rows));
    check_dispatch(&c, dout, os, oo, rows, "plain before workers");
    memcpy(plain_out, dout, BUF_BYTES);
    for (int nw = 0; nw <= 8; nw++) { /* 0: the automatic worker count */
        size_t ws[64 * 16], wo[64 * 16], wrows = 0;
        memset(dout, SENTINEL, BUF_BYTES);
        CHECK_OK(symm_moe_dispatch_parallel(pool, nw, dout, MAXROWS, inbuf, splits, c.ne, c.rb,
                                            c.align, ws, wo, &wrows));
        CHECK_BYTES(dout, plain_out, BUF_BYTES, "dispatch with %d workers", nw);
        CHECK_TRUE(wrows == rows && !memcmp(ws, os, sizeof(size_t) * (size_t)(c.n * c.ne)) &&
                       !memcmp(wo, oo, sizeof(size_t) * (size_t)(c.n * c.ne)),
                   "dispatch splits with %d workers", nw);
        memset(cout, SENTINEL, BUF_BYTES);
        CHECK_OK(symm_moe_combine_parallel(pool, nw, cout, MAXROWS, dout, ws, wo, c.ne, c.rb,
                                           cs, co, &crows));
        check_combine(&c, splits, in_rows, cs, co, crows, "parallel combine");
        if (nw != 1 && nw != 4 && nw != 7) continue;
        memset(dout, SENTINEL, BUF_BYTES);
        wrows = 0;
        wjob_t proto = {.pool = pool,
                        .c = &c,
                        .in = inbuf,
                        .splits = splits,
                        .osplit = ws,
                        .ooff = wo,
                        .orows = &wrows};
        TEST_RUN_WORKERS(wjob_t, proto, nw, wjob_main);
        CHECK_BYTES(dout, plain_out, BUF_BYTES, "dispatch_worker with %d workers", nw);
        CHECK_TRUE(wrows == rows, "dispatch_worker rows");
        memset(cout, SENTINEL, BUF_BYTES);
        wjob_t cproto = {.pool = pool,
                         .combine = 1,
                         .c = &c,
                         .in = dout,
                         .splits = os,
                         .offs = oo,
                         .osplit = cs,
                         .ooff = co,
                         .orows = &crows};
        CHECK_OK(symm_barrier_all()); /* dout complete everywhere before combine reads it */
        TEST_RUN_WORKERS(wjob_t, cproto, nw, wjob_main);
        check_combine(&c, splits, in_rows, cs, co, crows, "combine_worker");
    }
    /* 1-D parallel */
    size_t s1[64], o1[64], r1 = 0, p1[64], q1[64], rr = 0;
    cfg_t c1 = {.ne = 1, .align = 0, .rb = 10, .maxr = 9, .it = 950};
    cfg_team(&c1, SYMM_TEAM_WORLD);
    fill_input(&c1, s1);
    memset(dout, SENTINEL, BUF_BYTES);
    CHECK_OK(symm_all_to_all_v(SYMM_TEAM_WORLD, dout, MAXROWS, inbuf, s1, c1.rb, o1, p1, &r1));
    memcpy(plain_out, dout, BUF_BYTES);
    memset(dout, SENTINEL, BUF_BYTES);
    CHECK_OK(symm_all_to_all_v_parallel(pool, 3, dout, MAXROWS, inbuf, s1, c1.rb, q1, o1, &rr));
    CHECK_BYTES(dout, plain_out, BUF_BYTES, "all_to_all_v with 3 workers");
    CHECK_TRUE(rr == r1 && !memcmp(o1, p1, sizeof(size_t) * (size_t)npes), "1-D offsets");
    memset(dout, SENTINEL, BUF_BYTES);
    rr = 0;
    CHECK_OK(symm_all_to_all_v_parallel(pool, 0, dout, MAXROWS, inbuf, s1, c1.rb, q1, o1, &rr));
    CHECK_BYTES(dout, plain_out, BUF_BYTES, "all_to_all_v with the automatic worker count");
    CHECK_TRUE(rr == r1 && !memcmp(o1, p1, sizeof(size_t) * (size_t)npes), "1-D offsets, auto");
    CHECK_OK(symm_pool_destroy(pool));
}

/* ---------------------------------------------------------------- automatic count */
/* The automatic worker count is the documented formula over what all PEs published at
 * symm_init (the union of their affinity masks, or the least SYMM_NODE_CPUS any set),
 * and every PE gets the same number. */
static void test_auto_workers(void)
{
    enum { W = 16 }; /* mask words: CPUs 0..1023, as the library publishes them */
    uint64_t mine[W + 1] = {0}, *all = symm_malloc(sizeof mine * (size_t)npes);
    uint64_t *src = symm_malloc(sizeof mine);
    CHECK_TRUE(all && src, "allocation");
    cpu_set_t set;
    CHECK_TRUE(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity");
    for (int c = 0; c < W * 64 && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) mine[c / 64] |= (uint64_t)1 << (c % 64);
    const char *env = getenv("SYMM_NODE_CPUS");
    mine[W] = env && atoi(env) > 0 ? (uint64_t)atoi(env) : 0;
    memcpy(src, mine, sizeof mine);
    CHECK_OK(symm_fcollect(SYMM_TEAM_WORLD, all, src, sizeof mine));
    uint64_t uni[W] = {0}, forced = 0;
    for (int p = 0; p < npes; p++) {
        for (int w = 0; w < W; w++)
            uni[w] |= all[p * (W + 1) + w];
        uint64_t f = all[p * (W + 1) + W];
        if (f && (!forced || f < forced)) forced = f;
    }
    int cpus = 0;
    for (int w = 0; w < W; w++)
        cpus += __builtin_popcountll(uni[w]);
    if (forced) cpus = (int)forced;
    int per_pe = cpus / npes < 1 ? 1 : cpus / npes > 64 ? 64 : cpus / npes;
    const size_t sizes[] = {1, 3, 8, 100};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        symm_pool_t pool;
        CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, sizes[i], &pool));
        int want = per_pe < (int)sizes[i] ? per_pe : (int)sizes[i];
        int got = symm_pool_auto_workers(pool, SIZE_MAX);
        CHECK_TRUE(got == want,
                   "pool of %zu: %d automatic workers, expected %d (%d CPUs, %d "
                   "PEs)",
                   sizes[i], got, want, cpus, npes);
        /* with a size: at least 64 KiB per worker, and at least one worker */
        CHECK_EQ_I64(symm_pool_auto_workers(pool, 0), 1);
        CHECK_EQ_I64(symm_pool_auto_workers(pool, (64 << 10) - 1), 1);
        int by = 3 < want ? 3 : want;
        CHECK_EQ_I64(symm_pool_auto_workers(pool, (size_t)3 << 16), by);
        CHECK_OK(symm_pool_destroy(pool));
    }
    CHECK_EQ_I64(symm_pool_auto_workers((symm_pool_t)12345, SIZE_MAX), 0);
    symm_free(src);
    symm_free(all);
}

/* ---------------------------------------------------------------- failures */
static void test_overflow(void)
{
    cfg_t c = {.ne = 3, .align = 2, .rb = 16, .maxr = 5, .it = 1200};
    cfg_team(&c, SYMM_TEAM_WORLD);
    size_t splits[64 * 16], es[64 * 16], eo[64 * 16], src[64 * 16];
    fill_input(&c, splits);
    size_t need = model_dispatch(&c, es, eo, src);
    size_t os[64 * 16], oo[64 * 16], rows = 12345;
    memset(os, 0x5a, sizeof os);
    memset(oo, 0x5a, sizeof oo);
    memset(dout, SENTINEL, BUF_BYTES);
    /* the last PE's output is one row short; everyone fails and nothing is written */
    size_t cap = me == npes - 1 ? need - 1 : MAXROWS;
    CHECK_STATUS(symm_moe_dispatch(SYMM_TEAM_WORLD, dout, cap, inbuf, splits, c.ne, c.rb,
                                   c.align, os, oo, &rows),
                 SYMM_ERR_OVERFLOW);
    char want[64];
    snprintf(want, sizeof want, "PE %d (world %d)", npes - 1, npes - 1);
    CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "error names the PE: %s",
               symm_last_error());
    CHECK_ALL_BYTES(dout, SENTINEL, BUF_BYTES, "failed dispatch wrote out");
    CHECK_ALL_BYTES(os, 0x5a, sizeof os, "failed dispatch wrote out_splits");
    CHECK_ALL_BYTES(oo, 0x5a, sizeof oo, "failed dispatch wrote out_offsets");
    CHECK_EQ_U64(rows, 12345);
    /* exactly enough works */
    CHECK_OK(symm_moe_dispatch(SYMM_TEAM_WORLD, dout, me == npes - 1 ? need : MAXROWS, inbuf,
                               splits, c.ne, c.rb, c.align, os, oo, &rows));
    check_dispatch(&c, dout, os, oo, rows, "exact capacity");
}

static void test_bad_input(void)
{
    cfg_t c = {.ne = 2, .align = 1, .rb = 8, .maxr = 3, .it = 1300};
    cfg_team(&c, SYMM_TEAM_WORLD);
    size_t splits[64 * 16], os[64 * 16], oo[64 * 16], rows = 77;
    fill_input(&c, splits);
    memset(os, 0x5a, sizeof os);
    memset(dout, SENTINEL, BUF_BYTES);
    symm_team_t W = SYMM_TEAM_WORLD;
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, NULL, 2, 8, 1, os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, splits, 0, 8, 1, os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, splits, 2, 0, 1, os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_dispatch(W, NULL, 5, inbuf, splits, 2, 8, 1, os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_combine(W, dout, MAXROWS, inbuf, splits, NULL, 2, 8, os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    /* a huge split: the input would run past the object */
    size_t big[64 * 16];
    memcpy(big, splits, sizeof big);
    big[0] = (size_t)1 << 40;
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, big, 2, 8, 1, os, oo, &rows),
                 SYMM_ERR_NOT_SYMMETRIC);
    big[0] = SIZE_MAX;
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, big, 2, 8, 1, os, oo, &rows),
                 SYMM_ERR_OVERFLOW);
    /* input not symmetric (every PE sends at least one row here) */
    size_t ones[64 * 16];
    for (int k = 0; k < 2 * npes; k++)
        ones[k] = 1;
    uint8_t *local = malloc(4096);
    CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, local, ones, 2, 8, 1, os, oo, &rows),
                 SYMM_ERR_NOT_SYMMETRIC);
    /* out overlapping in */
    CHECK_STATUS(
        symm_moe_dispatch(W, inbuf + 8, MAXROWS - 1, inbuf, ones, 2, 8, 1, os, oo, &rows),
        SYMM_ERR_INVALID_ARG);
    /* worker forms */
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(W, 2, &pool));
    CHECK_STATUS(symm_moe_dispatch_parallel(pool, 3, dout, MAXROWS, inbuf, splits, 2, 8, 1, os,
                                            oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_dispatch_worker(pool, 2, 2, dout, MAXROWS, inbuf, splits, 2, 8, 1, os,
                                          oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_STATUS(symm_moe_combine_parallel(pool, 2, dout, MAXROWS, inbuf, splits, NULL, 2, 8,
                                           os, oo, &rows),
                 SYMM_ERR_INVALID_ARG);
    CHECK_OK(symm_pool_destroy(pool));
    /* only one PE passes a bad argument: all fail */
    if (npes >= 2) {
        const size_t *sp = me == 1 ? NULL : splits;
        CHECK_STATUS(symm_moe_dispatch(W, dout, MAXROWS, inbuf, sp, 2, 8, 1, os, oo, &rows),
                     SYMM_ERR_INVALID_ARG);
        if (me != 1)
            CHECK_TRUE(strstr(symm_last_error(), "PE 1 (world 1)") != NULL,
                       "names the bad PE: %s", symm_last_error());
    }
    CHECK_ALL_BYTES(dout, SENTINEL, BUF_BYTES, "a failed call wrote out");
    CHECK_ALL_BYTES(os, 0x5a, sizeof os, "a failed call wrote out_splits");
    CHECK_EQ_U64(rows, 77);
    free(local);
    /* the team still works */
    round_trip(&c, 0);
}

/* ---------------------------------------------------------------- where in lies */
/* A dispatch + combine round trip (or, with ne == 1 and one_d, an all_to_all_v) in which
 * the mute member passes in = NULL to dispatch and the deaf one to combine (each sends
 * nothing there, yet the mute one receives) and, with alt_in, odd members pass another
 * symmetric object at another offset while garbage fills their usual one: a reader that
 * looked for a peer's rows at its own in's place would get wrong rows. form: 0 plain, 1
 * parallel (3 workers), 2 worker forms on own threads (2 workers). */
static void round_trip_in(const cfg_t *c, symm_pool_t pool, int form, int alt_in, int one_d)
{
    size_t splits[64 * 16], os[64 * 16], oo[64 * 16], cs[64 * 16], co[64 * 16];
    size_t orows = 0, crows = 0;
    char what[96];
    snprintf(what, sizeof what, "%s form %d, %s, mute %d deaf %d, ne %d",
             one_d ? "1-D" : "dispatch", form, alt_in ? "other objects" : "one object", c->mute,
             c->deaf, c->ne);
    size_t in_rows = fill_input(c, splits), rb = c->rb;
    int odd = alt_in && c->rank % 2;
    size_t shift = 1 + (size_t)c->rank % 5;
    const uint8_t *din = c->rank == c->mute ? NULL : inbuf;
    if (odd && din) {
        memcpy(alt + shift * rb, inbuf, in_rows * rb);
        memset(inbuf, 0xEE, BUF_BYTES);
        din = alt + shift * rb;
    }
    memset(dout, SENTINEL, BUF_BYTES);
    memset(cout, SENTINEL, BUF_BYTES);
    if (form == 0 && one_d)
        CHECK_OK(symm_all_to_all_v(c->team, dout, MAXROWS, din, splits, rb, os, oo, &orows));
    if (form == 0 && !one_d)
        CHECK_OK(symm_moe_dispatch(c->team, dout, MAXROWS, din, splits, c->ne, rb, c->align, os,
                                   oo, &orows));
    if (form == 1 && one_d)
        CHECK_OK(symm_all_to_all_v_parallel(pool, 3, dout, MAXROWS, din, splits, rb, os, oo,
                                            &orows));
    if (form == 1 && !one_d)
        CHECK_OK(symm_moe_dispatch_parallel(pool, 3, dout, MAXROWS, din, splits, c->ne, rb,
                                            c->align, os, oo, &orows));
    if (form == 2) {
        wjob_t proto = {.pool = pool,
                        .one_d = one_d,
                        .c = c,
                        .in = din,
                        .splits = splits,
                        .osplit = os,
                        .ooff = oo,
                        .orows = &orows};
        TEST_RUN_WORKERS(wjob_t, proto, 2, wjob_main);
    }
    check_dispatch(c, dout, os, oo, orows, what);
    if (odd && din) memcpy(inbuf, alt + shift * rb, in_rows * rb);
    if (one_d) return;
    /* combine the dispatch output back: the deaf member has nothing to send */
    const uint8_t *cin = c->rank == c->deaf ? NULL : dout;
    if (odd && cin) {
        shift = 5 - (size_t)c->rank % 4;
        memcpy(alt + shift * rb, dout, orows * rb);
        memset(dout, 0xEE, BUF_BYTES);
        cin = alt + shift * rb;
    }
    if (form == 0)
        CHECK_OK(
            symm_moe_combine(c->team, cout, MAXROWS, cin, os, oo, c->ne, rb, cs, co, &crows));
    if (form == 1)
        CHECK_OK(symm_moe_combine_parallel(pool, 3, cout, MAXROWS, cin, os, oo, c->ne, rb, cs,
                                           co, &crows));
    if (form == 2) {
        wjob_t proto = {.pool = pool,
                        .combine = 1,
                        .c = c,
                        .in = cin,
                        .splits = os,
                        .offs = oo,
                        .osplit = cs,
                        .ooff = co,
                        .orows = &crows};
        TEST_RUN_WORKERS(wjob_t, proto, 2, wjob_main);
    }
    check_combine(c, splits, in_rows, cs, co, crows, what);
}

static void test_where_in(void)
{
    static const struct {
        int ne;
        size_t align, rb;
        int maxr;
    } cases[] = {{1, 0, 8, 4}, {3, 2, 12, 3}, {5, 1, 40, 2}, {2, 0, 64, 6}};
    symm_team_t solo;
    CHECK_OK(symm_team_create(&me, 1, &solo));
    const symm_team_t teams[2] = {SYMM_TEAM_WORLD, solo};
    uint64_t it = 1500;
    for (int t = 0; t < 2; t++) {
        symm_pool_t pool;
        CHECK_OK(symm_pool_create(teams[t], 3, &pool));
        int n = symm_team_n_pes(teams[t]);
        const int who[][2] = {
            {n - 1, 0}, {0, n - 1}, {n / 2, n / 2}, {-1, -1}}; /* mute, deaf */
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (int w = 0; w < 4; w++)
                for (int form = 0; form < 3; form++)
                    for (int alt_in = 0; alt_in < 2; alt_in++) {
                        cfg_t c = {.ne = cases[i].ne,
                                   .align = cases[i].align,
                                   .rb = cases[i].rb,
                                   .maxr = cases[i].maxr,
                                   .it = it++};
                        cfg_team(&c, teams[t]);
                        c.mute = who[w][0];
                        c.deaf = who[w][1];
                        round_trip_in(&c, pool, form, alt_in, 0);
                        if (c.ne != 1) continue;
                        c.align = 0;
                        c.it = it++;
                        round_trip_in(&c, pool, form, alt_in, 1);
                    }
        CHECK_OK(symm_pool_destroy(pool));
    }
    CHECK_OK(symm_team_destroy(solo));
}

/* A member that sends rows from in = NULL: every member fails alike, nothing written. */
static void test_null_in_sending(void)
{
    cfg_t c = {.ne = 2, .align = 1, .rb = 8, .maxr = 3, .it = 1400};
    cfg_team(&c, SYMM_TEAM_WORLD);
    size_t splits[64 * 16], os[64 * 16], oo[64 * 16], rows = 77;
    fill_input(&c, splits);
    int bad = npes - 1;
    splits[0] = 2; /* the bad member surely sends */
    const void *in = me == bad ? NULL : inbuf;
    char want[64];
    snprintf(want, sizeof want, "PE %d (world %d)", bad, bad);
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 2, &pool));
    memset(os, 0x5a, sizeof os);
    memset(dout, SENTINEL, BUF_BYTES);
    for (int f = 0; f < 5; f++) {
        symm_status_t st = SYMM_SUCCESS;
        switch (f) {
        case 0:
            st = symm_moe_dispatch(SYMM_TEAM_WORLD, dout, MAXROWS, in, splits, 2, 8, 1, os, oo,
                                   &rows);
            break;
        case 1:
            st =
                symm_all_to_all_v(SYMM_TEAM_WORLD, dout, MAXROWS, in, splits, 8, os, oo, &rows);
            break;
        case 2: { /* combine from offsets 0, 2, 4, ..: inside inbuf */
            size_t offs[64 * 16];
            for (int k = 0; k < 2 * npes; k++)
                offs[k] = 2 * (size_t)k;
            st = symm_moe_combine(SYMM_TEAM_WORLD, dout, MAXROWS, in, splits, offs, 2, 8, os,
                                  oo, &rows);
            break;
        }
        case 3:
            st = symm_moe_dispatch_parallel(pool, 2, dout, MAXROWS, in, splits, 2, 8, 1, os, oo,
                                            &rows);
            break;
        default:
            st = symm_all_to_all_v_parallel(pool, 0, dout, MAXROWS, in, splits, 8, os, oo,
                                            &rows);
        }
        CHECK_TRUE(st == SYMM_ERR_INVALID_ARG, "form %d: status %d (%s), want INVALID_ARG: %s",
                   f, (int)st, symm_strerror(st), symm_last_error());
        if (me == bad)
            CHECK_TRUE(strstr(symm_last_error(), "in is NULL") != NULL, "form %d: says why: %s",
                       f, symm_last_error());
        else
            CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "form %d: names the PE: %s", f,
                       symm_last_error());
    }
    CHECK_ALL_BYTES(dout, SENTINEL, BUF_BYTES, "a failed call wrote out");
    CHECK_ALL_BYTES(os, 0x5a, sizeof os, "a failed call wrote out_splits");
    CHECK_EQ_U64(rows, 77);
    CHECK_OK(symm_pool_destroy(pool));
    round_trip(&c, 0); /* the team still works */
}

int main(void)
{
    TEST_INIT();
    me = symm_my_pe();
    npes = symm_n_pes();
    seed = test_seed();
    CHECK_TRUE(npes <= 64, "at most 64 PEs");
    inbuf = symm_malloc(BUF_BYTES);
    dout = symm_malloc(BUF_BYTES);
    cout = symm_malloc(BUF_BYTES);
    scram = symm_malloc(BUF_BYTES);
    alt = symm_malloc(2 * BUF_BYTES);
    plain_out = malloc(BUF_BYTES);
    CHECK_TRUE(inbuf && dout && cout && scram && alt && plain_out, "allocation");
    test_dispatch_combine();
    test_random_sweep();
    test_large_ne();
    test_all_to_all_v();
    test_sub_teams();
    test_workers();
    test_auto_workers();
    test_overflow();
    test_bad_input();
    test_where_in();
    test_null_in_sending();
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_free(alt));
    CHECK_OK(symm_free(scram));
    CHECK_OK(symm_free(cout));
    CHECK_OK(symm_free(dout));
    CHECK_OK(symm_free(inbuf));
    free(plain_out);
    if (me == 0) printf("test_moe: %d PEs OK\n", npes);
    TEST_FINALIZE();
    return 0;
}
