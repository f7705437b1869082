/* tile.c — reduction of a strided 2-D tile over a team: to one root (every member
 * reducing a band of rows into root's out when all pass the same symmetric out, else the
 * root alone), to every member (each member reduces a band of rows, then copies the
 * others' bands; small tiles are reduced whole by every member) and multi-root
 * (several roots, each receiving the reduction of its own tile); plain, or split over
 * the workers of a pool by bands of rows.
 *
 * Every form starts with a one-word exchange that both tells every member that the
 * inputs are ready and agrees on the validity of everyone's arguments, so a bad argument
 * on one member fails the call everywhere instead of leaving the others to time out.
 * The word also fingerprints the tiles each member reads of its peers at its own tiles'
 * offsets (in, and allreduce's out): members that pass different objects all fail alike.
 * Peers' tiles are read in place, row by row, and combined with the type x op kernel
 * in team order (member 0 first), so every form and worker count gives the same bytes.
 * (The worker runner the _parallel forms use lives in workers.c.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/reduce_ops.h"
#include "coll/tile_far.h"
#include "coll/tile_moe.h"
#include "core/config.h"
#include "team/team.h"

typedef enum { TILE_MULTI, TILE_ALL } tile_kind_t;

typedef struct tile_args {
    tile_kind_t kind;
    symm_tile_t out;
    const symm_tile_t *in; /* [nroots] for TILE_MULTI, [1] for TILE_ALL */
    const int *roots;
    int nroots;
    symm_type_t type;
    symm_op_t op;
    const char *worker_fn; /* name of the _worker form, for the _parallel forms */
} tile_args_t;

/* The tiles members read of each other at their own offsets (every in tile, and
 * allreduce's out) are in the call's 64-bit fingerprint: members that pass others get
 * COLL_MISMATCH in the first exchange, naming the lowest one that differs, and a member
 * whose arguments are bad fails that exchange for everyone. The exchanged word says, in
 * the rooted forms, where out lies (62 bits; 0: out is not symmetric): a different out
 * is allowed there, it only stops the sharing of the work. It never has the bit of a
 * member ready to stream (SYMM_TILE_FAR_WORD), so that the streams run only where every
 * member's word has it. */
#define TILE_OUT_BITS 62
#define TILE_OUT_MASK (((uint64_t)1 << TILE_OUT_BITS) - 1)

static int tile_empty(const symm_tile_t *t)
{
    return symm_plan_tile_empty(t);
}

static int same_tile(const symm_tile_t *a, const symm_tile_t *b)
{
    return symm_plan_tile_same(a, b);
}

/* Validates this PE's arguments (check.h); *mine_k gets the tile I am root of (-1: none). */
static symm_status_t tile_validate(const char *fn, symm_coll_tname_t *tn, const symm_coll_t *c,
                                   const tile_args_t *a, int *mine_k)
{
    symm_check_where_t w;
    symm_tiles_checked_t res;
    symm_status_t st =
        symm_check_tiles(symm_coll_where(&w, fn, tn), a->kind == TILE_ALL, &a->out, a->in,
                         a->roots, a->nroots, a->type, a->op, c->n, c->me, &res);
    *mine_k = res.mine;
    return st;
}

/* Where a band of rows is folded: to < 0 into my out, else into member to's copy of my
 * out tile (the shared rooted forms). acc (blk bytes, or one row if longer) takes a block
 * of rows first where out cannot be written as it is folded: out is in (in place), or
 * member to is not mapped here. stage[0] and stage[1] (stage_size bytes each, twice acc's
 * size) hold the rows of two members that are not mapped here; NULL where every member is. fp8
 * (f8acc: a block's elements as floats): every member is folded into the floats, which are
 * rounded once. */
typedef struct tile_fold {
    symm_reduce_fn_t kern;
    symm_op_t op;
    symm_type_t type;
    size_t esize, blk, stage_size;
    uint8_t *acc, *stage[2];
    float *f8acc;
} tile_fold_t;

/* out rows [r0, r1) = reduction over members of in's rows, in team order, a block of
 * rows at a time: each member's rows of the block are read where they lie, or staged
 * with one strided get, and folded into the block's rows of out. */
