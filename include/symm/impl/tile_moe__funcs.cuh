/* tile_moe__funcs.cuh — device tile reduce (rooted, all, multi-root) and the MoE
 * all-to-all-v family (1-D, dispatch with major_align, combine) at block scope: each block
 * of a kernel calls with its own pool duplicate and handles band `part` of `nparts`, as a
 * CPU worker of symm_tile_reduce_worker / symm_moe_dispatch_worker does. Results are
 * bytewise those of the CPU calls of symm.h (same combination order, member 0 first; fp16
 * and bf16 rounded after every step, exactly as the CPU kernels round).
 *
 * Usage in a user's kernel (every thread of the block calls; every member passes the same
 * arguments, part = blockIdx.x, nparts = gridDim.x, the same grid on every member):
 *
 *     symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
 *     int rc = symm_dev_tile_allreduce_block<float>(t, out, in, SYMM_OP_SUM,
 *                                                   blockIdx.x, gridDim.x);
 *     rc = symm_dev_moe_dispatch_block(t, out, cap, in, in_cap, splits, ne, row_bytes,
 *                                      align, out_splits, out_offsets, &rows, ws,
 *                                      blockIdx.x, gridDim.x);
 *
 * Tiles: symm_tile_t of symm.h, bases in the GPU symmetric heap (a rooted out may be any
 * memory of the root's GPU), element-aligned; peers' tiles are read in place with plain
 * loads through the peer mappings (16-byte vectors where all addresses of a row piece
 * agree modulo 16), never NVLink multicast. A block's two synchronisation rounds (inputs
 * ready; band finished) are on its own duplicate. Rooted and multi-root: where a root's out
 * is in the symmetric heap and the tiles take the flat vector path, every member reduces a
 * share of it straight into that out; otherwise each root pulls its tile from every member
 * into its out (which then may be any memory of its GPU). Allreduce: member
 * m of block b reduces its share of band b and stores it into every member's out.
 * Arguments every member passes alike are checked alike, so every member returns the same
 * error without communicating; a root whose own out is bad still takes part in both
 * rounds (nothing is written anywhere) and returns the error.
 *
 * MoE: the split tables never go through the host. Every block of every member writes its
 * (count, source offset) table, its out_capacity, where its in lies, its status (its own
 * in_splits checked against in_capacity) and a fingerprint of the common arguments into
 * its symmetric workspace `ws` (symm_tm_a2a_ws_bytes(n, ne) bytes in the GPU symmetric
 * heap; block b writes copy b % SYMM_TM_A2A_COPIES, all copies hold the same values),
 * then a round; each block reads, in one pass of parallel loads, every member's header,
 * the counts of the capacity check and its column of every table, agrees on validity and
 * on every member's capacity (the same verdict everywhere: any failure fails every member
 * and nothing is written), lays out its output (warp scans, in windows of entries:
 * n * ne < 2^31) and copies its chunks of the moved rows (output order, padding excluded)
 * with 16-byte vectors where aligned. Readers find a source's rows through the place that
 * source published, never through their own in: members may pass different symmetric
 * objects as in, or NULL when they send no rows (a member whose splits send rows from a
 * NULL in fails every member with SYMM_ERR_INVALID_ARG). Part 0 writes out_splits /
 * out_offsets / *out_rows (device memory, each may be NULL). A closing round keeps inputs
 * and workspaces alive until every member has read. Two calls in one kernel that follow
 * each other must use different workspaces (a peer's other block may still be reading
 * the first). */
#ifndef SYMM_IMPL_TILE_MOE__FUNCS_CUH
#define SYMM_IMPL_TILE_MOE__FUNCS_CUH

#include "symm/impl/tile_moe__common.h"
#include "symm_device.cuh"

#ifdef __CUDACC__

