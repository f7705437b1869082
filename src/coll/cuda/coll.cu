/* coll.cu — collectives on GPU buffers enqueued on a CUDA stream: one block runs the
 * device collective of symm_device.cuh on the team's duplicate, or, from 64 KiB, a
 * cooperative grid shares the data work (below). The host side validates the arguments
 * (reported at once); device-side failures go to the error buffer (symm_cuda_check). */
#include <atomic>
#include <cooperative_groups.h>

#include "symm_device.cuh"

extern "C" {
#include "core/config.h"
#include "core/log.h"
}
#include "coll/cuda/cuda_coll.h"

namespace
{

const int kThreads = 512;

/* ---------------------------------------------------------------- grid form
 * A large collective runs as a cooperative grid on the team's one duplicate: block 0
 * claims it and runs the two rounds of the one-block form; the other blocks wait for it
 * at a grid synchronisation, share the data work (grid-stride), and meet again before
 * block 0's closing round. A member's rounds are those of the one-block form, so members
 * may run different grids. Block 0 tells the others how its first round went through a
 * slot tagged with the launch's sequence number (a slot is reused 65536 launches later;
 * a tag that is not this launch's is reported, never taken for a verdict). */
const size_t kGridMinBytes = 65536, kGridBytesPerBlock = 65536;
const unsigned kSlots = 65536;
const unsigned long long kSeqMask = (1ull << 48) - 1;
__device__ unsigned long long g_verdict[kSlots];

struct grid_tag {
    unsigned long long seq;
    unsigned slot;
};

template <typename Body>
__device__ void grid_run(const symm_dev_team_t &t, uint32_t what, bool root_ok, grid_tag g,
                         Body body)
{
    using namespace symm_detail;
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    const unsigned long long tag = (g.seq & kSeqMask) << 16;
    int owned = 0, rc = 0;
    if (blockIdx.x == 0) {
        rc = enter_block(t, what, &owned);
        if (!rc && !root_ok) rc = SYMM_ERR_INVALID_ARG;
        if (!rc) rc = round_block(t, what); /* every member's src is ready */
        if (thread_linear() == 0) g_verdict[g.slot] = tag | (uint16_t)(int16_t)rc;
    }
    grid.sync();
    const unsigned long long v = *(volatile unsigned long long *)&g_verdict[g.slot];
    if ((v & ~0xffffull) != tag) {
        if (thread_linear() == 0) record(t, SYMM_ERR_CUDA, what, 0, v); /* slot reused */
    } else if ((int16_t)(v & 0xffff) == 0) {
        fence_sys(); /* what block 0 acquired from the peers, for this block's reads */
        body(blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
    }
    /* the block's stores (into peers' memory too) before block 0's release */
    __syncthreads();
    if (thread_linear() == 0) __threadfence_system();
    grid.sync();
    if (blockIdx.x == 0) {
        if (!rc) rc = round_block(t, what); /* my slices are written everywhere */
        leave_block(t, owned);
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    k_reduce_grid(symm_dev_team_t t, T *dest, const T *src, size_t count, symm_op_t op,
                  int root, grid_tag g)
{
    grid_run(t, root < 0 ? SYMM_DEV_WHAT_ALLREDUCE : SYMM_DEV_WHAT_REDUCE, root < t.n, g,
             [&](uint32_t i0, uint32_t step) {
                 size_t per = (count + (size_t)t.n - 1) / (size_t)t.n;
                 size_t lo = per * (size_t)t.me, hi = lo + per < count ? lo + per : count;
                 if (lo < hi)
                     symm_detail::reduce_dispatch(t, dest, src, lo, hi, op, root, i0, step);
             });
}

__global__ void __launch_bounds__(kThreads)
    k_broadcast_grid(symm_dev_team_t t, void *dest, const void *src, size_t nbytes, int root,
                     grid_tag g)
{
    grid_run(t, SYMM_DEV_WHAT_BROADCAST, root >= 0 && root < t.n, g,
             [&](uint32_t i0, uint32_t step) {
                 if (!(t.me == root && dest == src))
                     symm_detail::copy_part<true>(dest, symm_detail::peer(t, src, root), nbytes,
                                                  i0, step);
             });
}

/* alltoall == false: fcollect (member j's src into block j of dest); true: alltoall
 * (block me of member j's src into block j of dest). */
__global__ void __launch_bounds__(kThreads)
    k_gather_grid(symm_dev_team_t t, void *dest, const void *src, size_t nbytes, bool alltoall,
                  grid_tag g)
{
    grid_run(t, alltoall ? SYMM_DEV_WHAT_ALLTOALL : SYMM_DEV_WHAT_FCOLLECT, true, g,
             [&](uint32_t i0, uint32_t step) {
                 for (int j = 0; j < t.n; j++)
                     symm_detail::copy_part<true>((char *)dest + (size_t)j * nbytes,
                                                  (const char *)symm_detail::peer(t, src, j) +
                                                      (alltoall ? (size_t)t.me * nbytes : 0),
                                                  nbytes, i0, step);
             });
}

/* Blocks of the grid form for a collective moving `bytes` per member (1: the one-block
 * form): SYMM_GPU_COLL_BLOCKS, else one per kGridBytesPerBlock from kGridMinBytes, at
 * most what can be resident on this PE's share of the GPU. */
int grid_blocks(const void *kernel, size_t bytes)
{
    static int coop = -1;
    if (coop < 0) {
        int v = 0;
        if (cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, symm_cuda_device()) !=
            cudaSuccess) {
            cudaGetLastError();
            v = 0;
        }
        coop = v != 0;
    }
    const int env = symm_config.gpu_coll_blocks;
    if (!coop || env == 1 || (env <= 0 && bytes < kGridMinBytes)) return 1;
    int cap = symm_cuda_max_resident_blocks(kernel, kThreads, 0);
    size_t want = env > 1 ? (size_t)env : (bytes + kGridBytesPerBlock - 1) / kGridBytesPerBlock;
    if (cap > 0 && want > (size_t)cap) want = (size_t)cap;
    return want < 2 ? 1 : (int)want;
}

grid_tag next_tag(void)
{
    static std::atomic<unsigned long long> seq{0};
    unsigned long long s = ++seq;
    return grid_tag{s, (unsigned)(s % kSlots)};
}

/* Launches kernel as a cooperative grid of nb blocks; false (error cleared) where the
 * device refuses it, for the caller to fall back on the one-block form. */
bool coop_launch(const void *kernel, int nb, void **args, cudaStream_t s)
{
    if (nb < 2) return false;
    cudaError_t e = cudaLaunchCooperativeKernel(kernel, dim3(nb), dim3(kThreads), args, 0, s);
    if (e == cudaSuccess) return true;
    cudaGetLastError();
    static std::atomic<int> told{0};
    if (!told.exchange(1))
        SYMM_WARN("stream collectives: a cooperative grid of %d blocks was refused (%s); "
                  "one block does the work (slower for large buffers)",
                  nb, cudaGetErrorString(e));
    return false;
}

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

symm_status_t prepare(const char *fn, symm_team_t team, symm_dev_team_t *t, const void *dest,
                      size_t dest_bytes, const void *src, size_t src_bytes, cudaStream_t s)
{
    return symm_cuda_coll_prepare(fn, team, t, dest, dest_bytes, src, src_bytes, s);
}

symm_status_t launched(const char *fn)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

template <typename T>
void launch_reduce(const symm_dev_team_t &t, void *dest, const void *src, size_t count,
                   symm_op_t op, int root, cudaStream_t s)
{
    const void *kg = (const void *)k_reduce_grid<T>;
    int nb = grid_blocks(kg, count * sizeof(T));
    T *d = (T *)dest;
    const T *sr = (const T *)src;
    grid_tag g = next_tag();
    void *args[] = {(void *)&t, &d, &sr, &count, &op, &root, &g};
    if (!coop_launch(kg, nb, args, s))
        k_reduce<T><<<1, kThreads, 0, s>>>(t, d, sr, count, op, root);
}

symm_status_t reduce_common(const char *fn, symm_team_t team, void *dest, const void *src,
                            size_t count, symm_type_t type, symm_op_t op, int root,
                            cudaStream_t s)
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
    symm_dev_team_t t;
    CHECK(prepare(fn, team, &t, dest, count * es, src, count * es, s));
    if (root >= t.n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", fn, root,
                              t.n);
    switch (type) {
    case SYMM_INT8:
        launch_reduce<int8_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_INT16:
        launch_reduce<int16_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_INT32:
        launch_reduce<int32_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_INT64:
        launch_reduce<int64_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_UINT8:
        launch_reduce<uint8_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_UINT16:
        launch_reduce<uint16_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_UINT32:
        launch_reduce<uint32_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_UINT64:
        launch_reduce<uint64_t>(t, dest, src, count, op, root, s);
        break;
    case SYMM_FLOAT:
        launch_reduce<float>(t, dest, src, count, op, root, s);
        break;
    case SYMM_DOUBLE:
        launch_reduce<double>(t, dest, src, count, op, root, s);
        break;
    case SYMM_FP16:
        launch_reduce<__half>(t, dest, src, count, op, root, s);
        break;
    case SYMM_BF16:
        launch_reduce<__nv_bfloat16>(t, dest, src, count, op, root, s);
        break;
    default:
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: type %d", fn, (int)type);
    }
    return launched(fn);
}

} // namespace

extern "C" symm_status_t symm_barrier_on_stream(symm_team_t team, cudaStream_t stream)
{
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, NULL, 0, NULL, 0, stream));
    k_barrier<<<1, kThreads, 0, stream>>>(t);
    return launched(__func__);
}

