/* moe_topk.c — top-k MoE dispatch (each token once to every member that holds one of its
 * experts, landing in each of its experts' segments there) and weighted combine (expert
 * outputs pulled back to their tokens' homes and reduced with the routing weights in
 * float), on a team or split over the workers of a pool.
 *
 * Dispatch. Every member publishes, in a per-call scratch of its team region, a header
 * (its out_capacity, its tokens, where its in and its side ins lie), its count table
 * (slots per global expert, n*ne words) and its route (one word per (token, slot): the
 * expert and the slot's rank among the sender's slots for that expert, plan__topk.h),
 * and announces the scratch with one exchange. Every member then reads every member's
 * counts: the segment lengths of every receiver, hence every receiver's need, checked
 * against its capacity (the same verdict everywhere, no episode), and where its own slots
 * land on each receiver (topk_rows). Each member then reads the route of every source and
 * pulls the tokens routed to it, each token read once and written into every segment it
 * goes to. A closing sync keeps inputs and scratches alive until everyone has read.
 * Members not mapped here are read through the transport (coll.h): their scratch is
 * copied once, their tokens and rows one get each.
 *
 * Combine. Every member publishes where its expert output lies and how many rows it has;
 * each checks its own topk_rows against them and a sync agrees on the outcome, so that a
 * bad row fails every member before anything is written; each member then reduces its own
 * tokens from the rows its slots name (pull), and a closing sync keeps the expert outputs
 * alive until everyone has read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/reduce_ops.h"
#include "coll/tile_moe.h"
#include "symm/impl/plan__topk.h"
#include "team/team.h"

typedef enum { TOPK_DISPATCH, TOPK_COMBINE } topk_kind_t;

typedef struct topk_args {
    topk_kind_t kind;
    void *out;
    size_t out_capacity; /* dispatch: rows of out */
    const void *in;
    size_t tokens;
    size_t row_bytes; /* dispatch */
    const int64_t *topk_idx;
    int k, ne;
    size_t major_align;
    const symm_moe_side_t *side;
    int nside;
    size_t *out_counts, *out_offsets, *out_rows;
    symm_moe_src_t *out_src;
    int64_t *rows_out; /* dispatch: topk_rows */
    /* combine */
    size_t in_rows, hidden;
    symm_type_t type;
    const int64_t *rows_in; /* combine: topk_rows */
    const float *weights;
} topk_args_t;

/* The exchanged word of a member that failed: its status in the low bits. */
#define TOPK_FAIL ((uint64_t)1 << 63)

/* The dispatch scratch: a header, then the count table (n*ne words), then the route
 * (tokens*k words). */
#define TK_HDR_CAP  0
#define TK_HDR_TOK  1
#define TK_HDR_IN   2
#define TK_HDR_SIDE 3
static size_t hdr_words(int nside)
{
    return (size_t)TK_HDR_SIDE + (size_t)nside;
}

static const char *topk_fn(topk_kind_t kind, int worker_form)
{
    static const char *names[2][2] = {
        {"symm_moe_topk_dispatch", "symm_moe_topk_dispatch_worker"},
        {"symm_moe_topk_combine", "symm_moe_topk_combine_worker"},
    };
    return names[kind][worker_form];
}

static symm_status_t peer_failed(const char *fn, symm_coll_tname_t *tn, const symm_coll_t *c,
                                 int s, uint64_t word)
{
    symm_status_t theirs = (symm_status_t)(-(int)(uint32_t)word);
    return symm_error_set(theirs,
                          "%s on %s: PE %d (world %d) passed bad arguments (%s); nothing "
                          "was written",
                          fn, symm_coll_tname(tn), s, c->world[s], symm_strerror(theirs));
}

/* The shape every member passes alike. */
static symm_status_t check_shape(const char *fn, symm_coll_tname_t *tn, int n,
                                 const topk_args_t *a)
{
    switch (symm_plan_topk_shape(n, a->ne, a->tokens, a->k)) {
    case SYMM_PLAN_TOPK_OK:
        return SYMM_SUCCESS;
    case SYMM_PLAN_TOPK_K:
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: k = %d (must be 1..%d)", fn,
                              symm_coll_tname(tn), a->k, SYMM_MOE_TOPK_MAX);
    case SYMM_PLAN_TOPK_NE:
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: ne = %d experts per member (must be >= 1)", fn,
                              symm_coll_tname(tn), a->ne);
    case SYMM_PLAN_TOPK_EXPERTS:
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: %d members x %d experts is 2^31 or more", fn,
                              symm_coll_tname(tn), n, a->ne);
    default:
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: %zu tokens x k = %d slots is 2^32 or more", fn,
                              symm_coll_tname(tn), a->tokens, a->k);
    }
}

