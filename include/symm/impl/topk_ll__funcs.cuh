/* topk_ll__funcs.cuh — bodies of the low-latency top-k MoE forms (the stream calls
 * symm_moe_topk_dispatch_ll_on_stream / _combine_ll_on_stream of symm_cuda.h), with the
 * layout of plan__topk.h (symm_plan_topk_ll_row, symm_plan_topk_ll_ws).
 *
 * Dispatch, one kernel and one one-way hop: every warp gives its slots their rows on
 * their receivers (an atomic counter per expert in the sender's workspace), the member's
 * blocks meet once, then every block writes its share of the token rows straight into
 * the receivers' outs (each row read once, written into every slot's row, on whichever
 * member), with their sources. The last block of the member to finish writes its counts
 * into every receiver's out_counts and then its flag into every receiver's workspace
 * (status and fingerprint with it). Block 0 waits for every source's flag: the rows that
 * land here are then all here. No closing round: nobody reads the sender's memory.
 *
 * Combine: every block pushes its share of the rows this member holds (those the last
 * dispatch wrote, counts and sources from it) straight into the workspace of the token's
 * owner, at the row of the token's slot; the last block publishes the flag; then every
 * block waits for every holder's flag and reduces its share of this member's tokens from
 * those rows, in slot order with fmaf (topk_reduce): the same bits as the other forms.
 *
 * Reuse: a dispatch writes into the receivers' outs and a combine into the owners'
 * workspaces without asking; that is safe because the calls alternate on every member
 * (dispatch, combine, dispatch, ...): a member starts a dispatch only after its previous
 * combine saw every holder's flag, which each holder raised after it was done with the
 * out of that dispatch; likewise for the combine's landing rows. */
#ifndef SYMM_IMPL_TOPK_LL__FUNCS_CUH
#define SYMM_IMPL_TOPK_LL__FUNCS_CUH

#include "symm/impl/topk__funcs.cuh"

namespace symm_tm
{

/* What both low-latency bodies share. */
struct topk_ll_call {
    topk_call c;
    symm_plan_topk_ll_ws_t W;
    int ok; /* the workspace layout exists */

