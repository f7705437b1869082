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

/* The arguments of a call (fail and trigger 0), for the device bodies below and the
 * stream forms' host wrappers alike. Zeroed first: the host passes the struct, padding
 * included, as a kernel parameter. */
SYMM_HD a2a_args a2a_args_make(int kind, void *out, size_t out_capacity, const void *in,
                               size_t in_capacity, const size_t *in_splits,
                               const size_t *in_offsets, int ne, size_t row_bytes,
                               size_t major_align, size_t *out_splits, size_t *out_offsets,
                               size_t *out_rows, void *ws)
{
    a2a_args a;
    memset(&a, 0, sizeof a);
    a.kind = kind;
    a.out = out;
    a.out_capacity = out_capacity;
    a.in = in;
    a.in_capacity = in_capacity;
    a.in_splits = in_splits;
    a.in_offsets = in_offsets;
    a.ne = ne;
    a.row_bytes = row_bytes;
    a.major_align = major_align;
    a.out_splits = out_splits;
    a.out_offsets = out_offsets;
    a.out_rows = out_rows;
    a.ws = ws;
    return a;
}

#define SYMM_TM_WIN 256
#define SYMM_TM_DL  32 /* heap deltas and sources' inputs kept in shared memory */

/* What a block keeps in shared memory during a call (one per block: a2a_impl declares it;
 * a call's first barrier keeps it from a block's earlier call). */
struct a2a_shared {
    int claim, rc, bad_s, fail_m;
    uint64_t ep, moved_me, total, fp, R;
    /* a window of my column: count, source offset, destination, moved position, my first
     * and last chunk, source member */
    uint64_t cnt[SYMM_TM_WIN], src[SYMM_TM_WIN], dst[SYMM_TM_WIN], mov[SYMM_TM_WIN],
        c1[SYMM_TM_WIN], cl[SYMM_TM_WIN];
    int sm[SYMM_TM_WIN];
    /* the entries of the window where this block has chunks to copy, and their number */
    uint16_t list[SYMM_TM_WIN];
    int nlist;
    int64_t dl[SYMM_TM_DL]; /* heap deltas of members < SYMM_TM_DL */
    int64_t in[SYMM_TM_DL]; /* their in, as mapped here, from my a.ws */
};

/* Whether an argument every member passes alike is bad (nthr: the block's threads). */
SYMM_DEV bool a2a_args_bad(const symm_dev_team_t &t, const a2a_args &a, uint32_t part,
                           uint32_t nparts, uint32_t nthr)
{
    const int n = t.n, ne = a.ne;
    return n < 1 || ne < 1 || a.row_bytes == 0 || nparts == 0 || part >= nparts || !a.ws ||
           !symm_tm_a2a_ws_bytes(n, ne) || nthr < 32 || (nthr & 31) ||
           (a.kind != SYMM_TM_A2A_DISPATCH && a.major_align) ||
           (a.kind == SYMM_TM_A2A_1D && ne != 1);
}

/* One call of a2a_impl (below), as its steps read it: the arguments, this thread's place
 * in the block, the block's shared memory, and what follows from them. */
struct a2a_call {
    const symm_dev_team_t &t;
    const a2a_args &a;
    a2a_shared &sh;
    uint32_t part, nparts;
    int n, me, ne;
    uint32_t tid, nthr, lane, warp, nwarps;
    bool bad_args; /* an argument every member passes alike is bad */
    bool publish;  /* this member publishes its table (else a status only) */
    uint64_t N;    /* entries of a table, n * ne (0 with bad_args) */
    /* rows of in: a NULL in holds none, so any row it would send fails the capacity check,
     * and that member's status is then SYMM_ERR_INVALID_ARG */
    uint64_t cap_in;