namespace symm_tm
{

/* ---------------------------------------------------------------- types and ops */
template <int TY> struct ty;
#define SYMM_TM_TY_(E, T_, U_, INT_, SIGNED_)                                                  \
    template <> struct ty<E> {                                                                 \
        typedef T_ T;                                                                          \
        typedef U_ U;                                                                          \
        static constexpr bool integer = INT_;                                                  \
        static constexpr bool is_signed = SIGNED_;                                             \
    };
SYMM_TM_TY_(SYMM_INT8, int8_t, uint8_t, true, true)
SYMM_TM_TY_(SYMM_INT16, int16_t, uint16_t, true, true)
SYMM_TM_TY_(SYMM_INT32, int32_t, uint32_t, true, true)
SYMM_TM_TY_(SYMM_INT64, int64_t, uint64_t, true, true)
SYMM_TM_TY_(SYMM_UINT8, uint8_t, uint8_t, true, false)
SYMM_TM_TY_(SYMM_UINT16, uint16_t, uint16_t, true, false)
SYMM_TM_TY_(SYMM_UINT32, uint32_t, uint32_t, true, false)
SYMM_TM_TY_(SYMM_UINT64, uint64_t, uint64_t, true, false)
SYMM_TM_TY_(SYMM_FLOAT, float, uint32_t, false, true)
SYMM_TM_TY_(SYMM_DOUBLE, double, uint64_t, false, true)
SYMM_TM_TY_(SYMM_FP16, uint16_t, uint16_t, false, true)
SYMM_TM_TY_(SYMM_BF16, uint16_t, uint16_t, false, true)
#undef SYMM_TM_TY_

/* The symm_type_t of a C++ element type (for the typed public calls). */
template <typename T> struct type_of;
template <> struct type_of<int8_t> {
    static constexpr int value = SYMM_INT8;
};
template <> struct type_of<int16_t> {
    static constexpr int value = SYMM_INT16;
};
template <> struct type_of<int32_t> {
    static constexpr int value = SYMM_INT32;
};
template <> struct type_of<long> {
    static constexpr int value = sizeof(long) == 8 ? SYMM_INT64 : SYMM_INT32;
};
template <> struct type_of<long long> {
    static constexpr int value = SYMM_INT64;
};
template <> struct type_of<uint8_t> {
    static constexpr int value = SYMM_UINT8;
};
template <> struct type_of<uint16_t> {
    static constexpr int value = SYMM_UINT16;
};
template <> struct type_of<uint32_t> {
    static constexpr int value = SYMM_UINT32;
};
template <> struct type_of<unsigned long> {
    static constexpr int value = sizeof(long) == 8 ? SYMM_UINT64 : SYMM_UINT32;
};
template <> struct type_of<unsigned long long> {
    static constexpr int value = SYMM_UINT64;
};
template <> struct type_of<float> {
    static constexpr int value = SYMM_FLOAT;
};
template <> struct type_of<double> {
    static constexpr int value = SYMM_DOUBLE;
};
template <> struct type_of<__half> {
    static constexpr int value = SYMM_FP16;
};
template <> struct type_of<__nv_bfloat16> {
    static constexpr int value = SYMM_BF16;
};

/* a op b with a the running result (member 0 first): the rule of plan__combine.h, as
 * src/coll/reduce_ops.c applies it. Integer sum, prod, and, or, xor compute in 64 bits on
 * the sign-extended values, as the CPU does; min and max compare in the type itself. */
template <int TY, int OP>
SYMM_TM_HD typename ty<TY>::T combine(typename ty<TY>::T a, typename ty<TY>::T b)
{
    typedef typename ty<TY>::T T;
    typedef typename ty<TY>::U U;
    if constexpr (TY == SYMM_FP16 || TY == SYMM_BF16)
        return symm_plan_half_combine(TY == SYMM_BF16, OP, a, b);
    else if constexpr (!ty<TY>::integer || OP == SYMM_OP_MIN || OP == SYMM_OP_MAX)
        return symm_plan_op<OP, T>(a, b);
    else
        return (T)(U)symm_plan_op<OP, uint64_t>((uint64_t)a, (uint64_t)b);
}

/* 1 if op is defined on type (and, or, xor on integers only). */
SYMM_TM_HD int op_valid(int type, int op)
{
    if (type < 0 || type >= SYMM_TYPE_COUNT || op < 0 || op >= SYMM_OP_COUNT) return 0;
    int flt =
        type == SYMM_FLOAT || type == SYMM_DOUBLE || type == SYMM_FP16 || type == SYMM_BF16;
    return !(flt && op >= SYMM_OP_AND);
}

/* ---------------------------------------------------------------- tile reduce */
enum { TILE_MULTI = 0, TILE_ALL = 1 };

template <typename T> SYMM_DEV const T *at(const void *base, int64_t delta, uint64_t byte_off)
{
    return (const T *)((const uint8_t *)base + delta + byte_off);
}

/* One row piece of len elements: src (my address of the in row piece; member m's is
 * src + delta[m]) reduced in team order into dst (mine only, or every member's when
 * all_dst). Thread tid takes the items j with (cum + j) % nthr == tid, so consecutive
 * short rows keep every thread busy; *cum advances by the piece's items. */
template <int TY, int OP>
SYMM_DEV void tile_piece(const symm_dev_team_t &t, const uint8_t *src, uint8_t *dst,
                         bool all_dst, uint64_t len, bool deltas16, uint64_t *cum)
{
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

/* Loads and stores of data each block touches once: a peer's input (read after a round's
 * acquire, so these weak loads see the peer's writes) and the outputs. Both with the
 * streaming hint (.cs: evict first), so that the streamed bytes do not push the kernels'
 * code, the split tables and the round flags out of the L2 between calls; the hint pays
 * only on both sides together. */
SYMM_DEV uint4 ld_once(const uint4 *p)
{
    return __ldcs(p);
}
SYMM_DEV void st_once(uint4 *p, const uint4 &v)
{
    __stcs(p, v);
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

/* 1 if tile_flat applies to in -> out (d16: every heap delta is a multiple of 16); the
 * host wrappers ask too, to launch the kernel compiled for that path. */
static __host__ __device__ __forceinline__ bool
tile_flat_ok(const symm_tile_t &out, const symm_tile_t &in, size_t es, bool d16)
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
    if (total + SYMM_TM_TILE_CHUNK <= UINT32_MAX)
        tile_flat<TY, OP, U, uint32_t>(t, out, in, all_dst, (uint32_t)total, part, nparts,
                                       share, nshares);
    else
        tile_flat<TY, OP, U, uint64_t>(t, out, in, all_dst, total, part, nparts, share,
                                       nshares);
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

/* The body of every tile form. kind TILE_ALL: in[0] -> every member's out. TILE_MULTI:
 * in[k] -> out of member roots[k]. work == false: take part in the rounds only (the host
 * wrapper of a root whose out failed its checks). out_symm: this member's out (when it is
 * a root) is in the GPU symmetric heap, so that the members may share its reduction (see
 * above). PATH: TILE_PATH_ANY decides per call between the flat vector path and the
 * general one; a host wrapper that has checked tile_flat_ok's conditions itself picks one
 * (each kernel then carries only its own code and keeps fewer registers). */
enum { TILE_PATH_ANY = 0, TILE_PATH_FLAT = 1, TILE_PATH_UNITS = 2 };
template <int TY, int PATH = TILE_PATH_ANY>
SYMM_DEV int tile_impl(const symm_dev_team_t &t, int kind, const symm_tile_t &out,
                       const symm_tile_t *in, const int *roots, int nroots, int op,
                       uint32_t part, uint32_t nparts, bool work, bool out_symm = false,
                       bool trigger = false)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_TILE;
    constexpr uint32_t ES = sizeof(typename ty<TY>::T);
    const uint32_t tid = thread_linear(), nthr = block_threads();
    const int n = t.n, me = t.me;
    /* Arguments every member passes alike: every member gives up alike, without a round. */
    int bad = 0;
    if (!op_valid(TY, op) || nparts == 0 || part >= nparts)
        bad = SYMM_ERR_INVALID_ARG;
    else if (kind == TILE_ALL) {
        if (!tile_ok(in[0], ES) || !tile_ok(out, ES))
            bad = SYMM_ERR_INVALID_ARG;
        else if (!tile_empty(in[0]) && (out.rows != in[0].rows || out.cols != in[0].cols))
            bad = SYMM_ERR_INVALID_ARG;
    } else if (nroots < 0 || nroots > n || (nroots && (!in || !roots))) {
        bad = SYMM_ERR_INVALID_ARG;
    } else {
        for (int k = 0; k < nroots && !bad; k++) {
            if (roots[k] < 0 || roots[k] >= n)
                bad = SYMM_ERR_PE_OUT_OF_RANGE;
            else if (!tile_ok(in[k], ES))
                bad = SYMM_ERR_INVALID_ARG;
            for (int j = 0; j < k && !bad; j++)
                if (roots[j] == roots[k]) bad = SYMM_ERR_INVALID_ARG;
        }
    }
    /* A root's own out: checked here, failing on that root only (it still syncs). */
    int mine = -1, local = 0;
    if (kind == TILE_MULTI && !bad)
        for (int k = 0; k < nroots; k++)
            if (roots[k] == me) mine = k;
    if (mine >= 0 && !tile_empty(in[mine]) &&
        (!tile_ok(out, ES) || out.rows != in[mine].rows || out.cols != in[mine].cols))
        local = SYMM_ERR_INVALID_ARG;
    bool d16 = PATH == TILE_PATH_FLAT;
    if (PATH == TILE_PATH_ANY || PATH == TILE_PATH_UNITS) {
        d16 = true;
        for (int m = 0; m < n; m++)
            d16 = d16 && (t.heap_delta[m] & 15) == 0;
    }
    /* Shared rooted reduction (above): every tile flat, alike on every member. */
    bool can_share = PATH != TILE_PATH_UNITS && kind == TILE_MULTI && !bad && d16 &&
                     nroots > 0 && nroots <= SYMM_TM_SHARE_MAX;
    for (int k = 0; k < nroots && can_share; k++)
        can_share = tile_empty(in[k]) || tile_flat_ok(in[k], in[k], ES, true);
    /* What this member publishes as a root: its kernel can share, its out can be shared. */
    uint64_t mb_off = 0, mb_word = 0;
    if (mine >= 0 && can_share && work && !local) {
        mb_word = TM_MB_FLAT;
        const symm_tile_t &mi = in[mine];
        if (out_symm && !tile_empty(mi) && tile_flat_ok(out, mi, ES, true) &&
            out.ld < (1ull << 40)) {
            mb_word |= TM_MB_SHARED | ((uint64_t)out.ld << 24);
            mb_off = (uint64_t)((const uint8_t *)out.base - (const uint8_t *)mi.base);
        }
    }

    /* The stream form: everything above reads only parameters, so it overlaps the end of
     * the kernel before this one on the stream; from here on memory it wrote is touched. */
    if (trigger) pdl_wait();
    /* The claim returns the episode counter: the rounds below are ep + 1 and ep + 2, with
     * no load of the counter before each (round_block's). */
    __shared__ int s_trc;
    __shared__ uint64_t s_tep;
    __syncthreads(); /* nobody still reads s_trc / s_tep of an earlier call */
    int owned = 0;
    if (tid == 0) {
        uint64_t e;
        const int c = claim(t, W, holder_tag(SUB_BLOCK), &e);
        owned = c == 1;
        s_trc = c < 0 ? c : 0;
        s_tep = e;
        /* before the round's release: the peers read it after the round */
        if (c >= 0 && mine >= 0) {
            uint64_t *mb = mailbox_of(t, me);
            st_relaxed_gpu(mb, mb_off);
            st_relaxed_gpu(mb + 1, mb_word | ((e + 1) & 0x3fffffu) << 2);
        }
    }
    __syncthreads();
    int rc = s_trc;
    if (rc) return rc;
    const uint64_t ep = s_tep;
    uint64_t ep_end = ep; /* the episode this call leaves */
    if (bad) {
        if (part == 0 && tid == 0) record(t, bad, W, 0, 0);
        leave_block_at(t, owned, ep_end);
        return bad;
    }
    ep_end = ep + 1;
    rc = round_block_at(t, ep + 1, W); /* every member's input is ready */
    /* The stream form lets the next kernel on the stream launch now: every member's
     * blocks of this call are resident (they passed the round), so blocks of the next
     * kernel waiting for SMs cannot keep a member of this call from running. */
    if (trigger) pdl_launch_dependents();
    /* The roots' mailboxes: which tiles every member reduces a share of (bit k). */
    __shared__ uint32_t s_share;
    __shared__ symm_tile_t s_dst[SYMM_TM_SHARE_MAX]; /* a shared tile's out, mapped here */
    uint32_t share_mask = 0;
    if (!rc && can_share) {
        if (tid < 32) {
            const int k = (int)tid;
            bool ok = true, sh = false;
            if (k < nroots) {
                const uint64_t *mb = mailbox_of(t, roots[k]);
                const uint64_t off = ld_flag(t, mb), w = ld_flag(t, mb + 1);
                ok = ((w >> 2) & 0x3fffffu) == ((ep + 1) & 0x3fffffu) && (w & TM_MB_FLAT);
                sh = ok && (w & TM_MB_SHARED);
                const symm_tile_t &src = in[k];
                s_dst[k] = {(uint8_t *)src.base + t.heap_delta[roots[k]] + (int64_t)off,
                            src.rows, src.cols, (size_t)(w >> 24)};
            }
            const bool all_ok = __all_sync(0xffffffffu, ok);
            const uint32_t m = __ballot_sync(0xffffffffu, sh);
            if (tid == 0) s_share = all_ok ? m : 0;
        }
        __syncthreads();
        share_mask = s_share;
    }
    if (!rc) {
        /* Each shared tile: this member's share, into the root's out. */
        if constexpr (PATH != TILE_PATH_UNITS)
            for (int k = 0; k < nroots && share_mask; k++)
                if ((share_mask >> k) & 1)
                    tile_flat_op<TY>(t, op, s_dst[k], in[k], false,
                                     in[k].rows * (in[k].cols * ES / 16), part, nparts,
                                     (uint32_t)me, (uint32_t)n);
        /* The allreduce's share; a root's own tile, when not shared. */
        const bool all = kind == TILE_ALL;
        if (work && !local &&
            (all || (mine >= 0 && !(share_mask && ((share_mask >> mine) & 1))))) {
            const symm_tile_t &src = in[all ? 0 : mine];
            /* Every member decides alike: the tiles are symmetric and d16 is a property of
             * the heaps, so an allreduce's members split bands alike. */
            const bool flat = PATH == TILE_PATH_FLAT    ? true
                              : PATH == TILE_PATH_UNITS ? false
                                                        : tile_flat_ok(out, src, ES, d16);
            if constexpr (PATH != TILE_PATH_UNITS)
                if (flat)
                    tile_flat_op<TY>(t, op, out, src, all,
                                     tile_empty(src) ? 0 : src.rows * (src.cols * ES / 16),
                                     part, nparts, all ? (uint32_t)me : 0,
                                     all ? (uint32_t)n : 1);
            if constexpr (PATH != TILE_PATH_FLAT)
                if (!flat) {
                    uint64_t u = symm_tm_tile_units(src.rows, src.cols, ES);
                    uint64_t lo, hi, mlo = 0, mhi;
                    symm_plan_band(u, nparts, part, &lo, &hi);
                    mhi = hi - lo;
                    if (all) symm_plan_band(hi - lo, (uint64_t)n, (uint64_t)me, &mlo, &mhi);
                    tile_units_op<TY>(t, op, out, src, all, lo + mlo, lo + mhi, d16);
                }
        }
        __syncthreads();
        /* Every member runs the closing round, whatever happened above. */
        ep_end = ep + 2;
        rc = round_block_at(t, ep + 2, W); /* band written everywhere; inputs no longer read */
    }
    if (!rc && local) {
        if (part == 0 && tid == 0) record(t, local, W, (uint32_t)me, 0);
        rc = local;
    }
    leave_block_at(t, owned, ep_end);
    return rc;
}

/* ---------------------------------------------------------------- all-to-all-v */
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

SYMM_DEV uint64_t warp_incl_scan(uint64_t v, uint32_t lane)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint64_t x = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (uint32_t)d) v += x;
    }
    return v;
}
SYMM_DEV uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}
/* Inclusive saturating sum over the warp's lanes, in lane order. */
SYMM_DEV uint64_t warp_scan_sat(uint64_t v, uint32_t lane)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint64_t x = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (uint32_t)d) v = sat_add(v, x);
    }
    return v;
}