/* Every slot of topk_idx is -1 or a global expert; *routed: some slot is not -1. */
static symm_status_t check_route(const char *fn, symm_coll_tname_t *tn, int n,
                                 const topk_args_t *a, int *routed)
{
    size_t slots = a->tokens * (size_t)a->k, nexp = (size_t)n * (size_t)a->ne;
    *routed = 0;
    if (slots && !a->topk_idx)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: topk_idx is NULL with %zu tokens", fn,
                              symm_coll_tname(tn), a->tokens);
    for (size_t q = 0; q < slots; q++) {
        int64_t g = a->topk_idx[q];
        if (!symm_plan_topk_slot_ok(g, nexp))
            return symm_error_set(SYMM_ERR_INVALID_ARG,
                                  "%s on %s: topk_idx[%zu] (token %zu, slot %d) = %lld is "
                                  "neither -1 nor a global expert below %zu (%d members x "
                                  "%d experts)",
                                  fn, symm_coll_tname(tn), q, q / (size_t)a->k,
                                  (int)(q % (size_t)a->k), (long long)g, nexp, n, a->ne);
        if (g >= 0) *routed = 1;
    }
    return SYMM_SUCCESS;
}

/* An input of tokens rows of rb bytes: symmetric when this member routes any slot (else
 * it may be NULL). what names it in messages. *bytes: the bytes read (0: none). */
static symm_status_t check_in(const char *fn, symm_coll_tname_t *tn, const char *what,
                              const void *in, size_t tokens, size_t rb, int routed,
                              size_t *bytes)
{
    *bytes = 0;
    if (!routed) return SYMM_SUCCESS;
    if (__builtin_mul_overflow(tokens, rb, bytes))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s on %s: %zu tokens of %zu bytes overflow",
                              fn, symm_coll_tname(tn), tokens, rb);
    if (!in)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: %s is NULL but this PE routes tokens to experts", fn,
                              symm_coll_tname(tn), what);
    if (!symm_addr_accessible(in, *bytes))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s on %s: %s %p + %zu bytes (%zu tokens of %zu bytes) is not "
                              "inside one symmetric object",
                              fn, symm_coll_tname(tn), what, in, *bytes, tokens, rb);
    return SYMM_SUCCESS;
}

/* This member's dispatch arguments. */
static symm_status_t dispatch_check(const char *fn, symm_coll_tname_t *tn, int n,
                                    const topk_args_t *a)
{
    symm_check_where_t w;
    CHECK(check_shape(fn, tn, n, a));
    if (a->row_bytes == 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: row_bytes is 0", fn,
                              symm_coll_tname(tn));
    if (a->nside < 0 || a->nside > SYMM_MOE_SIDE_MAX || (a->nside && !a->side))
        return symm_error_set(
            SYMM_ERR_INVALID_ARG, "%s on %s: nside = %d with side %p (0..%d side payloads)", fn,
            symm_coll_tname(tn), a->nside, (const void *)a->side, SYMM_MOE_SIDE_MAX);
    for (int p = 0; p < a->nside; p++)
        if (a->side[p].row_bytes == 0)
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: side[%d].row_bytes is 0", fn,
                                  symm_coll_tname(tn), p);
    int routed;
    CHECK(check_route(fn, tn, n, a, &routed));
    /* every in, then every out: none may overlap an in (peers read the ins meanwhile) */
    size_t ib[1 + SYMM_MOE_SIDE_MAX], ob;
    const void *ins[1 + SYMM_MOE_SIDE_MAX];
    ins[0] = a->in;
    CHECK(check_in(fn, tn, "in", a->in, a->tokens, a->row_bytes, routed, &ib[0]));
    for (int p = 0; p < a->nside; p++) {
        char what[32];
        snprintf(what, sizeof what, "side[%d].in", p);
        ins[1 + p] = a->side[p].in;
        CHECK(check_in(fn, tn, what, a->side[p].in, a->tokens, a->side[p].row_bytes, routed,
                       &ib[1 + p]));
    }
    for (int p = 0; p <= a->nside; p++) {
        void *o = p ? a->side[p - 1].out : a->out;
        size_t rb = p ? a->side[p - 1].row_bytes : a->row_bytes;
        /* out NULL with a capacity, or too many bytes; then no overlap with any in */
        CHECK(symm_check_a2a_out(symm_coll_where(&w, fn, tn), o, a->out_capacity, rb, NULL, 0,
                                 &ob));
        for (int q = 0; q <= a->nside; q++)
            if (symm_check_overlap((uintptr_t)o, (uintptr_t)o + ob, (uintptr_t)ins[q],
                                   (uintptr_t)ins[q] + ib[q])) {
                char on[32] = "out", inn[32] = "in";
                if (p) snprintf(on, sizeof on, "side[%d].out", p - 1);
                if (q) snprintf(inn, sizeof inn, "side[%d].in", q - 1);
                return symm_error_set(SYMM_ERR_INVALID_ARG,
                                      "%s on %s: %s [%p, +%zu) overlaps %s [%p, +%zu): peers "
                                      "read the ins while the outs are written",
                                      fn, symm_coll_tname(tn), on, o, ob, inn, ins[q], ib[q]);
            }
    }
    return SYMM_SUCCESS;
}