    SYMM_DEV a2a_call(const symm_dev_team_t &t_, const a2a_args &a_, a2a_shared &sh_,
                      uint32_t part_, uint32_t nparts_)
        : t(t_), a(a_), sh(sh_), part(part_), nparts(nparts_), n(t_.n), me(t_.me), ne(a_.ne),
          tid(symm_detail::thread_linear()), nthr(symm_detail::block_threads()),
          lane(tid & 31u), warp(tid >> 5), nwarps((nthr + 31) / 32),
          bad_args(a2a_args_bad(t_, a_, part_, nparts_, nthr)), publish(!bad_args && !a_.fail),
          N(bad_args ? 0 : (uint64_t)n * (uint64_t)ne), cap_in(a_.in ? a_.in_capacity : 0)
    {
    }

    /* What follows from the above, computed where a step needs it (as members, they would
     * be computed up front and held in registers across the claim). */
    /* The copy of the table this block uses: its offset in ws, in words. */
    SYMM_DEV uint64_t copy() const
    {
        return (part % SYMM_TM_A2A_COPIES) * (SYMM_TM_A2A_HDR + 2 * N);
    }
    /* Output entries per group: n for a dispatch (o = e * n + s), else ne. */
    SYMM_DEV int inner() const { return a.kind == SYMM_TM_A2A_DISPATCH ? n : ne; }
    /* A dispatch with major_align: its segments are padded. */
    SYMM_DEV bool pad_mode() const
    {
        return a.kind == SYMM_TM_A2A_DISPATCH && a.major_align > 0;
    }
    /* Roles with four warps or more: warp 0 loads window 0 of my column, the last warp the
     * headers, the others the counts of the capacity check, so that the loads are in
     * flight together. */
    SYMM_DEV bool roles() const { return nwarps >= 4; }
    /* With roles, when my column fits in one window (n * ne <= SYMM_TM_WIN), warp 0 goes
     * on at once with its layout (rows per chunk from the column's sum, the scans, my
     * chunks) while the other warps still check capacities: the layout only fills shared
     * memory, and nothing is written anywhere before the verdict. */
    SYMM_DEV bool early() const { return roles() && N <= SYMM_TM_WIN; }
};

/* My entry k (receiver-major: j = k / ne, e = k % ne): its count, and for a combine its
 * source offset. */
SYMM_DEV void a2a_load_entry(const a2a_call &c, uint64_t k, uint64_t *cnt, uint64_t *off)
{
    const a2a_args &a = c.a;
    *cnt = 0;
    *off = 0;
    if (!c.publish || k >= c.N) return;
    if (a.kind == SYMM_TM_A2A_COMBINE) { /* 32-bit: N < 2^31 (symm_tm_a2a_ws_bytes) */
        uint32_t j = (uint32_t)k / (uint32_t)c.ne, e = (uint32_t)k % (uint32_t)c.ne;
        uint64_t ki = (uint64_t)e * (uint64_t)c.n + j;
        *cnt = a.in_splits[ki];
        *off = a.in_offsets[ki];
    } else {
        *cnt = a.in_splits[k];
    }
}

/* The work that reads only parameters: the heap deltas into shared memory, from the
 * block's last threads (thread 0 claims meanwhile), and the fingerprint of the arguments
 * every member passes alike, by one thread (the others would only take issue slots from
 * it), in sh.fp for the header checks (an earlier call of this block read sh.fp before its
 * closing round). */
SYMM_DEV void a2a_prologue(const a2a_call &c)
{
    const a2a_args &a = c.a;
    for (int s = (int)(c.nthr - 1 - c.tid); !c.bad_args && s < c.n && s < SYMM_TM_DL;
         s += (int)c.nthr)
        c.sh.dl[s] = c.t.heap_delta[s];
    if (c.tid == 0) {
        uint64_t fp =
            symm_tm_a2a_args_fp((uint64_t)a.kind, (uint64_t)c.ne, a.row_bytes, a.major_align);
        fp = symm_tm_mix(fp, c.nparts);
        c.sh.fp = symm_tm_mix(fp, (uint64_t)c.n);
    }
}

/* Claims the duplicate for the block: 0 or the claim's error, the same in every thread;
 * *ep (thread 0): the episode counter; *owned (thread 0): the claim is this call's to
 * release. */
