/* tile__funcs.cuh — bodies of the device tile reduce calls of symm_device.cuh (rooted,
 * all, multi-root): block `part` of every member handles its share of the tile, as a CPU
 * worker of symm_tile_reduce_worker does. Included by symm_device.cuh.
 *
 * Peers' tiles are read in place with plain loads through the peer mappings (16-byte
 * vectors where all addresses of a row piece agree modulo 16), never NVLink multicast. A
 * block's two synchronisation rounds (inputs ready; band finished) are on its own
 * duplicate. Rooted and multi-root: where a root's out is in the symmetric heap and the
 * tiles take the flat vector path, every member reduces a share of it straight into that
 * out; otherwise each root pulls its tile from every member into its out (which then may
 * be any memory of its GPU). Allreduce: member m of block b reduces its share of band b
 * and stores it into every member's out. */
#ifndef SYMM_IMPL_TILE__FUNCS_CUH
#define SYMM_IMPL_TILE__FUNCS_CUH

#include "symm/impl/block__funcs.cuh"
#include "symm/impl/dev__funcs.cuh"
#include "symm/impl/tile_moe__common.h"
#include "symm/impl/type_op__funcs.cuh"

namespace symm_tm
{

enum { TILE_MULTI = 0, TILE_ALL = 1 };

template <typename T> SYMM_DEV const T *at(const void *base, int64_t delta, uint64_t byte_off)
{
    return (const T *)((const uint8_t *)base + delta + byte_off);
}

/* One row piece of len elements: src (my address of the in row piece; member m's is
 * src + delta[m]) reduced in team order into dst (mine only, or every member's when
 * all_dst). Thread tid takes the items j with (cum + j) % nthr == tid, so consecutive
 * short rows keep every thread busy; *cum advances by the piece's items. */
/* tile_piece for fp8: the members' values folded in float, rounded once (fp8_of). */
template <int TY, int OP>
SYMM_DEV void tile_piece_fp8(const symm_dev_team_t &t, const uint8_t *src, uint8_t *dst,
                             bool all_dst, uint64_t len, bool deltas16, uint64_t *cum)
{
    typedef fp8_of<TY> F;
    const uint32_t tid = symm_detail::thread_linear(), nthr = symm_detail::block_threads();
    const int n = t.n;
    const int64_t *dl = t.heap_delta;
    int vec = deltas16 && (((uintptr_t)src ^ (uintptr_t)dst) & 15) == 0;
    uint64_t head, nvec, tail;
    symm_tm_split16((uintptr_t)src, len, 1, vec, &head, &nvec, &tail);
    uint64_t items = head + nvec + tail;
    uint64_t j = (tid + nthr - (uint32_t)(*cum % nthr)) % nthr;
    *cum += items;
    for (; j < items; j += nthr) {
        if (j >= head && j < head + nvec) {
            const uint64_t off = head + (j - head) * 16;
            uint8_t x[16];
            float acc[16];
            uint4 q = __ldcg(at<uint4>(src, dl[0], off));
            memcpy(x, &q, 16);
#pragma unroll
            for (int e = 0; e < 16; e++)
                acc[e] = F::in(x[e]);
            for (int m = 1; m < n; m++) {
                q = __ldcg(at<uint4>(src, dl[m], off));
                memcpy(x, &q, 16);
#pragma unroll
                for (int e = 0; e < 16; e++)
                    acc[e] = symm_plan_op<OP, float>(acc[e], F::in(x[e]));
            }
#pragma unroll
            for (int e = 0; e < 16; e++)
                x[e] = F::out(acc[e]);
            memcpy(&q, x, 16);
            for (int m = all_dst ? 0 : n - 1; m < n; m++)
                *(uint4 *)(dst + (all_dst ? dl[m] : 0) + off) = q;
        } else {
            const uint64_t off = j < head ? j : head + nvec * 16 + (j - head - nvec);
            float a = F::in(symm_detail::ldcg(at<uint8_t>(src, dl[0], off)));
            for (int m = 1; m < n; m++)
                a = symm_plan_op<OP, float>(
                    a, F::in(symm_detail::ldcg(at<uint8_t>(src, dl[m], off))));
            const uint8_t r = F::out(a);
            for (int m = all_dst ? 0 : n - 1; m < n; m++)
                *(dst + (all_dst ? dl[m] : 0) + off) = r;
        }
    }
}

template <int TY, int OP>
SYMM_DEV void tile_piece(const symm_dev_team_t &t, const uint8_t *src, uint8_t *dst,
                         bool all_dst, uint64_t len, bool deltas16, uint64_t *cum)
{
    if constexpr (fp8_of<TY>::yes) {
        tile_piece_fp8<TY, OP>(t, src, dst, all_dst, len, deltas16, cum);
        return;
    }
    typedef typename ty<TY>::T T;
    constexpr uint32_t ES = sizeof(T), V = 16 / ES;
    const uint32_t tid = symm_detail::thread_linear(), nthr = symm_detail::block_threads();
    const int n = t.n;
    const int64_t *dl = t.heap_delta;
    int vec = deltas16 && (((uintptr_t)src ^ (uintptr_t)dst) & 15) == 0;
    uint64_t head, nvec, tail;
    symm_tm_split16((uintptr_t)src, len, ES, vec, &head, &nvec, &tail);
    uint64_t items = head + nvec + tail;
    uint64_t j = (tid + nthr - (uint32_t)(*cum % nthr)) % nthr;
    *cum += items;
    for (; j < items; j += nthr) {
        if (j >= head && j < head + nvec) {
            uint64_t off = (head + (j - head) * V) * ES;
            uint4 q = __ldcg(at<uint4>(src, dl[0], off));
            T acc[V];
            memcpy(acc, &q, 16);
            for (int m = 1; m < n; m += 4) {
                uint4 r[4];
#pragma unroll
                for (int k = 0; k < 4; k++)
                    if (m + k < n) r[k] = __ldcg(at<uint4>(src, dl[m + k], off));
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    if (m + k >= n) break;
                    T b[V];
                    memcpy(b, &r[k], 16);
#pragma unroll
                    for (uint32_t e = 0; e < V; e++)
                        acc[e] = combine<TY, OP>(acc[e], b[e]);
                }
            }
            memcpy(&q, acc, 16);
            if (all_dst) {
                for (int m = 0; m < n; m++)
                    *(uint4 *)(dst + dl[m] + off) = q;
            } else {
                *(uint4 *)(dst + off) = q;
            }
        } else {
            uint64_t k = j < head ? j : head + nvec * V + (j - head - nvec);
            uint64_t off = k * ES;
            T a = symm_detail::ldcg(at<T>(src, dl[0], off));
            for (int m = 1; m < n; m++)
                a = combine<TY, OP>(a, symm_detail::ldcg(at<T>(src, dl[m], off)));
            if (all_dst) {
                for (int m = 0; m < n; m++)
                    *(T *)(dst + dl[m] + off) = a;
            } else {
                *(T *)(dst + off) = a;
            }
        }
    }
}