/* The segment offset of a member's input (0: none; nobody reads it then). */
static uint64_t seg_off(const void *p)
{
    return p ? (uint64_t)((const uint8_t *)p - symm_g.seg[symm_g.me]) : 0;
}

/* My scratch: the header, the count table and the route (ranks counted in (token, slot)
 * order: the count table is the running count). */
static void dispatch_publish(const topk_args_t *a, int n, uint64_t *pub)
{
    size_t hw = hdr_words(a->nside), nexp = (size_t)n * (size_t)a->ne;
    size_t slots = a->tokens * (size_t)a->k;
    uint64_t *cnt = pub + hw, *route = cnt + nexp;
    pub[TK_HDR_CAP] = a->out_capacity;
    pub[TK_HDR_TOK] = a->tokens;
    pub[TK_HDR_IN] = seg_off(a->in);
    for (int p = 0; p < a->nside; p++)
        pub[TK_HDR_SIDE + p] = seg_off(a->side[p].in);
    memset(cnt, 0, nexp * sizeof(uint64_t));
    for (size_t q = 0; q < slots; q++) {
        int64_t g = a->topk_idx[q];
        route[q] = g < 0 ? symm_plan_topk_route(SYMM_PLAN_TOPK_NONE, 0)
                         : symm_plan_topk_route((uint32_t)g, (uint32_t)cnt[g]++);
    }
}

/* What a dispatch lays out from every member's counts (tab[s] + hw: source s's table). */
typedef struct {
    size_t *len;     /* [ne] rows of my segment e */
    size_t *start;   /* [ne] where my segment e starts */
    size_t *base;    /* [ne * n] start of my segment e + rows of sources before s: e*n + s */
    size_t *dstbase; /* [n * ne] for my slots: where my rows for receiver j's expert e begin */
    size_t need;     /* my rows, padding included */
    int fail_m;      /* the first member whose layout does not fit (n: none) */
    size_t fail_need;
} topk_layout_t;

static void dispatch_layout(const topk_args_t *a, int n, int me, const uint64_t *const *tab,
                            topk_layout_t *L)
{
    const size_t hw = hdr_words(a->nside), ne = (size_t)a->ne, A = a->major_align;
    L->fail_m = n;
    L->need = 0;
    for (int m = 0; m < n; m++) {
        uint64_t pos = 0;
        for (size_t e = 0; e < ne; e++) {
            size_t g = (size_t)m * ne + e;
            uint64_t sum = 0, pre_me = 0;
            for (int s = 0; s < n; s++) {
                if (s == me) pre_me = sum;
                if (m == me) L->base[e * (size_t)n + (size_t)s] = sum;
                sum += tab[s][hw + g]; /* < 2^32 each, fewer than 2^31 members */
            }
            if (pos != UINT64_MAX) {
                L->dstbase[g] = pos + pre_me;
                if (m == me) {
                    L->len[e] = sum;
                    L->start[e] = pos;
                }
            }
            pos = pos == UINT64_MAX ? pos : symm_plan_topk_seg_next(pos, sum, A);
        }
        if (m == me) L->need = pos;
        if (L->fail_m == n && (pos == UINT64_MAX || pos > tab[m][TK_HDR_CAP])) {
            L->fail_m = m;
            L->fail_need = pos;
        }
    }
    if (L->fail_m < n) return;
    for (size_t e = 0; e < ne; e++)
        for (int s = 0; s < n; s++)
            L->base[e * (size_t)n + (size_t)s] += L->start[e];
}

/* Member s's scratch of nwords words at offset off of its team region, readable here: in
 * its memory where it is mapped, else copied into *copy (malloc'd: the caller frees it;
 * NULL and c->local set where that fails). */
static const uint64_t *scratch_view(symm_coll_t *c, int s, uint64_t off, size_t nwords,
                                    uint64_t **copy)
{
    const void *at = symm_team_region_ptr(symm_g.me, off); /* the same offset in mine */
    *copy = NULL;
    if (symm_coll_near(c, s)) return symm_coll_ptr(c, at, s);
    if (!(*copy = malloc(nwords * sizeof(uint64_t)))) {
        if (!c->local)
            c->local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: no memory for PE %d's table",
                                      c->what, c->world[s]);
        return NULL;
    }
    symm_coll_get(c, *copy, at, nwords * sizeof(uint64_t), s, 0);
    return *copy;
}

/* Copies my share of the tokens I receive: received tokens (every source's, in member
 * order) [lo, hi). Each token is read once from its source and written into every segment
 * it goes to (the later copies from the first, locally). */
