/* a2a__funcs.cuh — bodies of the device all-to-all-v calls of symm_device.cuh (1-D, MoE
 * dispatch with major_align, combine): block `part` of every member copies its chunks of
 * the rows it receives, as a CPU worker of symm_moe_dispatch_worker does. Included by
 * symm_device.cuh.
 *
 * The split tables never go through the host. Every block of every member writes its
 * (count, source offset) table, its out_capacity, where its in lies, its status (its own
 * in_splits checked against in_capacity) and a fingerprint of the common arguments into
 * its symmetric workspace ws (block b writes copy b % SYMM_TM_A2A_COPIES, all copies hold
 * the same values), then a round; each block reads, in one pass of parallel loads, every
 * member's header, the counts of the capacity check and its column of every table, agrees
 * on validity and on every member's capacity (the same verdict everywhere: any failure
 * fails every member and nothing is written), lays out its output (warp scans, in windows
 * of entries: n * ne < 2^31) and copies its chunks of the moved rows (output order,
 * padding excluded) with 16-byte vectors where aligned. Readers find a source's rows
 * through the place that source published, never through their own in. A closing round
 * keeps inputs and workspaces alive until every member has read. */
#ifndef SYMM_IMPL_A2A__FUNCS_CUH
#define SYMM_IMPL_A2A__FUNCS_CUH

#include "symm/impl/block__funcs.cuh"
#include "symm/impl/dev__funcs.cuh"
#include "symm/impl/tile_moe__common.h"

