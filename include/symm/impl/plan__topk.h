/* plan__topk.h — what the CPU and the GPU decide alike in top-k MoE dispatch and weighted
 * combine (symm_moe_topk_* of symm.h): the limits, the route word a sender publishes for
 * each (token, slot), where a routed slot lands on its expert's member, the order in which
 * a combine accumulates, and the fingerprint of the arguments every member passes alike.
 * src/coll/moe_topk.c and the device code (topk__funcs.cuh) both call these. Valid C11
 * and CUDA C++, host and device. */
#ifndef SYMM_IMPL_PLAN__TOPK_H
#define SYMM_IMPL_PLAN__TOPK_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "symm.h"
#include "symm/impl/half__common.h"
#include "symm/impl/plan__hd.h"
#include "symm/impl/tile_moe__common.h"

/* What is wrong with the shape of a top-k call, first fault first (0: nothing). */
enum {
    SYMM_PLAN_TOPK_OK = 0,
    SYMM_PLAN_TOPK_K,       /* k outside 1..SYMM_MOE_TOPK_MAX */
    SYMM_PLAN_TOPK_NE,      /* ne < 1 */
    SYMM_PLAN_TOPK_EXPERTS, /* n * ne >= 2^31 */
    SYMM_PLAN_TOPK_TOKENS,  /* tokens * k >= 2^32 */
};

SYMM_HD int symm_plan_topk_shape(int n, int ne, uint64_t tokens, int k)
{
    if (k < 1 || k > SYMM_MOE_TOPK_MAX) return SYMM_PLAN_TOPK_K;
    if (ne < 1) return SYMM_PLAN_TOPK_NE;
    if ((uint64_t)n * (uint64_t)ne >= ((uint64_t)1 << 31)) return SYMM_PLAN_TOPK_EXPERTS;
    if (tokens >= ((uint64_t)1 << 32) || tokens * (uint64_t)k >= ((uint64_t)1 << 32))
        return SYMM_PLAN_TOPK_TOKENS;
    return SYMM_PLAN_TOPK_OK;
}

/* A slot's expert id is valid: -1 (no expert) or a global expert below nexp = n * ne. */
SYMM_HD int symm_plan_topk_slot_ok(int64_t g, uint64_t nexp)
{
    return g == -1 || (g >= 0 && (uint64_t)g < nexp);
}

/* The route word of a slot, as its sender publishes it: the global expert in the high
 * half (all ones: no expert), and its rank in the low half: how many earlier slots of
 * the sender, in (token, slot) order, go to the same expert. Where the slot lands on its
 * expert's member follows from the rank alone (symm_plan_topk_row). */
#define SYMM_PLAN_TOPK_NONE 0xffffffffu
SYMM_HD uint64_t symm_plan_topk_route(uint32_t g, uint32_t rank)
{
    return ((uint64_t)g << 32) | rank;
}
SYMM_HD uint32_t symm_plan_topk_route_expert(uint64_t w)
{
    return (uint32_t)(w >> 32);
}
SYMM_HD uint32_t symm_plan_topk_route_rank(uint64_t w)
{
    return (uint32_t)w;
}

/* Where segment e + 1 of a receiver starts, after segment e of len rows at start, with
 * major_align A (the rule of symm_moe_dispatch); UINT64_MAX on overflow. */
SYMM_HD uint64_t symm_plan_topk_seg_next(uint64_t start, uint64_t len, uint64_t A)
{
    uint64_t al;
    if (symm_tm_aligned_len(len, A, &al) || al > UINT64_MAX - 1 - start) return UINT64_MAX;
    return start + al;
}

/* The row of a receiver's out where a slot lands: its segment's start, plus the rows of
 * that segment from sources before it (base: both summed by the receiver's layout), plus
 * the slot's rank. */
SYMM_HD uint64_t symm_plan_topk_row(uint64_t seg_start_plus_base, uint32_t rank)
{
    return seg_start_plus_base + rank;
}

/* ---------------------------------------------------------------- combine */
/* The row element types a combine reduces. */
SYMM_HD int symm_plan_topk_type_ok(int type)
{
    return type == SYMM_FLOAT || type == SYMM_FP16 || type == SYMM_BF16;
}