extern "C" symm_status_t symm_broadcast_on_stream(symm_team_t team, void *dest, const void *src,
                                                  size_t nbytes, int root, cudaStream_t stream)
{
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, nbytes, src, nbytes, stream));
    if (root < 0 || root >= t.n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: root %d of a team of %d", __func__,
                              root, t.n);
    const void *kg = (const void *)k_broadcast_grid;
    grid_tag g = next_tag();
    void *args[] = {&t, &dest, &src, &nbytes, &root, &g};
    if (!coop_launch(kg, grid_blocks(kg, nbytes), args, stream))
        k_broadcast<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes, root);
    return launched(__func__);
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

extern "C" symm_status_t symm_fcollect_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, nbytes * (size_t)(n > 0 ? n : 1), src, nbytes,
                  stream));
    const void *kg = (const void *)k_gather_grid;
    grid_tag g = next_tag();
    bool a2a = false;
    void *args[] = {&t, &dest, &src, &nbytes, &a2a, &g};
    if (!coop_launch(kg, grid_blocks(kg, nbytes * (size_t)t.n), args, stream))
        k_fcollect<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes);
    return launched(__func__);
}

extern "C" symm_status_t symm_alltoall_on_stream(symm_team_t team, void *dest, const void *src,
                                                 size_t nbytes, cudaStream_t stream)
{
    int n = symm_team_n_pes(team);
    if (n > 0 && nbytes > SIZE_MAX / (size_t)n)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: nbytes %zu", __func__, nbytes);
    size_t total = nbytes * (size_t)(n > 0 ? n : 1);
    symm_dev_team_t t;
    CHECK(prepare(__func__, team, &t, dest, total, src, total, stream));
    const void *kg = (const void *)k_gather_grid;
    grid_tag g = next_tag();
    bool a2a = true;
    void *args[] = {&t, &dest, &src, &nbytes, &a2a, &g};
    if (!coop_launch(kg, grid_blocks(kg, total), args, stream))
        k_alltoall<<<1, kThreads, 0, stream>>>(t, dest, src, nbytes);
    return launched(__func__);
}