    SYMM_DEV topk_ll_call(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                          uint32_t nparts, uint64_t combine_row_bytes)
        : c(t, a, part, nparts), ok(0)
    {
        if (c.n > 0 && a.ne > 0 && a.k > 0)
            ok = symm_plan_topk_ll_ws(c.n, a.ne, a.max_tokens, a.k, combine_row_bytes, &W);
        c.stage = W.stage * 8;
        c.stage_rb = W.stage_rb;
    }
    /* Member j's word w of the workspace, as mapped here. */
    SYMM_DEV uint64_t *at(int j, uint64_t w) const
    {
        return (uint64_t *)((char *)c.a.ws + c.t.heap_delta[j]) + w;
    }
};

/* This call's number on this workspace (ep_word: the calls finished so far), read by every
 * block before it arrives (the last one to arrive moves it on). */
SYMM_DEV uint64_t topk_ll_epoch(const topk_ll_call &L, uint64_t ep_word)
{
    __shared__ uint64_t s_ep;
    __syncthreads();
    if (L.c.tid == 0) s_ep = symm_detail::ld_relaxed_gpu(L.c.ws + ep_word) + 1;
    __syncthreads();
    return s_ep;
}

/* The block's worst status (the lowest: statuses are negative) into the member's status
 * word (after the arrival counter arr_word), by thread 0. */
SYMM_DEV void topk_ll_note(const topk_ll_call &L, uint64_t arr_word, int mine)
{
    __shared__ int s_worst;
    __syncthreads();
    if (L.c.tid == 0) s_worst = 0;
    __syncthreads();
    if (mine) atomicMin(&s_worst, mine);
    __syncthreads();
    if (L.c.tid == 0 && s_worst)
        atomicMin((long long *)(L.c.ws + arr_word + 1), (long long)s_worst);
}

/* The member's blocks arrive, each with its worst status; true in the block that arrives
 * last, which then reads the member's worst status in *st and leaves the counter and the
 * status word ready for the next call. Every thread's writes, to any member, are ordered
 * before its block's arrival (system scope). */
SYMM_DEV bool topk_ll_arrive(const topk_ll_call &L, uint64_t arr_word, int mine, int *st)
{
    using namespace symm_detail;
    __shared__ int s_last, s_st;
    __threadfence_system();
    topk_ll_note(L, arr_word, mine);
    if (L.c.tid == 0) {
        uint64_t *cnt = L.c.ws + arr_word, *stw = cnt + 1;
        __threadfence_system();
        const unsigned long long old = atomicAdd((unsigned long long *)cnt, 1ull);
        s_last = old + 1 == L.c.nparts;
        s_st = 0;
        if (s_last) {
            __threadfence_system();
            s_st = (int)(long long)atomicExch((unsigned long long *)stw, 0ull);
            st_relaxed_gpu(cnt, 0);
        }
    }
    __syncthreads();
    *st = s_st;
    return s_last != 0;
}

/* The last block: status and fingerprint, then the flag ep, into every member's words of
 * source me (dflag or cflag and the two after it, by their offsets in W). */
SYMM_DEV void topk_ll_publish(const topk_ll_call &L, uint64_t flag, uint64_t stat, uint64_t fpw,
                              int st, uint64_t fp, uint64_t ep)
{
    using namespace symm_detail;
    const int n = L.c.n, me = L.c.me;
    for (int j = (int)L.c.tid; j < n; j += (int)L.c.nthr) {
        *L.at(j, stat + me) = (uint64_t)(int64_t)st;
        *L.at(j, fpw + me) = fp;
    }
    __threadfence_system();
    __syncthreads();
    for (int j = (int)L.c.tid; j < n; j += (int)L.c.nthr)
        st_flag(L.c.t, L.at(j, flag + me), ep);
}

/* Every source's flag ep seen (by the calling block), then the verdict: the first
 * source's status, SYMM_ERR_MISMATCH for a fingerprint unlike mine, or a timeout; 0 if all
 * is well. *who: the member it names (-1: none). The same in every thread. */
SYMM_DEV int topk_ll_wait(const topk_ll_call &L, uint64_t flag, uint64_t stat, uint64_t fpw,
                          uint64_t fp, uint64_t ep, int *who)
{
    using namespace symm_detail;
    __shared__ int s_bad;
    const int n = L.c.n;
    if (L.c.tid == 0) s_bad = n;
    __syncthreads();
    int to = 0;
    for (int s = (int)L.c.tid; s < n; s += (int)L.c.nthr) {
        if (wait_ge(L.c.t, L.c.ws + flag + s, ep, SYMM_DEV_WHAT_MOE, s)) {
            to = 1;
            continue;
        }
        if (ldcg(L.c.ws + stat + s) || ldcg(L.c.ws + fpw + s) != fp) atomicMin(&s_bad, s);
    }
    if (__syncthreads_or(to)) {
        *who = -1;
        return SYMM_ERR_TIMEOUT;
    }
    const int b = s_bad;
    if (b == n) {
        *who = -1;
        return 0;
    }
    *who = b;
    const int64_t st = (int64_t)ldcg(L.c.ws + stat + b);
    return st ? (int)st : SYMM_ERR_MISMATCH;
}

/* ---------------------------------------------------------------- dispatch */
SYMM_DEV uint64_t topk_ll_dispatch_fp(const topk_call &c)
{
    const topk_args &a = c.a;
    uint64_t fp = symm_plan_topk_ll_dispatch_fp((uint64_t)a.k, (uint64_t)a.ne, a.row_bytes,
                                                a.max_tokens, (uint64_t)a.nside);
    for (int p = 0; p < a.nside; p++)
        fp = symm_tm_mix(fp, a.side[p].row_bytes);
    return symm_tm_mix(fp, (uint64_t)c.n);
}

/* Piece `piece` of P of one row of rb bytes from src (this member's) into the rows dst of
 * lanes 0..m-1 (any members'), as topk_copy_row. */
SYMM_DEV void topk_ll_copy_row(uint8_t *dst, const uint8_t *src, uint64_t rb, uint32_t m,
                               uint32_t lane, uint32_t piece, uint32_t P)
{
    const uintptr_t al = (uintptr_t)src | (uintptr_t)rb | (lane < m ? (uintptr_t)dst : 0);
    const bool v16 = !__any_sync(0xffffffffu, (al & 15) != 0);
    const bool v4 = !__any_sync(0xffffffffu, (al & 3) != 0);
    uint64_t u0, u1;
    if (v16) {
        topk_piece(rb / 16, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 64) {
            const uint64_t v = v0 + lane, w = v + 32;
            uint4 x = make_uint4(0, 0, 0, 0), y = make_uint4(0, 0, 0, 0);
            if (v < u1) x = ld_once((const uint4 *)src + v);
            if (w < u1) y = ld_once((const uint4 *)src + w);
            for (uint32_t j = 0; j < m; j++) {
                uint4 *d = (uint4 *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (v < u1) st_once(d + v, x);
                if (w < u1) st_once(d + w, y);
            }
        }
    } else if (v4) {
        topk_piece(rb / 4, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 32) {
            const uint64_t v = v0 + lane;
            const unsigned x = v < u1 ? ((const unsigned *)src)[v] : 0u;
            for (uint32_t j = 0; j < m; j++) {
                unsigned *d = (unsigned *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (v < u1) d[v] = x;
            }
        }
    } else {
        topk_piece(rb, piece, P, &u0, &u1);
        for (uint64_t v0 = u0; v0 < u1; v0 += 32) {
            const uint64_t v = v0 + lane;
            const uint8_t x = v < u1 ? src[v] : (uint8_t)0;
            for (uint32_t j = 0; j < m; j++) {
                uint8_t *d = (uint8_t *)__shfl_sync(0xffffffffu, (uintptr_t)dst, j);
                if (v < u1) d[v] = x;
            }
        }
    }
}

/* The dispatch body, every block of the member; returns the verdict (block 0 has waited
 * for every source; the other blocks return once their rows are written, 0 or their own
 * member's failure). */
SYMM_DEV int topk_ll_dispatch_impl(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                                   uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W_ = SYMM_DEV_WHAT_MOE;
    const topk_ll_call L(t, a, part, nparts, 0);
    const topk_call &c = L.c;
    if (topk_dispatch_args_bad(c) || !L.ok) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W_, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    const int n = c.n, me = c.me, ne = a.ne, k = a.k;
    const uint64_t E = c.nexp(), ep = topk_ll_epoch(L, SYMM_PLAN_TKL_EP_D);
    uint64_t *rank = c.ws + L.W.rank + (ep & 1) * E, *other = c.ws + L.W.rank + (~ep & 1) * E;
    uint64_t *slot = c.ws + L.W.slot;
    const uint64_t fp = topk_ll_dispatch_fp(c);
    const uint64_t gt = (uint64_t)part * c.nthr + c.tid, GT = (uint64_t)nparts * c.nthr;
    int mine = a.fail                    ? a.fail
               : a.tokens > a.max_tokens ? SYMM_ERR_OVERFLOW
               : !a.out_counts || !a.out ? SYMM_ERR_INVALID_ARG
                                         : 0;
    const uint64_t tokens = mine ? 0 : a.tokens, slots = tokens * (uint64_t)k;
    /* every slot its row on its receiver, in arrival order per expert; the set the next
     * call uses cleared */
    bool null_in = !a.in;
    for (int p = 0; p < a.nside; p++)
        null_in = null_in || !a.side[p].in;
    for (uint64_t g = gt; g < E; g += GT)
        other[g] = 0;
    for (uint64_t q = gt; q < slots; q += GT) {
        const int64_t g = a.topk_idx[q];
        uint64_t r = UINT64_MAX;
        if (!symm_plan_topk_slot_ok(g, E)) {
            mine = SYMM_ERR_INVALID_ARG;
        } else if (g >= 0) {
            if (null_in) mine = SYMM_ERR_INVALID_ARG;
            r = atomicAdd((unsigned long long *)&rank[g], 1ull);
            if (r >= a.max_tokens) {
                mine = SYMM_ERR_OVERFLOW;
                r = UINT64_MAX;
            }
        }
        slot[q] = r;
    }
    topk_ll_note(L, SYMM_PLAN_TKL_ARR_D, mine);
    const int brc = topk_grid_barrier(t, c.ws, nparts); /* every slot's row known */
    if (brc) mine = brc;
    /* the rows, piece u % P of token u / P by warp u % (nparts * nwarps); piece 0 also
     * writes the sources and the side rows. A member whose slots failed writes nothing. */
    const int any_bad = brc || ldcg(c.ws + SYMM_PLAN_TKL_ARR_D + 1) != 0;
    const uint64_t gw = (uint64_t)part * c.nwarps + c.warp, GW = (uint64_t)nparts * c.nwarps;
    const uint32_t P = topk_pieces(tokens, GW);
    for (uint64_t u = gw; !any_bad && u < tokens * P; u += GW) {
        const uint64_t tk = u / P;
        const uint32_t piece = (uint32_t)(u % P);
        uint8_t *dst = nullptr;
        uint64_t row = 0;
        int j = 0;
        if (c.lane < (uint32_t)k) {
            const uint64_t q = tk * (uint64_t)k + c.lane;
            const int64_t g = a.topk_idx[q];
            const uint64_t r = ldcg(slot + q);
            if (g >= 0 && r != UINT64_MAX) {
                j = (int)(g / ne);
                row = symm_plan_topk_ll_row((uint64_t)(g % ne), (uint64_t)me, (uint64_t)n,
                                            a.max_tokens, r);
                dst = (uint8_t *)a.out + t.heap_delta[j] + row * a.row_bytes;
                if (a.out_src && piece == 0) {
                    symm_moe_src_t sr;
                    sr.pe = me;
                    sr.slot = (int32_t)c.lane;
                    sr.token = (int64_t)tk;
                    *(symm_moe_src_t *)((char *)(a.out_src + row) + t.heap_delta[j]) = sr;
                }
            }
        }
        const uint32_t mask = __ballot_sync(0xffffffffu, dst != nullptr);
        if (!mask) continue;
        /* the destinations of my slots, packed into lanes 0..m-1 */
        const uint32_t m = __popc(mask);
        uint32_t rest = mask;
        for (uint32_t i = 0; i < c.lane && rest; i++)
            rest &= rest - 1;
        const uint32_t from = rest ? (uint32_t)__ffs(rest) - 1 : 0;
        const uintptr_t pd = __shfl_sync(0xffffffffu, (uintptr_t)dst, from);
        const uint64_t prow = __shfl_sync(0xffffffffu, row, from);
        const int pj = __shfl_sync(0xffffffffu, j, from);
        topk_ll_copy_row((uint8_t *)pd, (const uint8_t *)a.in + tk * a.row_bytes, a.row_bytes,
                         m, c.lane, piece, P);
        for (int p = 0; piece == 0 && p < a.nside; p++) {
            const uint64_t rb = a.side[p].row_bytes;
            uint8_t *sd = (uint8_t *)a.side[p].out + t.heap_delta[pj] + prow * rb;
            topk_ll_copy_row(sd, (const uint8_t *)a.side[p].in + tk * rb, rb, m, c.lane, 0, 1);
        }
    }
    int st;
    if (topk_ll_arrive(L, SYMM_PLAN_TKL_ARR_D, mine, &st)) {
        /* my counts into every receiver (every expert's: a count of 0 clears the last
         * call's; none after a failure), then status, fingerprint and flag */
        for (uint64_t g = c.tid; !st && g < E; g += c.nthr) {
            const int j = (int)(g / (uint64_t)ne);
            const uint64_t e = g % (uint64_t)ne;
            *(size_t *)((char *)(a.out_counts + e * (uint64_t)n + (uint64_t)me) +
                        t.heap_delta[j]) = (size_t)ldcg(rank + g);
        }
        topk_ll_publish(L, L.W.dflag, L.W.dstat, L.W.dfp, st, fp, ep);
        __syncthreads();
        if (c.tid == 0) st_relaxed_gpu(c.ws + SYMM_PLAN_TKL_EP_D, ep);
    }
    if (part != 0) return mine;
    int who;
    const int v = topk_ll_wait(L, L.W.dflag, L.W.dstat, L.W.dfp, fp, ep, &who);
    if (v && v != SYMM_ERR_TIMEOUT && c.tid == 0)
        record(t, v, W_, who >= 0 ? (uint32_t)who : 0xffffffffu, 0);
    return v;
}

/* ---------------------------------------------------------------- combine */
SYMM_DEV uint64_t topk_ll_combine_fp(const topk_call &c)
{
    const topk_args &a = c.a;
    const uint64_t fp = symm_plan_topk_ll_combine_fp((uint64_t)a.k, (uint64_t)a.ne, a.hidden,
                                                     (uint64_t)a.type, a.max_tokens);
    return symm_tm_mix(fp, (uint64_t)c.n);
}

/* The combine body, every block of the member (in: the rows this member holds, laid out as
 * the dispatch's out; out_counts / out_src: the dispatch's, read here). */
SYMM_DEV int topk_ll_combine_impl(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                                  uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W_ = SYMM_DEV_WHAT_MOE;
    const uint64_t es = a.type == SYMM_FLOAT ? 4 : 2, rb = a.hidden * es;
    topk_ll_call L(t, a, part, nparts, rb);
    const topk_call &c = L.c;
    if (topk_combine_args_bad(c) || !L.ok || !a.out_counts || !a.out_src) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W_, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    const int n = c.n, ne = a.ne, k = a.k;
    const uint64_t E = c.nexp(), ep = topk_ll_epoch(L, SYMM_PLAN_TKL_EP_C);
    const uint64_t fp = topk_ll_combine_fp(c);
    int mine = a.fail ? a.fail : a.tokens > a.max_tokens ? SYMM_ERR_OVERFLOW : 0;
    const uint64_t tokens = mine ? 0 : a.tokens, slots = tokens * (uint64_t)k;
    const uint64_t gt = (uint64_t)part * c.nthr + c.tid, GT = (uint64_t)nparts * c.nthr;
    for (uint64_t q = gt; q < slots; q += GT)
        if (!symm_plan_topk_slot_ok(a.topk_idx[q], E)) mine = SYMM_ERR_INVALID_ARG;
    if (slots && !a.out) mine = SYMM_ERR_INVALID_ARG;
    /* the rows I hold, (expert, source) regions of max_tokens rows, the first counts of
     * each filled: their total sets how many warps share a row. With up to kTopkLLRegions
     * regions, their prefix in shared memory maps the warps' units onto the filled rows
     * alone (a binary search), not onto every row of every region. */
    constexpr uint64_t kTopkLLRegions = 1024;
    __shared__ unsigned long long s_rows;
    __shared__ uint64_t s_pre[kTopkLLRegions + 1];
    if (c.tid == 0) s_rows = 0;
    __syncthreads();
    const uint64_t regions = (uint64_t)ne * (uint64_t)n, mt = a.max_tokens;
    for (uint64_t x = c.tid; !a.fail && x < regions; x += c.nthr) {
        const uint64_t v = a.out_counts[x];
        if (v > mt) mine = SYMM_ERR_INVALID_ARG;
        atomicAdd(&s_rows, (unsigned long long)(v > mt ? 0 : v));
    }
    const bool packed = regions <= kTopkLLRegions;
    if (packed && c.warp == 0) {
        uint64_t run = 0;
        for (uint64_t x0 = 0; x0 < regions; x0 += 32) {
            const uint64_t x = x0 + c.lane;
            uint64_t v = x < regions && !a.fail ? a.out_counts[x] : 0;
            if (v > mt) v = 0;
            const uint64_t incl = warp_incl_scan(v, c.lane);
            if (x < regions) s_pre[x] = run + incl - v;
            run += __shfl_sync(0xffffffffu, incl, 31);
        }
        if (c.lane == 0) s_pre[regions] = run;
    }
    __syncthreads();
    const int any_bad = __syncthreads_or(mine != 0);
    const uint64_t gw = (uint64_t)part * c.nwarps + c.warp, GW = (uint64_t)nparts * c.nwarps;
    const uint32_t P = topk_pieces(s_rows, GW);
    const uint64_t units = packed ? s_pre[regions] : regions * mt;
    for (uint64_t u = gw; !any_bad && !a.fail && u < units * P; u += GW) {
        const uint64_t xv = u / P;
        const uint32_t piece = (uint32_t)(u % P);
        uint64_t x;
        if (packed) { /* the region lo with s_pre[lo] <= xv < s_pre[lo + 1] */
            uint64_t lo = 0, hi = regions;
            while (hi - lo > 1) {
                const uint64_t mid = (lo + hi) / 2;
                if (s_pre[mid] <= xv)
                    lo = mid;
                else
                    hi = mid;
            }
            x = lo * mt + (xv - s_pre[lo]);
        } else {
            x = xv;
            if (x % mt >= a.out_counts[x / mt]) continue;
        }
        const symm_moe_src_t sr = a.out_src[x];
        if (sr.pe < 0 || sr.pe >= n || sr.slot < 0 || sr.slot >= k || sr.token < 0 ||
            (uint64_t)sr.token >= mt)
            continue; /* not a row of the dispatch's: nothing is sent */
        const uint64_t q = (uint64_t)sr.token * (uint64_t)k + (uint64_t)sr.slot;
        uint8_t *dst = (uint8_t *)a.ws + t.heap_delta[sr.pe] + c.stage + q * c.stage_rb;
        topk_ll_copy_row(dst, (const uint8_t *)a.in + x * rb, rb, 1, c.lane, piece, P);
    }
    int st;
    if (topk_ll_arrive(L, SYMM_PLAN_TKL_ARR_C, mine, &st)) {
        topk_ll_publish(L, L.W.cflag, L.W.cstat, L.W.cfp, st, fp, ep);
        __syncthreads();
        if (c.tid == 0) st_relaxed_gpu(c.ws + SYMM_PLAN_TKL_EP_C, ep);
    }
    int who;
    const int v = topk_ll_wait(L, L.W.cflag, L.W.cstat, L.W.cfp, fp, ep, &who);
    if (v) {
        if (part == 0 && v != SYMM_ERR_TIMEOUT && c.tid == 0)
            record(t, v, W_, who >= 0 ? (uint32_t)who : 0xffffffffu, 0);
        return v;
    }
    if (a.type == SYMM_FLOAT)
        topk_reduce<SYMM_FLOAT, true>(c);
    else if (a.type == SYMM_BF16)
        topk_reduce<SYMM_BF16, true>(c);
    else
        topk_reduce<SYMM_FP16, true>(c);
    return 0;
}

} // namespace symm_tm

/* The workspace bytes of the low-latency forms. */
static __host__ __device__ __forceinline__ size_t
symm_tm_topk_ll_ws_bytes(int n, int ne, size_t max_tokens, int k, size_t combine_row_bytes)
{
    if (n < 1 || symm_plan_topk_shape(n, ne, max_tokens, k) != SYMM_PLAN_TOPK_OK) return 0;
    symm_plan_topk_ll_ws_t w;
    if (!symm_plan_topk_ll_ws(n, ne, max_tokens, k, combine_row_bytes, &w)) return 0;
    return (size_t)w.words * 8;
}

#endif