/* Units [u0, u1) of tile in -> out. */
template <int TY, int OP>
SYMM_DEV void tile_units(const symm_dev_team_t &t, const symm_tile_t &out,
                         const symm_tile_t &in, bool all_dst, uint64_t u0, uint64_t u1,
                         bool deltas16)
{
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    uint64_t cum = 0;
    for (uint64_t u = u0; u < u1; u++) {
        uint64_t r0, r1, c0, c1;
        symm_tm_tile_unit(in.rows, in.cols, ES, u, &r0, &r1, &c0, &c1);
        for (uint64_t r = r0; r < r1; r++) {
            const uint8_t *s = (const uint8_t *)in.base + (r * in.ld + c0) * ES;
            uint8_t *d = (uint8_t *)out.base + (r * out.ld + c0) * ES;
            tile_piece<TY, OP>(t, s, d, all_dst, c1 - c0, deltas16, &cum);
        }
    }
}

/* The fast form of tile_units for tiles whose rows all start 16-byte aligned (in and out,
 * on every member) and hold whole 16-byte vectors: the tile is a flat sequence of
 * vectors (row-major, vpr = cols / V per row) cut into chunks of TILE_CHUNK vectors.
 * Chunk c belongs to block c % nparts and, within it, to share (c / nparts) % nshares
 * (an allreduce's member; 1 share for a root): the blocks of every member sweep the tile
 * together, so the GPU's memory sees one moving window, as in a grid-stride copy, rather
 * than nparts x n separate streams (contiguous bands per block). Every thread keeps U
 * vectors of a member in flight at once (all loads issued before any use, stores after
 * all loads: the general loop above has a single load in flight per thread, because a
 * store may alias the next iteration's loads). Same combination order as tile_piece
 * (member 0 first). */