static void dispatch_copy(const topk_args_t *a, symm_coll_t *c, const uint64_t *const *tab,
                          const topk_layout_t *L, size_t lo, size_t hi)
{
    const int n = c->n, me = c->me, k = a->k, nside = a->nside;
    const size_t hw = hdr_words(nside), nexp = (size_t)n * (size_t)a->ne;
    const uint32_t ne = (uint32_t)a->ne, g0 = (uint32_t)me * ne;
    size_t pos = 0;
    for (int s = 0; s < n && pos < hi; s++) {
        size_t T = (size_t)tab[s][TK_HDR_TOK], t0 = lo > pos ? lo - pos : 0;
        size_t t1 = hi - pos < T ? hi - pos : T;
        pos += T;
        if (t0 >= t1) continue;
        const uint64_t *route = tab[s] + hw + nexp;
        /* s's inputs, named by their offsets in my own segment */
        const uint8_t *sin = symm_g.seg[symm_g.me] + tab[s][TK_HDR_IN];
        const uint8_t *sside[SYMM_MOE_SIDE_MAX];
        for (int p = 0; p < nside; p++)
            sside[p] = symm_g.seg[symm_g.me] + tab[s][TK_HDR_SIDE + p];
        for (size_t t = t0; t < t1; t++) {
            size_t first = SIZE_MAX;
            for (int i = 0; i < k; i++) {
                uint64_t w = route[t * (size_t)k + (size_t)i];
                uint32_t e = symm_plan_topk_route_expert(w) - g0; /* wraps for others */
                if (symm_plan_topk_route_expert(w) == SYMM_PLAN_TOPK_NONE || e >= ne) continue;
                size_t r = (size_t)symm_plan_topk_row(
                    L->base[(size_t)e * (size_t)n + (size_t)s], symm_plan_topk_route_rank(w));
                uint8_t *o = (uint8_t *)a->out;
                if (first == SIZE_MAX)
                    symm_coll_get(c, o + r * a->row_bytes, sin + t * a->row_bytes, a->row_bytes,
                                  s, 0);
                else
                    memcpy(o + r * a->row_bytes, o + first * a->row_bytes, a->row_bytes);
                for (int p = 0; p < nside; p++) {
                    size_t rb = a->side[p].row_bytes;
                    uint8_t *so = (uint8_t *)a->side[p].out;
                    if (first == SIZE_MAX)
                        symm_coll_get(c, so + r * rb, sside[p] + t * rb, rb, s, 0);
                    else
                        memcpy(so + r * rb, so + first * rb, rb);
                }
                if (first == SIZE_MAX) first = r;
            }
        }
    }
}

/* Worker 0's outputs: the layout, the source of every row and where my slots landed. */
static void dispatch_outputs(const topk_args_t *a, const symm_coll_t *c,
                             const uint64_t *const *tab, const uint64_t *pub,
                             const topk_layout_t *L)
{
    const int n = c->n, me = c->me, k = a->k;
    const size_t hw = hdr_words(a->nside), nexp = (size_t)n * (size_t)a->ne;
    const uint32_t ne = (uint32_t)a->ne, g0 = (uint32_t)me * ne;
    for (uint32_t e = 0; e < ne; e++) {
        if (a->out_counts) a->out_counts[e] = L->len[e];
        if (a->out_offsets) a->out_offsets[e] = L->start[e];
    }
    if (a->out_rows) *a->out_rows = L->need;
    if (a->out_src) {
        const symm_moe_src_t pad = {-1, -1, -1};
        for (uint32_t e = 0; e < ne; e++) {
            size_t end = e + 1 < ne ? L->start[e + 1] : L->need;
            for (size_t r = L->start[e] + L->len[e]; r < end; r++)
                a->out_src[r] = pad;
        }
        for (int s = 0; s < n; s++) {
            size_t T = (size_t)tab[s][TK_HDR_TOK];
            const uint64_t *route = tab[s] + hw + nexp;
            for (size_t q = 0; q < T * (size_t)k; q++) {
                uint32_t e = symm_plan_topk_route_expert(route[q]) - g0;
                if (symm_plan_topk_route_expert(route[q]) == SYMM_PLAN_TOPK_NONE || e >= ne)
                    continue;
                size_t r =
                    (size_t)symm_plan_topk_row(L->base[(size_t)e * (size_t)n + (size_t)s],
                                               symm_plan_topk_route_rank(route[q]));
                a->out_src[r] = (symm_moe_src_t){.pe = s,
                                                 .slot = (int32_t)(q % (size_t)k),
                                                 .token = (int64_t)(q / (size_t)k)};
            }
        }
    }
    if (a->rows_out) {
        const uint64_t *route = pub + hw + nexp;
        for (size_t q = 0; q < a->tokens * (size_t)k; q++) {
            uint32_t g = symm_plan_topk_route_expert(route[q]);
            a->rows_out[q] = g == SYMM_PLAN_TOPK_NONE
                                 ? -1
                                 : (int64_t)symm_plan_topk_row(
                                       L->dstbase[g], symm_plan_topk_route_rank(route[q]));
        }
    }
}

