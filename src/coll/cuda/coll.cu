/* coll.cu — collectives on GPU buffers enqueued on a CUDA stream, on three paths:
 * - the latency path, for at most SYMM_CUDA_LL_BYTES staged per member: one block on the
 *   team engine's staging duplicate; each member copies what it contributes into its
 *   staging area (by episode parity), meets the others once, and reads their staged bytes
 *   (a reduction in team order, or copies) into its own dest. One round, one launch.
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

/* Member pe's staging area of episode ep in the staging duplicate: after the block's
 * header and flags (gpu_block_size in team/cuda/pool.c), by parity. A member writes the
 * area of episode ep + 2 only after round ep + 1, which every member enters once it has
 * finished reading the areas of episode ep. */
__device__ __forceinline__ uint8_t *ll_stage(const symm_dev_team_t &t, int pe, uint64_t ep)
{
    const size_t hdr = (SYMM_DEV_BLOCK_HDR + 8 * (size_t)t.n + SYMM_DEV_BLOCK_ALIGN - 1) &
                       ~(size_t)(SYMM_DEV_BLOCK_ALIGN - 1);
    return t.member_base[pe] + t.off + hdr + (ep & 1) * (size_t)SYMM_CUDA_LL_BYTES;
}

/* Claims the duplicate (the claim's atomic gives the episode: no load of it before the
 * round), stages `bytes` of src (none: nothing staged), and runs round *ep. Returns 0 or
 * the error (the same in every thread); *held: the claim succeeded, and the caller ends
 * with ll_leave whatever happened after it. */
__device__ int ll_enter(const symm_dev_team_t &t, uint32_t what, const void *src, size_t bytes,
                        int *owned, uint64_t *ep, bool *held)
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
    if (bytes)
        copy_part<false>(ll_stage(t, t.me, *ep), src, bytes, thread_linear(), block_threads());
    __syncthreads();
    return round_block_at(t, *ep, what); /* every member's bytes are staged */
}

/* Releases the duplicate at episode ep (or leaves ep for its holder). */
__device__ void ll_leave(const symm_dev_team_t &t, int owned, uint64_t ep, bool held)
{
    if (held) symm_detail::leave_block_at(t, owned, ep);
}

/* dest[i] = op over the members' staged elements, in team order (root >= 0: on root
 * only). The combine of the one-block form (reduce_slice), element for element. */
template <typename T, int OP>
__device__ void ll_reduce(const symm_dev_team_t &t, T *dest, size_t first, size_t count,
                          uint64_t ep)
{
    using namespace symm_detail;
    typedef acc<T> C;
    constexpr int kMax = 8; /* up to kMax members, every load is issued before the combine */
    for (size_t i = thread_linear(); i < count; i += block_threads()) {
        T v[kMax];
        const int pre = t.n < kMax ? t.n : kMax;
#pragma unroll
        for (int j = 0; j < kMax; j++)
            if (j < pre) v[j] = ldcg((const T *)ll_stage(t, j, ep) + first + i);
        typename C::type a = C::in(v[0]);
#pragma unroll
        for (int j = 1; j < kMax; j++)
            if (j < pre) a = C::step(symm_plan_op<OP, typename C::type>(a, C::in(v[j])));
        for (int j = kMax; j < t.n; j++)
            a = C::step(symm_plan_op<OP, typename C::type>(
                a, C::in(ldcg((const T *)ll_stage(t, j, ep) + first + i))));
        dest[i] = C::out(a);
    }
}

/* Piece `soff` (nbytes) of every member's staged bytes into block j of dest: in 16-byte
 * words over the flattened (member, word) range where everything is aligned, so that a
 * thread's loads do not wait on each other member by member. */
