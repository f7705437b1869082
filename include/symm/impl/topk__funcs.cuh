/* topk__funcs.cuh — bodies of the device top-k MoE calls of symm_device.cuh: dispatch
 * (every token once to each member holding one of its experts, landing in each of its
 * experts' segments there) and weighted combine, by the blocks of a kernel, with the
 * rules of plan__topk.h, the same as the CPU's (src/coll/moe_topk.c): same bytes, same
 * bits.
 *
 * Block 0 of a member (the lead) holds its pool duplicate and runs the rounds between
 * members; the member's other blocks wait for it on a barrier in the member's own part of
 * the workspace. The member works out, on the device and with no host round trip, its
 * route (each slot's expert and rank among the member's slots for that expert: per-chunk
 * histograms, their prefix over chunks, then ranks within each chunk, one warp per
 * chunk): in the lead alone for few slots, in every block of the member from
 * SYMM_PLAN_TOPK_SPREAD slots on. The lead publishes it with the count table, and after a
 * round reads every member's counts: the capacity verdict (the same on every member), the
 * starts of its own segments, and where its slots land on each receiver. Then every block
 * copies its share of the tokens this member receives, a warp per token: the route words
 * of the token's slots, the row read once from its source and written into each segment
 * it goes to; and its share of topk_rows. A closing round keeps inputs and workspaces
 * alive until every member has read.
 *
 * Combine: the lead publishes where the expert output lies, a round, checks this member's
 * topk_rows against every member's rows, a round carrying that verdict; then every block
 * reduces its share of the member's tokens, a warp per token, each element accumulated in
 * float over the token's slots in order (fmaf) and rounded once; a closing round. */
#ifndef SYMM_IMPL_TOPK__FUNCS_CUH
#define SYMM_IMPL_TOPK__FUNCS_CUH

#include "symm/impl/block__funcs.cuh"
#include "symm/impl/dev__funcs.cuh"
#include "symm/impl/plan__topk.h"

namespace symm_tm
{

struct topk_args {
    void *out;
    size_t out_capacity;
    const void *in;
    size_t tokens, row_bytes;
    const int64_t *topk_idx;
    int k, ne;
    size_t major_align;
    int nside;
    symm_moe_side_t side[SYMM_MOE_SIDE_MAX];
    size_t *out_counts, *out_offsets, *out_rows;
    symm_moe_src_t *out_src;
    int64_t *rows_out; /* dispatch: topk_rows */
    /* combine */
    size_t in_rows, hidden;
    int type;
    const int64_t *rows_in; /* combine: topk_rows */
    const float *weights;
    void *ws;
    int fail; /* != 0: this member publishes this status (the host wrapper's local errors) */
    int pull; /* the low-latency combine: in is a symmetric object its owners read */
    size_t max_tokens; /* the low-latency forms (topk_ll__funcs.cuh) */
};

/* The arguments of a dispatch (of a combine: topk_combine_args), zeroed first: the host
 * passes the struct, padding included, as a kernel parameter. side: nside entries the
 * caller can read (host memory for the stream form, device memory for the device form). */
SYMM_HD topk_args topk_dispatch_args(void *out, size_t out_capacity, const void *in,
                                     size_t tokens, size_t row_bytes, const int64_t *topk_idx,
                                     int k, int ne, size_t major_align,
                                     const symm_moe_side_t *side, int nside, size_t *out_counts,
                                     size_t *out_offsets, symm_moe_src_t *out_src,
                                     size_t *out_rows, int64_t *topk_rows, void *ws)
{
    topk_args a;
    memset(&a, 0, sizeof a);
    a.out = out;
    a.out_capacity = out_capacity;
    a.in = in;
    a.tokens = tokens;
    a.row_bytes = row_bytes;
    a.topk_idx = topk_idx;
    a.k = k;
    a.ne = ne;
    a.major_align = major_align;
    a.nside = nside;
    for (int p = 0; side && p < nside && p < SYMM_MOE_SIDE_MAX; p++)
        a.side[p] = side[p];
    a.out_counts = out_counts;
    a.out_offsets = out_offsets;
    a.out_src = out_src;
    a.out_rows = out_rows;
    a.rows_out = topk_rows;
    a.ws = ws;
    return a;
}

SYMM_HD topk_args topk_combine_args(void *out, size_t tokens, const void *in, size_t in_rows,
                                    size_t hidden, int type, const int64_t *topk_idx,
                                    const int64_t *topk_rows, const float *topk_weights, int k,
                                    int ne, void *ws)
{
    topk_args a;
    memset(&a, 0, sizeof a);
    a.out = out;
    a.tokens = tokens;
    a.in = in;
    a.in_rows = in_rows;
    a.hidden = hidden;
    a.type = type;
    a.topk_idx = topk_idx;
    a.rows_in = topk_rows;
    a.weights = topk_weights;
    a.k = k;
    a.ne = ne;
    a.ws = ws;
    return a;
}

/* ---------------------------------------------------------------- the member's barrier */
/* All nparts blocks of this member meet (a generation barrier on two words of the
 * member's own workspace, which must start at 0 and are left ready for the next call;
 * nothing of it is fixed at launch, so a CUDA graph replays it as it is). The nparts
 * blocks must be resident together. Writes before it are visible to every block after it:
 * each block's arrival is a release (a fence, then the count), the last one's acquire
 * (the count, then a fence) comes before its release of the generation, which the others
 * acquire; each block's threads meet its thread 0 on __syncthreads, before and after. 0,
 * or SYMM_ERR_TIMEOUT in every thread of a block that waited past the team's timeout. */
SYMM_DEV int topk_grid_barrier(const symm_dev_team_t &t, uint64_t *ws, uint32_t nparts)
{
    using namespace symm_detail;
    __shared__ int s_rc;
    __syncthreads();
    if (thread_linear() == 0) {
        s_rc = 0;
        uint64_t *count = ws + SYMM_PLAN_TK_BAR_COUNT, *gen = ws + SYMM_PLAN_TK_BAR_GEN;
        const uint64_t g0 = ld_acquire_gpu(gen);
        __threadfence();
        const unsigned long long old = atomicAdd((unsigned long long *)count, 1ull);
        if (old + 1 == nparts) {
            /* acquire: the other blocks' writes before their arrivals */
            asm volatile("fence.acq_rel.gpu;" ::: "memory");
            st_relaxed_gpu(count, 0);
            st_release_gpu(gen, g0 + 1);
        } else {
            const uint64_t start = globaltimer();
            const uint64_t limit = t.timeout_ns ? t.timeout_ns : 120000000000ull;
            for (uint32_t i = 1; ld_acquire_gpu(gen) == g0; i++)
                if ((i & 1023u) == 0 && globaltimer() - start > limit) {
                    record(t, SYMM_ERR_TIMEOUT, SYMM_DEV_WHAT_MOE, 0xffffffffu, 0);
                    s_rc = SYMM_ERR_TIMEOUT;
                    break;
                }
        }
    }
    __syncthreads();
    return s_rc;
}

/* What a call shares between its steps. */
struct topk_call {
    const symm_dev_team_t &t;
    const topk_args &a;
    uint32_t part, nparts, tid, nthr, lane, warp, nwarps;
    int n, me;
    uint64_t *ws; /* this member's workspace */
    symm_plan_topk_ws_t L;
    uint64_t stage = 0, stage_rb = 0; /* the low-latency combine's landing rows (bytes) */