static symm_status_t overflow_error(const char *fn, symm_coll_tname_t *tn, const symm_coll_t *c,
                                    int m, size_t need, size_t cap)
{
    if (need == SIZE_MAX)
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: the output size of PE %d (world %d) overflows; "
                              "nothing was written",
                              fn, symm_coll_tname(tn), m, c->world[m]);
    return symm_error_set(SYMM_ERR_OVERFLOW,
                          "%s on %s: the output of PE %d (world %d) needs %zu rows, more than "
                          "its out_capacity %zu; nothing was written",
                          fn, symm_coll_tname(tn), m, c->world[m], need, cap);
}

static uint64_t dispatch_fp(const topk_args_t *a)
{
    uint64_t h =
        symm_plan_topk_dispatch_fp((uint64_t)(int64_t)a->k, (uint64_t)(int64_t)a->ne,
                                   a->row_bytes, a->major_align, (uint64_t)(int64_t)a->nside);
    /* the sides' widths, where they can be read (a bad side array is reported by the
     * checks, and its error outranks the mismatch) */
    if (a->nside > 0 && a->nside <= SYMM_MOE_SIDE_MAX && a->side)
        for (int p = 0; p < a->nside; p++)
            h = symm_tm_mix(h, a->side[p].row_bytes);
    return h;
}

static symm_status_t dispatch_run(const char *fn, symm_team_t team, int worker, int nworkers,
                                  const topk_args_t *a, symm_status_t pre)
{
    SYMM_REQUIRE_INIT();
    uint64_t h =
        symm_tm_mix(dispatch_fp(a), ((uint64_t)(uint32_t)worker << 32) | (uint32_t)nworkers);
    symm_coll_t c;
    CHECK(symm_coll_enter(team, fn, h, &c));
    if (worker == 0) symm_coll_set_gate(&c, symm_coll_take_gate());
    const int n = c.n, me = c.me;
    symm_coll_tname_t tname = {.team = team};
    symm_coll_tname_t *tn = &tname;

    /* ---- local checks and the publication; failures are agreed below */
    symm_status_t st = SYMM_SUCCESS, mine = pre;
    uint64_t pub_off = 0, *pub = NULL;
    uint64_t *words = malloc(sizeof(uint64_t) * (size_t)n);
    const uint64_t **tab = malloc(sizeof(uint64_t *) * (size_t)n);
    uint64_t **copies = calloc((size_t)n, sizeof(uint64_t *)); /* far members' scratch */
    topk_layout_t L = {0};
    if (!words || !tab || !copies) {
        free(words);
        free(tab);
        free(copies);
        symm_coll_leave(&c);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for %d members", fn,
                              symm_coll_tname(tn), n);
    }
    if (!mine) mine = dispatch_check(fn, tn, n, a);
    size_t nexp = 0;
    if (!mine) {
        nexp = (size_t)n * (size_t)a->ne;
        size_t ne = (size_t)a->ne,
               words_pub = hdr_words(a->nside) + nexp + a->tokens * (size_t)a->k;
        L.len = malloc(sizeof(size_t) * ne * 2);
        L.base = malloc(sizeof(size_t) * ne * (size_t)n);
        L.dstbase = malloc(sizeof(size_t) * nexp);
        if (!L.len || !L.base || !L.dstbase)
            mine = symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for the layout", fn,
                                  symm_coll_tname(tn));
        else if (!(mine = symm_team_region_alloc(words_pub * sizeof(uint64_t), &pub_off))) {
            pub = symm_team_region_ptr(symm_g.me, pub_off);
            dispatch_publish(a, n, pub);
        }
        if (L.len) L.start = L.len + ne;
    }

    /* Exchange 1: the scratch's offset, or my failure. It also orders every member's
     * scratch and inputs before anyone reads them (the notify is a release). */
    CHECK_GOTO(
        symm_coll_exchange(&c, NULL, mine ? TOPK_FAIL | (uint32_t)-mine : pub_off, words), st,
        out_free);
    for (int s = 0; s < n; s++) {
        if (!(words[s] & TOPK_FAIL)) continue;
        st = mine ? mine : peer_failed(fn, tn, &c, s, words[s]);
        goto out_free; /* nobody reads a scratch now */
    }
    /* a far member's scratch: its header first, which says how long the route is */
    const size_t hw = hdr_words(a->nside);
    for (int s = 0; s < n && !c.local; s++) {
        if (s == me || symm_coll_near(&c, s)) {
            tab[s] = s == me ? pub : scratch_view(&c, s, words[s], 0, &copies[s]);
            continue;
        }
        uint64_t hd[TK_HDR_SIDE + SYMM_MOE_SIDE_MAX];
        symm_coll_get(&c, hd, symm_team_region_ptr(symm_g.me, words[s]), hw * sizeof(uint64_t),
                      s, 0);
        tab[s] = scratch_view(&c, s, words[s],
                              hw + nexp + (size_t)hd[TK_HDR_TOK] * (size_t)a->k, &copies[s]);
    }
    if (c.local) {
        /* Peers may still be reading my table: sync before it goes. */
        st = symm_coll_sync(&c);
        goto out_free;
    }

    /* ---- every receiver's layout: the verdict on the capacities (the same everywhere),
     * my own segments and where my slots land */
    dispatch_layout(a, n, me, tab, &L);
    if (L.fail_m < n) {
        st = overflow_error(fn, tn, &c, L.fail_m,
                            L.fail_need == UINT64_MAX ? SIZE_MAX : L.fail_need,
                            (size_t)tab[L.fail_m][TK_HDR_CAP]);
        /* Peers may still be reading my table: sync before it goes. */
        symm_status_t st2 = symm_coll_sync(&c);
        (void)st2; /* the overflow is the error to report */
        goto out_free;
    }

    /* ---- my share of the tokens I receive, then (worker 0) the outputs */
    size_t recv_tokens = 0, lo, hi;
    for (int s = 0; s < n; s++)
        recv_tokens += (size_t)tab[s][TK_HDR_TOK];
    symm_coll_band(recv_tokens, (size_t)nworkers, (size_t)worker, &lo, &hi);
    dispatch_copy(a, &c, tab, &L, lo, hi);
    if (worker == 0) dispatch_outputs(a, &c, tab, pub, &L);
    /* Peers may still be reading my inputs and my scratch. */
    st = symm_coll_sync(&c);