SYMM_DEV int a2a_claim(const a2a_call &c, int *owned, uint64_t *ep)
{
    using namespace symm_detail;
    __syncthreads(); /* nobody still reads the shared variables of an earlier call */
    if (c.tid == 0) {
        int rc = claim(c.t, SYMM_DEV_WHAT_MOE, holder_tag(SUB_BLOCK), ep);
        *owned = rc == 1;
        c.sh.claim = rc < 0 ? rc : 0;
    }
    __syncthreads();
    return c.sh.claim;
}

/* My table, in my copy of the workspace: (count, source offset) of every entry, the
 * offsets running sums for a dispatch or 1-D call, each count checked against
 * in_capacity (cnt0, off0: entry tid, loaded before the claim). Returns whether a count
 * does not fit, the same in every thread. */
SYMM_DEV int a2a_write_table(const a2a_call &c, uint64_t cnt0, uint64_t off0)
{
    const a2a_args &a = c.a;
    const uint64_t N = c.N, cap_in = c.cap_in;
    uint64_t *ws = (uint64_t *)a.ws + c.copy();
    int bad = 0;
    uint64_t run = 0; /* dispatch / 1-D: source offset of the chunk's first entry */
    if (N <= 32) {    /* one warp: a warp scan, no block barriers */
        if (c.warp == 0 && c.publish) {
            uint64_t cnt = cnt0, off = off0;
            if (a.kind == SYMM_TM_A2A_COMBINE) {
                if (cnt && (cnt > cap_in || off > cap_in - cnt)) bad = 1;
            } else {
                const uint64_t incl = warp_scan_sat(cnt, c.lane);
                off = incl - cnt; /* exact while incl <= cap_in, which is checked */
                if (incl > cap_in) bad = 1;
            }
            if (c.tid < N) {
                ws[SYMM_TM_A2A_HDR + 2 * c.tid] = cnt;
                ws[SYMM_TM_A2A_HDR + 2 * c.tid + 1] = off;
            }
        }
    }
    for (uint64_t c0 = 0; c.publish && N > 32 && c0 < N; c0 += c.nthr) {
        const uint64_t k = c0 + c.tid;
        uint64_t cnt = cnt0, off = off0, total;
        if (c0) a2a_load_entry(c, k, &cnt, &off);
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
    return __syncthreads_or(bad);
}

/* My table's header (my status, out_capacity, where my in lies, the fingerprint), and the
 * block's shared state for the rest of the call (ep: the episode counter of thread 0's
 * claim). Ends with a block barrier: the table is written (a round's release covers the
 * block's stores). */
SYMM_DEV void a2a_write_header(const a2a_call &c, int bad, uint64_t ep)
{
    const a2a_args &a = c.a;
    uint64_t *ws = (uint64_t *)a.ws + c.copy();
    const int mine = a.fail ? a.fail
                     : !bad ? 0
                     : a.in ? SYMM_ERR_OVERFLOW
                            : SYMM_ERR_INVALID_ARG;
    if (c.tid == 0) {
        ws[0] = (uint64_t)(int64_t)mine;
        ws[1] = a.out_capacity;
        /* where my in lies, from my workspace (the same offset in every member's heap):
         * readers find my rows through it, never through their own in */
        ws[2] = a.in ? (uint64_t)((uintptr_t)a.in - (uintptr_t)a.ws) : 0;
        ws[3] = c.sh.fp;
        c.sh.ep = ep;
        c.sh.rc = mine;
        c.sh.bad_s = c.n;
        c.sh.fail_m = c.n;
        c.sh.moved_me = 0;
    }
    __syncthreads();
}

/* Member s's copy of the table this block uses, as mapped here. */
SYMM_DEV const uint64_t *a2a_wsp(const a2a_call &c, int s)
{
    const uint64_t *wsb = (const uint64_t *)c.a.ws + c.copy();
    return (const uint64_t *)((const char *)wsb +
                              (s < SYMM_TM_DL ? c.sh.dl[s] : c.t.heap_delta[s]));
}

/* Window w0 of my column: (count, source offset) of output entries [w0, w0 + wn), by
 * threads first, first + step, ... */
SYMM_DEV void a2a_load_window(const a2a_call &c, uint64_t w0, uint64_t wn, uint32_t first,
                              uint32_t step)
{
    using symm_detail::ldcg;
    const bool dispatch = c.a.kind == SYMM_TM_A2A_DISPATCH;
    for (uint64_t w = first; w < wn; w += step) {
        /* output entry o: dispatch o = e * n + s, else o = s * ne + e (32-bit) */
        uint32_t o = (uint32_t)(w0 + w), q = o / (uint32_t)c.inner(),
                 r = o % (uint32_t)c.inner();
        int s = dispatch ? (int)r : (int)q;
        int e = dispatch ? (int)q : (int)r;
        const uint64_t *tb = a2a_wsp(c, s) + SYMM_TM_A2A_HDR + 2 * ((uint64_t)c.me * c.ne + e);
        uint64_t cnt = ldcg(tb), so = ldcg(tb + 1);
        c.sh.cnt[w] = cnt;
        c.sh.src[w] = so;
        c.sh.sm[w] = s;
    }
}

/* What the layout carries from one window to the next (valid in warp 0): rows moved and
 * padding so far, and the moved position where the current group began. */
struct a2a_carry {
    uint64_t moved, pad, gsm;
};

/* The layout of output entries [w0, w0 + wn) (warp 0): destination and moved positions,
 * my chunks of each entry (c1, c1 + nparts, ... <= cl; chunk c holds moved rows
 * [c * R, (c + 1) * R)), the list of entries with chunks of mine; with store, part 0 also
 * writes out_splits / out_offsets. No overflow once the capacities agree (with early, a
 * failed verdict discards whatever this computed). */
SYMM_DEV void a2a_layout_window(const a2a_call &c, a2a_carry &cy, uint64_t w0, uint64_t wn,
                                uint64_t R, bool store)
{
    const a2a_args &a = c.a;
    a2a_shared &sh = c.sh;
    const uint32_t lane = c.lane;
    int c_list = 0;
    for (uint64_t c0 = w0; c0 < w0 + wn; c0 += 32) {
        uint64_t o = c0 + lane;
        bool valid = o < w0 + wn;
        uint64_t cnt = valid ? sh.cnt[o - w0] : 0;
        uint32_t j = (uint32_t)o % (uint32_t)c.inner();
        uint64_t incl = warp_incl_scan(cnt, lane);
        uint64_t mov = cy.moved + incl - cnt;
        /* moved position where this entry's group began */
        uint32_t gl = j <= lane ? lane - j : lane;
        uint64_t gsm_in = __shfl_sync(0xffffffffu, mov, gl);
        uint64_t gsm = j <= lane ? gsm_in : cy.gsm;
        uint64_t pad = 0;
        if (valid && c.pad_mode() && j == (uint32_t)c.inner() - 1) {
            uint64_t len = mov + cnt - gsm, al = len;
            symm_tm_aligned_len(len, a.major_align, &al);
            pad = al - len;
        }
        uint64_t pincl = warp_incl_scan(pad, lane);
        uint64_t dst = mov + cy.pad + pincl - pad;
        bool has = false;
        if (valid) {
            uint64_t c1, cl; /* the lanes divide at once */
            symm_tm_moe_my_chunks(mov, cnt, R, c.part, c.nparts, &c1, &cl);
            sh.c1[o - w0] = c1;
            sh.cl[o - w0] = cl;
            sh.dst[o - w0] = dst;
            sh.mov[o - w0] = mov;
            has = c1 <= cl;
            if (store && c.part == 0) {
                if (a.out_splits) a.out_splits[o] = cnt;
                if (a.out_offsets) a.out_offsets[o] = dst;
            }
        }
        /* the entries with chunks of mine, in order */
        const uint32_t hm = __ballot_sync(0xffffffffu, has);
        if (has) sh.list[c_list + __popc(hm & ((1u << lane) - 1u))] = (uint16_t)(o - w0);
        c_list += __popc(hm);
        uint32_t starts = __ballot_sync(0xffffffffu, valid && j == 0);
        if (starts) cy.gsm = __shfl_sync(0xffffffffu, mov, 31 - __clz(starts));
        cy.moved += __shfl_sync(0xffffffffu, incl, 31);
        cy.pad += __shfl_sync(0xffffffffu, pincl, 31);
    }
    if (lane == 0) {
        sh.total = cy.moved + cy.pad;
        sh.nlist = c_list;
    }
}

/* Every member's header: its status and fingerprint checked (the first bad one in
 * sh.bad_s), and where its in lies kept in sh.in. */
SYMM_DEV void a2a_check_headers(const a2a_call &c)
{
    using symm_detail::ldcg;
    const uint64_t fp = c.sh.fp;
    for (int s = (int)(c.roles() ? c.lane : c.tid); s < c.n;
         s += (int)(c.roles() ? 32 : c.nthr)) {
        const uint64_t *h = a2a_wsp(c, s);
        uint64_t st = ldcg(h), io = ldcg(h + 2), f = ldcg(h + 3);
        if (st || f != fp) atomicMin(&c.sh.bad_s, s);
        if (s < SYMM_TM_DL) c.sh.in[s] = c.sh.dl[s] + (int64_t)io;
    }
}

/* The early layout (warp 0, my column in one window, loaded): rows per chunk from the
 * column's sum (in sh.R), then the layout, its outputs held back until the verdict. */
SYMM_DEV void a2a_layout_early(const a2a_call &c, a2a_carry &cy)
{
    __syncwarp();
    uint64_t mv = 0; /* my column's sum: the rows I receive */
    for (uint64_t w = c.lane; w < c.N; w += 32)
        mv = sat_add(mv, c.sh.cnt[w]);
    mv = warp_sum_sat(mv);
    const uint64_t R = symm_tm_moe_chunk_rows(mv, c.a.row_bytes, c.nparts);
    if (c.lane == 0) c.sh.R = R;
    a2a_layout_window(c, cy, 0, c.N, R, false);
}

/* The capacity check, one member per warp of the warps it takes (all, or all but the
 * first and the last with roles): the rows every member would receive, aligned, against
 * its out_capacity (the first that does not fit in sh.fail_m), and the rows I receive
 * (sh.moved_me). */
SYMM_DEV void a2a_check_capacities(const a2a_call &c)
{
    using symm_detail::ldcg;
    const int n = c.n, ne = c.ne;
    const uint32_t warp = c.warp, lane = c.lane;
    const uint32_t need_first = c.roles() ? 1 : 0,
                   need_warps = c.roles() ? c.nwarps - 2 : c.nwarps;
    for (int m = (int)(warp - need_first);
         warp >= need_first && m < n && warp < need_first + need_warps; m += (int)need_warps) {
        uint64_t need = 0, moved = 0, cap = ldcg(a2a_wsp(c, m) + 1);
        for (int e = (int)lane; e < ne; e += 32) {
            uint64_t len = 0;
            for (int s = 0; s < n; s++)
                len = sat_add(
                    len, ldcg(a2a_wsp(c, s) + SYMM_TM_A2A_HDR + 2 * ((uint64_t)m * ne + e)));
            uint64_t al;
            if (len == UINT64_MAX ||
                symm_tm_aligned_len(len, c.pad_mode() ? c.a.major_align : 0, &al))
                al = UINT64_MAX;
            need = sat_add(need, al);
            moved = sat_add(moved, len);
        }
        need = warp_sum_sat(need);
        moved = warp_sum_sat(moved);
        if (lane == 0) {
            if (need == UINT64_MAX || need > cap) atomicMin(&c.sh.fail_m, m);
            if (m == c.me) c.sh.moved_me = moved;
        }
    }
}

/* The verdict, in sh.rc: my own status, else the first member whose status or arguments
 * are bad, else the first member whose output would not fit; and rows per chunk (sh.R)
 * where the early layout did not set them. The same everywhere (every thread reads the
 * same shared values, so all take the same branch). */
SYMM_DEV void a2a_verdict(const a2a_call &c)
{
    a2a_shared &sh = c.sh;
    const int n = c.n;
    if (sh.rc || sh.bad_s < n || sh.fail_m < n || !c.early()) {
        if (c.tid == 0 && !sh.rc && sh.bad_s < n) {
            const int64_t st = (int64_t)symm_detail::ldcg(a2a_wsp(c, sh.bad_s));
            sh.rc = st ? (int)st : SYMM_ERR_MISMATCH;
        }
        if (c.tid == 0 && !sh.rc && sh.fail_m < n) sh.rc = SYMM_ERR_OVERFLOW;
        /* rows per chunk, by one thread for all */
        if (c.tid == 0 && !c.early())
            sh.R = symm_tm_moe_chunk_rows(sh.moved_me, c.a.row_bytes, c.nparts);
        __syncthreads();
    }
}

/* My chunks of the entries of the window laid out in sh (the whole block): each chunk
 * copied from its source's in, found through the place that source published. */
SYMM_DEV void a2a_copy_chunks(const a2a_call &c, uint64_t R)
{
    const a2a_args &a = c.a;
    const a2a_shared &sh = c.sh;
    const uint64_t rb = a.row_bytes;
    for (int i = 0, ni = sh.nlist; i < ni; i++) {
        const uint32_t w = sh.list[i];
        const uint64_t m0 = sh.mov[w], cn = sh.cnt[w], cl = sh.cl[w];
        const int s = sh.sm[w];
        /* source s's in, from my a.ws (as s published it) */
        const int64_t sin =
            s < SYMM_TM_DL ? sh.in[s]
                           : c.t.heap_delta[s] + (int64_t)symm_detail::ldcg(a2a_wsp(c, s) + 2);
        for (uint64_t ch = sh.c1[w]; ch <= cl; ch += c.nparts) {
            uint64_t a0 = ch * R > m0 ? ch * R : m0;
            uint64_t a1 = (ch + 1) * R < m0 + cn ? (ch + 1) * R : m0 + cn;
            uint64_t d0 = sh.dst[w] + (a0 - m0), r = a1 - a0;
            if (d0 > a.out_capacity || r > a.out_capacity - d0) continue; /* cannot happen */
            const uint8_t *src = (const uint8_t *)a.ws + sin + (sh.src[w] + (a0 - m0)) * rb;
            copy_from_peer((uint8_t *)a.out + d0 * rb, src, r * rb);
        }
    }
}

/* After a good verdict: the layout in windows (warp 0; done by a2a_layout_early with
 * early) and the copy of my chunks of the moved rows (the whole block); part 0 writes the
 * outputs. */
SYMM_DEV void a2a_copy(const a2a_call &c, a2a_carry &cy)
{
    const a2a_args &a = c.a;
    const a2a_shared &sh = c.sh;
    const uint64_t N = c.N, R = sh.R;
    if (c.early() && c.part == 0) { /* the outputs the early layout held back */
        for (uint64_t o = c.tid; o < N; o += c.nthr) {
            if (a.out_splits) a.out_splits[o] = sh.cnt[o];
            if (a.out_offsets) a.out_offsets[o] = sh.dst[o];
        }
    }
    for (uint64_t w0 = 0; w0 < N; w0 += SYMM_TM_WIN) {
        uint64_t wn = N - w0 < SYMM_TM_WIN ? N - w0 : SYMM_TM_WIN;
        if (!c.early()) {
            if (w0) {
                a2a_load_window(c, w0, wn, c.tid, c.nthr);
                __syncthreads();
            }
            if (c.warp == 0) a2a_layout_window(c, cy, w0, wn, R, true);
            __syncthreads();
        }
        a2a_copy_chunks(c, R);
        if (!c.early()) __syncthreads();
    }
    if (c.part == 0 && c.tid == 0 && a.out_rows) *a.out_rows = sh.total;
}

/* The MoE body. The work before the copy is a chain of round trips to memory on every
 * block's critical path; it is kept to: the claim and the loads of my splits in flight
 * together; my table written; one round; one parallel pass of loads (every member's
 * header, the counts of the capacity check, the first window of my column); the layout
 * in shared memory. Block `part` uses copy part % SYMM_TM_A2A_COPIES of the table, so
 * that few blocks share a line of it. Every branch that returns early or skips a barrier
 * depends on values that are the same in every thread of the block. */
SYMM_DEV int a2a_impl(const symm_dev_team_t &t, const a2a_args &a, uint32_t part,
                      uint32_t nparts)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_MOE;
    __shared__ a2a_shared sh;
    const a2a_call c(t, a, sh, part, nparts);
    const uint32_t tid = c.tid;
    a2a_prologue(c);
    /* The stream form: everything above reads only parameters, so it overlaps the end of
     * the kernel before this one on the stream; from here on memory it wrote is read. */
    if (a.trigger) pdl_wait();
    uint64_t cnt0, off0; /* issued before the claim, so that both are in flight together */
    a2a_load_entry(c, tid, &cnt0, &off0);
    int owned = 0;
    uint64_t ep0 = 0;
    const int claimed = a2a_claim(c, &owned, &ep0);
    if (claimed) return claimed;
    if (c.bad_args) {
        if (part == 0 && tid == 0) record(t, SYMM_ERR_INVALID_ARG, W, 0, 0);
        leave_block(t, owned);
        return SYMM_ERR_INVALID_ARG;
    }
    const int bad = a2a_write_table(c, cnt0, off0);
    a2a_write_header(c, bad, ep0);
    const uint64_t ep = sh.ep;
    int rc = round_block_at(t, ep + 1, W); /* every member's table and input are ready */
    if (rc) {
        leave_block_at(t, owned, ep + 1);
        return rc;
    }
    if (a.trigger) pdl_launch_dependents(); /* see tile_impl */

    /* One pass of loads: headers, the counts of the capacity check, window 0; with roles,
     * each on its own warps so that the loads are in flight together. */
    a2a_carry cy = {0, 0, 0};
    if (!c.roles() || c.warp == c.nwarps - 1) a2a_check_headers(c);
    if (!c.roles() || c.warp == 0)
        a2a_load_window(c, 0, c.N < SYMM_TM_WIN ? c.N : SYMM_TM_WIN, c.roles() ? c.lane : tid,
                        c.roles() ? 32 : c.nthr);
    if (c.early() && c.warp == 0) a2a_layout_early(c, cy);
    a2a_check_capacities(c);
    __syncthreads();
    a2a_verdict(c);
    if (!sh.rc) a2a_copy(c, cy);
    if (sh.rc && part == 0 && tid == 0)
        record(t, sh.rc, W, sh.fail_m < c.n ? (uint32_t)sh.fail_m : 0xffffffffu, 0);
    const int agreed = sh.rc;
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
    const symm_tm::a2a_args a =
        symm_tm::a2a_args_make(SYMM_TM_A2A_1D, out, out_capacity, in, in_capacity, in_splits,
                               nullptr, 1, row_bytes, 0, out_splits, out_offsets, out_rows, ws);
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
    const symm_tm::a2a_args a = symm_tm::a2a_args_make(
        SYMM_TM_A2A_DISPATCH, out, out_capacity, in, in_capacity, in_splits, nullptr, ne,
        row_bytes, major_align, out_splits, out_offsets, out_rows, ws);
    return symm_tm::a2a_impl(t, a, part, nparts);
}
SYMM_DEV int symm_dev_moe_combine_block(const symm_dev_team_t &t, void *out,
                                        size_t out_capacity, const void *in, size_t in_capacity,
                                        const size_t *in_splits, const size_t *in_offsets,
                                        int ne, size_t row_bytes, size_t *out_splits,
                                        size_t *out_offsets, size_t *out_rows, void *ws,
                                        uint32_t part, uint32_t nparts)
{
    const symm_tm::a2a_args a = symm_tm::a2a_args_make(
        SYMM_TM_A2A_COMBINE, out, out_capacity, in, in_capacity, in_splits, in_offsets, ne,
        row_bytes, 0, out_splits, out_offsets, out_rows, ws);
    return symm_tm::a2a_impl(t, a, part, nparts);
}

#endif
