/* coll.cu — collectives on GPU buffers enqueued on a CUDA stream, on three paths:
 * - the latency path, for what fits in a staging area of SYMM_CUDA_LL_BYTES (about 4 KiB
 *   contributed per member): one block on the team engine's staging duplicate; each
 *   member writes what it contributes into its staging area (by episode parity) as words
 *   that carry their episode, and reads the others' words as they come (a reduction in
 *   team order, or copies) into its own dest. One launch, no round before the reads.
 * - the engine, above that: the multi-block kernels of the tile reduce and of the copies
 *   (tile_moe.cu), block b on duplicate b of the team engine's pool. An allreduce is a
 *   one-row tile allreduce, a reduce a one-row tile reduce (the members share the work
 *   into root's dest), a reduce_scatter a multi-root tile reduce.
 * - one block of the team's own duplicate (symm_device.cuh's block calls) where the
 *   engine could not be made, or with SYMM_GPU_COLL_BLOCKS=1.
 * The host side validates the arguments (reported at once); device-side failures go to
 * the error buffer (symm_cuda_check). */
#include <vector>

#include "symm_device.cuh"

extern "C" {
#include "core/config.h"
#include "core/log.h"
}
#include "coll/cuda/cuda_coll.h"

namespace
{

const int kThreads = 512;

/* ---------------------------------------------------------------- latency path */
enum { LL_REDUCE, LL_BROADCAST, LL_FCOLLECT, LL_ALLTOALL };

/* The latency path's words. A member's staging area of episode ep (in the staging
 * duplicate: after the block's header and flags, gpu_block_size in team/cuda/pool.c, by
 * parity) is a run of 8-byte words, each carrying 4 bytes of data in its low half and the
 * low 32 bits of ep in its high half, written by one 64-bit store: a reader that sees the
 * episode in a word sees its data, so the data needs no round before it is read and no
 * fence after it is written. Word 0 carries no data; every member writes it and waits for
 * every other member's, which makes the area of episode ep + 2 safe to write: a member
 * writes its words of ep + 1 only once it has read everything of ep. The area only ever
 * holds words of this form, so a stale word shows an older episode, never this one.
 * Segments (a reduce_scatter's or an alltoall's blocks) start at a word. */
constexpr size_t kLLWords = SYMM_CUDA_LL_BYTES / 8;

__host__ __device__ constexpr size_t ll_seg_words(size_t bytes)
{
    return (bytes + 3) / 4;
}
/* Do nseg segments of seg_bytes fit in a staging area? */
__host__ __device__ constexpr bool ll_fits(size_t seg_bytes, size_t nseg)
{
    return seg_bytes <= 4 * kLLWords && nseg <= kLLWords &&
           1 + nseg * ll_seg_words(seg_bytes) <= kLLWords;
}

__device__ __forceinline__ uint64_t *ll_area(const symm_dev_team_t &t, int pe, uint64_t ep)
{
    const size_t hdr = (SYMM_DEV_BLOCK_HDR + 8 * (size_t)t.n + SYMM_DEV_BLOCK_ALIGN - 1) &
                       ~(size_t)(SYMM_DEV_BLOCK_ALIGN - 1);
    return (uint64_t *)(t.member_base[pe] + t.off + hdr +
                        (ep & 1) * (size_t)SYMM_CUDA_LL_BYTES);
}

/* Relaxed 64-bit accesses at the team's scope: each word is its own message. */
__device__ __forceinline__ uint64_t ll_ld(const symm_dev_team_t &t, const uint64_t *p)
{
    uint64_t v;
    if (t.flags & SYMM_DEV_ONE_GPU)
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    else
        asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void ll_st(const symm_dev_team_t &t, uint64_t *p, uint64_t v)
{
    if (t.flags & SYMM_DEV_ONE_GPU)
        asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
    else
        asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* v, loaded from p, once it carries episode ep32 (polled again until it does, bounded
 * by the team's timeout: SYMM_ERR_TIMEOUT naming member pe, recorded). */
__device__ int ll_until(const symm_dev_team_t &t, const uint64_t *p, uint32_t ep32,
                        uint32_t what, int pe, uint64_t *v)
{
    if ((uint32_t)(*v >> 32) == ep32) return 0;
    const uint64_t start = symm_detail::globaltimer();
    for (uint32_t i = 1;; i++) {
        *v = ll_ld(t, p);
        if ((uint32_t)(*v >> 32) == ep32) return 0;
        if ((i & 1023u) == 0 && symm_detail::globaltimer() - start > t.timeout_ns) {
            symm_detail::record(t, SYMM_ERR_TIMEOUT, what, (uint32_t)pe, 0);
            return SYMM_ERR_TIMEOUT;
        }
    }
}

/* Claims the staging duplicate (the claim's atomic gives the episode: no load of it) and
 * writes my words of episode *ep: nseg segments of seg_bytes of src, then word 0. Returns
 * 0 or the claim's error (the same in every thread); *held: the claim succeeded, and the
 * caller ends with ll_leave whatever happened after it. */
__device__ int ll_enter(const symm_dev_team_t &t, uint32_t what, const void *src,
                        size_t seg_bytes, size_t nseg, int *owned, uint64_t *ep, bool *held)
{
    using namespace symm_detail;
    __shared__ int s_rc;
    __shared__ uint64_t s_ep;
    if (thread_linear() == 0) {
        uint64_t e;
        const int c = claim(t, what, holder_tag(SUB_BLOCK), &e);
        *owned = c == 1;
        s_rc = c < 0 ? c : 0;
        s_ep = e + 1;
    }
    __syncthreads();
    *held = s_rc == 0;
    *ep = s_ep;
    if (!*held) return s_rc;
    uint64_t *w = ll_area(t, t.me, *ep);
    const uint64_t tag = (uint64_t)(uint32_t)*ep << 32;
    const uint8_t *s = (const uint8_t *)src;
    const size_t sw = ll_seg_words(seg_bytes), total = sw * nseg;
    for (size_t k = thread_linear(); k < total; k += block_threads()) {
        const size_t seg = k / sw, i = k - seg * sw, off = seg * seg_bytes + 4 * i;
        const size_t left = seg_bytes - 4 * i;
        uint32_t d = 0;
        if (left >= 4 && ((uintptr_t)(s + off) & 3) == 0)
            d = *(const uint32_t *)(s + off);
        else
            for (size_t b = 0; b < 4 && b < left; b++)
                d |= (uint32_t)s[off + b] << (8 * b);
        ll_st(t, w + 1 + k, tag | d);
    }
    if (thread_linear() == 0) ll_st(t, w, tag);
    /* src is read whole before anyone writes dest (in place) */
    __syncthreads();
    return 0;
}

/* Every other member's word 0 of episode ep: the round the words make (threads j). */
__device__ int ll_meet(const symm_dev_team_t &t, uint64_t ep, uint32_t what)
{
    int rc = 0;
    for (int j = (int)symm_detail::thread_linear(); j < t.n && !rc;
         j += (int)symm_detail::block_threads()) {
        if (j == t.me) continue;
        const uint64_t *p = ll_area(t, j, ep);
        uint64_t v = ll_ld(t, p);
        rc = ll_until(t, p, (uint32_t)ep, what, j, &v);
    }
    return rc;
}

/* Releases the duplicate at episode ep (or leaves ep for its holder). */
__device__ void ll_leave(const symm_dev_team_t &t, int owned, uint64_t ep, bool held)
{
    if (held) symm_detail::leave_block_at(t, owned, ep);
}

/* dest[i] = op over the members' segment seg (count elements of T), in team order: the
 * combine of the one-block form (reduce_slice), element for element. A thread takes a
 * unit of max(4, sizeof(T)) bytes: its words of up to kMax members are loaded before any
 * is waited for. */
template <typename T, int OP>
__device__ int ll_reduce(const symm_dev_team_t &t, T *dest, size_t seg, size_t count,
                         uint64_t ep, uint32_t what)
{
    using namespace symm_detail;
    typedef acc<T> C;
    constexpr int WPU = sizeof(T) >= 4 ? (int)(sizeof(T) / 4) : 1; /* words per unit */
    constexpr int EPU = sizeof(T) >= 4 ? 1 : (int)(4 / sizeof(T)); /* elements per unit */
    constexpr int kMax = 8;
    const uint32_t ep32 = (uint32_t)ep;
    const size_t units = (count + EPU - 1) / EPU,
                 first = 1 + seg * ll_seg_words(count * sizeof(T));
    int rc = 0;
    for (size_t u = thread_linear(); u < units && !rc; u += block_threads()) {
        typename C::type a[EPU];
        for (int j0 = 0; j0 < t.n && !rc; j0 += kMax) {
            uint64_t v[kMax][WPU];
#pragma unroll
            for (int j = 0; j < kMax; j++)
#pragma unroll
                for (int q = 0; q < WPU; q++)
                    if (j0 + j < t.n)
                        v[j][q] = ll_ld(t, ll_area(t, j0 + j, ep) + first + u * WPU + q);
#pragma unroll
            for (int j = 0; j < kMax; j++) {
                if (j0 + j >= t.n || rc) continue;
                uint32_t x[WPU];
#pragma unroll
                for (int q = 0; q < WPU; q++) {
                    rc |= ll_until(t, ll_area(t, j0 + j, ep) + first + u * WPU + q, ep32, what,
                                   j0 + j, &v[j][q]);
                    x[q] = (uint32_t)v[j][q];
                }
                T e[EPU];
                memcpy(e, x, sizeof e);
#pragma unroll
                for (int k = 0; k < EPU; k++)
                    a[k] = j0 + j == 0
                               ? C::in(e[k])
                               : C::step(symm_plan_op<OP, typename C::type>(a[k], C::in(e[k])));
            }
        }
        if (rc) break;
#pragma unroll
        for (int k = 0; k < EPU; k++)
            if (u * EPU + k < count) dest[u * EPU + k] = C::out(a[k]);
    }
    return rc;
}

/* Segment seg (nbytes) of member j's words into dest + j * nbytes for every member j
 * (only j == from where from >= 0), a word per thread over (member, word). */
__device__ int ll_gather(const symm_dev_team_t &t, uint8_t *dest, size_t seg, size_t nbytes,
                         int from, uint64_t ep, uint32_t what)
{
    using namespace symm_detail;
    const size_t sw = ll_seg_words(nbytes), members = from >= 0 ? 1 : (size_t)t.n;
    const size_t total = sw * members;
    int rc = 0;
    for (size_t k = thread_linear(); k < total && !rc; k += block_threads()) {
        const int j = from >= 0 ? from : (int)(k / sw);
        const size_t i = from >= 0 ? k : k - (size_t)j * sw;
        const uint64_t *p = ll_area(t, j, ep) + 1 + seg * sw + i;
        uint64_t v = ll_ld(t, p);
        rc = ll_until(t, p, (uint32_t)ep, what, j, &v);
        uint8_t *d = dest + (from >= 0 ? 0 : (size_t)j * nbytes) + 4 * i;
        const size_t left = nbytes - 4 * i;
        if (left >= 4 && ((uintptr_t)d & 3) == 0)
            *(uint32_t *)d = (uint32_t)v;
        else
            for (size_t b = 0; b < 4 && b < left; b++)
                d[b] = (uint8_t)(v >> (8 * b));
    }
    return rc;
}

/* root >= 0: reduce; root == -1: allreduce; root == -2: reduce_scatter (src holds n
 * blocks of count elements, member r reduces block r). */
template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_ll_reduce(symm_dev_team_t t, T *dest, const T *src, size_t count, symm_op_t op, int root)
{
    using namespace symm_detail;
    const uint32_t W = root == -1 ? SYMM_DEV_WHAT_ALLREDUCE : SYMM_DEV_WHAT_REDUCE;
    const bool scatter = root == -2;
    int owned = 0;
    uint64_t ep;
    bool held;
    int rc =
        ll_enter(t, W, src, count * sizeof(T), scatter ? (size_t)t.n : 1, &owned, &ep, &held);
    if (!rc && (root < 0 || root == t.me))
        op_dispatch<is_int_type<T>::value>(op, [&](auto o) {
            rc = ll_reduce<T, decltype(o)::value>(t, dest, scatter ? (size_t)t.me : 0, count,
                                                  ep, W);
        });
    if (!rc) rc = ll_meet(t, ep, W);
    __syncthreads();
    ll_leave(t, owned, ep, held);
}

/* Broadcast (root writes src), fcollect (every member writes src) and alltoall (every
 * member writes all n pieces of src, one segment each). */
__global__ void __launch_bounds__(kThreads)
    k_ll_copy(symm_dev_team_t t, int kind, void *dest, const void *src, size_t nbytes, int root)
{
    using namespace symm_detail;
    const uint32_t W = kind == LL_BROADCAST  ? SYMM_DEV_WHAT_BROADCAST
                       : kind == LL_FCOLLECT ? SYMM_DEV_WHAT_FCOLLECT
                                             : SYMM_DEV_WHAT_ALLTOALL;
    const size_t nseg = kind == LL_BROADCAST  ? (t.me == root ? 1 : 0)
                        : kind == LL_FCOLLECT ? 1
                                              : (size_t)t.n;
    int owned = 0;
    uint64_t ep;
    bool held;
    int rc = ll_enter(t, W, src, nbytes, nseg, &owned, &ep, &held);
    if (rc) {
        /* nothing to read: the claim failed (recorded) */
    } else if (kind == LL_BROADCAST) {
        if (t.me != root)
            rc = ll_gather(t, (uint8_t *)dest, 0, nbytes, root, ep, W);
        else if (dest != src)
            copy_part<false>(dest, src, nbytes, thread_linear(), block_threads());
    } else {
        rc = ll_gather(t, (uint8_t *)dest, kind == LL_ALLTOALL ? (size_t)t.me : 0, nbytes, -1,
                       ep, W);
    }
    if (!rc) rc = ll_meet(t, ep, W);
    __syncthreads();
    ll_leave(t, owned, ep, held);
}

/* ---------------------------------------------------------------- choosing a path */
enum path { ONE_BLOCK, LATENCY, ENGINE };

/* seg_bytes, nseg: what a member writes on the latency path (the most of any member). */
path pick(const symm_cuda_engine_t &e, size_t seg_bytes, size_t nseg)
{
    const int env = symm_config.gpu_coll_blocks;
    if (!e.ok || env == 1) return ONE_BLOCK;
    if (env == 0 && ll_fits(seg_bytes, nseg)) return LATENCY;
    return ENGINE;
}

/* The engine's block count: SYMM_GPU_COLL_BLOCKS (at most the engine's duplicates), else
 * 0 (automatic: one per 32 KiB moved, up to what this PE's share of the GPU holds). */
int engine_blocks(void)
{
    const int env = symm_config.gpu_coll_blocks;
    return env < 2 ? 0 : env > SYMM_CUDA_ENGINE_DUPS ? SYMM_CUDA_ENGINE_DUPS : env;
}

/* A one-row tile of count elements at base. */
symm_tile_t row_tile(const void *base, size_t count)
{
    symm_tile_t r;
    r.base = (void *)base;
    r.rows = count ? 1 : 0;
    r.cols = count;
    r.ld = count;
    return r;
}

/* ---------------------------------------------------------------- one block */
__global__ void k_barrier(symm_dev_team_t t)
{
    symm_dev_barrier_block(t);
}

__global__ void k_broadcast(symm_dev_team_t t, void *dest, const void *src, size_t nbytes,
                            int root)
{
    symm_dev_broadcast_block(t, dest, src, nbytes, root);
}

template <typename T>
__global__ void k_reduce(symm_dev_team_t t, T *dest, const T *src, size_t count, symm_op_t op,
                         int root)
{
    if (root < 0)
        symm_dev_allreduce_block(t, dest, src, count, op);
    else
        symm_dev_reduce_block(t, dest, src, count, op, root);
}

__global__ void k_fcollect(symm_dev_team_t t, void *dest, const void *src, size_t nbytes)
{
    symm_dev_fcollect_block(t, dest, src, nbytes);
}

__global__ void k_alltoall(symm_dev_team_t t, void *dest, const void *src, size_t nbytes)
{
    symm_dev_alltoall_block(t, dest, src, nbytes);
}

symm_status_t launched(const char *fn)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

/* The checks every reduction shares: type, op, and count x type size. */
symm_status_t check_reduction(const char *fn, size_t count, symm_type_t type, symm_op_t op)
{
    size_t es = symm_type_size(type);
    if (!es) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid type %d", fn, (int)type);
    if ((int)op < 0 || op >= SYMM_OP_COUNT)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid op %d", fn, (int)op);
    if (type == SYMM_FP8_E4M3 || type == SYMM_FP8_E5M2)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: type %s: fp8 reductions accumulate in float, which the tile "
                              "calls do (symm_tile_reduce_on_stream, ...); this call does not "
                              "take fp8",
                              fn, symm_type_name(type));
    int is_float =
        type == SYMM_FLOAT || type == SYMM_DOUBLE || type == SYMM_FP16 || type == SYMM_BF16;
    if (is_float && op >= SYMM_OP_AND)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s is not defined on %s", fn,
                              symm_op_name(op), symm_type_name(type));
    if (count > SIZE_MAX / es)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: count %zu", fn, count);
    return SYMM_SUCCESS;
}

/* The latency path or one block, for element type T; root as k_ll_reduce's. One block
 * runs a reduce_scatter as n reduces, block r of src into member r. */
template <typename T>
void launch_reduce_block(path how, const symm_cuda_engine_t &e, const symm_dev_team_t &t,
                         void *dest, const void *src, size_t count, symm_op_t op, int root,
                         cudaStream_t s)
{
    if (how == LATENCY)
        k_ll_reduce<T><<<1, kThreads, 0, s>>>(e.ll, (T *)dest, (const T *)src, count, op, root);
    else if (root != -2)
        k_reduce<T><<<1, kThreads, 0, s>>>(t, (T *)dest, (const T *)src, count, op, root);
    else
        for (int r = 0; r < t.n; r++)
            k_reduce<T><<<1, kThreads, 0, s>>>(t, (T *)dest, (const T *)src + (size_t)r * count,
                                               count, op, r);
}

void reduce_block(symm_type_t type, path how, const symm_cuda_engine_t &e,
                  const symm_dev_team_t &t, void *dest, const void *src, size_t count,
                  symm_op_t op, int root, cudaStream_t s)
{
    switch (type) {
#define RB_CASE_(E, C)                                                                         \
    case E:                                                                                    \
        launch_reduce_block<C>(how, e, t, dest, src, count, op, root, s);                      \
        break;
        RB_CASE_(SYMM_INT8, int8_t)
        RB_CASE_(SYMM_INT16, int16_t)
        RB_CASE_(SYMM_INT32, int32_t)
        RB_CASE_(SYMM_INT64, int64_t)
        RB_CASE_(SYMM_UINT8, uint8_t)
        RB_CASE_(SYMM_UINT16, uint16_t)
        RB_CASE_(SYMM_UINT32, uint32_t)
        RB_CASE_(SYMM_UINT64, uint64_t)
        RB_CASE_(SYMM_FLOAT, float)
        RB_CASE_(SYMM_DOUBLE, double)
        RB_CASE_(SYMM_FP16, __half)
        RB_CASE_(SYMM_BF16, __nv_bfloat16)
#undef RB_CASE_
    default:
        break;
    }
}

/* A team of one member on the engine's path: the reduction of one contribution is that
 * contribution, moved by the device's copy (a copy node under capture) rather than by
 * the reduction kernel; nothing at all in place. *done: taken (false where the ranges
 * overlap without being the same, which the kernel handles). */
symm_status_t alone(const char *fn, void *dest, const void *src, size_t bytes, cudaStream_t s,
                    bool *done)
{
    const char *d = (const char *)dest, *c = (const char *)src;
    *done = d == c || d + bytes <= c || c + bytes <= d;
    if (!*done || d == c || !bytes) return SYMM_SUCCESS;
    cudaError_t e = cudaMemcpyAsync(dest, src, bytes, cudaMemcpyDefault, s);
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

/* reduce (root >= 0) and allreduce (root < 0). */
symm_status_t reduce_common(const char *fn, symm_team_t team, void *dest, const void *src,
                            size_t count, symm_type_t type, symm_op_t op, int root,
                            cudaStream_t s)
{
    CHECK(check_reduction(fn, count, type, op));
    const size_t bytes = count * symm_type_size(type);
    symm_dev_team_t t;
    symm_cuda_engine_t e;
    CHECK(symm_cuda_coll_prepare(fn, team, &t, dest, bytes, src, bytes, s, &e));
    if (root >= t.n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", fn, root,
                              t.n);
    const path how = pick(e, bytes, 1);
    if (how != ENGINE) {
        reduce_block(type, how, e, t, dest, src, count, op, root, s);
        return launched(fn);
    }
    bool done = false;
    if (t.n == 1) CHECK(alone(fn, dest, src, bytes, s, &done));
    if (done) return SYMM_SUCCESS;
    const symm_tile_t out = row_tile(dest, count), in = row_tile(src, count);
    if (root < 0)
        return symm_cuda_tile_launch(fn, e.bw, e.bw_fast, symm_tm::TILE_ALL, out, &in, nullptr,
                                     0, type, op, engine_blocks(), true, s);
    return symm_cuda_tile_launch(fn, e.bw, e.bw_fast, symm_tm::TILE_MULTI, out, &in, &root, 1,
                                 type, op, engine_blocks(), true, s);
}

/* broadcast, fcollect, alltoall: nbytes per piece. */
symm_status_t copy_common(const char *fn, int kind, symm_team_t team, void *dest,
                          size_t dest_bytes, const void *src, size_t src_bytes, size_t nbytes,
                          int root, cudaStream_t s)
{
    symm_dev_team_t t;
    symm_cuda_engine_t e;
    CHECK(symm_cuda_coll_prepare(fn, team, &t, dest, dest_bytes, src, src_bytes, s, &e));
    if (kind == SYMM_CUDA_COPY_BROADCAST && (root < 0 || root >= t.n))
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", fn, root,
                              t.n);
    switch (pick(e, nbytes, kind == SYMM_CUDA_COPY_ALLTOALL ? (size_t)t.n : 1)) {
    case LATENCY: {
        const int k = kind == SYMM_CUDA_COPY_BROADCAST  ? LL_BROADCAST
                      : kind == SYMM_CUDA_COPY_FCOLLECT ? LL_FCOLLECT
                                                        : LL_ALLTOALL;
        k_ll_copy<<<1, kThreads, 0, s>>>(e.ll, k, dest, src, nbytes, root);
        return launched(fn);
    }
    case ENGINE:
        return symm_cuda_copy_launch(fn, e.bw, e.bw_fast, kind, dest, src, nbytes, root,
                                     engine_blocks(), s);
    case ONE_BLOCK:
        break;
    }
    if (kind == SYMM_CUDA_COPY_BROADCAST)
        k_broadcast<<<1, kThreads, 0, s>>>(t, dest, src, nbytes, root);
    else if (kind == SYMM_CUDA_COPY_FCOLLECT)
        k_fcollect<<<1, kThreads, 0, s>>>(t, dest, src, nbytes);
    else
        k_alltoall<<<1, kThreads, 0, s>>>(t, dest, src, nbytes);
    return launched(fn);
}

} // namespace

extern "C" symm_status_t symm_barrier_on_stream(symm_team_t team, cudaStream_t stream)
{
    symm_dev_team_t t;
    symm_cuda_engine_t e;
    CHECK(symm_cuda_coll_prepare(__func__, team, &t, NULL, 0, NULL, 0, stream, &e));
    k_barrier<<<1, kThreads, 0, stream>>>(t);
    return launched(__func__);
}

extern "C" symm_status_t symm_broadcast_on_stream(symm_team_t team, void *dest, const void *src,
                                                  size_t nbytes, int root, cudaStream_t stream)
{
    return copy_common(__func__, SYMM_CUDA_COPY_BROADCAST, team, dest, nbytes, src, nbytes,
                       nbytes, root, stream);
}

extern "C" symm_status_t symm_reduce_on_stream(symm_team_t team, void *dest, const void *src,
                                               size_t count, symm_type_t type, symm_op_t op,
                                               int root, cudaStream_t stream)
{
    if (root < 0)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d", __func__, root);
    return reduce_common(__func__, team, dest, src, count, type, op, root, stream);
}

extern "C" symm_status_t symm_allreduce_on_stream(symm_team_t team, void *dest, const void *src,
                                                  size_t count, symm_type_t type, symm_op_t op,
                                                  cudaStream_t stream)
{
    return reduce_common(__func__, team, dest, src, count, type, op, -1, stream);
}

extern "C" symm_status_t symm_reduce_scatter_on_stream(symm_team_t team, void *dest,
                                                       const void *src, size_t count,
                                                       symm_type_t type, symm_op_t op,
                                                       cudaStream_t stream)
{
    const char *fn = __func__;
    CHECK(check_reduction(fn, count, type, op));
    const int n = symm_team_n_pes(team);
    const size_t es = symm_type_size(type), bytes = count * es;
    if (n > 0 && count > SIZE_MAX / es / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: count %zu", fn, count);
    symm_dev_team_t t;
    symm_cuda_engine_t e;
    CHECK(symm_cuda_coll_prepare(fn, team, &t, dest, bytes, src,
                                 bytes * (size_t)(n > 0 ? n : 1), stream, &e));
    const path how = pick(e, bytes, (size_t)t.n);
    if (how != ENGINE) {
        reduce_block(type, how, e, t, dest, src, count, op, -2, stream);
        return launched(fn);
    }
    bool done = false;
    if (t.n == 1) CHECK(alone(fn, dest, src, bytes, stream, &done));
    if (done) return SYMM_SUCCESS;
    /* n one-row tiles, tile r reduced into member r's dest by member r alone (every member
     * reads one tile of each: the reduce-scatter half of an allreduce) */
    std::vector<symm_tile_t> in((size_t)t.n);
    std::vector<int> roots((size_t)t.n);
    for (int r = 0; r < t.n; r++) {
        in[(size_t)r] = row_tile((const char *)src + (size_t)r * bytes, count);
        roots[(size_t)r] = r;
    }
    return symm_cuda_tile_launch(fn, e.bw, e.bw_fast, symm_tm::TILE_MULTI,
                                 row_tile(dest, count), in.data(), roots.data(), t.n, type, op,
                                 engine_blocks(), false, stream);
}

extern "C" symm_status_t symm_fcollect_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    return copy_common(__func__, SYMM_CUDA_COPY_FCOLLECT, team, dest,
                       nbytes * (size_t)(n > 0 ? n : 1), src, nbytes, nbytes, -1, stream);
}

extern "C" symm_status_t symm_alltoall_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    size_t total = nbytes * (size_t)(n > 0 ? n : 1);
    return copy_common(__func__, SYMM_CUDA_COPY_ALLTOALL, team, dest, total, src, total, nbytes,
                       -1, stream);
}