namespace symm_tm
{

struct a2a_args {
    int kind;
    void *out;
    size_t out_capacity;
    const void *in;
    size_t in_capacity;
    const size_t *in_splits;
    const size_t *in_offsets;
    int ne;
    size_t row_bytes;
    size_t major_align;
    size_t *out_splits, *out_offsets, *out_rows;
    void *ws;
    int fail;    /* != 0: this member publishes this status instead of its table (the host
                  * wrapper's local argument errors, so that every member fails alike) */
    int trigger; /* the stream form (programmatic dependent launch): wait for the kernel
                  * before on the stream inside the body, let the next one launch after
                  * the first round */
};

#define SYMM_TM_WIN 256
#define SYMM_TM_DL  32 /* heap deltas and sources' inputs kept in shared memory */

/* The MoE body. The work before the copy is a chain of round trips to memory on every
 * block's critical path; it is kept to: the claim and the loads of my splits in flight
 * together; my table written; one round; one parallel pass of loads (every member's
 * header, the counts of the capacity check, the first window of my column); the layout
 * in shared memory. Block `part` uses copy part % SYMM_TM_A2A_COPIES of the table, so
 * that few blocks share a line of it. */
SYMM_DEV int a2a_impl(const symm_dev_team_t &t, const a2a_args &a, uint32_t part,
                      uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_MOE;
    __shared__ int s_claim, s_rc, s_bad_s, s_fail_m;
    __shared__ uint64_t s_ep, s_moved_me, s_total, s_fp, s_R;
    /* a window of my column: count, source offset, destination, moved position, my first
     * and last chunk, source member */
    __shared__ uint64_t s_cnt[SYMM_TM_WIN], s_src[SYMM_TM_WIN], s_dst[SYMM_TM_WIN],
        s_mov[SYMM_TM_WIN], s_c1[SYMM_TM_WIN], s_cl[SYMM_TM_WIN];
    __shared__ int s_sm[SYMM_TM_WIN];
    /* the entries of the window where this block has chunks to copy, and their number */
    __shared__ uint16_t s_list[SYMM_TM_WIN];
    __shared__ int s_nlist;
    __shared__ int64_t s_dl[SYMM_TM_DL]; /* heap deltas of members < SYMM_TM_DL */
    __shared__ int64_t s_in[SYMM_TM_DL]; /* their in, as mapped here, from my a.ws */
    const int n = t.n, me = t.me, ne = a.ne;
    const uint32_t tid = thread_linear(), nthr = block_threads(), lane = tid & 31u,
                   warp = tid >> 5, nwarps = (nthr + 31) / 32;
    /* Arguments every member passes alike. */
    const bool bad_args = n < 1 || ne < 1 || a.row_bytes == 0 || nparts == 0 ||
                          part >= nparts || !a.ws || !symm_tm_a2a_ws_bytes(n, ne) ||
                          nthr < 32 || (nthr & 31) ||
                          (a.kind != SYMM_TM_A2A_DISPATCH && a.major_align) ||
                          (a.kind == SYMM_TM_A2A_1D && ne != 1);
    /* A NULL in holds no rows: any row it would send fails the capacity check below,
     * and that member's status is then SYMM_ERR_INVALID_ARG. */
    const uint64_t N = bad_args ? 0 : (uint64_t)n * (uint64_t)ne,
                   cap_in = a.in ? a.in_capacity : 0;
    const bool publish = !bad_args && !a.fail;
    /* My entry k (receiver-major: j = k / ne, e = k % ne): its count, and for a combine
     * its source offset; issued before the claim so that both are in flight together. */
    auto load_entry = [&](uint64_t k, uint64_t *cnt, uint64_t *off) {
        *cnt = 0;
        *off = 0;
        if (!publish || k >= N) return;
        if (a.kind == SYMM_TM_A2A_COMBINE) { /* 32-bit: N < 2^31 (symm_tm_a2a_ws_bytes) */
            uint32_t j = (uint32_t)k / (uint32_t)ne, e = (uint32_t)k % (uint32_t)ne;
            uint64_t ki = (uint64_t)e * (uint64_t)n + j;
            *cnt = a.in_splits[ki];
            *off = a.in_offsets[ki];
        } else {
            *cnt = a.in_splits[k];
        }
    };
    /* the heap deltas, from the block's last threads (thread 0 claims meanwhile) */
    for (int s = (int)(nthr - 1 - tid); !bad_args && s < n && s < SYMM_TM_DL; s += (int)nthr)
        s_dl[s] = t.heap_delta[s];
    if (tid == 0) {
        /* A fingerprint of the arguments every member passes alike, by one thread (the
         * others would only take issue slots from it): in s_fp for the header checks.
         * (An earlier call of this block read s_fp before its closing round.) */
        uint64_t fp =
            symm_tm_a2a_args_fp((uint64_t)a.kind, (uint64_t)ne, a.row_bytes, a.major_align);
        fp = symm_tm_mix(fp, nparts);
        s_fp = symm_tm_mix(fp, (uint64_t)n);
    }
    /* The stream form: everything above reads only parameters, so it overlaps the end of
     * the kernel before this one on the stream; from here on memory it wrote is read. */
    if (a.trigger) pdl_wait();
    uint64_t cnt0, off0;
    load_entry(tid, &cnt0, &off0);

    __syncthreads(); /* nobody still reads the shared variables of an earlier call */
    int owned = 0;
    uint64_t ep0 = 0;
    if (tid == 0) {
        /* the claim returns the episode counter (kept in s_ep meanwhile) */
        int c = claim(t, W, holder_tag(SUB_BLOCK), &ep0);
        owned = c == 1;
        s_claim = c < 0 ? c : 0;
    }
    __syncthreads();
    if (s_claim) return s_claim;
    if (bad_args) {
        if (part == 0 && tid == 0) record(t, SYMM_ERR_INVALID_ARG, W, 0, 0);
        leave_block(t, owned);
        return SYMM_ERR_INVALID_ARG;
    }
    /* ---- publish my table in my copy, checked against in_capacity */
    const uint64_t tw = SYMM_TM_A2A_HDR + 2 * N, copy = (part % SYMM_TM_A2A_COPIES) * tw;
    uint64_t *ws = (uint64_t *)a.ws + copy;
    int bad = 0;
    uint64_t run = 0; /* dispatch / 1-D: source offset of the chunk's first entry */
    if (N <= 32) {    /* one warp: a warp scan, no block barriers */
        if (warp == 0 && publish) {
            uint64_t cnt = cnt0, off = off0;
            if (a.kind == SYMM_TM_A2A_COMBINE) {
                if (cnt && (cnt > cap_in || off > cap_in - cnt)) bad = 1;
            } else {
                const uint64_t incl = warp_scan_sat(cnt, lane);
                off = incl - cnt; /* exact while incl <= cap_in, which is checked */
                if (incl > cap_in) bad = 1;
            }
            if (tid < N) {
                ws[SYMM_TM_A2A_HDR + 2 * tid] = cnt;
                ws[SYMM_TM_A2A_HDR + 2 * tid + 1] = off;
            }
        }
    }
    for (uint64_t c0 = 0; publish && N > 32 && c0 < N; c0 += nthr) {
        const uint64_t k = c0 + tid;
        uint64_t cnt = cnt0, off = off0, total;
        if (c0) load_entry(k, &cnt, &off);
        if (a.kind == SYMM_TM_A2A_COMBINE) {
            if (cnt && (cnt > cap_in || off > cap_in - cnt)) bad = 1;
        } else {
            uint64_t incl = sat_add(run, block_scan_sat(cnt, &total));
            off = incl - cnt; /* exact while incl <= cap_in, which is checked */
            if (incl > cap_in) bad = 1;
            run = sat_add(run, total);
        }
        if (k < N) {
            ws[SYMM_TM_A2A_HDR + 2 * k] = cnt;
            ws[SYMM_TM_A2A_HDR + 2 * k + 1] = off;
        }
    }
    bad = __syncthreads_or(bad);
    const int mine = a.fail ? a.fail
                     : !bad ? 0
                     : a.in ? SYMM_ERR_OVERFLOW
                            : SYMM_ERR_INVALID_ARG;
    if (tid == 0) {
        ws[0] = (uint64_t)(int64_t)mine;
        ws[1] = a.out_capacity;
        /* where my in lies, from my workspace (the same offset in every member's heap):
         * readers find my rows through it, never through their own in */
        ws[2] = a.in ? (uint64_t)((uintptr_t)a.in - (uintptr_t)a.ws) : 0;
        ws[3] = s_fp;
        s_ep = ep0;
        s_rc = mine;
        s_bad_s = n;
        s_fail_m = n;
        s_moved_me = 0;
    }
    __syncthreads(); /* the table is written (a round's release covers the block's stores) */
    const uint64_t ep = s_ep;
    int rc = round_block_at(t, ep + 1, W);
    if (rc) { /* every member's table and input are ready */
        leave_block_at(t, owned, ep + 1);
        return rc;
    }
    if (a.trigger) pdl_launch_dependents(); /* see tile_impl */

    /* ---- one pass of loads: headers, the counts of the capacity check, window 0; with
     * four warps or more, each on its own warps so that the loads are in flight together */
    const uint64_t *wsb = (const uint64_t *)a.ws + copy;
    const uint64_t fp = s_fp;
    auto wsp = [&](int s) {
        return (const uint64_t *)((const char *)wsb +
                                  (s < SYMM_TM_DL ? s_dl[s] : t.heap_delta[s]));
    };
    const bool pad_mode = a.kind == SYMM_TM_A2A_DISPATCH && a.major_align > 0;
    const int inner = a.kind == SYMM_TM_A2A_DISPATCH ? n : ne;
    /* Window w0 of my column: (count, source offset) of output entries [w0, w0 + wn), by
     * threads first, first + step, ... */
    auto load_window = [&](uint64_t w0, uint64_t wn, uint32_t first, uint32_t step) {
        for (uint64_t w = first; w < wn; w += step) {
            /* output entry o: dispatch o = e * n + s, else o = s * ne + e (32-bit) */
            uint32_t o = (uint32_t)(w0 + w), q = o / (uint32_t)inner, r = o % (uint32_t)inner;
            int s = a.kind == SYMM_TM_A2A_DISPATCH ? (int)r : (int)q;
            int e = a.kind == SYMM_TM_A2A_DISPATCH ? (int)q : (int)r;
            const uint64_t *tb = wsp(s) + SYMM_TM_A2A_HDR + 2 * ((uint64_t)me * ne + e);
            uint64_t c = ldcg(tb), so = ldcg(tb + 1);
            s_cnt[w] = c;
            s_src[w] = so;
            s_sm[w] = s;
        }
    };
    /* Roles with four warps or more: warp 0 loads window 0 of my column, the last warp the
     * headers, the others the counts of the capacity check, so that the loads are in
     * flight together. When my column fits in one window (n * ne <= SYMM_TM_WIN), warp 0
     * goes on at once with its layout (rows per chunk from the column's sum, the scans,
     * my chunks), while the other warps still check capacities: the layout only fills
     * shared memory, and nothing is written anywhere before the verdict. */
    const bool roles = nwarps >= 4;
    const bool early = roles && N <= SYMM_TM_WIN;
    const uint32_t need_first = roles ? 1 : 0, need_warps = roles ? nwarps - 2 : nwarps;
    const uint64_t rb = a.row_bytes;
    uint64_t c_moved = 0, c_pad = 0, c_gsm = 0; /* layout carries, valid in warp 0 */
    /* The layout of output entries [w0, w0 + wn) (warp 0): destination and moved
     * positions, my chunks of each entry (c1, c1 + nparts, ... <= cl; chunk c holds moved
     * rows [c * R, (c + 1) * R)), the list of entries with chunks of mine; with store, part
     * 0 also writes out_splits / out_offsets. No overflow once the capacities agree (with
     * early, a failed verdict discards whatever this computed). */
    auto layout_window = [&](uint64_t w0, uint64_t wn, uint64_t R, bool store) {
        int c_list = 0;
        for (uint64_t c0 = w0; c0 < w0 + wn; c0 += 32) {
            uint64_t o = c0 + lane;
            bool valid = o < w0 + wn;
            uint64_t cnt = valid ? s_cnt[o - w0] : 0;
            uint32_t j = (uint32_t)o % (uint32_t)inner;
            uint64_t incl = warp_incl_scan(cnt, lane);
            uint64_t mov = c_moved + incl - cnt;
            /* moved position where this entry's group began */
            uint32_t gl = j <= lane ? lane - j : lane;
            uint64_t gsm_in = __shfl_sync(0xffffffffu, mov, gl);
            uint64_t gsm = j <= lane ? gsm_in : c_gsm;
            uint64_t pad = 0;
            if (valid && pad_mode && j == (uint32_t)inner - 1) {
                uint64_t len = mov + cnt - gsm, al = len;
                symm_tm_aligned_len(len, a.major_align, &al);
                pad = al - len;
            }
            uint64_t pincl = warp_incl_scan(pad, lane);
            uint64_t dst = mov + c_pad + pincl - pad;
            bool has = false;
            if (valid) {
                uint64_t c1, cl; /* the lanes divide at once */
                symm_tm_moe_my_chunks(mov, cnt, R, part, nparts, &c1, &cl);
                s_c1[o - w0] = c1;
                s_cl[o - w0] = cl;
                s_dst[o - w0] = dst;
                s_mov[o - w0] = mov;
                has = c1 <= cl;
                if (store && part == 0) {
                    if (a.out_splits) a.out_splits[o] = cnt;
                    if (a.out_offsets) a.out_offsets[o] = dst;
                }
            }
            /* the entries with chunks of mine, in order */
            const uint32_t hm = __ballot_sync(0xffffffffu, has);
            if (has) s_list[c_list + __popc(hm & ((1u << lane) - 1u))] = (uint16_t)(o - w0);
            c_list += __popc(hm);
            uint32_t starts = __ballot_sync(0xffffffffu, valid && j == 0);
            if (starts) c_gsm = __shfl_sync(0xffffffffu, mov, 31 - __clz(starts));
            c_moved += __shfl_sync(0xffffffffu, incl, 31);
            c_pad += __shfl_sync(0xffffffffu, pincl, 31);
        }
        if (lane == 0) {
            s_total = c_moved + c_pad;
            s_nlist = c_list;
        }
    };

    if (!roles || warp == nwarps - 1) {
        for (int s = (int)(roles ? lane : tid); s < n; s += (int)(roles ? 32 : nthr)) {
            const uint64_t *h = wsp(s);
            uint64_t st = ldcg(h), io = ldcg(h + 2), f = ldcg(h + 3);
            if (st || f != fp) atomicMin(&s_bad_s, s);
            if (s < SYMM_TM_DL) s_in[s] = s_dl[s] + (int64_t)io;
        }
    }
    if (!roles || warp == 0)
        load_window(0, N < SYMM_TM_WIN ? N : SYMM_TM_WIN, roles ? lane : tid,
                    roles ? 32 : nthr);
    if (early && warp == 0) {
        __syncwarp();
        uint64_t mv = 0; /* my column's sum: the rows I receive */
        for (uint64_t w = lane; w < N; w += 32)
            mv = sat_add(mv, s_cnt[w]);
#pragma unroll
        for (int d = 16; d > 0; d >>= 1)
            mv = sat_add(mv, __shfl_xor_sync(0xffffffffu, mv, d));
        const uint64_t R = symm_tm_moe_chunk_rows(mv, rb, nparts);
        if (lane == 0) s_R = R;
        layout_window(0, N, R, false);
    }
    for (int m = (int)(warp - need_first);
         warp >= need_first && m < n && warp < need_first + need_warps; m += (int)need_warps) {
        uint64_t need = 0, moved = 0, cap = ldcg(wsp(m) + 1);
        for (int e = (int)lane; e < ne; e += 32) {
            uint64_t len = 0;
            for (int s = 0; s < n; s++)
                len = sat_add(len, ldcg(wsp(s) + SYMM_TM_A2A_HDR + 2 * ((uint64_t)m * ne + e)));
            uint64_t al;
            if (len == UINT64_MAX ||
                symm_tm_aligned_len(len, pad_mode ? a.major_align : 0, &al))
                al = UINT64_MAX;
            need = sat_add(need, al);
            moved = sat_add(moved, len);
        }
#pragma unroll
        for (int d = 16; d > 0; d >>= 1) {
            need = sat_add(need, __shfl_xor_sync(0xffffffffu, need, d));
            moved = sat_add(moved, __shfl_xor_sync(0xffffffffu, moved, d));
        }
        if (lane == 0) {
            if (need == UINT64_MAX || need > cap) atomicMin(&s_fail_m, m);
            if (m == me) s_moved_me = moved;
        }
    }
    __syncthreads();
    /* The verdict: my own status, else the first member whose status or arguments are
     * bad, else the first member whose output would not fit. The same everywhere (every
     * thread reads the same shared values, so all take the same branch). */
    if (s_rc || s_bad_s < n || s_fail_m < n || !early) {
        if (tid == 0 && !s_rc && s_bad_s < n) {
            const int64_t st = (int64_t)ldcg(wsp(s_bad_s));
            s_rc = st ? (int)st : SYMM_ERR_MISMATCH;
        }
        if (tid == 0 && !s_rc && s_fail_m < n) s_rc = SYMM_ERR_OVERFLOW;
        /* rows per chunk, by one thread for all */
        if (tid == 0 && !early) s_R = symm_tm_moe_chunk_rows(s_moved_me, rb, nparts);
        __syncthreads();
    }

    /* ---- layout in windows (warp 0; done above with early) and copy of my band of the
     * moved rows (all) */
    if (!s_rc) {
        const uint64_t R = s_R;
        if (early && part == 0) { /* the outputs the layout above held back */
            for (uint64_t o = tid; o < N; o += nthr) {
                if (a.out_splits) a.out_splits[o] = s_cnt[o];
                if (a.out_offsets) a.out_offsets[o] = s_dst[o];
            }
        }
        for (uint64_t w0 = 0; w0 < N; w0 += SYMM_TM_WIN) {
            uint64_t wn = N - w0 < SYMM_TM_WIN ? N - w0 : SYMM_TM_WIN;
            if (!early) {
                if (w0) {
                    load_window(w0, wn, tid, nthr);
                    __syncthreads();
                }
                if (warp == 0) layout_window(w0, wn, R, true);
                __syncthreads();
            }
            for (int i = 0, ni = s_nlist; i < ni; i++) { /* my chunks of the window */
                const uint32_t w = s_list[i];
                const uint64_t m0 = s_mov[w], cn = s_cnt[w], cl = s_cl[w];
                const int s = s_sm[w];
                /* source s's in, from my a.ws (as s published it) */
                const int64_t sin =
                    s < SYMM_TM_DL ? s_in[s] : t.heap_delta[s] + (int64_t)ldcg(wsp(s) + 2);
                for (uint64_t c = s_c1[w]; c <= cl; c += nparts) {
                    uint64_t a0 = c * R > m0 ? c * R : m0;
                    uint64_t a1 = (c + 1) * R < m0 + cn ? (c + 1) * R : m0 + cn;
                    uint64_t d0 = s_dst[w] + (a0 - m0), r = a1 - a0;
                    if (d0 > a.out_capacity || r > a.out_capacity - d0)
                        continue; /* cannot happen */
                    const uint8_t *src =
                        (const uint8_t *)a.ws + sin + (s_src[w] + (a0 - m0)) * rb;
                    copy_from_peer((uint8_t *)a.out + d0 * rb, src, r * rb);
                }
            }
            if (!early) __syncthreads();
        }
        if (part == 0 && tid == 0 && a.out_rows) *a.out_rows = s_total;
    }
    if (s_rc && part == 0 && tid == 0)
        record(t, s_rc, W, s_fail_m < n ? (uint32_t)s_fail_m : 0xffffffffu, 0);
    const int agreed = s_rc;
    __syncthreads();
    /* Every member runs the closing round (the verdict above is the same everywhere). */
    rc = round_block_at(t, ep + 2, W); /* nobody reads my input or ws */
    leave_block_at(t, owned, ep + 2);
    return agreed ? agreed : rc;
}

} // namespace symm_tm

