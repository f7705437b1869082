/* reduce.c — allreduce, rooted reduce and reduce-scatter on a team.
 *
 * A reduction reads the peers' sources directly where they are mapped here, and stages
 * them through the transport otherwise (symm_coll_view); what differs by size is who
 * reduces what:
 *   <= 8 bytes       the payload rides in the episode's data word: one exchange, then each
 *                    member folds the words locally (one cache-line round trip per pair);
 *   <= coll_small    sync, each member that needs the result folds all sources, sync
 *                    (the second sync keeps the sources alive until everyone has read);
 *   larger           sync, member r reduces slice r of every source in L1-sized chunks and
 *                    stores the chunk into every member's (or the root's) dest, sync: each
 *                    member reads and writes the payload once, as a copy would.
 * Members are always folded in team order, ((s0 op s1) op s2) ..., so every member and
 * every algorithm gives bitwise-identical results, floating point included. Across groups
 * that share no memory (coll/two_level.c) the larger reductions fold whole sources the
 * same way, in root's group only (reduce) or in each of two groups (allreduce). */
#include "coll/coll.h"
#include "coll/reduce_ops.h"
#include "coll/two_level.h"

typedef struct {
    symm_reduce_fn_t k;
    symm_op_t op;
    symm_type_t type;
    size_t es;    /* element size */
    size_t count; /* elements */
    int root;     /* -1: every member gets the result */
} red_args_t;

/* dst[0..len) = fold over members of their source at byte offset off. dst is mine or a
 * scratch buffer and aliases no source still to be read. stage (2 x len elements) holds
 * what comes from members that are not mapped here (NULL where all are). */
static void red_fold_peers(symm_coll_t *c, const red_args_t *a, void *dst, const void *src,
                           size_t off, size_t len, uint8_t *stage)
{
    const uint8_t *at = (const uint8_t *)src + off;
    size_t nb = len * a->es;
    const void *s0 = symm_coll_view(c, at, nb, 0, stage);
    const void *s1 = symm_coll_view(c, at, nb, 1, stage ? stage + nb : NULL);
    a->k(a->op, dst, s0, s1, len);
    for (int j = 2; j < c->n; j++)
        a->k(a->op, dst, dst, symm_coll_view(c, at, nb, j, stage), len);
}

/* Bytes a reduction works on per step: SYMM_COLL_CHUNK where every member is mapped here,
 * SYMM_COLL_FAR_CHUNK where some are not (each staged piece costs a round trip). */
static size_t red_chunk(const symm_coll_t *c)
{
    return c->pool->remote ? SYMM_COLL_FAR_CHUNK : SYMM_COLL_CHUNK;
}

/* One exchange of the payload in the data word. */
static symm_status_t red_word(symm_coll_t *c, const red_args_t *a, void *dest, const void *src)
{
    size_t nbytes = a->count * a->es;
    uint64_t stackbuf[64];
    symm_coll_scratch_t s;
    symm_status_t sst = symm_coll_scratch(c->what, &s, stackbuf, sizeof stackbuf,
                                          (size_t)c->n * sizeof(uint64_t));
    if (sst) return symm_coll_fail(c, sst);
    uint64_t *recv = s.p, word = 0, acc;
    memcpy(&word, src, nbytes);
    symm_status_t st = symm_coll_exchange(c, NULL, word, recv);
    if (!st && (a->root < 0 || a->root == c->me)) {
        a->k(a->op, &acc, &recv[0], &recv[1], a->count);
        for (int j = 2; j < c->n; j++)
            a->k(a->op, &acc, &acc, &recv[j], a->count);
        memcpy(dest, &acc, nbytes);
    }
    symm_coll_scratch_free(&s);
    return st;
}

