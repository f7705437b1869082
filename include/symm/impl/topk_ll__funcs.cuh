/* topk_ll__funcs.cuh — bodies of the low-latency top-k MoE forms (the stream calls
 * symm_moe_topk_dispatch_ll_on_stream / _combine_ll_on_stream of symm_cuda.h), with the
 * layout of plan__topk.h (symm_plan_topk_ll_row, symm_plan_topk_ll_ws).
 *
 * Dispatch, one kernel, one one-way hop and no meeting of the member's blocks: every
 * block takes a range of the member's tokens, gives their slots their rows on their
 * receivers (an atomic counter per expert in the sender's workspace; slot table kept for
 * the combine), arrives on a counter of the member's (nobody waits on it), and its warps
 * write those tokens' rows straight into the receivers' outs (each row read once, written
 * into every slot's row, on whichever member), with their sources. In the last block to
 * arrive, warp 0 also writes the member's counts into every receiver's out_counts (status
 * and fingerprint with them) while the other warps copy, and clears the ranks for the
 * next call. Then every block adds its share to the member's counter on
 * every receiver (topk_ll_add): counts and rows travel in the one hop, and no block
 * waits for another. Block 0 waits for every source's counter: the rows that land here
 * are then all here. No closing round: nobody reads the sender's memory.
 *
 * Combine, each expert output row moved once: a member whose in is a symmetric object
 * (the host says so) only publishes where it lies (cin), with its status, from block 0,
 * which then adds the whole unit to its counter at every member; every block then waits for
 * every holder's counter and reduces its share of this member's tokens, reading the k rows of
 * each token straight from the holders' ins (where this member's slot table says the dispatch
 * put them), in slot order with fmaf (topk_reduce): the same bits as the other forms. A holder
 * whose in is not symmetric pushes its rows into the workspace of each token's owner first (the
 * rows then move twice) and publishes SYMM_PLAN_TKL_PUSHED; owners read those from their own
 * landing rows. Then every block adds its share to a second counter (xflag: done reading) at
 * every member, and, where any holder was read in place, block 0 waits for every
 * member's: nobody's in or out is written again while an owner still reads it.
 *
 * Reuse: a dispatch writes into the receivers' outs and a combine into the owners'
 * workspaces without asking; that is safe because the calls alternate on every member
 * (dispatch, combine, dispatch, ...): a member starts a dispatch only after its previous
 * combine saw every holder's counter (and, if anyone read in place, every owner's xflag),
 * raised after the holder (owner) was done with the memory the next call writes. */
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

/* The rounds' counters (dflag, cflag, xflag: one per source on every member). Every block
 * of a source adds its share of one unit, 2^kTopkLLUnitShift, to the source's counter on
 * every member once it is done (topk_ll_share: the shares of a member's blocks sum to one
 * unit, whatever their number): source s has finished call ep on a member once s's counter
 * there reaches ep units. Nobody resets a counter; comparisons are modulo 2^64. */
constexpr uint32_t kTopkLLUnitShift = 32;

SYMM_DEV uint64_t topk_ll_share(uint32_t part, uint32_t nparts)
{
    const uint64_t u = (uint64_t)1 << kTopkLLUnitShift;
    return u * (part + 1) / nparts - u * part / nparts;
}

/* This call's number on this workspace, from the member's own counter of round `cnt`, read
 * by a block before it adds its share (only the member's own blocks add to it: the counter
 * then holds ep - 1 units and less than one more, whatever the other blocks have added). */
SYMM_DEV uint64_t topk_ll_epoch(const topk_ll_call &L, uint64_t cnt)
{
    return (symm_detail::ld_relaxed_gpu(L.c.ws + cnt + L.c.me) >> kTopkLLUnitShift) + 1;
}

/* The block's worst status (the lowest: statuses are negative), in every thread. */
SYMM_DEV int topk_ll_worst(const topk_ll_call &L, int mine)
{
    __shared__ int s_worst;
    if (L.c.tid == 0) s_worst = 0;
    __syncthreads();
    if (mine) atomicMin(&s_worst, mine);
    __syncthreads();
    return s_worst;
}