static void tile_reduce_rows(symm_coll_t *c, const tile_fold_t *f, const symm_tile_t *out,
                             int to, const symm_tile_t *in, size_t r0, size_t r1, int use_acc)
{
    size_t cols = in->cols, rb = cols * f->esize, ild = in->ld * f->esize;
    size_t old = out->ld * f->esize, per = f->blk / rb ? f->blk / rb : 1;
    for (size_t r = r0; r < r1; r += per) {
        size_t k = r1 - r < per ? r1 - r : per;
        const uint8_t *at = (const uint8_t *)in->base + r * ild;
        uint8_t *orow = (uint8_t *)out->base + r * old;
        uint8_t *dst = use_acc ? f->acc : to < 0 ? orow : symm_coll_ptr(c, orow, to);
        size_t dld = use_acc ? rb : old;
        symm_coll_rows_t v =
            symm_coll_view_rows(c, at, ild, rb, k, 0, f->stage[0], f->stage_size);
        if (f->f8acc) {
            for (int m = 0; m < c->n; m++) {
                if (m)
                    v = symm_coll_view_rows(c, at, ild, rb, k, m, f->stage[0], f->stage_size);
                for (size_t i = 0; i < k; i++)
                    symm_reduce_fp8_fold(f->type, f->op, f->f8acc + i * cols, v.p + i * v.ld,
                                         cols, m == 0);
            }
            for (size_t i = 0; i < k; i++)
                symm_reduce_fp8_store(f->type, dst + i * dld, f->f8acc + i * cols, cols);
        } else if (c->n == 1) {
            for (size_t i = 0; i < k; i++)
                if (dst + i * dld != v.p + i * v.ld) memcpy(dst + i * dld, v.p + i * v.ld, rb);
        } else {
            symm_coll_rows_t w =
                symm_coll_view_rows(c, at, ild, rb, k, 1, f->stage[1], f->stage_size);
            for (size_t i = 0; i < k; i++)
                f->kern(f->op, dst + i * dld, v.p + i * v.ld, w.p + i * w.ld, cols);
            for (int m = 2; m < c->n; m++) {
                v = symm_coll_view_rows(c, at, ild, rb, k, m, f->stage[0], f->stage_size);
                for (size_t i = 0; i < k; i++)
                    f->kern(f->op, dst + i * dld, dst + i * dld, v.p + i * v.ld, cols);
            }
        }
        if (!use_acc) continue;
        if (to < 0)
            for (size_t i = 0; i < k; i++)
                memcpy(orow + i * old, f->acc + i * rb, rb);
        else
            symm_coll_put_rows(c, orow, old, f->acc, rb, rb, k, to);
    }
}

/* A symmetric address is hashed by its heap offset (equal on every member); anything
 * else by a constant, so that validation reports it. */
static uint64_t addr_hash(uint64_t h, const void *p)
{
    uint64_t off = 1;
    if (p && symm_in_heap(p, 0))
        off = (uint64_t)((const uint8_t *)p - symm_heap_base(symm_g.me));
    return symm_hash64(h, off);
}

/* A tile's shape, for the tag. Every empty tile hashes alike: its base (NULL allowed),
 * ld and which of rows and cols is 0 do not matter, nothing of it is read. */
static uint64_t tile_shape_hash(uint64_t h, const symm_tile_t *t)
{
    if (tile_empty(t)) return symm_hash64(h, 0);
    h = symm_hash64(h, t->rows);
    h = symm_hash64(h, t->cols);
    return symm_hash64(h, t->ld);
}

/* A tile's shape and place, for the fingerprints of the exchanged word. */
static uint64_t tile_obj_hash(uint64_t h, const symm_tile_t *t)
{
    h = tile_shape_hash(h, t);
    return tile_empty(t) ? h : addr_hash(h, t->base);
}

/* The out field of the rooted forms' word: a fingerprint of a symmetric out tile (0 if
 * it is not one). When every member passes the same symmetric out, as PyTorch requires,
 * every member reduces a band of rows straight into the root's out. */
static uint64_t out_word(const symm_tile_t *o, size_t esize)
{
    size_t elems, bytes;
    if (tile_empty(o) || !o->base || o->ld < o->cols ||
        __builtin_mul_overflow(o->rows - 1, o->ld, &elems) ||
        __builtin_add_overflow(elems, o->cols, &elems) ||
        __builtin_mul_overflow(elems, esize, &bytes) || !symm_addr_accessible(o->base, bytes))
        return 0;
    return (symm_mix64(tile_obj_hash(SYMM_HASH_INIT, o)) & TILE_OUT_MASK) | 1;
}