/* Each member that wants the result folds all sources itself. */
static symm_status_t red_small(symm_coll_t *c, const red_args_t *a, void *dest, const void *src)
{
    size_t nbytes = a->count * a->es;
    int want = a->root < 0 || a->root == c->me;
    _Alignas(64) uint8_t stackbuf[4096], stagebuf[4096];
    symm_coll_scratch_t s = {dest, 0}, stage = {NULL, 0};
    /* In place, the fold would overwrite my source before the others have read it. */
    symm_status_t st;
    if (want && dest == src) {
        st = symm_coll_scratch(c->what, &s, stackbuf, sizeof stackbuf, nbytes);
        if (st) return symm_coll_fail(c, st);
    }
    if (want && c->pool->remote) {
        st = symm_coll_scratch(c->what, &stage, stagebuf, sizeof stagebuf, 2 * nbytes);
        if (st) {
            symm_coll_scratch_free(&s);
            return symm_coll_fail(c, st);
        }
    }
    CHECK_GOTO(symm_coll_sync(c), st, out);
    if (want) red_fold_peers(c, a, s.p, src, 0, a->count, stage.p);
    CHECK_GOTO(symm_coll_sync(c), st, out);
    if (want && s.p != dest) memcpy(dest, s.p, nbytes);
out:
    symm_coll_scratch_free(&stage);
    symm_coll_scratch_free(&s);
    return st;
}

typedef struct {
    const red_args_t *a;
    const void *src;
    uint8_t *stage;
} red_fold_ctx_t;

static void red_fold_cb(symm_coll_t *c, void *ctx, void *dst, size_t off, size_t len)
{
    const red_fold_ctx_t *f = ctx;
    red_fold_peers(c, f->a, dst, f->src, off, len, f->stage);
}

/* The larger reduction across groups: the members of each group that wants the result
 * share it among themselves, each folding every member's source for its share. */
static symm_status_t red_two_level(symm_coll_t *c, const red_args_t *a, void *dest,
                                   const void *src)
{
    size_t chunk = red_chunk(c);
    red_fold_ctx_t f = {a, src, malloc(2 * chunk)};
    if (!f.stage)
        return symm_coll_fail(c, symm_error_set(SYMM_ERR_NO_MEMORY,
                                                "%s: no memory for %zu bytes of scratch",
                                                c->what, 2 * chunk));
    symm_status_t st = symm_coll_sync(c);
    if (!st)
        st = symm_coll_tl_reduce(c, dest, a->count, a->es, chunk / a->es, a->root,
                                 a->root < 0 && dest == src, red_fold_cb, &f);
    /* Nobody may leave (and reuse a source or read dest) before every share is stored. */
    if (!st) st = symm_coll_sync(c);
    free(f.stage);
    return st;
}

/* A rooted reduction of two members that reach each other only through the transport,
 * dest not src: the root fetches the first half of the other's source and folds it while
 * the other stores its second half into the root's dest; after the closing sync the root
 * folds that half in place. The root's half arrives by one transfer of the other's, so
 * each half crosses once and the two transfers run at once, where slices would have the
 * other fetch the root's half and store the result back (one transfer more). Measured
 * with every PE its own group on 2 cores (Open MPI 4.1, vader; three runs, against the
 * slices): 32 KiB 10.6-11.2 -> 5.7-8.7 us, 64 KiB 14.0-15.6 -> 7.4-11.6, 1 MiB 254-279 ->
 * 178-275. */
static symm_status_t red_pair(symm_coll_t *c, const red_args_t *a, void *dest, const void *src)
{
    size_t chunk = red_chunk(c), step = chunk / a->es, half = a->count / 2;
    uint8_t *stage = NULL;
    if (c->me == a->root && !(stage = malloc(2 * chunk)))
        return symm_coll_fail(c, symm_error_set(SYMM_ERR_NO_MEMORY,
                                                "%s: no memory for %zu bytes of scratch",
                                                c->what, 2 * chunk));
    symm_status_t st = symm_coll_sync(c);
    if (!st && c->me != a->root) {
        size_t off = half * a->es;
        symm_coll_put(c, (uint8_t *)dest + off, (const uint8_t *)src + off,
                      (a->count - half) * a->es, a->root, 0);
    }
    for (size_t i = 0; !st && stage && i < half; i += step) {
        size_t len = half - i < step ? half - i : step;
        red_fold_peers(c, a, (uint8_t *)dest + i * a->es, src, i * a->es, len, stage);
    }
    if (!st) st = symm_coll_sync(c);
    if (!st && stage) {
        /* member 0's source first, as every fold */
        uint8_t *d = (uint8_t *)dest + half * a->es;
        const uint8_t *own = (const uint8_t *)src + half * a->es;
        if (c->me == 0)
            a->k(a->op, d, own, d, a->count - half);
        else
            a->k(a->op, d, d, own, a->count - half);
    }
    free(stage);
    return st;
}

