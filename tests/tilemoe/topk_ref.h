/* topk_ref.h — the serial model of top-k MoE dispatch and weighted combine, for the CPU
 * test (test_moe_topk.c) and the GPU test (test_gpu_topk.cu): every member's tokens,
 * routes, weights and rows follow from the case and the member's world rank, so any PE
 * computes any member's input and the whole expected layout without communication.
 * Header-only, C and C++. */
#ifndef SYMM_TEST_TOPK_REF_H
#define SYMM_TEST_TOPK_REF_H

#include <math.h>

#include "common/test_util.h"

#define TOPK_REF_MAXN  64
#define TOPK_REF_MAXNE 2048 /* experts per member */

typedef struct {
    int n, ne, k;
    size_t align; /* major_align */
    uint64_t tag; /* the case: all data follows from it and the members' world ranks */
    int world[TOPK_REF_MAXN];
    size_t maxtok, mintok; /* tokens per member: mintok..maxtok */
    int empty;             /* a member with no tokens (-1: none) */
    int deaf;              /* a member that no slot routes to (-1: none) */
    int one_pe;            /* every token's experts on one member */
    int none_every;        /* every this many tokens (0: never) routes no slot at all */
} topk_case_t;

static inline size_t topk_ref_tokens(const topk_case_t *c, int s)
{
    if (s == c->empty) return 0;
    size_t lo = c->mintok < c->maxtok ? c->mintok : c->maxtok;
    return lo +
           (size_t)(test_mix(c->tag, (uint64_t)c->world[s] * 7 + 1) % (c->maxtok - lo + 1));
}

/* A member that can receive: any member but the deaf one (a random pick). */
static inline int topk_ref_pick_pe(const topk_case_t *c, test_rng_t *r)
{
    int j = (int)test_rng_below(r, (uint64_t)c->n);
    if (j == c->deaf) j = (j + 1) % c->n;
    return j;
}

/* Member s's routes: tokens x k global expert ids (-1: none). Tokens of several kinds:
 * no slot routed; every expert on one member; distinct experts; experts drawn with
 * repetition; slots left empty here and there. */
static inline void topk_ref_route(const topk_case_t *c, int s, int64_t *idx)
{
    size_t T = topk_ref_tokens(c, s);
    int n = c->n, ne = c->ne, k = c->k;
    test_rng_t r;
    test_rng_seed(&r, test_mix(c->tag, (uint64_t)c->world[s] * 7 + 2));
    int only_deaf = c->deaf >= 0 && n == 1;
    for (size_t t = 0; t < T; t++) {
        int64_t *row = idx + t * (size_t)k;
        int kind = (int)test_rng_below(&r, 8);
        if (c->one_pe) kind = 1;
        if ((c->none_every && t % (size_t)c->none_every == 0) || only_deaf) kind = 0;
        for (int i = 0; i < k; i++)
            row[i] = -1;
        if (kind == 0) continue;
        if (kind == 1) { /* all on one member */
            int j = topk_ref_pick_pe(c, &r);
            for (int i = 0; i < k; i++)
                row[i] = (int64_t)j * ne + (int64_t)test_rng_below(&r, (uint64_t)ne);
            continue;
        }
        for (int i = 0; i < k; i++) {
            if (kind >= 6 && test_rng_below(&r, 5) == 0) continue; /* an empty slot */
            for (int tries = 0;; tries++) {
                int j = topk_ref_pick_pe(c, &r);
                int64_t g = (int64_t)j * ne + (int64_t)test_rng_below(&r, (uint64_t)ne);
                int dup = 0;
                for (int q = 0; q < i; q++)
                    dup |= row[q] == g;
                /* distinct experts where there are enough (kinds 2..5), else repeats */
                if (!dup || kind >= 6 || tries > 20) {
                    row[i] = g;
                    break;
                }
            }
        }
    }
}

static inline float topk_ref_weight(const topk_case_t *c, int s, size_t t, int i)
{
    uint64_t h = test_mix(test_mix(c->tag, (uint64_t)c->world[s] * 7 + 3), t * 64 + (size_t)i);
    return (float)((h >> 40) + 1) / (float)(1 << 24); /* (0, 1] */
}

/* The pattern tag of token t of member s: payload p (0: the token row, 1..: side p-1). */
static inline uint64_t topk_ref_row_tag(const topk_case_t *c, int s, size_t t, int p)
{
    return test_mix(test_mix(c->tag, (uint64_t)c->world[s] * 7 + 4), t * 16 + (size_t)p);
}