/* The word of a member whose arguments are valid (see TILE_OUT_BITS). */
static uint64_t tile_word(const tile_args_t *a, size_t esize)
{
    return a->kind == TILE_ALL ? 0 : out_word(&a->out, esize);
}

/* The jobs of a call on a team with members in other groups (tile_far.h), into jobs
 * (n entries for the allreduce, nroots for the rooted forms); returns their count. The
 * rooted forms: each root folds its tile (this worker's band of rows); the allreduce:
 * each member folds a band and spreads it, or, small (direct), every member folds the
 * whole tile. */
static int tile_far_jobs(const tile_args_t *a, int n, int worker, int nworkers, int direct,
                         size_t esize, symm_tile_job_t *jobs)
{
    int nj = 0;
    for (int t = 0; t < (a->kind == TILE_ALL ? n : a->nroots); t++) {
        const symm_tile_t *ti = &a->in[a->kind == TILE_ALL ? 0 : t];
        if (tile_empty(ti)) continue;
        size_t lo, hi, mlo = 0, mhi;
        symm_coll_band(ti->rows, (size_t)nworkers, (size_t)worker, &lo, &hi);
        mhi = hi - lo;
        if (a->kind == TILE_ALL && !direct)
            symm_coll_band(hi - lo, (size_t)n, (size_t)t, &mlo, &mhi);
        jobs[nj++] = (symm_tile_job_t){
            .in = ti->base,
            .out = a->out.base,
            .ild = ti->ld * esize,
            .old = a->out.ld * esize,
            .rb = ti->cols * esize,
            .r0 = lo + mlo,
            .r1 = lo + mhi,
            .owner = a->kind == TILE_ALL ? t : a->roots[t],
            .spread = a->kind == TILE_ALL && !direct,
            .in_place = same_tile(&a->out, ti),
        };
    }
    return nj;
}