#define SYMM_TM_TILE_CHUNK 2048u
template <int TY, int OP, int U, typename I>
SYMM_DEV void tile_flat(const symm_dev_team_t &t, const symm_tile_t &out, const symm_tile_t &in,
                        bool all_dst, I total, uint32_t part, uint32_t nparts, uint32_t share,
                        uint32_t nshares)
{
    typedef typename ty<TY>::T T;
    constexpr uint32_t ES = sizeof(T), V = 16 / ES;
    const I tid = (I)symm_detail::thread_linear(), nthr = (I)symm_detail::block_threads();
    const int n = t.n;
    const int64_t *dl = t.heap_delta;
    const I vpr = (I)(in.cols / V);
    const uint64_t ild = (uint64_t)in.ld * ES, old = (uint64_t)out.ld * ES;
    const uint8_t *ib = (const uint8_t *)in.base;
    uint8_t *ob = (uint8_t *)out.base;
    const uint64_t stride = (uint64_t)nparts * nshares;
    const uint64_t nchunks = (total + SYMM_TM_TILE_CHUNK - 1) / SYMM_TM_TILE_CHUNK;
    for (uint64_t c = (uint64_t)share * nparts + part; c < nchunks; c += stride) {
        const I lo = (I)(c * SYMM_TM_TILE_CHUNK);
        const I v1 = total - lo < (I)SYMM_TM_TILE_CHUNK ? total : lo + (I)SYMM_TM_TILE_CHUNK;
        for (I i0 = lo + tid; i0 < v1; i0 += (I)U * nthr) {
            I rr[U], cc[U]; /* row, and vector within the row, of item k */
            uint4 acc[U];
#pragma unroll
            for (int k = 0; k < U; k++) {
                I i = i0 + (I)k * nthr;
                rr[k] = i < v1 ? i / vpr : 0;
                cc[k] = i < v1 ? i - rr[k] * vpr : 0;
            }
            const uint8_t *p0 = ib + dl[0];
#pragma unroll
            for (int k = 0; k < U; k++)
                if (i0 + (I)k * nthr < v1)
                    acc[k] = ld_once((const uint4 *)(p0 + (uint64_t)rr[k] * ild) + cc[k]);
            for (int m = 1; m < n; m++) {
                const uint8_t *pm = ib + dl[m];
                uint4 b[U];
#pragma unroll
                for (int k = 0; k < U; k++)
                    if (i0 + (I)k * nthr < v1)
                        b[k] = ld_once((const uint4 *)(pm + (uint64_t)rr[k] * ild) + cc[k]);
#pragma unroll
                for (int k = 0; k < U; k++) {
                    if (i0 + (I)k * nthr >= v1) continue;
                    T x[V], y[V];
                    memcpy(x, &acc[k], 16);
                    memcpy(y, &b[k], 16);
#pragma unroll
                    for (uint32_t e = 0; e < V; e++)
                        x[e] = combine<TY, OP>(x[e], y[e]);
                    memcpy(&acc[k], x, 16);
                }
            }
            for (int m = all_dst ? 0 : n - 1; m < n; m++) {
                uint8_t *q = ob + (all_dst ? dl[m] : 0);
#pragma unroll
                for (int k = 0; k < U; k++)
                    if (i0 + (I)k * nthr < v1)
                        st_once((uint4 *)(q + (uint64_t)rr[k] * old) + cc[k], acc[k]);
            }
        }
    }
}

/* tile_flat for fp8: U vectors of 16 elements per thread, folded in float over the members
 * and rounded once (fp8_of). */