/* What expert g computes for token t of member s, element h: a float in about [-4, 4). */
static inline float topk_ref_expert_value(const topk_case_t *c, int64_t g, int s, size_t t,
                                          size_t h)
{
    uint64_t x =
        test_mix(test_mix(c->tag, (uint64_t)g * 131 + (uint64_t)c->world[s]), t * 4096 + h);
    return (float)((double)(x >> 40) / (double)(1 << 21) - 4.0);
}

/* Every member's routes, computed once per case. */
typedef struct {
    int64_t *idx[TOPK_REF_MAXN];
    size_t tokens[TOPK_REF_MAXN];
} topk_routes_t;

static inline void topk_ref_routes(const topk_case_t *c, topk_routes_t *R)
{
    for (int s = 0; s < c->n; s++) {
        R->tokens[s] = topk_ref_tokens(c, s);
        R->idx[s] = (int64_t *)malloc(sizeof(int64_t) * (R->tokens[s] * (size_t)c->k + 1));
        if (!R->idx[s]) TEST_FAIL("allocation");
        topk_ref_route(c, s, R->idx[s]);
    }
}

static inline void topk_ref_routes_free(const topk_case_t *c, topk_routes_t *R)
{
    for (int s = 0; s < c->n; s++)
        free(R->idx[s]);
}

/* The layout on receiver j: count[e] and start[e] (ne each), the source of every row
 * (src, rows entries, or NULL; padding rows {-1, -1, -1}) and, for source s_of, the row
 * each of its slots lands at on j (rows_of, tokens x k, slots to other members left as
 * they are; or NULL). Returns the rows, padding included. Segment e holds the slots
 * routed to e in (source, token, slot) order and starts as symm_moe_dispatch says. */
static inline size_t topk_ref_layout(const topk_case_t *c, const topk_routes_t *R, int j,
                                     size_t *count, size_t *start, symm_moe_src_t *src,
                                     int s_of, int64_t *rows_of)
{
    size_t pos = 0;
    for (int e = 0; e < c->ne; e++) {
        int64_t g = (int64_t)j * c->ne + e;
        start[e] = pos;
        size_t cnt = 0;
        for (int s = 0; s < c->n; s++)
            for (size_t q = 0; q < R->tokens[s] * (size_t)c->k; q++) {
                if (R->idx[s][q] != g) continue;
                if (src) {
                    src[pos + cnt].pe = s;
                    src[pos + cnt].slot = (int32_t)(q % (size_t)c->k);
                    src[pos + cnt].token = (int64_t)(q / (size_t)c->k);
                }
                if (rows_of && s == s_of) rows_of[q] = (int64_t)(pos + cnt);
                cnt++;
            }
        count[e] = cnt;
        size_t len = cnt;
        if (c->align) len = len ? (len + c->align - 1) / c->align * c->align : c->align;
        if (src)
            for (size_t r = pos + cnt; r < pos + len; r++) {
                src[r].pe = -1;
                src[r].slot = -1;
                src[r].token = -1;
            }
        pos += len;
    }
    return pos;
}

/* A float in a row type (float, fp16, bf16), and back. */
static inline void topk_ref_store(symm_type_t t, void *row, size_t h, float v)
{
    if (t == SYMM_FLOAT)
        ((float *)row)[h] = v;
    else if (t == SYMM_BF16)
        ((uint16_t *)row)[h] = symm_float_to_bf16(v);
    else
        ((uint16_t *)row)[h] = symm_float_to_fp16(v);
}

static inline float topk_ref_load(symm_type_t t, const void *row, size_t h)
{
    if (t == SYMM_FLOAT) return ((const float *)row)[h];
    if (t == SYMM_BF16) return symm_bf16_to_float(((const uint16_t *)row)[h]);
    return symm_fp16_to_float(((const uint16_t *)row)[h]);
}

/* Member s's combined token t, element h: the documented rule (fmaf from 0 over the slots
 * in order, one rounding to the type) into *exact, and the same sum in double into
 * *approx, with a bound on how far the rounded result may be from it. */
