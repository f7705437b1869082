/* two_level.c — collectives across groups that share no memory (two_level.h): load/store
 * inside a group, one transfer per group and item across groups. Which member of a group
 * fetches what is fixed by the team alone (the groups of pool->group, in team order), so
 * every member knows who brings each item without a word more. */
#include "coll/two_level.h"

/* The group of member g's view: its members in team order, mine among them, and the
 * rank of every other member among those outside it (which one of the group fetches
 * from it). */
typedef struct {
    int k;       /* members of the group */
    int li;      /* my index among them; -1 if I am not in it */
    int *local;  /* [k] their team numbers */
    int *farpos; /* [n] rank among the members outside the group; -1 inside */
    symm_coll_scratch_t s;
    int buf[256];
} tl_layout_t;

static symm_status_t tl_layout(symm_coll_t *c, int group, tl_layout_t *t)
{
    int n = c->n, far = 0;
    symm_status_t st =
        symm_coll_scratch(c->what, &t->s, t->buf, sizeof t->buf, 2 * (size_t)n * sizeof(int));
    if (st) return st;
    t->local = t->s.p;
    t->farpos = t->local + n;
    t->k = 0;
    t->li = -1;
    for (int j = 0; j < n; j++) {
        if (c->pool->group[j] != group) {
            t->farpos[j] = far++;
            continue;
        }
        if (j == c->me) t->li = t->k;
        t->farpos[j] = -1;
        t->local[t->k++] = j;
    }
    return SYMM_SUCCESS;
}

static void tl_layout_free(tl_layout_t *t)
{
    symm_coll_scratch_free(&t->s);
}

/* My layout, or the call's failure recorded for the next episode. */
static int tl_mine(symm_coll_t *c, tl_layout_t *t)
{
    symm_status_t st = tl_layout(c, c->pool->group[c->me], t);
    if (st && !c->local) c->local = st;
    return st == SYMM_SUCCESS;
}

/* The n bytes at addr in my memory into the same place of every other member of my
 * group. */
static void tl_spread(symm_coll_t *c, const tl_layout_t *t, void *addr, size_t n, int nt)
{
    for (int i = 1; i < t->k; i++)
        symm_coll_put(c, addr, addr, n, t->local[(t->li + i) % t->k], nt);
}

void symm_coll_tl_broadcast(symm_coll_t *c, void *dest, const void *src, size_t nbytes,
                            int root, int nt)
{
    if (c->pool->group[root] == c->pool->group[c->me]) {
        symm_coll_get(c, dest, src, nbytes, root, nt);
        return;
    }
    tl_layout_t t;
    if (!tl_mine(c, &t)) return;
    /* each member of the group brings a share and hands it to the others */
    size_t lo, hi;
    symm_coll_slice(nbytes, 1, t.k, t.li, &lo, &hi);
    uint8_t *at = (uint8_t *)dest + lo;
    symm_coll_get(c, at, (const uint8_t *)src + lo, hi - lo, root, nt);
    tl_spread(c, &t, at, hi - lo, nt);
    tl_layout_free(&t);
}

void symm_coll_tl_pull(symm_coll_t *c, void *dest, const void *src,
                       size_t (*where)(const void *ctx, int j, size_t *len), const void *ctx,
                       int inplace, int nt)
{
    tl_layout_t t;
    if (!tl_mine(c, &t)) return;
    for (int s = 1; s <= c->n; s++) {
        int j = (c->me + s) % c->n;
        size_t len, off = where(ctx, j, &len);
        uint8_t *at = (uint8_t *)dest + off;
        const void *from = inplace ? at : src;
        if (t.farpos[j] < 0) {
            symm_coll_get(c, at, from, len, j, nt);
        } else if (t.farpos[j] % t.k == t.li) {
            symm_coll_get(c, at, from, len, j, nt);
            tl_spread(c, &t, at, len, nt);
        }
    }
    tl_layout_free(&t);
}

/* The blocks of far member j for my whole group, where the group's members are
 * consecutive in team order and the blocks small: a few large gets of the run of blocks
 * into stage (stage_size bytes), each block then stored into its member's dest. */