/* ================================================================ public device calls */
SYMM_DEV int symm_dev_all_to_all_v_block(const symm_dev_team_t &t, void *out,
                                         size_t out_capacity, const void *in,
                                         size_t in_capacity, const size_t *in_splits,
                                         size_t row_bytes, size_t *out_splits,
                                         size_t *out_offsets, size_t *out_rows, void *ws,
                                         uint32_t part, uint32_t nparts)
{
    symm_tm::a2a_args a = {
        SYMM_TM_A2A_1D, out, out_capacity, in,          in_capacity, in_splits, nullptr, 1,
        row_bytes,      0,   out_splits,   out_offsets, out_rows,    ws,        0,       0};
    return symm_tm::a2a_impl(t, a, part, nparts);
}
SYMM_DEV int symm_dev_moe_dispatch_block(const symm_dev_team_t &t, void *out,
                                         size_t out_capacity, const void *in,
                                         size_t in_capacity, const size_t *in_splits, int ne,
                                         size_t row_bytes, size_t major_align,
                                         size_t *out_splits, size_t *out_offsets,
                                         size_t *out_rows, void *ws, uint32_t part,
                                         uint32_t nparts)
{
    symm_tm::a2a_args a = {SYMM_TM_A2A_DISPATCH,
                           out,
                           out_capacity,
                           in,
                           in_capacity,
                           in_splits,
                           nullptr,
                           ne,
                           row_bytes,
                           major_align,
                           out_splits,
                           out_offsets,
                           out_rows,
                           ws,
                           0,
                           0};
    return symm_tm::a2a_impl(t, a, part, nparts);
}
SYMM_DEV int symm_dev_moe_combine_block(const symm_dev_team_t &t, void *out,
                                        size_t out_capacity, const void *in, size_t in_capacity,
                                        const size_t *in_splits, const size_t *in_offsets,
                                        int ne, size_t row_bytes, size_t *out_splits,
                                        size_t *out_offsets, size_t *out_rows, void *ws,
                                        uint32_t part, uint32_t nparts)
{
    symm_tm::a2a_args a = {SYMM_TM_A2A_COMBINE,
                           out,
                           out_capacity,
                           in,
                           in_capacity,
                           in_splits,
                           in_offsets,
                           ne,
                           row_bytes,
                           0,
                           out_splits,
                           out_offsets,
                           out_rows,
                           ws,
                           0,
                           0};
    return symm_tm::a2a_impl(t, a, part, nparts);
}

#endif