static inline void topk_ref_combine(const topk_case_t *c, const topk_routes_t *R, int s,
                                    size_t t, size_t h, symm_type_t type, int weighted,
                                    float *exact, double *approx, double *tol)
{
    float acc = 0.0f;
    double sum = 0, mag = 0;
    for (int i = 0; i < c->k; i++) {
        int64_t g = R->idx[s][t * (size_t)c->k + (size_t)i];
        if (g < 0) continue;
        uint8_t cell[4];
        topk_ref_store(type, cell, 0, topk_ref_expert_value(c, g, s, t, h));
        float x = topk_ref_load(type, cell, 0);
        float w = weighted ? topk_ref_weight(c, s, t, i) : 1.0f;
        acc = fmaf(w, x, acc);
        sum += (double)w * (double)x;
        mag += fabs((double)w * (double)x);
    }
    uint8_t cell[4];
    topk_ref_store(type, cell, 0, acc);
    *exact = topk_ref_load(type, cell, 0);
    *approx = sum;
    double ulp = type == SYMM_FLOAT ? 0x1p-24 : type == SYMM_BF16 ? 0x1p-8 : 0x1p-11;
    *tol = ulp * fabs(sum) + (double)c->k * 0x1p-24 * mag + 1e-30;
    if (type == SYMM_FP16) *tol += 0x1p-24; /* fp16 subnormal spacing */
}

/* ---------------------------------------------------------------- checks */
/* What a dispatch left on a member. The layout outputs (src, counts, offsets, rows, trows)
 * are checked when src is set. */
typedef struct {
    const uint8_t *out;
    size_t rb;
    int nside;
    const uint8_t *side_out[SYMM_MOE_SIDE_MAX];
    size_t srb[SYMM_MOE_SIDE_MAX];
    const symm_moe_src_t *src;
    const size_t *counts, *offsets, *rows;
    const int64_t *trows;
    size_t maxrows; /* rows of out (and of every side out and of src) */
    uint8_t sentinel, src_sentinel;
} topk_got_t;

/* Every row of member rank's outputs against the model: the rows of every slot routed
 * here from their sources' patterns, padding and everything past the layout untouched,
 * and (with g->src) the sources, counts, offsets, rows and where rank's slots landed. */
static inline void topk_ref_check_dispatch(const topk_case_t *c, const topk_routes_t *R,
                                           int rank, const topk_got_t *g, const char *what)
{
    size_t cnt[TOPK_REF_MAXNE], start[TOPK_REF_MAXNE], maxrb = g->rb;
    if (c->ne > TOPK_REF_MAXNE) TEST_FAIL("more than TOPK_REF_MAXNE experts per member");
    for (int p = 0; p < g->nside; p++)
        if (g->srb[p] > maxrb) maxrb = g->srb[p];
    symm_moe_src_t *ref = (symm_moe_src_t *)malloc(sizeof(symm_moe_src_t) * (g->maxrows + 1));
    uint8_t *want = (uint8_t *)malloc(maxrb);
    if (!ref || !want) TEST_FAIL("allocation");
    size_t rows = topk_ref_layout(c, R, rank, cnt, start, NULL, -1, NULL);
    CHECK_TRUE(rows <= g->maxrows, "%s: model rows %zu", what, rows);
    topk_ref_layout(c, R, rank, cnt, start, ref, -1, NULL);
    if (g->src) {
        CHECK_TRUE(*g->rows == rows, "%s: out_rows %zu, model %zu (n %d ne %d k %d align %zu)",
                   what, *g->rows, rows, c->n, c->ne, c->k, c->align);
        for (int e = 0; e < c->ne; e++)
            CHECK_TRUE(g->counts[e] == cnt[e] && g->offsets[e] == start[e],
                       "%s: expert %d count/offset %zu/%zu, model %zu/%zu", what, e,
                       g->counts[e], g->offsets[e], cnt[e], start[e]);
    }
    for (size_t r = 0; r < g->maxrows; r++) {
        int real = r < rows && ref[r].pe >= 0;
        if (g->src) {
            const symm_moe_src_t *o = &g->src[r];
            if (r < rows)
                CHECK_TRUE(o->pe == ref[r].pe && o->slot == ref[r].slot &&
                               o->token == ref[r].token,
                           "%s: out_src[%zu] = (%d, %lld, %d), model (%d, %lld, %d)", what, r,
                           o->pe, (long long)o->token, o->slot, ref[r].pe,
                           (long long)ref[r].token, ref[r].slot);
            else
                CHECK_ALL_BYTES(o, g->src_sentinel, sizeof(symm_moe_src_t),
                                "%s: out_src[%zu] past the layout written", what, r);
        }
        if (!real) {
            CHECK_ALL_BYTES(g->out + r * g->rb, g->sentinel, g->rb,
                            "%s: padding row %zu written", what, r);
            for (int p = 0; p < g->nside; p++)
                CHECK_ALL_BYTES(g->side_out[p] + r * g->srb[p], g->sentinel, g->srb[p],
                                "%s: side %d padding row %zu written", what, p, r);
            if (r > rows + 8 && r + 9 < g->maxrows) r = g->maxrows - 9; /* the tail: spots */
            continue;
        }
        int s = ref[r].pe;
        size_t t = (size_t)ref[r].token;
        test_fill_pattern(want, g->rb, topk_ref_row_tag(c, s, t, 0));
        CHECK_BYTES(
            g->out + r * g->rb, want, g->rb,
            "%s: row %zu (source %d token %zu slot %d; n %d ne %d k %d align %zu rb %zu)", what,
            r, s, t, ref[r].slot, c->n, c->ne, c->k, c->align, g->rb);
        for (int p = 0; p < g->nside; p++) {
            test_fill_pattern(want, g->srb[p], topk_ref_row_tag(c, s, t, 1 + p));
            CHECK_BYTES(g->side_out[p] + r * g->srb[p], want, g->srb[p],
                        "%s: side %d row %zu (source %d token %zu)", what, p, r, s, t);
        }
    }
    if (g->src) { /* where my slots landed */
        size_t slots = R->tokens[rank] * (size_t)c->k;
        int64_t *wr = (int64_t *)malloc(sizeof(int64_t) * (slots + 1));
        if (!wr) TEST_FAIL("allocation");
        for (size_t q = 0; q < slots; q++)
            wr[q] = -1;
        for (int j = 0; j < c->n; j++)
            topk_ref_layout(c, R, j, cnt, start, NULL, rank, wr);
        for (size_t q = 0; q < slots; q++)
            CHECK_TRUE(g->trows[q] == wr[q], "%s: topk_rows[%zu] = %lld, model %lld", what, q,
                       (long long)g->trows[q], (long long)wr[q]);
        free(wr);
    }
    free(want);
    free(ref);
}