template <int TY, int OP, int U, typename I>
SYMM_DEV void tile_flat_fp8(const symm_dev_team_t &t, const symm_tile_t &out,
                            const symm_tile_t &in, bool all_dst, I total, uint32_t part,
                            uint32_t nparts, uint32_t share, uint32_t nshares)
{
    typedef fp8_of<TY> F;
    const I tid = (I)symm_detail::thread_linear(), nthr = (I)symm_detail::block_threads();
    const int n = t.n;
    const int64_t *dl = t.heap_delta;
    const I vpr = (I)(in.cols / 16);
    const uint64_t ild = (uint64_t)in.ld, old = (uint64_t)out.ld;
    const uint8_t *ib = (const uint8_t *)in.base;
    uint8_t *ob = (uint8_t *)out.base;
    const uint64_t stride = (uint64_t)nparts * nshares;
    const uint64_t nchunks = (total + SYMM_TM_TILE_CHUNK - 1) / SYMM_TM_TILE_CHUNK;
    for (uint64_t c = (uint64_t)share * nparts + part; c < nchunks; c += stride) {
        const I lo = (I)(c * SYMM_TM_TILE_CHUNK);
        const I v1 = total - lo < (I)SYMM_TM_TILE_CHUNK ? total : lo + (I)SYMM_TM_TILE_CHUNK;
        for (I i0 = lo + tid; i0 < v1; i0 += (I)U * nthr) {
            I rr[U], cc[U];
            float acc[U][16];
#pragma unroll
            for (int k = 0; k < U; k++) {
                I i = i0 + (I)k * nthr;
                rr[k] = i < v1 ? i / vpr : 0;
                cc[k] = i < v1 ? i - rr[k] * vpr : 0;
            }
            for (int m = 0; m < n; m++) {
                const uint8_t *pm = ib + dl[m];
                uint4 b[U];
#pragma unroll
                for (int k = 0; k < U; k++)
                    if (i0 + (I)k * nthr < v1)
                        b[k] = ld_once((const uint4 *)(pm + (uint64_t)rr[k] * ild) + cc[k]);
#pragma unroll
                for (int k = 0; k < U; k++) {
                    if (i0 + (I)k * nthr >= v1) continue;
                    uint8_t y[16];
                    memcpy(y, &b[k], 16);
#pragma unroll
                    for (int e = 0; e < 16; e++)
                        acc[k][e] =
                            m ? symm_plan_op<OP, float>(acc[k][e], F::in(y[e])) : F::in(y[e]);
                }
            }
#pragma unroll
            for (int k = 0; k < U; k++) {
                if (i0 + (I)k * nthr >= v1) continue;
                uint8_t x[16];
#pragma unroll
                for (int e = 0; e < 16; e++)
                    x[e] = F::out(acc[k][e]);
                uint4 q;
                memcpy(&q, x, 16);
                for (int m = all_dst ? 0 : n - 1; m < n; m++)
                    st_once((uint4 *)(ob + (all_dst ? dl[m] : 0) + (uint64_t)rr[k] * old) +
                                cc[k],
                            q);
            }
        }
    }
}

/* 1 if tile_flat applies to in -> out (d16: every heap delta is a multiple of 16); the
 * host wrappers ask too, to launch the kernel compiled for that path. */
SYMM_HD bool tile_flat_ok(const symm_tile_t &out, const symm_tile_t &in, size_t es, bool d16)
{
    return d16 && ((uintptr_t)in.base & 15) == 0 && ((uintptr_t)out.base & 15) == 0 &&
           (in.ld * es) % 16 == 0 && (out.ld * es) % 16 == 0 && (in.cols * es) % 16 == 0;
}

/* The tile's total vectors, in 32-bit index arithmetic where it fits. */
template <int TY, int OP>
SYMM_DEV void tile_flat_range(const symm_dev_team_t &t, const symm_tile_t &out,
                              const symm_tile_t &in, bool all_dst, uint64_t total,
                              uint32_t part, uint32_t nparts, uint32_t share, uint32_t nshares)
{
    constexpr int U = 4; /* 4 vectors per thread per member: more spills registers */
    if constexpr (fp8_of<TY>::yes) { /* 16 float accumulators per vector */
        if (total + SYMM_TM_TILE_CHUNK <= UINT32_MAX)
            tile_flat_fp8<TY, OP, 2, uint32_t>(t, out, in, all_dst, (uint32_t)total, part,
                                               nparts, share, nshares);
        else
            tile_flat_fp8<TY, OP, 2, uint64_t>(t, out, in, all_dst, total, part, nparts, share,
                                               nshares);
    } else if (total + SYMM_TM_TILE_CHUNK <= UINT32_MAX) {
        tile_flat<TY, OP, U, uint32_t>(t, out, in, all_dst, (uint32_t)total, part, nparts,
                                       share, nshares);
    } else {
        tile_flat<TY, OP, U, uint64_t>(t, out, in, all_dst, total, part, nparts, share,
                                       nshares);
    }
}

