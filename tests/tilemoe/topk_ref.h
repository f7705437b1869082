/* topk_ref.h — the serial model of top-k MoE dispatch and weighted combine, for the CPU
 * test (test_moe_topk.c) and the GPU test (test_gpu_topk.cu): every member's tokens,
 * routes, weights and rows follow from the case and the member's world rank, so any PE
 * computes any member's input and the whole expected layout without communication.
 * Header-only, C and C++. */
#ifndef SYMM_TEST_TOPK_REF_H
#define SYMM_TEST_TOPK_REF_H

#include <math.h>

#include "common/test_util.h"

#define TOPK_REF_MAXN 64

typedef struct {
    int n, ne, k;
    size_t align; /* major_align */
    uint64_t tag; /* the case: all data follows from it and the members' world ranks */
    int world[TOPK_REF_MAXN];
    size_t maxtok;  /* tokens per member: 0..maxtok */
    int empty;      /* a member with no tokens (-1: none) */
    int deaf;       /* a member that no slot routes to (-1: none) */
    int one_pe;     /* every token's experts on one member */
    int none_every; /* every this many tokens (0: never) routes no slot at all */
} topk_case_t;

static inline size_t topk_ref_tokens(const topk_case_t *c, int s)
{
    if (s == c->empty) return 0;
    return (size_t)(test_mix(c->tag, (uint64_t)c->world[s] * 7 + 1) % (c->maxtok + 1));
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

#endif