/* Block copy of nbytes from a peer's memory (read at L2) into local memory: up to U
 * 16-byte loads in flight per thread before any store (a store could alias the next
 * loads, so the compiler would not overlap iterations by itself). U = 8: enough loads in
 * flight to cover a peer's latency within the MoE kernel's registers. */
SYMM_DEV void copy_from_peer(uint8_t *dst, const uint8_t *src, uint64_t nbytes)
{
    constexpr int U = 8;
    const uint32_t tid = symm_detail::thread_linear(), nthr = symm_detail::block_threads();
    int vec = (((uintptr_t)src ^ (uintptr_t)dst) & 15) == 0;
    uint64_t head, nvec, tail;
    symm_tm_split16((uintptr_t)src, nbytes, 1, vec, &head, &nvec, &tail);
    for (uint64_t i = tid; i < head; i += nthr)
        dst[i] = __ldcg(src + i);
    const uint4 *s4 = (const uint4 *)(src + head);
    uint4 *d4 = (uint4 *)(dst + head);
    for (uint64_t b = tid; b < nvec; b += U * (uint64_t)nthr) {
        uint4 v[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * (uint64_t)nthr < nvec) v[k] = ld_once(s4 + b + k * (uint64_t)nthr);
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * (uint64_t)nthr < nvec) st_once(d4 + b + k * (uint64_t)nthr, v[k]);
    }
    uint64_t t0 = head + nvec * 16;
    for (uint64_t k = tid; k < tail; k += nthr)
        dst[t0 + k] = __ldcg(src + t0 + k);
}