/* tile_flat_range and tile_units for the symm_op_t op (one instantiation per op). */
template <int TY>
SYMM_DEV void tile_flat_op(const symm_dev_team_t &t, int op, const symm_tile_t &out,
                           const symm_tile_t &in, bool all_dst, uint64_t total, uint32_t part,
                           uint32_t nparts, uint32_t share, uint32_t nshares)
{
    symm_detail::op_dispatch<ty<TY>::integer>(op, [&](auto o) {
        tile_flat_range<TY, decltype(o)::value>(t, out, in, all_dst, total, part, nparts, share,
                                                nshares);
    });
}
template <int TY>
SYMM_DEV void tile_units_op(const symm_dev_team_t &t, int op, const symm_tile_t &out,
                            const symm_tile_t &in, bool all_dst, uint64_t u0, uint64_t u1,
                            bool d16)
{
    symm_detail::op_dispatch<ty<TY>::integer>(op, [&](auto o) {
        tile_units<TY, decltype(o)::value>(t, out, in, all_dst, u0, u1, d16);
    });
}

SYMM_DEV bool tile_empty(const symm_tile_t &x)
{
    return symm_plan_tile_empty(&x);
}
/* Shape and alignment of one tile (empty tiles are always fine): the host's checks that
 * need no arithmetic (symm_plan_tile_span ran on the host). */
SYMM_DEV bool tile_ok(const symm_tile_t &x, uint32_t es)
{
    return tile_empty(x) ||
           (symm_plan_tile_shape(&x) == SYMM_PLAN_TILE_OK && ((uintptr_t)x.base % es) == 0);
}

/* Shared rooted reduction. A root whose out lies in the GPU symmetric heap (out_symm: the
 * host wrapper checked it, or the caller vouches) publishes in its mailbox, before the
 * first round, the byte offset of its out from its tile in and out's ld; after the round
 * every member reads the roots' mailboxes and, where a root's out is shared, reduces its
 * share of that tile (the allreduce's split of the flat path) straight into it, through
 * the peer mapping, instead of the root reading all n tiles alone: n members' blocks share
 * the reads. It needs the flat path everywhere: every tile flat (a property of the
 * symmetric tiles and the heaps: every member sees it alike), and every root's kernel
 * carrying the flat path (a root publishes it; a root whose out cannot take the flat
 * path, or whose out failed its checks, turns sharing off for the whole call, and every
 * root pulls its own tile). At most SYMM_TM_SHARE_MAX roots (one warp reads the
 * mailboxes); beyond, roots pull alone. Mailbox word 1: (out.ld << 24) | (round-1 episode
 * & 0x3fffff) << 2 | TM_MB_* (the episode guards against a stale word: members that
 * disagree on the roots fall back to pulling alone instead of writing anywhere). */
#define SYMM_TM_SHARE_MAX 32
enum { TM_MB_FLAT = 1, TM_MB_SHARED = 2 };

enum { TILE_PATH_ANY = 0, TILE_PATH_FLAT = 1, TILE_PATH_UNITS = 2 };

/* One call of tile_impl (below), as its steps read it. */
struct tile_call {
    const symm_dev_team_t &t;
    int kind;
    const symm_tile_t &out;
    const symm_tile_t *in;
    const int *roots;
    int nroots, op;
    uint32_t part, nparts;
    bool work, out_symm;
};

/* The arguments every member passes alike: every member gives up alike, without a round. */
template <int TY> SYMM_DEV int tile_check_alike(const tile_call &c)
{
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    const symm_tile_t *in = c.in;
    const int n = c.t.n;
    int bad = 0;
    if (!op_valid(TY, c.op) || c.nparts == 0 || c.part >= c.nparts)
        bad = SYMM_ERR_INVALID_ARG;
    else if (c.kind == TILE_ALL) {
        if (!tile_ok(in[0], ES) || !tile_ok(c.out, ES))
            bad = SYMM_ERR_INVALID_ARG;
        else if (!tile_empty(in[0]) && (c.out.rows != in[0].rows || c.out.cols != in[0].cols))
            bad = SYMM_ERR_INVALID_ARG;
    } else if (c.nroots < 0 || c.nroots > n || (c.nroots && (!in || !c.roots))) {
        bad = SYMM_ERR_INVALID_ARG;
    } else {
        for (int k = 0; k < c.nroots && !bad; k++) {
            if (c.roots[k] < 0 || c.roots[k] >= n)
                bad = SYMM_ERR_PE_OUT_OF_RANGE;
            else if (!tile_ok(in[k], ES))
                bad = SYMM_ERR_INVALID_ARG;
            for (int j = 0; j < k && !bad; j++)
                if (c.roots[j] == c.roots[k]) bad = SYMM_ERR_INVALID_ARG;
        }
    }
    return bad;
}