SYMM_HD float symm_plan_topk_load(int type, const void *row, size_t h)
{
    if (type == SYMM_FLOAT) return ((const float *)row)[h];
    uint16_t v = ((const uint16_t *)row)[h];
    return type == SYMM_BF16 ? symm_half_bf16_to_float(v) : symm_half_fp16_to_float(v);
}

SYMM_HD void symm_plan_topk_store(int type, void *row, size_t h, float v)
{
    if (type == SYMM_FLOAT)
        ((float *)row)[h] = v;
    else
        ((uint16_t *)row)[h] =
            type == SYMM_BF16 ? symm_half_float_to_bf16(v) : symm_half_float_to_fp16(v);
}

/* One step of a token's weighted sum: acc + w * x with one rounding (a fused multiply-add:
 * the CPU and the GPU agree bit for bit). The sum starts at 0 and runs over the token's
 * slots in order; its result is rounded to the row type once. */
SYMM_HD float symm_plan_topk_acc(float acc, float w, float x)
{
    return fmaf(w, x, acc);
}

/* ---------------------------------------------------------------- fingerprints */
enum { SYMM_PLAN_TOPK_DISPATCH = 0x7d, SYMM_PLAN_TOPK_COMBINE = 0x7c };

/* What every member of a dispatch passes alike (the side rows are folded in by the
 * caller, one symm_tm_mix each). */
SYMM_HD uint64_t symm_plan_topk_dispatch_fp(uint64_t k, uint64_t ne, uint64_t row_bytes,
                                            uint64_t major_align, uint64_t nside)
{
    uint64_t fp = symm_tm_mix(0x70b4, SYMM_PLAN_TOPK_DISPATCH);
    fp = symm_tm_mix(fp, k);
    fp = symm_tm_mix(fp, ne);
    fp = symm_tm_mix(fp, row_bytes);
    fp = symm_tm_mix(fp, major_align);
    return symm_tm_mix(fp, nside);
}

SYMM_HD uint64_t symm_plan_topk_combine_fp(uint64_t k, uint64_t ne, uint64_t hidden,
                                           uint64_t type)
{
    uint64_t fp = symm_tm_mix(0x70b4, SYMM_PLAN_TOPK_COMBINE);
    fp = symm_tm_mix(fp, k);
    fp = symm_tm_mix(fp, ne);
    fp = symm_tm_mix(fp, hidden);
    return symm_tm_mix(fp, type);
}

/* ---------------------------------------------------------------- device workspace */
/* The workspace of the device calls, in 8-byte words at the same offsets on every member
 * (it is a symmetric object): a header that peers read (status, out_capacity, tokens,
 * where the ins lie, the fingerprint; combine: in_rows and the verdict on its rows), the
 * member's own grid-barrier, verdict and route-flag words (their own 128-byte lines), the
 * count table (n*ne words, read by peers), the route (tokens*k words, read by peers), then the
 * member's own scratch for the layout: segment lengths and prefixes of every receiver,
 * where its slots land on each, the bases of its own segments per source, its segments'
 * starts and lengths, the sources' token prefix, and the per-chunk histograms that rank
 * the slots (symm_plan_topk_chunk). */
enum {
    SYMM_PLAN_TK_STATUS = 0,
    SYMM_PLAN_TK_CAP = 1,
    SYMM_PLAN_TK_TOK = 2,
    SYMM_PLAN_TK_IN = 3, /* byte offset of in from the workspace */
    SYMM_PLAN_TK_FP = 4,
    SYMM_PLAN_TK_ROWS = 5,    /* combine: in_rows */
    SYMM_PLAN_TK_ROWSTAT = 6, /* combine: this member's topk_rows checked (status) */
    SYMM_PLAN_TK_SIDE = 8,    /* SYMM_MOE_SIDE_MAX words: the side ins */
    SYMM_PLAN_TK_BAR_COUNT = 16,
    SYMM_PLAN_TK_BAR_GEN = 32,
    SYMM_PLAN_TK_RC = 48,    /* the call's verdict */
    SYMM_PLAN_TK_FAILM = 49, /* the member that failed it */
    SYMM_PLAN_TK_NEED = 50,  /* my rows, padding included */
    SYMM_PLAN_TK_RECV = 51,  /* tokens I receive (every source's, summed) */
    SYMM_PLAN_TK_EP = 52,    /* the lead's episode */
    SYMM_PLAN_TK_RFLAG = 53, /* a route in every block: what its blocks saw (ORed) */
    SYMM_PLAN_TK_CNT = 64,
};