static symm_status_t tile_run(const char *fn, symm_team_t team, int worker, int nworkers,
                              const tile_args_t *a, symm_status_t pre)
{
    SYMM_REQUIRE_INIT();
    uint64_t h = SYMM_HASH_INIT;
    h = symm_hash64(h, (uint64_t)a->kind);
    h = symm_hash64(h, ((uint64_t)a->type << 32) | (uint32_t)a->op);
    h = symm_hash64(h, ((uint64_t)(uint32_t)worker << 32) | (uint32_t)nworkers);
    h = symm_hash64(h, (uint64_t)(int64_t)a->nroots);
    /* Shapes and places of the tiles peers read (a tile outside the heap hashes to a
     * constant: validation reports it, and its error outranks the mismatch). */
    if (a->kind == TILE_ALL) {
        h = tile_obj_hash(h, &a->in[0]);
        h = tile_obj_hash(h, &a->out);
    } else if (a->in && a->roots && a->nroots <= symm_team_n_pes(team)) {
        /* (an nroots beyond the team is reported by validation: in[] is not read) */
        for (int k = 0; k < a->nroots; k++) {
            h = symm_hash64(h, (uint64_t)(int64_t)a->roots[k]);
            h = tile_obj_hash(h, &a->in[k]);
        }
    }
    symm_coll_t c;
    CHECK(symm_coll_enter(team, fn, h, &c));
    if (worker == 0) symm_coll_set_gate(&c, symm_coll_take_gate());
    int n = c.n, me = c.me;
    symm_coll_tname_t tname = {.team = team};
    symm_coll_tname_t *tn = &tname;
    symm_status_t st = SYMM_SUCCESS, mine;
    int k = -1;
    size_t esize = symm_type_size(a->type);
    tile_fold_t f = {.op = a->op, .type = a->type, .esize = esize};
    uint64_t *words = malloc(sizeof(uint64_t) * (size_t)n);
    uint8_t *bufs = NULL;
    symm_tile_far_t far = {0};
    symm_tile_job_t *jobs = NULL;
    int far_on = 0;
    if (!words) {
        symm_coll_leave(&c);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for %d members", fn,
                              symm_coll_tname(tn), n);
    }
    mine = pre ? pre : tile_validate(fn, tn, &c, a, &k);
    const symm_tile_t *in = a->kind == TILE_ALL ? &a->in[0] : k >= 0 ? &a->in[k] : NULL;
    uint64_t word = 0;
    /* A small allreduce (not in place) is reduced whole by every member: one sync and the
     * copy-out phase saved, the same bytes (same order). Every member decides alike: the
     * shapes, places and type are in the fingerprint. */
    int direct = !mine && a->kind == TILE_ALL && !tile_empty(in) && !same_tile(&a->out, in) &&
                 in->rows * in->cols * esize <= symm_config.coll_small;
    if (!mine) {
        f.kern = symm_reduce_kernel(a->type, a->op);
        /* A block buffer when out is an in tile (in place: a block is read whole before
         * it is written; in the rooted forms any member may reduce into the root's tile)
         * or a member is not mapped here (its rows are staged, and a root's out may be
         * out of reach), sized for the longest row. */
        int in_place = 0;
        size_t row = 0;
        for (int t = 0; t < (a->kind == TILE_ALL ? 1 : a->nroots); t++) {
            const symm_tile_t *ti = a->kind == TILE_ALL ? in : &a->in[t];
            if (tile_empty(ti)) continue;
            in_place |= same_tile(&a->out, ti);
            if (ti->cols * esize > row) row = ti->cols * esize;
        }
        f.blk = c.pool->remote ? SYMM_COLL_FAR_CHUNK : SYMM_COLL_CHUNK;
        size_t acc_size = ((f.blk > row ? f.blk : row) + 63) & ~(size_t)63;
        word = tile_word(a, esize);
        /* Members in other groups: rows travel packed in streams (tile_far.c) where every
         * member has scratch for them; the exchanged word says where mine is (the out
         * word serves only teams whose members are all mapped). */
        if (c.pool->remote) {
            word = 0;
            jobs = malloc(sizeof *jobs * (size_t)(a->kind == TILE_ALL ? n : a->nroots));
            int nj = jobs ? tile_far_jobs(a, n, worker, nworkers, direct, esize, jobs) : 0;
            int stream = a->kind == TILE_ALL && !direct;
            for (int j = 0; j < nj && !stream; j++)
                stream = a->kind == TILE_MULTI &&
                         (jobs[j].r1 - jobs[j].r0) * jobs[j].rb >= SYMM_TILE_FAR_ROOTED_MIN;
            if (stream && jobs)
                word = symm_tile_far_prepare(&far, &c, jobs, nj, a->type, a->op);
        }
        /* fp8: the floats of a block (acc_size elements at most) */
        size_t f8_size = symm_reduce_is_fp8(a->type) ? acc_size * sizeof(float) : 0;
        f.stage_size = c.pool->remote ? 2 * acc_size : 0;
        size_t total = acc_size + 2 * f.stage_size + f8_size;
        if (((in_place || c.pool->remote) && row) || f8_size) {
            if (!(bufs = malloc(total)))
                mine = symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for %zu bytes",
                                      fn, symm_coll_tname(tn), total);
            f.acc = bufs;
            if (f.stage_size && bufs) {
                f.stage[0] = bufs + acc_size;
                f.stage[1] = bufs + acc_size + f.stage_size;
            }
            f.f8acc = f8_size && bufs ? (float *)(bufs + acc_size + 2 * f.stage_size) : NULL;
        }
    }

    /* Exchange 1: inputs ready, everyone's arguments valid and the same tiles (the
     * fingerprint), and where everyone's out lies. */
    c.local = mine;
    CHECK_GOTO(symm_coll_exchange(&c, NULL, word, words), st, out_free);
    far_on = symm_tile_far_agreed(&c, words);
    if (far_on) {
        st = symm_tile_far_run(&far, words);
        /* a wait that gave up broke the team: no episode follows */
        if (c.dup->broken) goto out_free;
        goto out_sync;
    }
    /* Rooted forms: if every member passed the same symmetric out tile, all share the
     * work, each reducing its band of every tile into that tile's root; else each root
     * reduces its tile alone. Every member sees the same words: the same choice. So
     * does a team whose members are not all mapped here (every member has some then):
     * its roots pull and reduce alone, since a band stored into another group's root
     * goes row by row (strided puts cannot cover the gaps between rows). */
    int shared = a->kind == TILE_MULTI && !c.pool->remote && (words[0] & TILE_OUT_MASK) != 0;
    for (int s = 1; s < n && shared; s++)
        shared = (words[s] & TILE_OUT_MASK) == (words[0] & TILE_OUT_MASK);
    if (shared) {
        for (int t = 0; t < a->nroots; t++) {
            const symm_tile_t *ti = &a->in[t];
            if (tile_empty(ti)) continue;
            int to = a->roots[t];
            size_t lo, hi, mlo, mhi;
            symm_coll_band(ti->rows, (size_t)nworkers, (size_t)worker, &lo, &hi);
            symm_coll_band(hi - lo, (size_t)n, (size_t)me, &mlo, &mhi);
            tile_reduce_rows(&c, &f, &a->out, to, ti, lo + mlo, lo + mhi,
                             same_tile(&a->out, ti) || !symm_coll_near(&c, to));
        }
    } else if (in && !tile_empty(in)) {
        size_t lo, hi;
        int use_acc = same_tile(&a->out, in);
        symm_coll_band(in->rows, (size_t)nworkers, (size_t)worker, &lo, &hi);
        if (a->kind == TILE_MULTI || direct) {
            tile_reduce_rows(&c, &f, &a->out, -1, in, lo, hi, use_acc);
        } else {
            size_t mlo, mhi;
            symm_coll_band(hi - lo, (size_t)n, (size_t)me, &mlo, &mhi);
            tile_reduce_rows(&c, &f, &a->out, -1, in, lo + mlo, lo + mhi, use_acc);
        }
    }
    if (a->kind == TILE_ALL && !direct) {
        /* Every band is reduced before anyone copies it. */
        CHECK_GOTO(symm_coll_sync(&c), st, out_free);
        if (!tile_empty(in)) {
            size_t lo, hi, rb = in->cols * esize, ld = a->out.ld * esize;
            symm_coll_band(in->rows, (size_t)nworkers, (size_t)worker, &lo, &hi);
            for (int m = 0; m < n; m++) {
                if (m == me) continue;
                size_t mlo, mhi;
                symm_coll_band(hi - lo, (size_t)n, (size_t)m, &mlo, &mhi);
                uint8_t *at = (uint8_t *)a->out.base + (lo + mlo) * ld;
                symm_coll_get_rows(&c, at, ld, at, ld, rb, mhi - mlo, m);
            }
        }
    }