__device__ void ll_gather(const symm_dev_team_t &t, void *dest, size_t soff, size_t nbytes,
                          uint64_t ep)
{
    using namespace symm_detail;
    const uint32_t i0 = thread_linear(), step = block_threads();
    if ((((uintptr_t)dest | soff | nbytes) & 15) == 0) {
        const size_t words = nbytes / 16, total = words * (size_t)t.n;
        for (size_t k = i0; k < total; k += step) {
            const size_t j = k / words, w = k - j * words;
            ((uint4 *)dest)[k] = __ldcg((const uint4 *)(ll_stage(t, (int)j, ep) + soff) + w);
        }
        return;
    }
    for (int j = 0; j < t.n; j++)
        copy_part<true>((char *)dest + (size_t)j * nbytes, ll_stage(t, j, ep) + soff, nbytes,
                        i0, step);
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
    const int rc = ll_enter(t, W, src, count * sizeof(T) * (scatter ? (size_t)t.n : 1), &owned,
                            &ep, &held);
    const size_t first = scatter ? (size_t)t.me * count : 0;
    if (!rc && (root < 0 || root == t.me))
        op_dispatch<is_int_type<T>::value>(
            op, [&](auto o) { ll_reduce<T, decltype(o)::value>(t, dest, first, count, ep); });
    ll_leave(t, owned, ep, held);
}

/* Broadcast (root stages src), fcollect (every member stages src) and alltoall (every
 * member stages all n pieces of src). */
__global__ void __launch_bounds__(kThreads)
    k_ll_copy(symm_dev_team_t t, int kind, void *dest, const void *src, size_t nbytes, int root)
{
    using namespace symm_detail;
    const uint32_t W = kind == LL_BROADCAST  ? SYMM_DEV_WHAT_BROADCAST
                       : kind == LL_FCOLLECT ? SYMM_DEV_WHAT_FCOLLECT
                                             : SYMM_DEV_WHAT_ALLTOALL;
    const size_t staged = kind == LL_BROADCAST  ? (t.me == root ? nbytes : 0)
                          : kind == LL_FCOLLECT ? nbytes
                                                : nbytes * (size_t)t.n;
    int owned = 0;
    uint64_t ep;
    bool held;
    const int rc = ll_enter(t, W, src, staged, &owned, &ep, &held);
    const uint32_t i0 = thread_linear(), step = block_threads();
    if (rc) {
        /* nothing to read: the round failed (recorded) */
    } else if (kind == LL_BROADCAST) {
        if (t.me != root)
            copy_part<true>(dest, ll_stage(t, root, ep), nbytes, i0, step);
        else if (dest != src)
            copy_part<false>(dest, src, nbytes, i0, step);
    } else {
        ll_gather(t, dest, kind == LL_ALLTOALL ? (size_t)t.me * nbytes : 0, nbytes, ep);
    }
    ll_leave(t, owned, ep, held);
}

/* ---------------------------------------------------------------- choosing a path */
enum path { ONE_BLOCK, LATENCY, ENGINE };

/* staged: the bytes a member stages on the latency path (the most of any member). */
path pick(const symm_cuda_engine_t &e, size_t staged)
{
    const int env = symm_config.gpu_coll_blocks;
    if (!e.ok || env == 1) return ONE_BLOCK;
    if (env == 0 && staged <= SYMM_CUDA_LL_BYTES) return LATENCY;
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
    const path how = pick(e, bytes);
    if (how != ENGINE) {
        reduce_block(type, how, e, t, dest, src, count, op, root, s);
        return launched(fn);
    }
    const symm_tile_t out = row_tile(dest, count), in = row_tile(src, count);
    if (root < 0)
        return symm_cuda_tile_launch(fn, e.bw, e.bw_fast, symm_tm::TILE_ALL, out, &in, nullptr,
                                     0, type, op, engine_blocks(), true, s);
    return symm_cuda_tile_launch(fn, e.bw, e.bw_fast, symm_tm::TILE_MULTI, out, &in, &root, 1,
                                 type, op, engine_blocks(), true, s);
}

/* broadcast, fcollect, alltoall: nbytes per piece; staged, the most a member stages on the
 * latency path. */
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
    const size_t staged = kind == SYMM_CUDA_COPY_ALLTOALL ? nbytes * (size_t)t.n : nbytes;
    switch (pick(e, staged)) {
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
    const path how = pick(e, bytes * (size_t)t.n);
    if (how != ENGINE) {
        reduce_block(type, how, e, t, dest, src, count, op, -2, stream);
        return launched(fn);
    }
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