/* Thread 0 of each of the member's blocks arrives on the counter at arr_word of the
 * member's own workspace, with its block's worst status, kept in the word after it; true
 * in the block that arrives last, which then reads the member's worst status in *st and
 * leaves both words ready for the next call. Every thread's writes and atomics before
 * the block last met come before the arrival (GPU scope: only the member's own blocks
 * read the counter). */
SYMM_DEV bool topk_ll_arrive(const topk_ll_call &L, uint64_t arr_word, int worst, int *st)
{
    uint64_t *cnt = L.c.ws + arr_word, *stw = cnt + 1;
    if (worst) atomicMin((long long *)stw, (long long)worst);
    __threadfence();
    const unsigned long long old = atomicAdd((unsigned long long *)cnt, 1ull);
    *st = 0;
    if (old + 1 != L.c.nparts) return false;
    __threadfence();
    *st = (int)(long long)atomicExch((unsigned long long *)stw, 0ull);
    symm_detail::st_relaxed_gpu(cnt, 0);
    return true;
}

/* The member's status and fingerprint (and, where cinw != 0, the word cinv at cinw) into
 * every member's words of source me, by threads from, from + step, ... */
SYMM_DEV void topk_ll_status_out(const topk_ll_call &L, uint64_t stat, uint64_t fpw, int st,
                                 uint64_t fp, uint64_t cinw, uint64_t cinv, uint32_t from,
                                 uint32_t step)
{
    const int me = L.c.me;
    for (int j = (int)from; j < L.c.n; j += (int)step) {
        *L.at(j, stat + me) = (uint64_t)(int64_t)st;
        *L.at(j, fpw + me) = fp;
        if (cinw) *L.at(j, cinw + me) = cinv;
    }
}

/* Every block of the member: sh (its share, topk_ll_share, by default) added to every
 * member's counter cnt of source me. Every thread's writes before the call, to any member,
 * come before the adds (the block meets, then each add is a release). */
SYMM_DEV void topk_ll_add(const topk_ll_call &L, uint64_t cnt, uint64_t sh)
{
    __syncthreads();
    for (int j = (int)L.c.tid; sh && j < L.c.n; j += (int)L.c.nthr)
        symm_detail::add_flag(L.c.t, L.at(j, cnt + L.c.me), sh);
}
SYMM_DEV void topk_ll_add(const topk_ll_call &L, uint64_t cnt)
{
    topk_ll_add(L, cnt, topk_ll_share(L.c.part, L.c.nparts));
}

/* Waits until the counter *p reaches ep units (modulo 2^64), bounded by the team's timeout
 * (pe: the source it waits for, named in the record). */
SYMM_DEV int topk_ll_wait_count(const symm_dev_team_t &t, const uint64_t *p, uint64_t ep,
                                int pe)
{
    const uint64_t want = ep << kTopkLLUnitShift;
    return symm_detail::wait_until(
        t, p, [want](uint64_t v) { return (int64_t)(v - want) >= 0; }, SYMM_DEV_WHAT_MOE, pe);
}

/* Every source's counter cnt at ep units (seen by the calling block), then the verdict:
 * the first source's status, SYMM_ERR_MISMATCH for a fingerprint unlike mine, or a
 * timeout; 0 if all is well. *who: the member it names (-1: none). The same in every
 * thread. */