out_sync:
    /* Peers may still be reading my in (and, for allreduce, my out). */
    {
        symm_status_t st2 = symm_coll_sync(&c);
        if (!st) st = st2;
    }
out_free:
    symm_tile_far_release(&far);
    free(jobs);
    free(bufs);
    free(words);
    symm_coll_leave(&c);
    return st;
}

/* ---------------------------------------------------------------- entry points */
static symm_status_t tile_worker_fn(symm_pool_t pool, int worker, int nworkers, void *arg)
{
    const tile_args_t *a = arg;
    symm_team_t team;
    symm_status_t pre = symm_coll_worker_team(a->worker_fn, pool, worker, nworkers, &team);
    if (pre && team == SYMM_TEAM_INVALID) return pre;
    return tile_run(a->worker_fn, team, worker, nworkers, a, pre);
}

/* The bytes of the tiles reduced, for the automatic worker count: made only of what every
 * member passes alike (shapes and type are part of the tag), so every member picks the
 * same count. SIZE_MAX (no cap) where they cannot be read: such a call fails anyway. */
static size_t tile_work_bytes(symm_pool_t pool, const tile_args_t *a)
{
    size_t esize = symm_type_size(a->type), total = 0, b;
    int n = symm_team_n_pes(symm_pool_team(pool, 0));
    if (!esize || (a->kind == TILE_MULTI && (a->nroots < 0 || a->nroots > n))) return SIZE_MAX;
    int ntiles = a->kind == TILE_MULTI ? a->nroots : 1;
    /* in may be NULL with no roots: 0 bytes, as for members that pass an array */
    if (ntiles && !a->in) return SIZE_MAX;
    for (int k = 0; k < ntiles; k++)
        if (__builtin_mul_overflow(a->in[k].rows, a->in[k].cols, &b) ||
            __builtin_mul_overflow(b, esize, &b) || __builtin_add_overflow(total, b, &total))
            return SIZE_MAX;
    return total;
}