/* The tile this member is the root of (-1: none, or the arguments are bad). */
SYMM_DEV int tile_mine(const tile_call &c, int bad)
{
    int mine = -1;
    if (c.kind == TILE_MULTI && !bad)
        for (int k = 0; k < c.nroots; k++)
            if (c.roots[k] == c.t.me) mine = k;
    return mine;
}

/* A root's own out: checked here, failing on that root only (it still syncs). */
template <uint32_t ES> SYMM_DEV int tile_check_mine(const tile_call &c, int mine)
{
    const symm_tile_t &out = c.out;
    if (mine >= 0 && !tile_empty(c.in[mine]) &&
        (!tile_ok(out, ES) || out.rows != c.in[mine].rows || out.cols != c.in[mine].cols))
        return SYMM_ERR_INVALID_ARG;
    return 0;
}

/* Whether every heap delta is a multiple of 16, which the vector loads need (taken as
 * true for PATH FLAT: the host wrapper has checked). */
template <int PATH> SYMM_DEV bool tile_heaps16(const symm_dev_team_t &t)
{
    bool d16 = PATH == TILE_PATH_FLAT;
    if (PATH == TILE_PATH_ANY || PATH == TILE_PATH_UNITS) {
        d16 = true;
        for (int m = 0; m < t.n; m++)
            d16 = d16 && (t.heap_delta[m] & 15) == 0;
    }
    return d16;
}

/* Whether the call may share rooted reductions (above): every tile flat, alike on every
 * member. */
template <uint32_t ES, int PATH>
SYMM_DEV bool tile_can_share(const tile_call &c, int bad, bool d16)
{
    bool can_share = PATH != TILE_PATH_UNITS && c.kind == TILE_MULTI && !bad && d16 &&
                     c.nroots > 0 && c.nroots <= SYMM_TM_SHARE_MAX;
    for (int k = 0; k < c.nroots && can_share; k++)
        can_share = tile_empty(c.in[k]) || tile_flat_ok(c.in[k], c.in[k], ES, true);
    return can_share;
}

/* What this member publishes as a root: mailbox word 1 without its episode (0: nothing),
 * and in *mb_off word 0. TM_MB_FLAT when its kernel can share, TM_MB_SHARED and out's ld
 * when its out can be shared. */
template <uint32_t ES>
SYMM_DEV uint64_t tile_mailbox_word(const tile_call &c, int mine, bool can_share, int local,
                                    uint64_t *mb_off)
{
    uint64_t mb_word = 0;
    *mb_off = 0;
    if (mine >= 0 && can_share && c.work && !local) {
        mb_word = TM_MB_FLAT;
        const symm_tile_t &mi = c.in[mine], &out = c.out;
        if (c.out_symm && !tile_empty(mi) && tile_flat_ok(out, mi, ES, true) &&
            out.ld < (1ull << 40)) {
            mb_word |= TM_MB_SHARED | ((uint64_t)out.ld << 24);
            *mb_off = (uint64_t)((const uint8_t *)out.base - (const uint8_t *)mi.base);
        }
    }
    return mb_word;
}

/* Claims the duplicate for the block and, for a root (mine >= 0), fills its mailbox before
 * the first round's release (the peers read it after that round). Returns 0 or the
 * claim's error, the same in every thread; *ep: the episode counter, so that the rounds
 * of the call are ep + 1 and ep + 2 with no load of the counter before each
 * (round_block's); *owned (thread 0): the claim is this call's to release. */
SYMM_DEV int tile_claim(const symm_dev_team_t &t, int mine, uint64_t mb_off, uint64_t mb_word,
                        int *owned, uint64_t *ep)
{
    using namespace symm_detail;
    __shared__ int s_trc;
    __shared__ uint64_t s_tep;
    __syncthreads(); /* nobody still reads s_trc / s_tep of an earlier call */
    if (thread_linear() == 0) {
        uint64_t e;
        const int c = claim(t, SYMM_DEV_WHAT_TILE, holder_tag(SUB_BLOCK), &e);
        *owned = c == 1;
        s_trc = c < 0 ? c : 0;
        s_tep = e;
        if (c >= 0 && mine >= 0) {
            uint64_t *mb = mailbox_of(t, t.me);
            st_relaxed_gpu(mb, mb_off);
            st_relaxed_gpu(mb + 1, mb_word | ((e + 1) & 0x3fffffu) << 2);
        }
    }
    __syncthreads();
    *ep = s_tep;
    return s_trc;
}