/* The slots are ranked in chunks of whole warps' worth of slots (a multiple of 32), one
 * warp a chunk. Ranked by the lead block alone: at most SYMM_PLAN_TOPK_CHUNKS chunks, few
 * slots making many short chunks, so that every warp of the block ranks some (a decode
 * step's 1024 slots: 32 chunks of 32, not one warp walking them all), and the prefix over
 * chunks stays short. From SYMM_PLAN_TOPK_SPREAD slots on, a member of several blocks
 * ranks them in every block (spread): at most SYMM_PLAN_TOPK_SPREAD_CHUNKS chunks of at
 * least SYMM_PLAN_TOPK_SPREAD_MIN slots, enough to give most of the member's warps a
 * chunk. Either way a slot's rank is the same (its place among the member's slots, in
 * (token, slot) order); the workspace holds the histograms of the longer of the two. */
#define SYMM_PLAN_TOPK_CHUNKS        64u
#define SYMM_PLAN_TOPK_SPREAD        4096u
#define SYMM_PLAN_TOPK_SPREAD_CHUNKS 1024u
#define SYMM_PLAN_TOPK_SPREAD_MIN    128u
SYMM_HD uint64_t symm_plan_topk_chunk(uint64_t slots, int spread)
{
    const uint64_t most = spread ? SYMM_PLAN_TOPK_SPREAD_CHUNKS : SYMM_PLAN_TOPK_CHUNKS;
    const uint64_t least = spread ? SYMM_PLAN_TOPK_SPREAD_MIN : 32;
    const uint64_t per = (slots + most - 1) / most;
    return per <= least ? least : (per + 31) / 32 * 32;
}
SYMM_HD uint64_t symm_plan_topk_chunks(uint64_t slots, int spread)
{
    const uint64_t ch = symm_plan_topk_chunk(slots, spread);
    return (slots + ch - 1) / ch;
}
/* The chunks the workspace holds histograms for: the most either way takes. */
SYMM_HD uint64_t symm_plan_topk_ws_chunks(uint64_t slots)
{
    const uint64_t lead = symm_plan_topk_chunks(slots, 0),
                   spread = symm_plan_topk_chunks(slots, 1);
    return lead > spread ? lead : spread;
}

typedef struct {
    uint64_t route, len, pre, dstb, recvb, mystart, mylen, tokpre, hist, words;
} symm_plan_topk_ws_t;

/* Where everything of a member with `tokens` tokens lies (words from the workspace) and
 * the words it needs; a shape symm_plan_topk_shape accepts. */
SYMM_HD void symm_plan_topk_ws(int n, int ne, uint64_t tokens, int k, symm_plan_topk_ws_t *w)
{
    const uint64_t E = (uint64_t)n * (uint64_t)ne, slots = tokens * (uint64_t)k;
    const uint64_t chunks = symm_plan_topk_ws_chunks(slots);
    w->route = SYMM_PLAN_TK_CNT + E;
    w->len = w->route + slots;
    w->pre = w->len + E;
    w->dstb = w->pre + E;
    w->recvb = w->dstb + E;
    w->mystart = w->recvb + E;
    w->mylen = w->mystart + (uint64_t)ne;
    w->tokpre = w->mylen + (uint64_t)ne;
    w->hist = w->tokpre + (uint64_t)n + 1;
    w->words = w->hist + chunks * E;
}

/* ---------------------------------------------------------------- low-latency forms */
/* The low-latency forms (symm_moe_topk_dispatch_ll_on_stream, symm_cuda.h) give every
 * (local expert e, source s) pair of a receiver its own region of max_tokens rows, so a
 * sender places its rows without knowing anyone else's counts: slot (t, i) of source s
 * that goes to expert j*ne + e lands on member j at row
 * symm_plan_topk_ll_row(e, s, n, max_tokens, r), r its arrival order among s's rows for
 * that expert (r < max_tokens: a token names each expert at most once). */