out_free:
    if (pub) symm_team_region_free(pub_off);
    free(L.len);
    free(L.base);
    free(L.dstbase);
    for (int s = 0; s < n; s++)
        free(copies[s]);
    free(copies);
    free(tab);
    free(words);
    symm_coll_leave(&c);
    return st;
}

/* ---------------------------------------------------------------- combine */
#define TC_HDR_IN   0
#define TC_HDR_ROWS 1

static symm_status_t combine_check(const char *fn, symm_coll_tname_t *tn, int n,
                                   const topk_args_t *a, size_t *in_bytes)
{
    CHECK(check_shape(fn, tn, n, a));
    *in_bytes = 0;
    if (!symm_plan_topk_type_ok(a->type))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: type %d (%s) is not a combine row type (float, fp16 "
                              "or bf16)",
                              fn, symm_coll_tname(tn), (int)a->type, symm_type_name(a->type));
    if (a->hidden == 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: hidden is 0", fn,
                              symm_coll_tname(tn));
    size_t es = symm_type_size(a->type), rb, ob;
    if (__builtin_mul_overflow(a->hidden, es, &rb) ||
        __builtin_mul_overflow(a->in_rows, rb, in_bytes) ||
        __builtin_mul_overflow(a->tokens, rb, &ob))
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: rows of %zu elements overflow (in_rows %zu, tokens "
                              "%zu)",
                              fn, symm_coll_tname(tn), a->hidden, a->in_rows, a->tokens);
    if (*in_bytes && (!a->in || !symm_addr_accessible(a->in, *in_bytes)))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s on %s: in %p + %zu bytes (%zu rows of %zu bytes) is not "
                              "inside one symmetric object",
                              fn, symm_coll_tname(tn), a->in, *in_bytes, a->in_rows, rb);
    if (ob && !a->out)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: out is NULL with %zu tokens", fn,
                              symm_coll_tname(tn), a->tokens);
    if (symm_check_overlap((uintptr_t)a->out, (uintptr_t)a->out + ob, (uintptr_t)a->in,
                           (uintptr_t)a->in + *in_bytes))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: out [%p, +%zu) overlaps in [%p, +%zu): peers read "
                              "in while out is written",
                              fn, symm_coll_tname(tn), a->out, ob, a->in, *in_bytes);
    int routed;
    CHECK(check_route(fn, tn, n, a, &routed));
    if (routed && !a->rows_in)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: topk_rows is NULL", fn,
                              symm_coll_tname(tn));
    return SYMM_SUCCESS;
}

/* My slots' rows against the rows of their members' ins (rows[j]). */
static symm_status_t combine_check_rows(const char *fn, symm_coll_tname_t *tn,
                                        const symm_coll_t *c, const topk_args_t *a,
                                        const uint64_t *rows)
{
    for (size_t q = 0; q < a->tokens * (size_t)a->k; q++) {
        int64_t g = a->topk_idx[q];
        if (g < 0) continue;
        int j = (int)(g / a->ne);
        int64_t r = a->rows_in[q];
        if (r < 0 || (uint64_t)r >= rows[j])
            return symm_error_set(SYMM_ERR_INVALID_ARG,
                                  "%s on %s: topk_rows[%zu] (token %zu, slot %d) = %lld but "
                                  "the in of PE %d (world %d), which holds expert %lld, has "
                                  "%llu rows",
                                  fn, symm_coll_tname(tn), q, q / (size_t)a->k,
                                  (int)(q % (size_t)a->k), (long long)r, j, c->world[j],
                                  (long long)g, (unsigned long long)rows[j]);
    }
    return SYMM_SUCCESS;
}