/* The shared rooted reductions, after the first round (ep + 1): warp 0 reads the roots'
 * mailboxes, then the block reduces this member's share of each shared tile straight into
 * its root's out. Returns the tiles shared (bit k: in[k]); none when can_share is false,
 * or when a root's word is stale or lacks TM_MB_FLAT (every member then sees the same). */
template <int TY, int PATH>
SYMM_DEV uint32_t tile_reduce_shared(const tile_call &c, uint64_t ep, bool can_share)
{
    using namespace symm_detail;
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    const symm_dev_team_t &t = c.t;
    const uint32_t tid = thread_linear();
    __shared__ uint32_t s_share;
    __shared__ symm_tile_t s_dst[SYMM_TM_SHARE_MAX]; /* a shared tile's out, mapped here */
    if (!can_share) return 0;
    if (tid < 32) {
        const int k = (int)tid;
        bool ok = true, sh = false;
        if (k < c.nroots) {
            const uint64_t *mb = mailbox_of(t, c.roots[k]);
            const uint64_t off = ld_flag(t, mb), w = ld_flag(t, mb + 1);
            ok = ((w >> 2) & 0x3fffffu) == ((ep + 1) & 0x3fffffu) && (w & TM_MB_FLAT);
            sh = ok && (w & TM_MB_SHARED);
            const symm_tile_t &src = c.in[k];
            s_dst[k] = {(uint8_t *)src.base + t.heap_delta[c.roots[k]] + (int64_t)off, src.rows,
                        src.cols, (size_t)(w >> 24)};
        }
        const bool all_ok = __all_sync(0xffffffffu, ok);
        const uint32_t m = __ballot_sync(0xffffffffu, sh);
        if (tid == 0) s_share = all_ok ? m : 0;
    }
    __syncthreads();
    const uint32_t share_mask = s_share;
    if constexpr (PATH != TILE_PATH_UNITS)
        for (int k = 0; k < c.nroots && share_mask; k++)
            if ((share_mask >> k) & 1)
                tile_flat_op<TY>(t, c.op, s_dst[k], c.in[k], false,
                                 c.in[k].rows * (c.in[k].cols * ES / 16), c.part, c.nparts,
                                 (uint32_t)t.me, (uint32_t)t.n);
    return share_mask;
}

/* The allreduce's share of its tile, or a root's own tile (in[mine]) reduced alone. Every
 * member decides the path alike: the tiles are symmetric and d16 is a property of the
 * heaps, so an allreduce's members split bands alike. */
template <int TY, int PATH>
SYMM_DEV void tile_reduce_own(const tile_call &c, int mine, bool d16)
{
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    const symm_dev_team_t &t = c.t;
    const int n = t.n, me = t.me;
    const bool all = c.kind == TILE_ALL;
    const symm_tile_t &src = c.in[all ? 0 : mine], &out = c.out;
    const bool flat = PATH == TILE_PATH_FLAT    ? true
                      : PATH == TILE_PATH_UNITS ? false
                                                : tile_flat_ok(out, src, ES, d16);
    if constexpr (PATH != TILE_PATH_UNITS)
        if (flat)
            tile_flat_op<TY>(t, c.op, out, src, all,
                             tile_empty(src) ? 0 : src.rows * (src.cols * ES / 16), c.part,
                             c.nparts, all ? (uint32_t)me : 0, all ? (uint32_t)n : 1);
    if constexpr (PATH != TILE_PATH_FLAT)
        if (!flat) {
            uint64_t u = symm_tm_tile_units(src.rows, src.cols, ES);
            uint64_t lo, hi, mlo = 0, mhi;
            symm_plan_band(u, c.nparts, c.part, &lo, &hi);
            mhi = hi - lo;
            if (all) symm_plan_band(hi - lo, (uint64_t)n, (uint64_t)me, &mlo, &mhi);
            tile_units_op<TY>(t, c.op, out, src, all, lo + mlo, lo + mhi, d16);
        }
}