static void tl_a2a_run(symm_coll_t *c, const tl_layout_t *t, void *dest, const void *src,
                       size_t nbytes, int j, uint8_t *stage, size_t stage_size, int nt)
{
    size_t per = stage_size / nbytes;
    for (int q = 0; q < t->k; q += (int)per) {
        int m = t->k - q < (int)per ? t->k - q : (int)per;
        symm_coll_far_get(c, stage, (const uint8_t *)src + (size_t)t->local[q] * nbytes,
                          (size_t)m * nbytes, j);
        for (int i = 0; i < m; i++)
            symm_coll_put(c, (uint8_t *)dest + (size_t)j * nbytes, stage + (size_t)i * nbytes,
                          nbytes, t->local[q + i], nt);
    }
}

void symm_coll_tl_alltoall(symm_coll_t *c, void *dest, const void *src, size_t nbytes, int nt)
{
    tl_layout_t t;
    if (!tl_mine(c, &t)) return;
    int run = t.local[t.k - 1] - t.local[0] == t.k - 1;
    size_t per = nbytes < SYMM_COLL_FAR_CHUNK ? SYMM_COLL_FAR_CHUNK / nbytes : 1;
    size_t stage_size = (per < (size_t)t.k ? per : (size_t)t.k) * nbytes;
    uint8_t *stage = run && per > 1 ? malloc(stage_size) : NULL;
    for (int s = 1; s <= c->n; s++) {
        int j = (c->me + s) % c->n;
        uint8_t *at = (uint8_t *)dest + (size_t)j * nbytes;
        if (t.farpos[j] < 0) {
            symm_coll_get(c, at, (const uint8_t *)src + (size_t)c->me * nbytes, nbytes, j, nt);
            continue;
        }
        if (t.farpos[j] % t.k != t.li) continue;
        if (stage) {
            tl_a2a_run(c, &t, dest, src, nbytes, j, stage, stage_size, nt);
            continue;
        }
        /* each group member's block of j straight into that member's dest */
        for (int i = 0; i < t.k; i++) {
            int p = t.local[i];
            symm_coll_far_get(c, symm_coll_ptr(c, at, p),
                              (const uint8_t *)src + (size_t)p * nbytes, nbytes, j);
        }
    }
    free(stage);
    tl_layout_free(&t);
}

symm_status_t symm_coll_tl_reduce(symm_coll_t *c, void *dest, size_t count, size_t es,
                                  size_t step, int root, int inplace, symm_coll_fold_fn fold,
                                  void *ctx)
{
    tl_layout_t t;
    symm_status_t st = tl_layout(c, c->pool->group[root >= 0 ? root : c->me], &t);
    if (st) return symm_coll_fail(c, st);
    uint8_t *mine = NULL;
    size_t lo = 0, hi = 0, nb;
    if (t.li >= 0) symm_coll_slice(count, es, t.k, t.li, &lo, &hi);
    nb = (hi - lo) * es;
    int nt = count * es >= SYMM_COLL_NT_MIN;
    if (inplace && nb && !(mine = malloc(nb)))
        c->local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: no memory for %zu bytes of scratch",
                                  c->what, nb);
    _Alignas(64) uint8_t buf[SYMM_COLL_CHUNK];
    uint8_t *tmp = buf;
    if (!inplace && step * es > sizeof buf && !(tmp = malloc(step * es))) {
        c->local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: no memory for %zu bytes of scratch",
                                  c->what, step * es);
        hi = lo;
    }
    for (size_t i = lo; i < hi && !c->local; i += step) {
        size_t len = hi - i < step ? hi - i : step, off = i * es;
        uint8_t *to = inplace ? mine + (i - lo) * es : tmp;
        fold(c, ctx, to, off, len);
        if (inplace) continue;
        if (root >= 0)
            symm_coll_put(c, (uint8_t *)dest + off, to, len * es, root, nt);
        else
            for (int q = 0; q < t.k; q++)
                symm_coll_put(c, (uint8_t *)dest + off, to, len * es, t.local[(t.li + q) % t.k],
                              nt);
    }
    if (tmp != buf) free(tmp);
    if (inplace) {
        /* the other group may still be reading the sources that these stores replace */
        st = symm_coll_sync(c);
        for (int q = 0; q < t.k && !st && nb; q++)
            symm_coll_put(c, (uint8_t *)dest + lo * es, mine, nb, t.local[(t.li + q) % t.k],
                          nt);
        free(mine);
    }
    tl_layout_free(&t);
    return st;
}