/* Reduces my tokens [t0, t1). in[j]: member j's expert output, named by its offset in my
 * own segment; a row of a member not mapped here is staged in stage (one row). */
static void combine_tokens(const topk_args_t *a, symm_coll_t *c, const uint8_t *const *in,
                           float *acc, uint8_t *stage, size_t t0, size_t t1)
{
    const size_t hidden = a->hidden, rb = hidden * symm_type_size(a->type);
    const int k = a->k;
    for (size_t t = t0; t < t1; t++) {
        memset(acc, 0, hidden * sizeof(float));
        for (int i = 0; i < k; i++) {
            size_t q = t * (size_t)k + (size_t)i;
            int64_t g = a->topk_idx[q];
            if (g < 0) continue;
            int j = (int)(g / a->ne);
            const uint8_t *row =
                symm_coll_view(c, in[j] + (size_t)a->rows_in[q] * rb, rb, j, stage);
            symm_reduce_wacc(a->type, acc, row, a->weights ? a->weights[q] : 1.0f, hidden);
        }
        symm_reduce_round_store(a->type, (uint8_t *)a->out + t * rb, acc, hidden);
    }
}

static symm_status_t combine_run(const char *fn, symm_team_t team, int worker, int nworkers,
                                 const topk_args_t *a, symm_status_t pre)
{
    SYMM_REQUIRE_INIT();
    uint64_t h = symm_plan_topk_combine_fp((uint64_t)(int64_t)a->k, (uint64_t)(int64_t)a->ne,
                                           a->hidden, (uint64_t)(int64_t)a->type);
    h = symm_tm_mix(h, ((uint64_t)(uint32_t)worker << 32) | (uint32_t)nworkers);
    symm_coll_t c;
    CHECK(symm_coll_enter(team, fn, h, &c));
    if (worker == 0) symm_coll_set_gate(&c, symm_coll_take_gate());
    const int n = c.n, me = c.me;
    symm_coll_tname_t tname = {.team = team};
    symm_coll_tname_t *tn = &tname;
    symm_status_t st = SYMM_SUCCESS, mine = pre;
    uint64_t pub_off = 0, *pub = NULL;
    uint64_t *words = malloc(sizeof(uint64_t) * (size_t)n * 2);
    const uint8_t **in = malloc(sizeof(uint8_t *) * (size_t)n);
    float *acc = NULL;
    if (!words || !in) {
        free(words);
        free(in);
        symm_coll_leave(&c);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for %d members", fn,
                              symm_coll_tname(tn), n);
    }
    uint64_t *rows = words + n;
    size_t in_bytes = 0;
    if (!mine) mine = combine_check(fn, tn, n, a, &in_bytes);
    /* a row of floats, then (members not mapped here) a staged row */
    if (!mine && !(acc = malloc(a->hidden * sizeof(float) * (c.pool->remote ? 2 : 1))))
        mine = symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for a row", fn,
                              symm_coll_tname(tn));
    if (!mine && !(mine = symm_team_region_alloc(2 * sizeof(uint64_t), &pub_off))) {
        pub = symm_team_region_ptr(symm_g.me, pub_off);
        pub[TC_HDR_IN] = in_bytes ? seg_off(a->in) : 0;
        pub[TC_HDR_ROWS] = a->in_rows;
    }

    /* Exchange 1: where every member's expert output lies, or its failure. */
    CHECK_GOTO(
        symm_coll_exchange(&c, NULL, mine ? TOPK_FAIL | (uint32_t)-mine : pub_off, words), st,
        out_free);
    for (int s = 0; s < n; s++) {
        if (!(words[s] & TOPK_FAIL)) continue;
        st = mine ? mine : peer_failed(fn, tn, &c, s, words[s]);
        goto out_free;
    }
    for (int s = 0; s < n; s++) {
        uint64_t hd[2];
        if (s == me)
            memcpy(hd, pub, sizeof hd);
        else
            symm_coll_get(&c, hd, symm_team_region_ptr(symm_g.me, words[s]), sizeof hd, s, 0);
        in[s] = symm_g.seg[symm_g.me] + hd[TC_HDR_IN]; /* the same offset in my segment */
        rows[s] = hd[TC_HDR_ROWS];
    }
    /* Sync 2: every member's rows checked (a bad one fails every member, naming it, and
     * nothing is written); after it nobody reads a header. */
    if (!c.local) c.local = combine_check_rows(fn, tn, &c, a, rows);
    CHECK_GOTO(symm_coll_sync(&c), st, out_free);
    symm_team_region_free(pub_off);
    pub = NULL;

    size_t lo, hi;
    symm_coll_band(a->tokens, (size_t)nworkers, (size_t)worker, &lo, &hi);
    combine_tokens(a, &c, in, acc, c.pool->remote ? (uint8_t *)(acc + a->hidden) : NULL, lo,
                   hi);
    /* Peers may still be reading my expert output. */
    st = symm_coll_sync(&c);