#define SYMM_TM_WIN 256
#define SYMM_TM_DL  32 /* heap deltas and sources' inputs kept in shared memory */

/* Inclusive saturating sum of v over the block's threads, in thread order (block size a
 * multiple of 32); *total: the block's sum. Every thread calls. */
SYMM_DEV uint64_t block_scan_sat(uint64_t v, uint64_t *total)
{
    using namespace symm_detail;
    __shared__ uint64_t s_w[32];
    const uint32_t tid = thread_linear(), lane = tid & 31u, warp = tid >> 5,
                   nw = block_threads() / 32;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint64_t x = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (uint32_t)d) v = sat_add(v, x);
    }
    if (lane == 31) s_w[warp] = v;
    __syncthreads();
    if (warp == 0) {
        uint64_t w = lane < nw ? s_w[lane] : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            uint64_t x = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= (uint32_t)d) w = sat_add(w, x);
        }
        if (lane < nw) s_w[lane] = w;
    }
    __syncthreads();
    if (warp) v = sat_add(v, s_w[warp - 1]);
    *total = s_w[nw - 1];
    __syncthreads(); /* s_w is free for the next call */
    return v;
}

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
/* T: int8_t .. uint64_t, float, double, __half, __nv_bfloat16. out_symmetric (rooted
 * forms): the caller vouches that a root's out is in the GPU symmetric heap, so that the
 * members may share its reduction (each reduces a share straight into it; without it the
 * root reads every member's tile alone). */
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_block(const symm_dev_team_t &t, symm_tile_t out,
                                        symm_tile_t in, symm_op_t op, int root, uint32_t part,
                                        uint32_t nparts, bool out_symmetric = false)
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
/* in[] and roots[] (nroots each) must be readable by the device (device memory, or a
 * __grid_constant__ kernel parameter). */
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_multi_block(const symm_dev_team_t &t, symm_tile_t out,
                                              const symm_tile_t *in, const int *roots,
                                              int nroots, symm_op_t op, uint32_t part,
                                              uint32_t nparts, bool out_symmetric = false)
{
    return symm_tm::tile_impl<symm_tm::type_of<T>::value>(
        t, symm_tm::TILE_MULTI, out, in, roots, nroots, op, part, nparts, true, out_symmetric);
}

/* MoE: the arguments of the CPU calls of symm.h, plus in_capacity (rows of in: every
 * member checks its own splits against it; ignored when in is NULL) and ws (see above).
 * in is symmetric, any object on each member, or NULL on a member that sends no rows. The count
 * arrays are in this GPU's memory, as size_t. */
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

#endif /* __CUDACC__ */
#endif