/* Member r reduces slice r and stores it where it is wanted. In place is safe: slice r
 * of any member's source is read by member r only, before r overwrites it. */
static symm_status_t red_large(symm_coll_t *c, const red_args_t *a, void *dest, const void *src)
{
    if (symm_coll_tl_reduces(c, a->root)) return red_two_level(c, a, dest, src);
    if (a->root >= 0 && symm_coll_far_pair(c) && dest != src) return red_pair(c, a, dest, src);
    _Alignas(64) uint8_t buf[SYMM_COLL_CHUNK];
    int n = c->n, me = c->me;
    size_t chunk = red_chunk(c), lo, hi, step = chunk / a->es;
    /* where members are far: the chunk, then two staged sources */
    symm_coll_scratch_t s;
    symm_status_t st =
        symm_coll_scratch(c->what, &s, buf, sizeof buf, c->pool->remote ? 3 * chunk : chunk);
    if (st) return symm_coll_fail(c, st);
    uint8_t *tmp = s.p, *stage = c->pool->remote ? tmp + chunk : NULL;
    symm_coll_slice(a->count, a->es, n, me, &lo, &hi);
    int nt = a->count * a->es >= SYMM_COLL_NT_MIN;
    CHECK_GOTO(symm_coll_sync(c), st, out);
    for (size_t i = lo; i < hi; i += step) {
        size_t len = hi - i < step ? hi - i : step, off = i * a->es, nb = len * a->es;
        red_fold_peers(c, a, tmp, src, off, len, stage);
        if (a->root >= 0) {
            symm_coll_put(c, (uint8_t *)dest + off, tmp, nb, a->root, nt);
            continue;
        }
        /* Start with the next member so that the n stores of a chunk do not all queue
         * on member 0's memory at once. */
        for (int t = 1; t <= n; t++)
            symm_coll_put(c, (uint8_t *)dest + off, tmp, nb, (me + t) % n, nt);
    }
    /* Nobody may leave (and reuse a source or read dest) before every slice is stored. */
    st = symm_coll_sync(c);
out:
    symm_coll_scratch_free(&s);
    return st;
}

/* The checks of one member's arguments; a failure is told to the others in the call's
 * first episode (symm_coll_fail). */
static symm_status_t red_check(const char *fn, int n, int rooted, red_args_t *a,
                               const void *dest, const void *src, size_t *nbytes)
{
    CHECK(symm_reduce_lookup(fn, a->type, a->op, &a->k, &a->es));
    CHECK(symm_coll_mul(fn, "count x element size", a->count, a->es, 1, nbytes));
    CHECK(symm_coll_check_io(fn, dest, *nbytes, src, *nbytes,
                             dest != src ? "dest and src overlap without being equal" : NULL));
    return rooted ? symm_coll_check_root(fn, a->root, n) : SYMM_SUCCESS;
}

/* root < 0: every member gets the result (allreduce). */
static symm_status_t red_run(const char *fn, symm_team_t team, void *dest, const void *src,
                             size_t count, symm_type_t type, symm_op_t op, int rooted, int root)
{
    red_args_t a = {NULL, op, type, 0, count, rooted ? root : -1};
    size_t nbytes = 0;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    symm_status_t local = red_check(fn, c.n, rooted, &a, dest, src, &nbytes);
    /* The algorithm is part of the fingerprint: members whose SYMM_COLL_SMALL differ
     * would pick different ones and corrupt an in-place call; this way they get
     * COLL_MISMATCH. */
    uint64_t alg = nbytes <= SYMM_COLL_WORD ? 0 : nbytes <= symm_config.coll_small ? 1 : 2;
    uint64_t args = symm_coll_args(count, (uint64_t)type | alg << 32 | (uint64_t)op << 40,
                                   (uint64_t)a.root, symm_coll_off(dest));
    symm_coll_set_args(&c, symm_mix64(args ^ symm_coll_off(src)));
    symm_status_t st;
    if (!symm_coll_settled(&c, local, dest, src, nbytes, &st))
        st = alg == 0   ? red_word(&c, &a, dest, src)
             : alg == 1 ? red_small(&c, &a, dest, src)
                        : red_large(&c, &a, dest, src);
    symm_coll_leave(&c);
    return st;
}