/* Member rank's expert outputs (rows of hidden elements of type, into eo): for every row
 * it received (from src, counts and offsets), what its expert computes for its token;
 * padding rows all ones (NaN for every type: a combine that read one would show it). */
static inline void topk_ref_fill_expert_out(const topk_case_t *c, int rank, symm_type_t type,
                                            size_t hidden, size_t rows, const size_t *counts,
                                            const size_t *offsets, const symm_moe_src_t *src,
                                            uint8_t *eo)
{
    size_t rb = hidden * symm_type_size(type);
    memset(eo, 0xff, rows * rb);
    for (int e = 0; e < c->ne; e++)
        for (size_t r = offsets[e]; r < offsets[e] + counts[e]; r++) {
            int64_t g = (int64_t)rank * c->ne + e;
            for (size_t h = 0; h < hidden; h++)
                topk_ref_store(type, eo + r * rb, h,
                               topk_ref_expert_value(c, g, src[r].pe, (size_t)src[r].token, h));
        }
}

/* Member rank's combined tokens (out, out_bytes bytes, sentinel past its tokens): bit for
 * bit the documented float accumulation, and within rounding of the exact sum. */
static inline void topk_ref_check_combine(const topk_case_t *c, const topk_routes_t *R,
                                          int rank, symm_type_t type, size_t hidden,
                                          int weighted, const uint8_t *out, size_t out_bytes,
                                          uint8_t sentinel, const char *what)
{
    size_t T = R->tokens[rank], rb = hidden * symm_type_size(type);
    for (size_t t = 0; t < T; t++)
        for (size_t h = 0; h < hidden; h++) {
            float exact, got = topk_ref_load(type, out + t * rb, h);
            double approx, tol;
            topk_ref_combine(c, R, rank, t, h, type, weighted, &exact, &approx, &tol);
            CHECK_TRUE(!memcmp(&got, &exact, sizeof got) || (got != got && exact != exact),
                       "%s: token %zu element %zu = %.9g, the float accumulation gives %.9g "
                       "(type %s, k %d)",
                       what, t, h, (double)got, (double)exact, symm_type_name(type), c->k);
            CHECK_TRUE(fabs((double)got - approx) <= tol,
                       "%s: token %zu element %zu = %.9g, the exact sum is %.12g (tolerance "
                       "%.3g)",
                       what, t, h, (double)got, approx, tol);
        }
    CHECK_ALL_BYTES(out + T * rb, sentinel, out_bytes - T * rb,
                    "%s: combine wrote past its tokens", what);
}

#endif