SYMM_HD uint64_t symm_plan_topk_ll_row(uint64_t e, uint64_t s, uint64_t n, uint64_t max_tokens,
                                       uint64_t r)
{
    return (e * n + s) * max_tokens + r;
}

/* The workspace of the low-latency forms, in 8-byte words: the arrival counter and the
 * worst status of the member's blocks in a dispatch (their own 128-byte line); then,
 * written by the senders, for every source: the dispatch's counter (the member's blocks
 * add their shares when done, topk_ll__funcs.cuh), status and fingerprint, the same for
 * the combine, where the source's combine input lies (cin: a byte offset from the
 * workspace, or SYMM_PLAN_TKL_PUSHED where it pushed its rows) and the counter of the
 * combines it has finished reading (xflag); the member's own rank counters (n*ne, cleared
 * by the dispatch's last block once it has read them); where each of its slots
 * lands (max_tokens x k rows); and the combine's landing rows, max_tokens x k rows of
 * combine_row_bytes (rounded up to 16), where holders whose input is not symmetric put the
 * expert outputs of this member's slots. */
enum {
    SYMM_PLAN_TKL_ARR_D = 0, /* and the status word after it */
    SYMM_PLAN_TKL_SRC = 16,
};
#define SYMM_PLAN_TKL_PUSHED (~(uint64_t)0)
typedef struct {
    uint64_t dflag, dstat, dfp, cflag, cstat, cfp, cin, xflag, rank, slot, stage, stage_rb,
        words;
} symm_plan_topk_ll_ws_t;

/* 0 where the sizes overflow or max_tokens is 0. */
SYMM_HD int symm_plan_topk_ll_ws(int n, int ne, uint64_t max_tokens, int k,
                                 uint64_t combine_row_bytes, symm_plan_topk_ll_ws_t *w)
{
    const uint64_t N = (uint64_t)n, E = N * (uint64_t)ne;
    if (!max_tokens || max_tokens >= ((uint64_t)1 << 32) ||
        combine_row_bytes >= ((uint64_t)1 << 40))
        return 0;
    const uint64_t rows = max_tokens * (uint64_t)k;
    w->dflag = SYMM_PLAN_TKL_SRC;
    w->dstat = w->dflag + N;
    w->dfp = w->dstat + N;
    w->cflag = w->dfp + N;
    w->cstat = w->cflag + N;
    w->cfp = w->cstat + N;
    w->cin = w->cfp + N;
    w->xflag = w->cin + N;
    w->rank = w->xflag + N;
    w->slot = w->rank + E;
    w->stage = (w->slot + rows + 1) / 2 * 2;
    w->stage_rb = (combine_row_bytes + 15) / 16 * 16;
    if (w->stage_rb && rows > ((uint64_t)1 << 60) / w->stage_rb) return 0;
    w->words = w->stage + rows * w->stage_rb / 8;
    return 1;
}

SYMM_HD uint64_t symm_plan_topk_ll_dispatch_fp(uint64_t k, uint64_t ne, uint64_t row_bytes,
                                               uint64_t max_tokens, uint64_t nside)
{
    uint64_t fp = symm_tm_mix(0x70b5, SYMM_PLAN_TOPK_DISPATCH);
    fp = symm_tm_mix(fp, k);
    fp = symm_tm_mix(fp, ne);
    fp = symm_tm_mix(fp, row_bytes);
    fp = symm_tm_mix(fp, max_tokens);
    return symm_tm_mix(fp, nside);
}

SYMM_HD uint64_t symm_plan_topk_ll_combine_fp(uint64_t k, uint64_t ne, uint64_t hidden,
                                              uint64_t type, uint64_t max_tokens)
{
    uint64_t fp = symm_tm_mix(0x70b5, SYMM_PLAN_TOPK_COMBINE);
    fp = symm_tm_mix(fp, k);
    fp = symm_tm_mix(fp, ne);
    fp = symm_tm_mix(fp, hidden);
    fp = symm_tm_mix(fp, type);
    return symm_tm_mix(fp, max_tokens);
}

#endif