    SYMM_DEV topk_call(const symm_dev_team_t &t_, const topk_args &a_, uint32_t part_,
                       uint32_t nparts_)
        : t(t_), a(a_), part(part_), nparts(nparts_), tid(symm_detail::thread_linear()),
          nthr(symm_detail::block_threads()), lane(tid & 31u), warp(tid >> 5),
          nwarps((nthr + 31) / 32), n(t_.n), me(t_.me), ws((uint64_t *)a_.ws)
    {
        if (n > 0 && a.ne > 0 && a.k > 0) symm_plan_topk_ws(n, a.ne, a.tokens, a.k, &L);
    }
    /* Member s's workspace, as mapped here. */
    SYMM_DEV const uint64_t *wsp(int s) const
    {
        return (const uint64_t *)((const char *)ws + t.heap_delta[s]);
    }
    SYMM_DEV uint64_t nexp() const { return (uint64_t)n * (uint64_t)a.ne; }
};

SYMM_DEV uint64_t ldg_ws(const uint64_t *p)
{
    return symm_detail::ldcg(p);
}

/* An argument every member passes alike is bad: every member finds it, and nobody
 * communicates. */
SYMM_DEV bool topk_dispatch_args_bad(const topk_call &c)
{
    const topk_args &a = c.a;
    bool bad = c.n < 1 || c.nparts == 0 || c.part >= c.nparts || !a.ws || c.nthr < 32 ||
               (c.nthr & 31) || a.row_bytes == 0 || a.nside < 0 ||
               a.nside > SYMM_MOE_SIDE_MAX ||
               symm_plan_topk_shape(c.n, a.ne, 0, a.k) != SYMM_PLAN_TOPK_OK;
    for (int p = 0; !bad && p < a.nside; p++)
        bad = a.side[p].row_bytes == 0;
    return bad;
}

SYMM_DEV uint64_t topk_dispatch_fp(const topk_call &c)
{
    const topk_args &a = c.a;
    uint64_t fp = symm_plan_topk_dispatch_fp((uint64_t)a.k, (uint64_t)a.ne, a.row_bytes,
                                             a.major_align, (uint64_t)a.nside);
    for (int p = 0; p < a.nside; p++)
        fp = symm_tm_mix(fp, a.side[p].row_bytes);
    return symm_tm_mix(fp, (uint64_t)c.n); /* the block count is each member's own */
}

/* ---------------------------------------------------------------- dispatch: the route */
/* The member's route: its slots checked, each given its rank among the member's slots for
 * its expert, published with the count table. Three steps over chunks of the slots
 * (symm_plan_topk_chunk), one warp a chunk: each chunk's histogram (topk_count_chunks),
 * their prefix over chunks per expert with the totals (the count table), then each slot's
 * rank from its chunk's prefix (topk_rank_chunks). A warp loads kTopkRankU batches of 32
 * ids before it counts them, so that their loads overlap rather than waiting one by one
 * behind the counts. With at most kTopkRankE experts in the team, a warp counts its chunk
 * in shared memory (the first kTopkRankWarps warps of a block rank; a count there is a
 * few cycles, one in global memory a round trip) and moves the chunk's histogram to the
 * workspace in one go. Few slots are routed by the lead block alone (topk_route_lead);
 * from SYMM_PLAN_TOPK_SPREAD slots on, by every block of the member (topk_route_spread),
 * whose steps the member's barrier keeps apart. Either way every slot gets the same rank
 * and the member the same status. */
constexpr int kTopkRankU = 4, kTopkRankWarps = 16, kTopkRankE = 256;
typedef uint32_t topk_rank_row_t[kTopkRankE];

/* The rank warps' rows in shared memory, one array for both forms of the route. */
SYMM_DEV topk_rank_row_t *topk_rank_smem()
{
    __shared__ uint32_t s_hist[kTopkRankWarps][kTopkRankE];
    return s_hist;
}

/* How a route cuts the member's slots. */
struct topk_chunking {
    uint64_t slots, E, CH, chunks;
    bool sm;     /* counted in shared memory */
    uint32_t NW; /* the rank warps of a block: warps 0..NW-1 */
};
SYMM_DEV topk_chunking topk_chunking_of(const topk_call &c, int spread)
{
    topk_chunking k;
    k.slots = c.a.tokens * (uint64_t)c.a.k;
    k.E = c.nexp();
    k.CH = symm_plan_topk_chunk(k.slots, spread);
    k.chunks = symm_plan_topk_chunks(k.slots, spread);
    k.sm = k.E <= (uint64_t)kTopkRankE;
    k.NW = k.sm && c.nwarps > (uint32_t)kTopkRankWarps ? (uint32_t)kTopkRankWarps : c.nwarps;
    return k;
}

/* A count of a histogram in the workspace; CG: one another block may have written (read
 * from the L2, never from a stale L1 line). */
template <bool CG, typename C> SYMM_DEV C topk_hist_ld(const C *p)
{
    if constexpr (CG)
        return symm_detail::ldcg(p);
    else
        return *p;
}

SYMM_DEV int64_t topk_slot_id(const topk_args &a, uint64_t q, uint64_t q1, uint64_t E, int *bad)
{
    int64_t g = q < q1 ? a.topk_idx[q] : -1;
    if (!symm_plan_topk_slot_ok(g, E)) {
        *bad = 1;
        g = -1;
    }
    return g;
}
/* Slots [q0, q1) counted into h by the warp. */
template <bool CG, typename C>
SYMM_DEV void topk_rank_count(const topk_call &c, C *h, uint64_t q0, uint64_t q1, uint64_t E,
                              int *bad, int *routed)
{
    for (uint64_t b = q0; b < q1; b += 32 * kTopkRankU) {
        int64_t gv[kTopkRankU];
#pragma unroll
        for (int u = 0; u < kTopkRankU; u++)
            gv[u] = topk_slot_id(c.a, b + 32 * (uint64_t)u + c.lane, q1, E, bad);
#pragma unroll
        for (int u = 0; u < kTopkRankU; u++) {
            const int64_t g = gv[u];
            *routed |= g >= 0;
            const uint32_t peers = __match_any_sync(0xffffffffu, (unsigned long long)g);
            if (g >= 0 && c.lane == (uint32_t)(__ffs(peers) - 1))
                h[g] = (C)(topk_hist_ld<CG>(h + g) + (C)__popc(peers));
            __syncwarp();
        }
    }
}
/* Slots [q0, q1) ranked by the warp from the chunk's prefix in h, their route words out. */
template <bool CG, typename C>
SYMM_DEV void topk_rank_slots(const topk_call &c, C *h, uint64_t q0, uint64_t q1, uint64_t E,
                              uint64_t *route)
{
    for (uint64_t b = q0; b < q1; b += 32 * kTopkRankU) {
        int64_t gv[kTopkRankU];
        int ignored = 0;
#pragma unroll
        for (int u = 0; u < kTopkRankU; u++)
            gv[u] = topk_slot_id(c.a, b + 32 * (uint64_t)u + c.lane, q1, E, &ignored);
#pragma unroll
        for (int u = 0; u < kTopkRankU; u++) {
            const uint64_t q = b + 32 * (uint64_t)u + c.lane;
            const int64_t g = gv[u];
            const uint32_t peers = __match_any_sync(0xffffffffu, (unsigned long long)g);
            const uint64_t base = g >= 0 ? (uint64_t)topk_hist_ld<CG>(h + g) : 0;
            __syncwarp();
            if (g >= 0 && c.lane == (uint32_t)(__ffs(peers) - 1))
                h[g] = (C)(base + __popc(peers));
            if (q < q1)
                route[q] = g < 0
                               ? symm_plan_topk_route(SYMM_PLAN_TOPK_NONE, 0)
                               : symm_plan_topk_route(
                                     (uint32_t)g,
                                     (uint32_t)(base + __popc(peers & ((1u << c.lane) - 1u))));
            __syncwarp();
        }
    }
}

/* Step 1, by rank warp gw of GW: the histograms of chunks gw, gw + GW, ... into the
 * workspace, each row written by its chunk's warp alone. sh: the warp's row in shared
 * memory, or nullptr (counted in the workspace, in the chunk's row zeroed first). */
template <bool CG>
SYMM_DEV void topk_count_chunks(const topk_call &c, const topk_chunking &k, uint64_t *hist,
                                uint32_t *sh, uint64_t gw, uint64_t GW, int *bad, int *routed)
{
    const uint64_t E = k.E;
    for (uint64_t ch = gw; ch < k.chunks; ch += GW) {
        const uint64_t q0 = ch * k.CH, q1 = q0 + k.CH < k.slots ? q0 + k.CH : k.slots;
        uint64_t *row = hist + ch * E;
        if (sh) {
            for (uint64_t e = c.lane; e < E; e += 32)
                sh[e] = 0;
            __syncwarp();
            topk_rank_count<false>(c, sh, q0, q1, E, bad, routed);
            for (uint64_t e = c.lane; e < E; e += 32)
                row[e] = sh[e];
            __syncwarp(); /* the row is read before the next chunk zeroes it */
        } else {
            for (uint64_t e = c.lane; e < E; e += 32)
                row[e] = 0;
            __syncwarp();
            topk_rank_count<CG>(c, row, q0, q1, E, bad, routed);
        }
    }
}

/* Step 2 by the lead alone: thread g the prefix of expert g over the chunks and its
 * total; eight chunks' counts loaded before any is rewritten, so that the loads overlap. */
SYMM_DEV void topk_prefix_lead(const topk_call &c, const topk_chunking &k, uint64_t *hist,
                               uint64_t *cnt)
{
    const uint64_t E = k.E, chunks = k.chunks;
    for (uint64_t g = c.tid; g < E; g += c.nthr) {
        uint64_t run = 0;
        for (uint64_t q0 = 0; q0 < chunks; q0 += 8) {
            uint64_t v[8];
#pragma unroll
            for (int i = 0; i < 8; i++)
                v[i] = q0 + i < chunks ? hist[(q0 + i) * E + g] : 0;
#pragma unroll
            for (int i = 0; i < 8; i++)
                if (q0 + i < chunks) {
                    hist[(q0 + i) * E + g] = run;
                    run += v[i];
                }
        }
        cnt[g] = run;
    }
}

/* Step 2 for expert g by one warp (the spread route): its prefix over the chunks and its
 * total, 256 chunks a step, lane i's eight consecutive chunks loaded before any is
 * rewritten (eight loads in flight per lane), then a scan over the lanes. */
SYMM_DEV void topk_prefix_warp(const topk_call &c, const topk_chunking &k, uint64_t *hist,
                               uint64_t g, uint64_t *cnt)
{
    const uint64_t E = k.E, chunks = k.chunks;
    uint64_t run = 0;
    for (uint64_t q0 = 0; q0 < chunks; q0 += 8 * 32) {
        const uint64_t qb = q0 + 8 * (uint64_t)c.lane;
        uint64_t v[8], sum = 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            v[i] = qb + i < chunks ? symm_detail::ldcg(hist + (qb + i) * E + g) : 0;
#pragma unroll
        for (int i = 0; i < 8; i++)
            sum += v[i];
        const uint64_t incl = warp_incl_scan(sum, c.lane);
        uint64_t pre = run + incl - sum;
#pragma unroll
        for (int i = 0; i < 8; i++)
            if (qb + i < chunks) {
                hist[(qb + i) * E + g] = pre;
                pre += v[i];
            }
        run += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (c.lane == 0) cnt[g] = run;
}

/* Step 3, by rank warp gw of GW: the slots of chunks gw, gw + GW, ... ranked from their
 * chunk's prefix (sh as in step 1), their route words written. */
template <bool CG>
SYMM_DEV void topk_rank_chunks(const topk_call &c, const topk_chunking &k, uint64_t *hist,
                               uint32_t *sh, uint64_t gw, uint64_t GW, uint64_t *route)
{
    const uint64_t E = k.E;
    for (uint64_t ch = gw; ch < k.chunks; ch += GW) {
        const uint64_t q0 = ch * k.CH, q1 = q0 + k.CH < k.slots ? q0 + k.CH : k.slots;
        uint64_t *row = hist + ch * E;
        if (sh) {
            for (uint64_t e = c.lane; e < E; e += 32)
                sh[e] = (uint32_t)topk_hist_ld<CG>(row + e);
            __syncwarp();
            topk_rank_slots<false>(c, sh, q0, q1, E, route);
            __syncwarp(); /* the row is read before the next chunk fills it */
        } else {
            topk_rank_slots<CG>(c, row, q0, q1, E, route);
        }
    }
}

/* The member's status from what its route saw: SYMM_ERR_INVALID_ARG for a bad expert id,
 * or for routed slots with a NULL in; else 0. */
SYMM_DEV int topk_route_status(const topk_args &a, bool bad, bool routed)
{
    bool null_in = !a.in;
    for (int p = 0; p < a.nside; p++)
        null_in = null_in || !a.side[p].in;
    return bad || (routed && null_in) ? SYMM_ERR_INVALID_ARG : 0;
}

/* The route by the lead block alone (chunk q by warp q % NW). Returns the member's status
 * (topk_route_status), the same in every thread. */
SYMM_DEV int topk_route_lead(const topk_call &c)
{
    const topk_chunking k = topk_chunking_of(c, 0);
    uint64_t *hist = c.ws + c.L.hist;
    uint32_t *sh = k.sm && c.warp < k.NW ? topk_rank_smem()[c.warp] : nullptr;
    int bad = 0, routed = 0;
    __syncthreads(); /* the shared rows are free */
    if (c.warp < k.NW) topk_count_chunks<false>(c, k, hist, sh, c.warp, k.NW, &bad, &routed);
    __syncthreads();
    topk_prefix_lead(c, k, hist, c.ws + SYMM_PLAN_TK_CNT);
    __syncthreads();
    if (c.warp < k.NW) topk_rank_chunks<false>(c, k, hist, sh, c.warp, k.NW, c.ws + c.L.route);
    routed = __syncthreads_or(routed);
    bad = __syncthreads_or(bad);
    return topk_route_status(c.a, bad, routed);
}

/* The route is spread over every block of the member: several blocks, no failure of the
 * member's own so far (the host's, a shape beyond the limits) and enough slots. The same
 * in every block: it follows from the arguments alone. */
SYMM_DEV bool topk_spread(const topk_call &c)
{
    const topk_args &a = c.a;
    return c.nparts > 1 && !a.fail &&
           symm_plan_topk_shape(c.n, a.ne, a.tokens, a.k) == SYMM_PLAN_TOPK_OK &&
           a.tokens * (uint64_t)a.k >= SYMM_PLAN_TOPK_SPREAD;
}

/* The route by every block of the member (topk_spread), its steps kept apart by the
 * member's barrier: the histograms (chunk q by rank warp q / nparts of block q % nparts,
 * so that every block takes a few chunks rather than the first blocks all of them), a
 * barrier, the prefix of every expert (expert g by warp g / nparts of block g % nparts),
 * a barrier, the ranks (chunks as in the first step), a barrier: after it every route word
 * and count is in the workspace, for the lead to publish. The histograms pass between
 * blocks: read with ld.global.cg. What the blocks saw (a bad expert id, a routed slot) is
 * ORed into the workspace's route flags, which the lead reads and clears. Returns 0, or
 * SYMM_ERR_TIMEOUT in every thread of a block that waited past the team's timeout;
 * *status (the lead block): the member's status (topk_route_status). */
SYMM_DEV int topk_route_spread(const topk_call &c, int *status)
{
    const topk_chunking k = topk_chunking_of(c, 1);
    uint64_t *hist = c.ws + c.L.hist;
    unsigned long long *flags = (unsigned long long *)(c.ws + SYMM_PLAN_TK_RFLAG);
    uint32_t *sh = k.sm && c.warp < k.NW ? topk_rank_smem()[c.warp] : nullptr;
    const uint64_t gw = (uint64_t)c.warp * c.nparts + c.part, GW = (uint64_t)k.NW * c.nparts;
    __shared__ unsigned long long s_flags;
    int bad = 0, routed = 0;
    __syncthreads(); /* the shared rows are free */
    if (c.warp < k.NW) topk_count_chunks<true>(c, k, hist, sh, gw, GW, &bad, &routed);
    bad = __syncthreads_or(bad);
    routed = __syncthreads_or(routed);
    if (c.tid == 0 && (bad || routed))
        atomicOr(flags, (bad ? 1ull : 0ull) | (routed ? 2ull : 0ull));
    int rc = topk_grid_barrier(c.t, c.ws, c.nparts); /* every chunk counted */
    const uint64_t pw = (uint64_t)c.warp * c.nparts + c.part,
                   PW = (uint64_t)c.nwarps * c.nparts;
    for (uint64_t g = pw; g < k.E; g += PW)
        topk_prefix_warp(c, k, hist, g, c.ws + SYMM_PLAN_TK_CNT);
    int brc = topk_grid_barrier(c.t, c.ws, c.nparts); /* every prefix and total written */
    rc = rc ? rc : brc;
    /* every block ORed its flags before the first barrier; the next call ORs after this
     * one's last */
    if (c.part == 0 && c.tid == 0) s_flags = atomicExch(flags, 0ull);
    if (c.warp < k.NW) topk_rank_chunks<true>(c, k, hist, sh, gw, GW, c.ws + c.L.route);
    brc = topk_grid_barrier(c.t, c.ws, c.nparts); /* every route word written */
    rc = rc ? rc : brc;
    /* s_flags: written before the barrier, which ends in a __syncthreads */
    if (c.part == 0)
        *status = topk_route_status(c.a, (s_flags & 1ull) != 0, (s_flags & 2ull) != 0);
    return rc;
}

/* The lead's header: its status, capacity, tokens, where its ins lie, the fingerprint. */
SYMM_DEV void topk_write_header(const topk_call &c, int status, uint64_t fp)
{
    const topk_args &a = c.a;
    if (c.tid == 0) {
        uint64_t *w = c.ws;
        w[SYMM_PLAN_TK_STATUS] = (uint64_t)(int64_t)status;
        w[SYMM_PLAN_TK_CAP] = a.out_capacity;
        w[SYMM_PLAN_TK_TOK] = a.tokens;
        w[SYMM_PLAN_TK_IN] = a.in ? (uint64_t)((uintptr_t)a.in - (uintptr_t)a.ws) : 0;
        for (int p = 0; p < a.nside; p++)
            w[SYMM_PLAN_TK_SIDE + p] =
                a.side[p].in ? (uint64_t)((uintptr_t)a.side[p].in - (uintptr_t)a.ws) : 0;
        w[SYMM_PLAN_TK_FP] = fp;
    }
    __syncthreads();
}

/* ---------------------------------------------------------------- dispatch: the layout */
/* The lead block, after the first round: every member's header checked, every receiver's
 * segments (lengths and the prefix before me), the capacity verdict, my segments and the
 * bases of my sources, where my slots land, the sources' token prefix. Writes the verdict
 * (SYMM_PLAN_TK_RC, _FAILM), my rows and the tokens I receive into my workspace. */
SYMM_DEV void topk_layout(const topk_call &c, int mine, uint64_t fp)
{
    using symm_detail::ldcg;
    const topk_args &a = c.a;
    const int n = c.n, me = c.me, ne = a.ne;
    const uint64_t E = c.nexp();
    uint64_t *w = c.ws;
    __shared__ int s_bad, s_fail;
    __shared__ uint64_t s_need;
    if (c.tid == 0) {
        s_bad = n;
        s_fail = n;
        s_need = 0;
    }
    __syncthreads();
    for (int s = (int)c.tid; s < n; s += (int)c.nthr) {
        const uint64_t *h = c.wsp(s);
        if (ldcg(h + SYMM_PLAN_TK_STATUS) || ldcg(h + SYMM_PLAN_TK_FP) != fp)
            atomicMin(&s_bad, s);
    }
    /* segment lengths of every receiver, and the rows of sources before me */
    for (uint64_t g = c.tid; g < E; g += c.nthr) {
        uint64_t sum = 0, pre = 0;
        for (int s = 0; s < n; s++) {
            if (s == me) pre = sum;
            sum += ldcg(c.wsp(s) + SYMM_PLAN_TK_CNT + g);
        }
        w[c.L.len + g] = sum;
        w[c.L.pre + g] = pre;
    }
    __syncthreads();
    /* every receiver's segment starts: the capacity check, where my slots land. A warp a
     * receiver, its experts 32 at a time: a saturating scan of the aligned lengths (the
     * sum reaches UINT64_MAX exactly where symm_plan_topk_seg_next overflows), so that a
     * member with hundreds of experts is not walked by one thread. */
    for (int m = (int)c.warp; m < n; m += (int)c.nwarps) {
        uint64_t pos = 0;
        for (int e0 = 0; e0 < ne; e0 += 32) {
            const int e = e0 + (int)c.lane;
            const uint64_t g = (uint64_t)m * ne + e;
            uint64_t len = 0, al = 0;
            if (e < ne) {
                len = w[c.L.len + g];
                if (symm_tm_aligned_len(len, a.major_align, &al)) al = UINT64_MAX;
            }
            const uint64_t incl = warp_scan_sat(al, c.lane);
            uint64_t excl = __shfl_up_sync(0xffffffffu, incl, 1);
            if (c.lane == 0) excl = 0;
            const uint64_t start = sat_add(pos, excl);
            if (e < ne) {
                if (start != UINT64_MAX) w[c.L.dstb + g] = start + w[c.L.pre + g];
                if (m == me) {
                    w[c.L.mystart + e] = start;
                    w[c.L.mylen + e] = len;
                }
            }
            pos = sat_add(pos, __shfl_sync(0xffffffffu, incl, 31));
        }
        if (c.lane == 0) {
            if (pos == UINT64_MAX || pos > ldcg(c.wsp(m) + SYMM_PLAN_TK_CAP))
                atomicMin(&s_fail, m);
            if (m == me) s_need = pos;
        }
    }
    __syncthreads();
    /* my segments' bases per source, and the sources' token prefix */
    for (int e = (int)c.tid; e < ne && s_fail == n; e += (int)c.nthr) {
        uint64_t run = w[c.L.mystart + e];
        for (int s = 0; s < n; s++) {
            w[c.L.recvb + (uint64_t)e * n + s] = run;
            run += ldcg(c.wsp(s) + SYMM_PLAN_TK_CNT + (uint64_t)me * ne + e);
        }
    }
    if (c.tid == 0) {
        uint64_t run = 0;
        for (int s = 0; s < n; s++) {
            w[c.L.tokpre + s] = run;
            run += ldcg(c.wsp(s) + SYMM_PLAN_TK_TOK);
        }
        w[c.L.tokpre + n] = run;
        int rc = mine;
        if (!rc && s_bad < n) {
            const int64_t st = (int64_t)ldcg(c.wsp(s_bad) + SYMM_PLAN_TK_STATUS);
            rc = st ? (int)st : SYMM_ERR_MISMATCH;
        }
        if (!rc && s_fail < n) rc = SYMM_ERR_OVERFLOW;
        w[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)rc;
        w[SYMM_PLAN_TK_FAILM] = (uint64_t)(s_bad < n ? s_bad : s_fail < n ? s_fail : -1);
        w[SYMM_PLAN_TK_NEED] = s_need;
        w[SYMM_PLAN_TK_RECV] = run;
    }
    __syncthreads();
}

/* ---------------------------------------------------------------- dispatch: the rows */
/* Piece `piece` of P of one payload row of rb bytes from src (any member's), copied to the
 * rows that lanes 0..m-1 of the warp point at (dst, any member's), reading it once: the row's
 * units (16-byte vectors where everything is aligned to them, else words or bytes), 32 a warp
 * step, split into P ranges of whole steps. Every lane runs the same iterations: the
 * shuffles need the whole warp. keep: plain stores (the rows stay in the L2 for their
 * reader: the low-latency dispatch's few rows) rather than the streaming hint of st_once. */
SYMM_DEV void topk_piece(uint64_t nunits, uint32_t piece, uint32_t P, uint64_t *u0,
                         uint64_t *u1)
{
    const uint64_t steps = (nunits + 31) / 32, per = (steps + P - 1) / P;
    *u0 = (uint64_t)piece * per * 32;
    *u1 = *u0 + per * 32 < nunits ? *u0 + per * 32 : nunits;
}
SYMM_DEV void topk_copy_row(uint8_t *dst, const uint8_t *src, uint64_t rb, uint32_t m,
                            uint32_t lane, uint32_t piece, uint32_t P, bool keep = false)
{
    const uintptr_t al = (uintptr_t)src | (uintptr_t)rb | (lane < m ? (uintptr_t)dst : 0);
    const bool v16 = !__any_sync(0xffffffffu, (al & 15) != 0);
    const bool v4 = !__any_sync(0xffffffffu, (al & 3) != 0);
    uint64_t u0, u1;
    if (v16) {
        /* two vectors in flight per lane: a lone load per lane leaves the copy waiting on
         * its latency */
        topk_piece(rb / 16, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 64) {
            const uint64_t v = v0 + lane, w = v + 32;
            uint4 x = make_uint4(0, 0, 0, 0), y = make_uint4(0, 0, 0, 0);
            if (v < u1) x = ld_once((const uint4 *)src + v);
            if (w < u1) y = ld_once((const uint4 *)src + w);
            for (uint32_t j = 0; j < m; j++) {
                uint4 *d = (uint4 *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (keep) {
                    if (v < u1) d[v] = x;
                    if (w < u1) d[w] = y;
                } else {
                    if (v < u1) st_once(d + v, x);
                    if (w < u1) st_once(d + w, y);
                }
            }
        }
    } else if (v4) {
        topk_piece(rb / 4, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 32) {
            const uint64_t v = v0 + lane;
            const unsigned x = v < u1 ? __ldcg((const unsigned *)src + v) : 0u;
            for (uint32_t j = 0; j < m; j++) {
                unsigned *d = (unsigned *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (v < u1) d[v] = x;
            }
        }
    } else {
        topk_piece(rb, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 32) {
            const uint64_t v = v0 + lane;
            const unsigned char x = v < u1 ? __ldcg(src + v) : (unsigned char)0;
            for (uint32_t j = 0; j < m; j++) {
                uint8_t *d = (uint8_t *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (v < u1) d[v] = x;
            }
        }
    }
}

/* The lane whose slot is the lane-th set bit of mask (0 past the last): with a shuffle
 * from it, the destinations of a token's slots are packed into lanes 0..popc(mask)-1. */
SYMM_DEV uint32_t topk_packed_from(uint32_t mask, uint32_t lane)
{
    uint32_t rest = mask;
    for (uint32_t i = 0; i < lane && rest; i++)
        rest &= rest - 1;
    return rest ? (uint32_t)__ffs(rest) - 1 : 0;
}

/* How many warps share one token's row, for `items` tokens (or rows) over GW warps: a
 * decode step's 128 tokens would otherwise keep 128 warps of thousands busy, each walking
 * a 7 KiB row alone. */
constexpr uint32_t kTopkMaxPieces = 16;
SYMM_DEV uint32_t topk_pieces(uint64_t items, uint64_t GW)
{
    const uint64_t p = items ? GW / items : 1;
    return p < 1 ? 1 : p > kTopkMaxPieces ? kTopkMaxPieces : (uint32_t)p;
}

/* My share of the tokens this member receives (piece u % P of received token u / P by
 * warp u % (nparts * nwarps) of the member's blocks), each read once from its source and
 * written into the segment of every slot of it routed here, with the source of each row
 * (piece 0 writes the sources and the side rows). */
SYMM_DEV void topk_copy(const topk_call &c)
{
    using symm_detail::ldcg;
    const topk_args &a = c.a;
    const int n = c.n, ne = a.ne, k = a.k;
    const uint32_t g0 = (uint32_t)c.me * (uint32_t)ne;
    const uint64_t *w = c.ws;
    const uint64_t recv = ldcg(w + SYMM_PLAN_TK_RECV);
    const uint64_t gw = (uint64_t)c.part * c.nwarps + c.warp,
                   GW = (uint64_t)c.nparts * c.nwarps;
    const uint32_t P = topk_pieces(recv, GW);
    int s = 0;
    for (uint64_t u = gw; u < recv * P; u += GW) {
        const uint64_t x = u / P;
        const uint32_t piece = (uint32_t)(u % P);
        while (s + 1 < n && ldcg(w + c.L.tokpre + s + 1) <= x)
            s++;
        const uint64_t t = x - ldcg(w + c.L.tokpre + s);
        const uint64_t *hs = c.wsp(s);
        uint64_t rw = symm_plan_topk_route(SYMM_PLAN_TOPK_NONE, 0);
        if (c.lane < (uint32_t)k) rw = ldcg(hs + c.L.route + t * (uint64_t)k + c.lane);
        const uint32_t ge = symm_plan_topk_route_expert(rw), e = ge - g0;
        const bool mine = ge != SYMM_PLAN_TOPK_NONE && e < (uint32_t)ne;
        const uint32_t mask = __ballot_sync(0xffffffffu, mine);
        if (!mask) continue;
        uint64_t pos = 0;
        if (mine) {
            pos = symm_plan_topk_row(ldcg(w + c.L.recvb + (uint64_t)e * n + s),
                                     symm_plan_topk_route_rank(rw));
            if (a.out_src && piece == 0) {
                symm_moe_src_t sr;
                sr.pe = s;
                sr.slot = (int32_t)c.lane;
                sr.token = (int64_t)t;
                a.out_src[pos] = sr;
            }
        }
        /* the positions of my slots, packed into lanes 0..m-1 */
        const uint32_t m = __popc(mask);
        const uint64_t packed = __shfl_sync(0xffffffffu, pos, topk_packed_from(mask, c.lane));
        const char *base = (const char *)a.ws + c.t.heap_delta[s];
        topk_copy_row((uint8_t *)a.out + packed * a.row_bytes,
                      (const uint8_t *)base + ldcg(hs + SYMM_PLAN_TK_IN) + t * a.row_bytes,
                      a.row_bytes, m, c.lane, piece, P);
        for (int p = 0; piece == 0 && p < a.nside; p++) {
            const uint64_t rb = a.side[p].row_bytes;
            topk_copy_row((uint8_t *)a.side[p].out + packed * rb,
                          (const uint8_t *)base + ldcg(hs + SYMM_PLAN_TK_SIDE + p) + t * rb, rb,
                          m, c.lane, 0, 1);
        }
    }
}

/* My share of the outputs: topk_rows (the slots of this member's tokens, by every block),
 * and, by part 0, the counts, offsets, rows and the padding rows' sources. */
SYMM_DEV void topk_outputs(const topk_call &c)
{
    using symm_detail::ldcg;
    const topk_args &a = c.a;
    const uint64_t *w = c.ws;
    const uint64_t slots = a.tokens * (uint64_t)a.k;
    const uint64_t gt = (uint64_t)c.part * c.nthr + c.tid, GT = (uint64_t)c.nparts * c.nthr;
    for (uint64_t q = gt; a.rows_out && q < slots; q += GT) {
        const uint64_t rw = ldcg(w + c.L.route + q);
        const uint32_t g = symm_plan_topk_route_expert(rw);
        a.rows_out[q] = g == SYMM_PLAN_TOPK_NONE
                            ? -1
                            : (int64_t)symm_plan_topk_row(ldcg(w + c.L.dstb + g),
                                                          symm_plan_topk_route_rank(rw));
    }
    if (c.part != 0) return;
    const int ne = a.ne;
    const uint64_t need = ldcg(w + SYMM_PLAN_TK_NEED);
    for (int e = (int)c.tid; e < ne; e += (int)c.nthr) {
        const uint64_t st = ldcg(w + c.L.mystart + e), len = ldcg(w + c.L.mylen + e);
        if (a.out_counts) a.out_counts[e] = len;
        if (a.out_offsets) a.out_offsets[e] = st;
    }
    if (c.tid == 0 && a.out_rows) *a.out_rows = need;
    if (!a.out_src) return;
    for (int e = (int)c.warp; e < ne; e += (int)c.nwarps) {
        const uint64_t st = ldcg(w + c.L.mystart + e), len = ldcg(w + c.L.mylen + e);
        const uint64_t end = e + 1 < ne ? ldcg(w + c.L.mystart + e + 1) : need;
        for (uint64_t r = st + len + c.lane; r < end; r += 32) {
            symm_moe_src_t pad;
            pad.pe = -1;
            pad.slot = -1;
            pad.token = -1;
            a.out_src[r] = pad;
        }
    }
}

/* The dispatch body. Every branch that skips a barrier depends on values the same in
 * every thread of the block; every block of the member passes the same member barriers. */
SYMM_DEV int topk_dispatch_impl(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                                uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_MOE;
    const topk_call c(t, a, part, nparts);
    if (topk_dispatch_args_bad(c)) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    __shared__ int s_claim, s_owned;
    __shared__ uint64_t s_ep;
    const bool spread = topk_spread(c);
    int rc = 0, mine = 0, rbrc = 0;
    uint64_t fp = 0;
    if (part == 0) {
        fp = topk_dispatch_fp(c);
        __syncthreads();
        if (c.tid == 0) {
            uint64_t ep = 0;
            const int cl = claim(t, W, holder_tag(SUB_BLOCK), &ep);
            s_owned = cl == 1;
            s_claim = cl < 0 ? cl : 0;
            s_ep = ep;
        }
        __syncthreads();
        rc = s_claim;
    }
    /* A spread route takes every block, the lead's claim failed or not: the other blocks
     * cannot know; what it wrote is then left unpublished. */
    if (spread) rbrc = topk_route_spread(c, &mine);
    if (part == 0) {
        if (!rc) {
            /* my own failures: the host's, a shape beyond the limits with my tokens, a bad
             * expert id or a NULL in that routes tokens; published, so every member fails */
            if (spread) {
                if (rbrc) mine = rbrc;
            } else {
                mine = a.fail;
                if (!mine &&
                    symm_plan_topk_shape(c.n, a.ne, a.tokens, a.k) != SYMM_PLAN_TOPK_OK)
                    mine = SYMM_ERR_OVERFLOW;
                if (!mine) mine = topk_route_lead(c);
            }
            topk_write_header(c, mine, fp);
            rc = round_block_at(t, s_ep + 1, W); /* every member's route and ins ready */
            if (!rc) topk_layout(c, mine, fp);
        }
        if (rc && c.tid == 0) c.ws[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)rc;
        __syncthreads();
    }
    int brc = topk_grid_barrier(t, c.ws, nparts);
    const int verdict = brc ? brc : (int)(int64_t)ldg_ws(c.ws + SYMM_PLAN_TK_RC);
    if (!verdict) {
        topk_copy(c);
        topk_outputs(c);
    }
    brc = topk_grid_barrier(t, c.ws, nparts); /* every block has read its peers */
    if (part == 0) {
        if (!s_claim) {
            if (verdict && verdict != SYMM_ERR_TIMEOUT && c.tid == 0) {
                const int64_t fm = (int64_t)c.ws[SYMM_PLAN_TK_FAILM];
                record(t, verdict, W, fm >= 0 ? (uint32_t)fm : 0xffffffffu, 0);
            }
            /* the closing round: nobody reads my ins or workspace any more */
            const int rc2 = rc ? rc : round_block_at(t, s_ep + 2, W);
            if (!rc && !verdict && rc2) c.ws[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)rc2;
            leave_block_at(t, s_owned, rc ? s_ep + 1 : s_ep + 2);
        }
        __syncthreads();
    }
    const int brc2 = topk_grid_barrier(t, c.ws, nparts); /* the closing round is done */
    if (brc || brc2 || rbrc) return SYMM_ERR_TIMEOUT;
    return (int)(int64_t)ldg_ws(c.ws + SYMM_PLAN_TK_RC);
}

/* ---------------------------------------------------------------- combine */
SYMM_DEV bool topk_combine_args_bad(const topk_call &c)
{
    const topk_args &a = c.a;
    return c.n < 1 || c.nparts == 0 || c.part >= c.nparts || !a.ws || c.nthr < 32 ||
           (c.nthr & 31) || a.hidden == 0 || !symm_plan_topk_type_ok(a.type) ||
           symm_plan_topk_shape(c.n, a.ne, 0, a.k) != SYMM_PLAN_TOPK_OK;
}

SYMM_DEV uint64_t topk_combine_fp(const topk_call &c)
{
    const topk_args &a = c.a;
    uint64_t fp =
        symm_plan_topk_combine_fp((uint64_t)a.k, (uint64_t)a.ne, a.hidden, (uint64_t)a.type);
    fp = symm_tm_mix(fp, c.nparts);
    return symm_tm_mix(fp, (uint64_t)c.n);
}

/* The lead: my slots' rows against every member's rows (0, or SYMM_ERR_INVALID_ARG in
 * every thread); with bad expert ids or missing arrays the same. The members' in_rows are
 * read once into shared memory (teams of up to kTopkRowsShared members), so that a slot
 * costs its own two loads, which the loop overlaps, not a third one behind them. */
constexpr int kTopkRowsShared = 256;
SYMM_DEV int topk_combine_check(const topk_call &c)
{
    using symm_detail::ldcg;
    const topk_args &a = c.a;
    const uint64_t slots = a.tokens * (uint64_t)a.k, E = c.nexp();
    __shared__ uint64_t s_rows[kTopkRowsShared];
    const bool cached = c.n <= kTopkRowsShared;
    for (int j = (int)c.tid; cached && j < c.n; j += (int)c.nthr)
        s_rows[j] = ldcg(c.wsp(j) + SYMM_PLAN_TK_ROWS);
    __syncthreads();
    int bad = slots && (!a.topk_idx || !a.rows_in || !a.out);
    constexpr int U = 4; /* slots a thread loads before it checks them */
    if (!bad)
        for (uint64_t q0 = c.tid; q0 < slots; q0 += U * (uint64_t)c.nthr) {
            int64_t g[U], r[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const uint64_t q = q0 + u * (uint64_t)c.nthr;
                g[u] = q < slots ? a.topk_idx[q] : -1;
                r[u] = q < slots ? a.rows_in[q] : 0;
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                if (!symm_plan_topk_slot_ok(g[u], E)) {
                    bad = 1;
                    continue;
                }
                if (g[u] < 0) continue;
                const int j = (int)(g[u] / a.ne);
                const uint64_t rows = cached ? s_rows[j] : ldcg(c.wsp(j) + SYMM_PLAN_TK_ROWS);
                if (r[u] < 0 || (uint64_t)r[u] >= rows) bad = 1;
            }
        }
    return __syncthreads_or(bad) ? SYMM_ERR_INVALID_ARG : 0;
}

/* Elements [h0, h0 + 8) (or the tail) of a token: acc over the slots of lanes 0..k-1
 * (their rows in ptr, weights in wt), by one lane, in slot order. */
template <int TY> struct topk_elem;
template <> struct topk_elem<SYMM_FLOAT> {
    static SYMM_DEV float ld(const void *row, uint64_t h)
    {
        return __ldcg((const float *)row + h);
    }
    static SYMM_DEV void st(void *row, uint64_t h, float v) { ((float *)row)[h] = v; }
};
template <> struct topk_elem<SYMM_BF16> {
    static SYMM_DEV float ld(const void *row, uint64_t h)
    {
        return symm_half_bf16_to_float(__ldcg((const unsigned short *)row + h));
    }
    static SYMM_DEV void st(void *row, uint64_t h, float v)
    {
        ((uint16_t *)row)[h] = symm_half_float_to_bf16(v);
    }
};
template <> struct topk_elem<SYMM_FP16> {
    static SYMM_DEV float ld(const void *row, uint64_t h)
    {
        return symm_half_fp16_to_float(__ldcg((const unsigned short *)row + h));
    }
    static SYMM_DEV void st(void *row, uint64_t h, float v)
    {
        ((uint16_t *)row)[h] = symm_half_float_to_fp16(v);
    }
};

/* One 16-byte vector of type TY into acc, weighted: acc[e] = fmaf(w, x[e], acc[e]). */
template <int TY> SYMM_DEV void topk_acc_vec(float *acc, float w, const uint4 &x)
{
    if constexpr (TY == SYMM_FLOAT) {
        float f[4];
        memcpy(f, &x, 16);
#pragma unroll
        for (int e = 0; e < 4; e++)
            acc[e] = symm_plan_topk_acc(acc[e], w, f[e]);
    } else {
        uint16_t hv[8];
        memcpy(hv, &x, 16);
#pragma unroll
        for (int e = 0; e < 8; e++)
            acc[e] = symm_plan_topk_acc(acc[e], w,
                                        TY == SYMM_BF16 ? symm_half_bf16_to_float(hv[e])
                                                        : symm_half_fp16_to_float(hv[e]));
    }
}

/* My share of this member's tokens (piece u % P of token u / P by warp u % (nparts *
 * nwarps), topk_pieces): each element the fmaf sum over the token's slots in order,
 * rounded to the type once. row_of(q, g): where the expert output of slot q (routed to
 * expert g >= 0) lies, as mapped here (any member's memory), or nullptr for none: the
 * packed combine's rows in the holders' ins (topk_rows), the low-latency combine's in the
 * holders' ins or in this member's landing rows. The vector form loads the vectors of
 * kTopkSlotU slots before it adds any of them (the sum still runs in slot order): one load in
 * flight per lane would leave each warp waiting on k latencies per step. */
constexpr int kTopkSlotU = 8;
template <int TY, typename RowOf>
SYMM_DEV void topk_reduce(const topk_call &c, const RowOf &row_of)
{
    typedef topk_elem<TY> EL;
    const topk_args &a = c.a;
    const int k = a.k;
    const uint64_t hidden = a.hidden, rb = hidden * (TY == SYMM_FLOAT ? 4 : 2);
    const uint64_t gw = (uint64_t)c.part * c.nwarps + c.warp,
                   GW = (uint64_t)c.nparts * c.nwarps;
    const uint32_t P = topk_pieces(a.tokens, GW);
    for (uint64_t u = gw; u < a.tokens * P; u += GW) {
        const uint64_t t = u / P;
        const uint32_t piece = (uint32_t)(u % P);
        const char *row = nullptr;
        float wt = 0.0f;
        if (c.lane < (uint32_t)k) {
            const uint64_t q = t * (uint64_t)k + c.lane;
            const int64_t g = a.topk_idx[q];
            if (g >= 0) {
                row = row_of(q, g);
                wt = a.weights ? a.weights[q] : 1.0f;
            }
        }
        const uint32_t used = __ballot_sync(0xffffffffu, row != nullptr);
        char *o = (char *)a.out + t * rb;
        uint64_t u0, u1;
        /* 16-byte vectors where every row and the output are aligned to them: a lane takes
         * V consecutive elements (the same order of operations per element) */
        const bool mis = row && ((uintptr_t)row & 15);
        if (!__any_sync(0xffffffffu, mis) && (((uintptr_t)o | rb) & 15) == 0) {
            constexpr int V = TY == SYMM_FLOAT ? 4 : 8;
            topk_piece(rb / 16, piece, P, &u0, &u1);
            for (uint64_t v0 = u0; v0 < u1; v0 += 32) {
                const uint64_t v = v0 + c.lane;
                float acc[V];
#pragma unroll
                for (int e = 0; e < V; e++)
                    acc[e] = 0.0f;
                for (int j0 = 0; j0 < k; j0 += kTopkSlotU) {
                    uint4 x[kTopkSlotU];
                    float wj[kTopkSlotU];
#pragma unroll
                    for (int jj = 0; jj < kTopkSlotU; jj++) {
                        const int j = j0 + jj;
                        const char *rj =
                            (const char *)__shfl_sync(0xffffffffu, (uintptr_t)row, j & 31);
                        wj[jj] = __shfl_sync(0xffffffffu, wt, j & 31);
                        /* no default value: with one, the compiler may land the load in
                         * other registers and move it under the predicate, a move that
                         * waits for the load before the next one issues */
                        if (j < k && (used >> j & 1u) && v < u1)
                            x[jj] = __ldcg((const uint4 *)rj + v);
                    }
#pragma unroll
                    for (int jj = 0; jj < kTopkSlotU; jj++) {
                        const int j = j0 + jj;
                        if (j < k && (used >> j & 1u) && v < u1)
                            topk_acc_vec<TY>(acc, wj[jj], x[jj]);
                    }
                }
                if (v >= u1) continue;
                uint4 y;
                if constexpr (TY == SYMM_FLOAT) {
                    memcpy(&y, acc, 16);
                } else {
                    uint16_t hv[8];
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        hv[e] = TY == SYMM_BF16 ? symm_half_float_to_bf16(acc[e])
                                                : symm_half_float_to_fp16(acc[e]);
                    memcpy(&y, hv, 16);
                }
                ((uint4 *)o)[v] = y;
            }
            continue;
        }
        topk_piece(hidden, piece, P, &u0, &u1);
        for (uint64_t h0 = u0; h0 < u1; h0 += 32) {
            const uint64_t h = h0 + c.lane;
            float acc = 0.0f;
            for (uint32_t j = 0; j < (uint32_t)k; j++) {
                const char *rj = (const char *)__shfl_sync(0xffffffffu, (uintptr_t)row, j);
                const float wj = __shfl_sync(0xffffffffu, wt, j);
                if ((used >> j & 1u) && h < u1)
                    acc = symm_plan_topk_acc(acc, wj, EL::ld(rj, h));
            }
            if (h < u1) EL::st(o, h, acc);
        }
    }
}

/* topk_reduce for the call's row type. */
template <typename RowOf>
SYMM_DEV void topk_reduce_typed(const topk_call &c, const RowOf &row_of)
{
    if (c.a.type == SYMM_FLOAT)
        topk_reduce<SYMM_FLOAT>(c, row_of);
    else if (c.a.type == SYMM_BF16)
        topk_reduce<SYMM_BF16>(c, row_of);
    else
        topk_reduce<SYMM_FP16>(c, row_of);
}

SYMM_DEV int topk_combine_impl(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                               uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_MOE;
    const topk_call c(t, a, part, nparts);
    if (topk_combine_args_bad(c)) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    __shared__ int s_claim, s_owned, s_bad;
    __shared__ uint64_t s_ep;
    int rc = 0, rounds = 0;
    if (part == 0) {
        const uint64_t fp = topk_combine_fp(c);
        __syncthreads();
        if (c.tid == 0) {
            uint64_t ep = 0;
            const int cl = claim(t, W, holder_tag(SUB_BLOCK), &ep);
            s_owned = cl == 1;
            s_claim = cl < 0 ? cl : 0;
            s_ep = ep;
            s_bad = c.n;
            if (!s_claim) {
                uint64_t *w = c.ws;
                w[SYMM_PLAN_TK_STATUS] = (uint64_t)(int64_t)a.fail;
                w[SYMM_PLAN_TK_IN] = a.in ? (uint64_t)((uintptr_t)a.in - (uintptr_t)a.ws) : 0;
                w[SYMM_PLAN_TK_ROWS] = a.in ? a.in_rows : 0;
                w[SYMM_PLAN_TK_FP] = fp;
            }
        }
        __syncthreads();
        rc = s_claim;
        if (!rc) rc = round_block_at(t, s_ep + 1, W); /* where every expert output lies */
        if (!rc) {
            rounds = 1;
            for (int s = (int)c.tid; s < c.n; s += (int)c.nthr) {
                const uint64_t *h = c.wsp(s);
                if (ldcg(h + SYMM_PLAN_TK_STATUS) || ldcg(h + SYMM_PLAN_TK_FP) != fp)
                    atomicMin(&s_bad, s);
            }
            __syncthreads();
            int mine = (int)(int64_t)c.ws[SYMM_PLAN_TK_STATUS];
            if (!mine && s_bad == c.n) mine = topk_combine_check(c);
            if (c.tid == 0) c.ws[SYMM_PLAN_TK_ROWSTAT] = (uint64_t)(int64_t)mine;
            __syncthreads();
            rc = round_block_at(t, s_ep + 2, W); /* every member's rows checked */
            if (!rc) {
                rounds = 2;
                if (c.tid == 0) {
                    int v = 0, fm = -1;
                    if (s_bad < c.n) {
                        const int64_t st = (int64_t)ldcg(c.wsp(s_bad) + SYMM_PLAN_TK_STATUS);
                        v = st ? (int)st : SYMM_ERR_MISMATCH;
                        fm = s_bad;
                    }
                    for (int s = 0; !v && s < c.n; s++) {
                        const int64_t st = (int64_t)ldcg(c.wsp(s) + SYMM_PLAN_TK_ROWSTAT);
                        if (st) {
                            v = (int)st;
                            fm = s;
                        }
                    }
                    c.ws[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)v;
                    c.ws[SYMM_PLAN_TK_FAILM] = (uint64_t)(int64_t)fm;
                }
            }
        }
        if (rc && c.tid == 0) c.ws[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)rc;
        __syncthreads();
    }
    int brc = topk_grid_barrier(t, c.ws, nparts);
    const int verdict = brc ? brc : (int)(int64_t)ldg_ws(c.ws + SYMM_PLAN_TK_RC);
    if (!verdict) {
        const uint64_t rb = a.hidden * (a.type == SYMM_FLOAT ? 4 : 2);
        topk_reduce_typed(c, [&](uint64_t q, int64_t g) {
            const int j = (int)(g / a.ne);
            return (const char *)a.ws + c.t.heap_delta[j] + ldcg(c.wsp(j) + SYMM_PLAN_TK_IN) +
                   (uint64_t)a.rows_in[q] * rb;
        });
    }
    brc = topk_grid_barrier(t, c.ws, nparts); /* every block has read its peers */
    if (part == 0) {
        if (!s_claim) {
            if (verdict && verdict != SYMM_ERR_TIMEOUT && c.tid == 0) {
                const int64_t fm = (int64_t)c.ws[SYMM_PLAN_TK_FAILM];
                record(t, verdict, W, fm >= 0 ? (uint32_t)fm : 0xffffffffu, 0);
            }
            const int rc3 = rounds == 2 ? round_block_at(t, s_ep + 3, W) : 0;
            if (!verdict && rc3) c.ws[SYMM_PLAN_TK_RC] = (uint64_t)(int64_t)rc3;
            leave_block_at(t, s_owned, s_ep + (uint64_t)(rounds == 2 ? 3 : rounds + 1));
        }
        __syncthreads();
    }
    const int brc2 = topk_grid_barrier(t, c.ws, nparts);
    if (brc || brc2) return SYMM_ERR_TIMEOUT;
    return (int)(int64_t)ldg_ws(c.ws + SYMM_PLAN_TK_RC);
}

} // namespace symm_tm

/* ================================================================ public device calls */
static __host__ __device__ __forceinline__ size_t symm_tm_topk_ws_bytes(int n, int ne,
                                                                        size_t tokens, int k)
{
    if (n < 1 || symm_plan_topk_shape(n, ne, tokens, k) != SYMM_PLAN_TOPK_OK) return 0;
    symm_plan_topk_ws_t w;
    symm_plan_topk_ws(n, ne, tokens, k, &w);
    return (size_t)w.words * 8;
}

SYMM_DEV int
symm_dev_moe_topk_dispatch_block(const symm_dev_team_t &t, void *out, size_t out_capacity,
                                 const void *in, size_t tokens, size_t row_bytes,
                                 const int64_t *topk_idx, int k, int ne, size_t major_align,
                                 const symm_moe_side_t *side, int nside, size_t *out_counts,
                                 size_t *out_offsets, symm_moe_src_t *out_src, size_t *out_rows,
                                 int64_t *topk_rows, void *ws, uint32_t part, uint32_t nparts)
{
    const symm_tm::topk_args a = symm_tm::topk_dispatch_args(
        out, out_capacity, in, tokens, row_bytes, topk_idx, k, ne, major_align, side, nside,
        out_counts, out_offsets, out_src, out_rows, topk_rows, ws);
    return symm_tm::topk_dispatch_impl(t, a, part, nparts);
}

SYMM_DEV int symm_dev_moe_topk_combine_block(const symm_dev_team_t &t, void *out, size_t tokens,
                                             const void *in, size_t in_rows, size_t hidden,
                                             symm_type_t type, const int64_t *topk_idx,
                                             const int64_t *topk_rows,
                                             const float *topk_weights, int k, int ne, void *ws,
                                             uint32_t part, uint32_t nparts)
{
    const symm_tm::topk_args a =
        symm_tm::topk_combine_args(out, tokens, in, in_rows, hidden, (int)type, topk_idx,
                                   topk_rows, topk_weights, k, ne, ws);
    return symm_tm::topk_combine_impl(t, a, part, nparts);
}

#endif