/* The body of every tile form. kind TILE_ALL: in[0] -> every member's out. TILE_MULTI:
 * in[k] -> out of member roots[k]. work == false: take part in the rounds only (the host
 * wrapper of a root whose out failed its checks). out_symm: this member's out (when it is
 * a root) is in the GPU symmetric heap, so that the members may share its reduction (see
 * above). PATH: TILE_PATH_ANY decides per call between the flat vector path and the
 * general one; a host wrapper that has checked tile_flat_ok's conditions itself picks one
 * (each kernel then carries only its own code and keeps fewer registers). Every branch
 * that returns early or skips a round depends on values that are the same in every thread
 * of the block (the arguments, or what thread 0 put in shared memory before a barrier). */
template <int TY, int PATH = TILE_PATH_ANY>
SYMM_DEV int tile_impl(const symm_dev_team_t &t, int kind, const symm_tile_t &out,
                       const symm_tile_t *in, const int *roots, int nroots, int op,
                       uint32_t part, uint32_t nparts, bool work, bool out_symm = false,
                       bool trigger = false)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_TILE;
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    const tile_call c = {t, kind, out, in, roots, nroots, op, part, nparts, work, out_symm};
    const int bad = tile_check_alike<TY>(c);
    const int mine = tile_mine(c, bad);
    const int local = tile_check_mine<ES>(c, mine);
    const bool d16 = tile_heaps16<PATH>(t);
    const bool can_share = tile_can_share<ES, PATH>(c, bad, d16);
    uint64_t mb_off;
    const uint64_t mb_word = tile_mailbox_word<ES>(c, mine, can_share, local, &mb_off);

    /* The stream form: everything above reads only parameters, so it overlaps the end of
     * the kernel before this one on the stream; from here on memory it wrote is touched. */
    if (trigger) pdl_wait();
    int owned = 0;
    uint64_t ep;
    int rc = tile_claim(t, mine, mb_off, mb_word, &owned, &ep);
    if (rc) return rc;
    if (bad) {
        if (part == 0 && thread_linear() == 0) record(t, bad, W, 0, 0);
        leave_block_at(t, owned, ep);
        return bad;
    }
    uint64_t ep_end = ep + 1;          /* the episode this call leaves */
    rc = round_block_at(t, ep + 1, W); /* every member's input is ready */
    /* The stream form lets the next kernel on the stream launch now: every member's
     * blocks of this call are resident (they passed the round), so blocks of the next
     * kernel waiting for SMs cannot keep a member of this call from running. */
    if (trigger) pdl_launch_dependents();
    if (!rc) {
        const uint32_t share_mask = tile_reduce_shared<TY, PATH>(c, ep, can_share);
        /* The allreduce's share; a root's own tile, when not shared. */
        if (work && !local &&
            (kind == TILE_ALL || (mine >= 0 && !(share_mask && ((share_mask >> mine) & 1)))))
            tile_reduce_own<TY, PATH>(c, mine, d16);
        __syncthreads();
        /* Every member runs the closing round, whatever happened above. */
        ep_end = ep + 2;
        rc = round_block_at(t, ep + 2, W); /* band written everywhere; inputs no longer read */
    }
    if (!rc && local) {
        if (part == 0 && thread_linear() == 0) record(t, local, W, (uint32_t)t.me, 0);
        rc = local;
    }
    leave_block_at(t, owned, ep_end);
    return rc;
}

} // namespace symm_tm

/* ================================================================ public device calls */
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_block(const symm_dev_team_t &t, symm_tile_t out,
                                        symm_tile_t in, symm_op_t op, int root, uint32_t part,
                                        uint32_t nparts, bool out_symmetric)
{
    return symm_tm::tile_impl<symm_tm::type_of<T>::value>(
        t, symm_tm::TILE_MULTI, out, &in, &root, 1, op, part, nparts, true, out_symmetric);
}
template <typename T>
SYMM_DEV int symm_dev_tile_allreduce_block(const symm_dev_team_t &t, symm_tile_t out,
                                           symm_tile_t in, symm_op_t op, uint32_t part,
                                           uint32_t nparts)
{
    return symm_tm::tile_impl<symm_tm::type_of<T>::value>(t, symm_tm::TILE_ALL, out, &in,
                                                          nullptr, 0, op, part, nparts, true);
}
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_multi_block(const symm_dev_team_t &t, symm_tile_t out,
                                              const symm_tile_t *in, const int *roots,
                                              int nroots, symm_op_t op, uint32_t part,
                                              uint32_t nparts, bool out_symmetric)
{
    return symm_tm::tile_impl<symm_tm::type_of<T>::value>(
        t, symm_tm::TILE_MULTI, out, in, roots, nroots, op, part, nparts, true, out_symmetric);
}

#endif