SYMM_DEV int topk_ll_wait(const topk_ll_call &L, uint64_t cnt, uint64_t stat, uint64_t fpw,
                          uint64_t fp, uint64_t ep, int *who)
{
    using namespace symm_detail;
    __shared__ int s_bad;
    const int n = L.c.n;
    if (L.c.tid == 0) s_bad = n;
    __syncthreads();
    int to = 0;
    for (int s = (int)L.c.tid; s < n; s += (int)L.c.nthr) {
        if (topk_ll_wait_count(L.c.t, L.c.ws + cnt + s, ep, s)) {
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

/* The dispatch body, every block of the member; returns the verdict (block 0 has waited
 * for every source; the other blocks return once their rows are written, 0 or their own
 * failure). Block `part` takes tokens [t0, t1) of the member's: it ranks their slots,
 * then its warps copy them (piece u % P of token t0 + u / P by warp u % nwarps), so a
 * block only ever reads the ranks it gave: no meeting of the member's blocks. */
SYMM_DEV int topk_ll_dispatch_impl(const symm_dev_team_t &t, const topk_args &a, uint32_t part,
                                   uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W_ = SYMM_DEV_WHAT_MOE;
    const topk_ll_call L(t, a, part, nparts, 0);
    const topk_call &c = L.c;
    const bool args_bad = topk_dispatch_args_bad(c) || !L.ok;
    const uint64_t fp = args_bad ? 0 : topk_ll_dispatch_fp(c);
    /* Everything above reads only parameters: launched with programmatic dependent launch,
     * it overlaps the end of the kernel before this one on the stream. */
    pdl_wait();
    if (args_bad) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W_, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    const int n = c.n, me = c.me, ne = a.ne, k = a.k;
    const uint64_t E = c.nexp();
    /* block 0 alone waits, and so needs the call's number: read now, used at the end */
    const uint64_t ep = part == 0 ? topk_ll_epoch(L, L.W.dflag) : 0;
    uint64_t *rank = c.ws + L.W.rank, *slot = c.ws + L.W.slot;
    int mine = a.fail                    ? a.fail
               : a.tokens > a.max_tokens ? SYMM_ERR_OVERFLOW
               : !a.out_counts || !a.out ? SYMM_ERR_INVALID_ARG
                                         : 0;
    const uint64_t tokens = mine ? 0 : a.tokens;
    const uint64_t t0 = tokens * part / nparts, t1 = tokens * (part + 1) / nparts;
    /* my tokens' slots their rows on their receivers, in arrival order per expert */
    bool null_in = !a.in;
    for (int p = 0; p < a.nside; p++)
        null_in = null_in || !a.side[p].in;
    for (uint64_t q = t0 * (uint64_t)k + c.tid; q < t1 * (uint64_t)k; q += c.nthr) {
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
    /* The block has ranked its slots. Warp 0 arrives on the member's counter; in the last
     * block to arrive (which then holds every rank) it writes my counts into every
     * receiver (every expert's: a count of 0 clears the last call's; none after a
     * failure) with status and fingerprint, and clears the ranks for the next call. The
     * other warps start on the rows at once, taking pieces as they come free. */
    __shared__ unsigned long long s_next;
    if (c.tid == 0) s_next = 0;
    const int worst = topk_ll_worst(L, mine), bad = worst != 0;
    if (c.warp == 0) {
        int st = 0, last = 0;
        if (c.lane == 0) last = topk_ll_arrive(L, SYMM_PLAN_TKL_ARR_D, worst, &st);
        last = __shfl_sync(0xffffffffu, last, 0);
        st = __shfl_sync(0xffffffffu, st, 0);
        /* kTopkLLCountU counts per lane loaded before any is written: one load at a time
         * would cost a round trip per 32 experts */
        constexpr int kTopkLLCountU = 8;
        for (uint64_t g0 = 0; last && g0 < E; g0 += 32 * kTopkLLCountU) {
            uint64_t v[kTopkLLCountU];
#pragma unroll
            for (int b = 0; b < kTopkLLCountU; b++) {
                const uint64_t g = g0 + 32 * b + c.lane;
                v[b] = g < E ? ldcg(rank + g) : 0;
            }
#pragma unroll
            for (int b = 0; b < kTopkLLCountU; b++) {
                const uint64_t g = g0 + 32 * b + c.lane;
                if (g >= E) break;
                rank[g] = 0;
                if (st) continue;
                const int j = (int)(g / (uint64_t)ne);
                const uint64_t e = g % (uint64_t)ne;
                *(size_t *)((char *)(a.out_counts + e * (uint64_t)n + (uint64_t)me) +
                            t.heap_delta[j]) = (size_t)v[b];
            }
        }
        if (last) topk_ll_status_out(L, L.W.dstat, L.W.dfp, st, fp, 0, 0, c.lane, 32);
    }
    /* the rows; piece 0 also writes the sources and the side rows. A block that found a
     * failure writes nothing (the call fails on every member: rows may have landed). */
    const uint32_t P = topk_pieces(t1 - t0, c.nwarps);
    const uint64_t units = bad ? 0 : (t1 - t0) * P;
    for (;;) {
        uint64_t u = 0;
        if (c.lane == 0) u = atomicAdd(&s_next, 1ull);
        u = __shfl_sync(0xffffffffu, u, 0);
        if (u >= units) break;
        const uint64_t tk = t0 + u / P;
        const uint32_t piece = (uint32_t)(u % P);
        uint8_t *dst = nullptr;
        uint64_t row = 0;
        int j = 0;
        if (c.lane < (uint32_t)k) {
            const uint64_t q = tk * (uint64_t)k + c.lane;
            const int64_t g = a.topk_idx[q];
            const uint64_t r = slot[q];
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
        const uint32_t m = __popc(mask), from = topk_packed_from(mask, c.lane);
        const uintptr_t pd = __shfl_sync(0xffffffffu, (uintptr_t)dst, from);
        const uint64_t prow = __shfl_sync(0xffffffffu, row, from);
        const int pj = __shfl_sync(0xffffffffu, j, from);
        topk_copy_row((uint8_t *)pd, (const uint8_t *)a.in + tk * a.row_bytes, a.row_bytes, m,
                      c.lane, piece, P, true);
        for (int p = 0; piece == 0 && p < a.nside; p++) {
            const uint64_t rb = a.side[p].row_bytes;
            uint8_t *sd = (uint8_t *)a.side[p].out + t.heap_delta[pj] + prow * rb;
            topk_copy_row(sd, (const uint8_t *)a.side[p].in + tk * rb, rb, m, c.lane, 0, 1,
                          true);
        }
    }
    /* every block's share of the flag, once its rows (and counts) are written */
    topk_ll_add(L, L.W.dflag);
    if (part != 0) return mine;
    int who;
    const int v = topk_ll_wait(L, L.W.dflag, L.W.dstat, L.W.dfp, fp, ep, &who);
    /* Every member's blocks have added their shares (none still waits for an SM): the next
     * kernel on the stream may launch once the other blocks have ended. */
    pdl_launch_dependents();
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
    const bool args_bad = topk_combine_args_bad(c) || !L.ok || !a.out_counts || !a.out_src;
    const uint64_t fp = args_bad ? 0 : topk_ll_combine_fp(c);
    pdl_wait(); /* as in the dispatch */
    if (args_bad) {
        if (part == 0 && c.tid == 0) record(t, SYMM_ERR_INVALID_ARG, W_, 0, 0);
        return SYMM_ERR_INVALID_ARG;
    }
    const int n = c.n, ne = a.ne, k = a.k;
    /* the call's number, used at the waits, from the counter every block adds its share to
     * at its end (the cflag may already hold block 0's whole unit) */
    const uint64_t E = c.nexp(), ep = topk_ll_epoch(L, L.W.xflag);
    int mine = a.fail ? a.fail : a.tokens > a.max_tokens ? SYMM_ERR_OVERFLOW : 0;
    const uint64_t tokens = mine ? 0 : a.tokens, slots = tokens * (uint64_t)k;
    /* block 0 checks every slot: its status is the member's */
    for (uint64_t q = c.tid; part == 0 && q < slots; q += c.nthr)
        if (!symm_plan_topk_slot_ok(a.topk_idx[q], E)) mine = SYMM_ERR_INVALID_ARG;
    if (slots && !a.out) mine = SYMM_ERR_INVALID_ARG;
    /* A holder whose in is not symmetric pushes: the rows I hold, (expert, source)
     * regions of max_tokens rows, the first counts of each filled, into their owners'
     * landing rows; their total sets how many warps share a row. With up to kTopkLLRegions
     * regions, their prefix in shared memory maps the warps' units onto the filled rows
     * alone (a binary search), not onto every row of every region. */
    constexpr uint64_t kTopkLLRegions = 1024;
    __shared__ unsigned long long s_rows;
    __shared__ uint64_t s_pre[kTopkLLRegions + 1];
    if (c.tid == 0) s_rows = 0;
    __syncthreads();
    const uint64_t regions = (uint64_t)ne * (uint64_t)n, mt = a.max_tokens;
    const bool push = !a.pull;
    for (uint64_t x = c.tid; push && !a.fail && x < regions; x += c.nthr) {
        const uint64_t v = a.out_counts[x];
        if (v > mt) mine = SYMM_ERR_INVALID_ARG;
        atomicAdd(&s_rows, (unsigned long long)(v > mt ? 0 : v));
    }
    const bool packed = regions <= kTopkLLRegions;
    if (push && packed && c.warp == 0) {
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
    const int worst = topk_ll_worst(L, mine), any_bad = worst != 0;
    const uint64_t gw = (uint64_t)part * c.nwarps + c.warp, GW = (uint64_t)nparts * c.nwarps;
    const uint32_t P = topk_pieces(s_rows, GW);
    const uint64_t units = !push ? 0 : packed ? s_pre[regions] : regions * mt;
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
        topk_copy_row(dst, (const uint8_t *)a.in + x * rb, rb, 1, c.lane, piece, P);
    }
    /* block 0 publishes the member's status and where its in lies; a pusher's blocks add
     * their shares once their rows are pushed, a puller's block 0 adds the whole unit at
     * once (its other blocks write nothing before: nobody waits for them to start) */
    const uint64_t cin =
        push ? SYMM_PLAN_TKL_PUSHED : (uint64_t)((uintptr_t)a.in - (uintptr_t)a.ws);
    if (part == 0)
        topk_ll_status_out(L, L.W.cstat, L.W.cfp, worst, fp, L.W.cin, cin, c.tid, c.nthr);
    if (push)
        topk_ll_add(L, L.W.cflag);
    else
        topk_ll_add(L, L.W.cflag, part == 0 ? (uint64_t)1 << kTopkLLUnitShift : 0);
    int who;
    const int v = topk_ll_wait(L, L.W.cflag, L.W.cstat, L.W.cfp, fp, ep, &who);
    if (v) {
        if (part == 0 && v != SYMM_ERR_TIMEOUT && c.tid == 0)
            record(t, v, W_, who >= 0 ? (uint32_t)who : 0xffffffffu, 0);
    } else {
        /* each slot's row: in its holder's in, where my dispatch put it (my slot table),
         * or in my landing rows where the holder pushed it */
        const uint64_t *cinw = c.ws + L.W.cin, *slot = c.ws + L.W.slot;
        topk_reduce_typed(c, [&](uint64_t q, int64_t g) -> const char * {
            const int j = (int)(g / ne);
            const uint64_t off = ldcg(cinw + j);
            if (off == SYMM_PLAN_TKL_PUSHED)
                return (const char *)a.ws + c.stage + q * c.stage_rb;
            const uint64_t r = ldcg(slot + q);
            if (r >= mt) return nullptr; /* not a row of the dispatch's */
            const uint64_t row =
                symm_plan_topk_ll_row((uint64_t)(g % ne), (uint64_t)c.me, (uint64_t)n, mt, r);
            return (const char *)a.ws + t.heap_delta[j] + off + row * rb;
        });
    }
    /* done reading: every block's share of the xflag at every member; block 0 waits for
     * every other member's where any holder was read in place (and the call went through;
     * the member's own blocks are done when the kernel ends) */
    topk_ll_add(L, L.W.xflag);
    if (part != 0) return v;
    int wait = 0, to = 0;
    for (int s = (int)c.tid; !v && s < n; s += (int)c.nthr)
        wait |= ldcg(c.ws + L.W.cin + s) != SYMM_PLAN_TKL_PUSHED;
    if (__syncthreads_or(wait))
        for (int s = (int)c.tid; s < n; s += (int)c.nthr)
            if (s != c.me) to |= topk_ll_wait_count(t, c.ws + L.W.xflag + s, ep, s) != 0;
    /* As in the dispatch: every holder's blocks have run (the cflag of a pusher counts them
     * all, the xflag of every member too where anyone was read in place). */
    const int late = __syncthreads_or(to);
    pdl_launch_dependents();
    return late ? SYMM_ERR_TIMEOUT : v;
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