out_free:
    if (pub) symm_team_region_free(pub_off);
    free(acc);
    free(in);
    free(words);
    symm_coll_leave(&c);
    return st;
}

/* ---------------------------------------------------------------- entry points */
static symm_status_t topk_run(const char *fn, symm_team_t team, int worker, int nworkers,
                              const topk_args_t *a, symm_status_t pre)
{
    return a->kind == TOPK_DISPATCH ? dispatch_run(fn, team, worker, nworkers, a, pre)
                                    : combine_run(fn, team, worker, nworkers, a, pre);
}

static symm_status_t topk_worker_fn(symm_pool_t pool, int worker, int nworkers, void *arg)
{
    const topk_args_t *a = arg;
    symm_team_t team;
    const char *fn = topk_fn(a->kind, 1);
    symm_status_t pre = symm_coll_worker_team(fn, pool, worker, nworkers, &team);
    if (pre && team == SYMM_TEAM_INVALID) return pre;
    return topk_run(fn, team, worker, nworkers, a, pre);
}

#define TOPK_DISPATCH_ARGS                                                                     \
    (topk_args_t)                                                                              \
    {                                                                                          \
        .kind = TOPK_DISPATCH, .out = out, .out_capacity = out_capacity, .in = in,             \
        .tokens = tokens, .row_bytes = row_bytes, .topk_idx = topk_idx, .k = k, .ne = ne,      \
        .major_align = major_align, .side = side, .nside = nside, .out_counts = out_counts,    \
        .out_offsets = out_offsets, .out_rows = out_rows, .out_src = out_src,                  \
        .rows_out = topk_rows                                                                  \
    }
#define TOPK_COMBINE_ARGS                                                                      \
    (topk_args_t)                                                                              \
    {                                                                                          \
        .kind = TOPK_COMBINE, .out = out, .in = in, .tokens = tokens, .topk_idx = topk_idx,    \
        .k = k, .ne = ne, .in_rows = in_rows, .hidden = hidden, .type = type,                  \
        .rows_in = topk_rows, .weights = topk_weights                                          \
    }

symm_status_t symm_moe_topk_dispatch(symm_team_t team, void *out, size_t out_capacity,
                                     const void *in, size_t tokens, size_t row_bytes,
                                     const int64_t *topk_idx, int k, int ne, size_t major_align,
                                     const symm_moe_side_t *side, int nside, size_t *out_counts,
                                     size_t *out_offsets, symm_moe_src_t *out_src,
                                     size_t *out_rows, int64_t *topk_rows)
{
    topk_args_t a = TOPK_DISPATCH_ARGS;
    return topk_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_moe_topk_combine(symm_team_t team, void *out, size_t tokens, const void *in,
                                    size_t in_rows, size_t hidden, symm_type_t type,
                                    const int64_t *topk_idx, const int64_t *topk_rows,
                                    const float *topk_weights, int k, int ne)
{
    topk_args_t a = TOPK_COMBINE_ARGS;
    return topk_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_moe_topk_dispatch_worker(
    symm_pool_t pool, int worker, int nworkers, void *out, size_t out_capacity, const void *in,
    size_t tokens, size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows)
{
    topk_args_t a = TOPK_DISPATCH_ARGS;
    return topk_worker_fn(pool, worker, nworkers, &a);
}

symm_status_t symm_moe_topk_combine_worker(symm_pool_t pool, int worker, int nworkers,
                                           void *out, size_t tokens, const void *in,
                                           size_t in_rows, size_t hidden, symm_type_t type,
                                           const int64_t *topk_idx, const int64_t *topk_rows,
                                           const float *topk_weights, int k, int ne)
{
    topk_args_t a = TOPK_COMBINE_ARGS;
    return topk_worker_fn(pool, worker, nworkers, &a);
}

symm_status_t symm_moe_topk_dispatch_parallel(
    symm_pool_t pool, int nworkers, void *out, size_t out_capacity, const void *in,
    size_t tokens, size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows)
{
    topk_args_t a = TOPK_DISPATCH_ARGS;
    /* SIZE_MAX: each member knows only its own tokens, so the automatic count cannot
     * depend on them */
    return symm_coll_run_workers(__func__, pool, nworkers, SIZE_MAX, topk_worker_fn, &a);
}

symm_status_t symm_moe_topk_combine_parallel(symm_pool_t pool, int nworkers, void *out,
                                             size_t tokens, const void *in, size_t in_rows,
                                             size_t hidden, symm_type_t type,
                                             const int64_t *topk_idx, const int64_t *topk_rows,
                                             const float *topk_weights, int k, int ne)
{
    topk_args_t a = TOPK_COMBINE_ARGS;
    return symm_coll_run_workers(__func__, pool, nworkers, SIZE_MAX, topk_worker_fn, &a);
}