static symm_status_t tile_parallel(const char *fn, symm_pool_t pool, int nworkers,
                                   tile_args_t *a, const char *worker_fn)
{
    a->worker_fn = worker_fn;
    return symm_coll_run_workers(fn, pool, nworkers, tile_work_bytes(pool, a), tile_worker_fn,
                                 a);
}

#define TILE_ROOTED_ARGS                                                                       \
    (tile_args_t)                                                                              \
    {                                                                                          \
        .kind = TILE_MULTI, .out = out, .in = &in, .roots = &root, .nroots = 1, .type = type,  \
        .op = op                                                                               \
    }
#define TILE_ALL_ARGS                                                                          \
    (tile_args_t)                                                                              \
    {                                                                                          \
        .kind = TILE_ALL, .out = out, .in = &in, .type = type, .op = op                        \
    }
#define TILE_MULTI_ARGS                                                                        \
    (tile_args_t)                                                                              \
    {                                                                                          \
        .kind = TILE_MULTI, .out = out, .in = in, .roots = roots, .nroots = nroots,            \
        .type = type, .op = op                                                                 \
    }

symm_status_t symm_tile_reduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                               symm_type_t type, symm_op_t op, int root)
{
    tile_args_t a = TILE_ROOTED_ARGS;
    return tile_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_tile_allreduce(symm_team_t team, symm_tile_t out, symm_tile_t in,
                                  symm_type_t type, symm_op_t op)
{
    tile_args_t a = TILE_ALL_ARGS;
    return tile_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_tile_reduce_multi(symm_team_t team, symm_tile_t out, const symm_tile_t *in,
                                     const int *roots, int nroots, symm_type_t type,
                                     symm_op_t op)
{
    tile_args_t a = TILE_MULTI_ARGS;
    return tile_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

static symm_status_t tile_worker(const char *fn, symm_pool_t pool, int worker, int nworkers,
                                 const tile_args_t *a)
{
    symm_team_t team;
    symm_status_t pre = symm_coll_worker_team(fn, pool, worker, nworkers, &team);
    if (pre && team == SYMM_TEAM_INVALID) return pre;
    return tile_run(fn, team, worker, nworkers, a, pre);
}

symm_status_t symm_tile_reduce_worker(symm_pool_t pool, int worker, int nworkers,
                                      symm_tile_t out, symm_tile_t in, symm_type_t type,
                                      symm_op_t op, int root)
{
    tile_args_t a = TILE_ROOTED_ARGS;
    return tile_worker(__func__, pool, worker, nworkers, &a);
}

symm_status_t symm_tile_allreduce_worker(symm_pool_t pool, int worker, int nworkers,
                                         symm_tile_t out, symm_tile_t in, symm_type_t type,
                                         symm_op_t op)
{
    tile_args_t a = TILE_ALL_ARGS;
    return tile_worker(__func__, pool, worker, nworkers, &a);
}

symm_status_t symm_tile_reduce_multi_worker(symm_pool_t pool, int worker, int nworkers,
                                            symm_tile_t out, const symm_tile_t *in,
                                            const int *roots, int nroots, symm_type_t type,
                                            symm_op_t op)
{
    tile_args_t a = TILE_MULTI_ARGS;
    return tile_worker(__func__, pool, worker, nworkers, &a);
}

symm_status_t symm_tile_reduce_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                        symm_tile_t in, symm_type_t type, symm_op_t op,
                                        int root)
{
    tile_args_t a = TILE_ROOTED_ARGS;
    return tile_parallel(__func__, pool, nworkers, &a, "symm_tile_reduce_worker");
}

symm_status_t symm_tile_allreduce_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                           symm_tile_t in, symm_type_t type, symm_op_t op)
{
    tile_args_t a = TILE_ALL_ARGS;
    return tile_parallel(__func__, pool, nworkers, &a, "symm_tile_allreduce_worker");
}

symm_status_t symm_tile_reduce_multi_parallel(symm_pool_t pool, int nworkers, symm_tile_t out,
                                              const symm_tile_t *in, const int *roots,
                                              int nroots, symm_type_t type, symm_op_t op)
{
    tile_args_t a = TILE_MULTI_ARGS;
    return tile_parallel(__func__, pool, nworkers, &a, "symm_tile_reduce_multi_worker");
}