symm_status_t symm_allreduce(symm_team_t team, void *dest, const void *src, size_t count,
                             symm_type_t type, symm_op_t op)
{
    return red_run(__func__, team, dest, src, count, type, op, 0, -1);
}

symm_status_t symm_reduce(symm_team_t team, void *dest, const void *src, size_t count,
                          symm_type_t type, symm_op_t op, int root)
{
    return red_run(__func__, team, dest, src, count, type, op, 1, root);
}

/* Member r folds block r of every source straight into its dest, chunk by chunk; dest
 * may not overlap src (the others read all of my src). Up to 8 bytes per block, the
 * blocks ride in the exchange's per-pair words instead. */
symm_status_t symm_reduce_scatter(symm_team_t team, void *dest, const void *src, size_t count,
                                  symm_type_t type, symm_op_t op)
{
    const char *fn = __func__;
    red_args_t a = {NULL, op, type, 0, count, -1};
    size_t nbytes = 0, srcbytes = 0;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n, me = c.me;
    symm_status_t local = symm_reduce_lookup(fn, type, op, &a.k, &a.es);
    if (!local) local = symm_coll_mul(fn, "count x element size", count, a.es, 1, &nbytes);
    if (!local)
        local = symm_coll_mul(fn, "team size x count x element size", (size_t)n, count, a.es,
                              &srcbytes);
    if (!local)
        local = symm_coll_check_io(fn, dest, nbytes, src, srcbytes, "dest overlaps src");

    uint64_t stackbuf[128];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local =
            symm_coll_word_scratch(fn, &s, stackbuf, sizeof stackbuf, nbytes, 2 * (size_t)n);
    symm_coll_set_args(&c, symm_mix64(symm_coll_args(count, type, op, symm_coll_off(src)) ^
                                      symm_coll_off(dest)));
    symm_status_t st;
    if (symm_coll_settled(&c, local, dest, src, nbytes, &st)) goto out_leave;
    if (nbytes <= SYMM_COLL_WORD) {
        uint64_t *send = s.p, *recv = send + n, acc;
        for (int j = 0; j < n; j++) {
            send[j] = 0;
            memcpy(&send[j], (const uint8_t *)src + (size_t)j * nbytes, nbytes);
        }
        CHECK_GOTO(symm_coll_exchange(&c, send, 0, recv), st, out_leave);
        a.k(op, &acc, &recv[0], &recv[1], count);
        for (int j = 2; j < n; j++)
            a.k(op, &acc, &acc, &recv[j], count);
        memcpy(dest, &acc, nbytes);
    } else {
        size_t chunk = red_chunk(&c), step = chunk / a.es, base = (size_t)me * nbytes;
        uint8_t *stage = NULL;
        if (c.pool->remote && !(stage = malloc(2 * chunk)))
            c.local = symm_error_set(SYMM_ERR_NO_MEMORY,
                                     "%s: no memory for %zu bytes of "
                                     "scratch",
                                     fn, 2 * chunk);
        st = symm_coll_sync(&c);
        for (size_t i = 0; i < count && !st; i += step) {
            size_t len = count - i < step ? count - i : step;
            red_fold_peers(&c, &a, (uint8_t *)dest + i * a.es, src, base + i * a.es, len,
                           stage);
        }
        /* the others may still be reading my source */
        if (!st) st = symm_coll_sync(&c);
        free(stage);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}
