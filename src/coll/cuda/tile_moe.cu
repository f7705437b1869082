/* tile_moe.cu — the stream forms of the device tile reduce and MoE all-to-all-v
 * (symm/impl/tile__funcs.cuh, a2a__funcs.cuh): the argument checks shared with tile.c and moe.c
 * (coll/check.h), the automatic block count, and one kernel whose block b runs the
 * block-scoped call on pool duplicate b. Errors only this member can see still launch a kernel
 * that takes part in the synchronisation (and, for MoE, publishes the failure so every member
 * fails). */
#include <cstdio>
#include <cstring>

#include "symm_device.cuh"

extern "C" {
#include "core/log.h"
}
#include "coll/check.h"
#include "coll/cuda/cuda_coll.h"

namespace
{

const int kThreads = 512;
/* The MoE kernel's shape: 512 threads a block, one block per SM, so that a thread may
 * use up to 127 registers (the automatic block count follows the occupancy). 1024
 * threads, or two blocks per SM, would cap a thread at 64 registers, and the copy loop
 * would spill. */
const int kA2aThreads = 512;
/* Tile bytes per block when choosing the block count: one block moves a small share of
 * the GPU's bandwidth, so even small tiles want many blocks. */
const size_t kTileBytesPerBlock = (size_t)32 << 10;
/* Roots per multi-root kernel (the tiles travel as a kernel parameter). */
const int kMultiMax = 64;

struct tile_params {
    symm_cuda_fast_t fast;
    int kind, nroots, op, work;
    int out_symm; /* this member's out is in the GPU symmetric heap (a root's may be shared) */
    symm_tile_t out;
    symm_tile_t in[kMultiMax];
    int roots[kMultiMax];
};

/* Duplicate b of the pool: from the kernel's parameters (their copy in shared memory)
 * when it lies in the pool's first chunk (two dependent loads of the pool's tables in
 * memory less before the claim), else from the tables. */
__device__ __forceinline__ symm_dev_team_t team_of(const symm_dev_pool_t &pool,
                                                   const symm_cuda_fast_t &f, uint32_t b)
{
    if (b >= f.count || b >= pool.size) return symm_dev_pool_team(pool, b);
    symm_dev_team_t t = symm_detail::team_common(pool, b);
    t.member_base = f.base;
    t.off = (uint64_t)b * f.block_size;
    t.heap_delta = f.delta;
    t.n = pool.n;
    return t;
}

/* Every kernel here is launched with programmatic dependent launch (symm_cuda_launch_pdl):
 * it may begin while the kernel before it on the stream drains. The bodies (trigger /
 * a.trigger) do the work that reads only parameters first, then griddepcontrol.wait, and
 * let the next kernel launch once all of their blocks have passed their first round. */

/* The kernel's parameters, copied into shared memory by the block's threads at once: read
 * from the parameter bank, each new line of it is a constant-cache miss on the body's
 * chain of dependent steps (a new launch's parameters are never cached); one parallel
 * copy pays one. */
template <typename P> __device__ __forceinline__ void params_to_shared(const P &p, P &sp)
{
    static_assert(sizeof(P) % 8 == 0, "parameters copied in 8-byte words");
    for (uint32_t i = threadIdx.x; i < sizeof(P) / 8; i += blockDim.x)
        ((uint64_t *)&sp)[i] = ((const uint64_t *)&p)[i];
    __syncthreads();
}

/* PATH: symm_tm::TILE_PATH_FLAT when tile_run has checked that the tile takes the flat
 * vector path, else TILE_PATH_UNITS. */
template <int TY, int PATH>
__global__ void __launch_bounds__(kThreads)
    k_tile(symm_dev_pool_t pool, const __grid_constant__ tile_params p)
{
    __shared__ __align__(16) tile_params sp;
    params_to_shared(p, sp);
    symm_dev_team_t t = team_of(pool, sp.fast, blockIdx.x);
    symm_tm::tile_impl<TY, PATH>(t, sp.kind, sp.out, sp.in, sp.roots, sp.nroots, sp.op,
                                 blockIdx.x, gridDim.x, sp.work != 0, sp.out_symm != 0, true);
}

struct a2a_params {
    symm_dev_pool_t pool;
    symm_cuda_fast_t fast;
    symm_tm::a2a_args a;
};

__global__ void __launch_bounds__(kA2aThreads, 1) k_a2a(const __grid_constant__ a2a_params p)
{
    __shared__ __align__(16) a2a_params sp;
    params_to_shared(p, sp);
    symm_dev_team_t t = team_of(sp.pool, sp.fast, blockIdx.x);
    symm_tm::a2a_impl(t, sp.a, blockIdx.x, gridDim.x);
}

const void *tile_kernel(symm_type_t type, bool flat)
{
    switch (type) {
#define TM_CASE_(e, name, ctype)                                                               \
    case e:                                                                                    \
        return flat ? (const void *)k_tile<e, symm_tm::TILE_PATH_FLAT>                         \
                    : (const void *)k_tile<e, symm_tm::TILE_PATH_UNITS>;
        SYMM_FOREACH_TYPE(TM_CASE_)
#undef TM_CASE_
    default:
        return nullptr;
    }
}

/* Blocks of kernel that can be resident at once on this PE's share of the GPU, or of
 * the worse of two kernels (k2 != NULL: when members may launch different ones). */
int resident_cap(const void *kernel, const void *k2 = nullptr, int threads = kThreads)
{
    int cap = symm_cuda_max_resident_blocks(kernel, threads, 0);
    if (k2) {
        int c2 = symm_cuda_max_resident_blocks(k2, threads, 0);
        if (c2 < cap) cap = c2;
    }
    return cap;
}

int auto_blocks(int cap, const symm_dev_pool_t &dp, int kind, size_t bytes)
{
    long lim = 2L * symm_cuda_sm_share();
    if (lim < 1) lim = 1;
    if (cap > 0 && lim > cap) lim = cap;
    if (lim > (long)dp.size) lim = (long)dp.size;
    long want = lim;
    if (kind == 0) {
        size_t w = (bytes + kTileBytesPerBlock - 1) / kTileBytesPerBlock;
        want = w < (size_t)lim ? (long)w : lim;
    }
    return want < 1 ? 1 : (int)want;
}

symm_status_t get_pool(const char *fn, symm_pool_t pool, symm_dev_pool_t *dp,
                       symm_cuda_fast_t *fast, cudaStream_t stream)
{
    CHECK(symm_cuda_pool_device_fast(fn, pool, dp, fast, stream));
    if (dp->n < 1 || dp->me < 0 || dp->size < 1)
        return symm_error_set(SYMM_ERR_TEAM_INVALID, "%s: pool %lld has no usable GPU state",
                              fn, (long long)pool);
    return SYMM_SUCCESS;
}

/* cap: resident_cap of the kernel(s) the members launch; it must be the same on every
 * member, so that every member picks the same grid (or fails alike). */
symm_status_t pick_blocks(const char *fn, int cap, const symm_dev_pool_t &dp, int kind,
                          size_t bytes, int nblocks, int *out, int threads = kThreads)
{
    if (nblocks < 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: nblocks = %d (0: automatic)", fn,
                              nblocks);
    if ((uint64_t)nblocks > dp.size)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: nblocks = %d but the pool has %u duplicates (one per block; "
                              "grow it with symm_pool_grow)",
                              fn, nblocks, dp.size);
    if (nblocks > cap && cap > 0)
        return symm_error_set(
            SYMM_ERR_INVALID_ARG,
            "%s: nblocks = %d but at most %d blocks of %d threads can be "
            "resident at once on this PE's share of the GPU (blocks that wait "
            "on peers would wait for ever)",
            fn, nblocks, cap, threads);
    *out = nblocks ? nblocks : auto_blocks(cap, dp, kind, bytes);
    return SYMM_SUCCESS;
}

/* [p, p + bytes) inside this PE's GPU heap (bytes > 0). */
int in_gpu_heap(const void *p, size_t bytes)
{
    int me = symm_my_pe();
    return p && symm_gpu_ptr(p, me) && symm_gpu_ptr((const uint8_t *)p + (bytes - 1), me) &&
           (uintptr_t)p + bytes > (uintptr_t)p;
}

/* Readable by this GPU's kernels (device, managed or registered host memory). The GPU
 * heap is known without asking the driver (cudaPointerGetAttributes is ~1 us a call). */
int dev_accessible(const void *p)
{
    if (symm_gpu_ptr(p, symm_my_pe())) return 1;
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged ||
           (at.type == cudaMemoryTypeHost && at.devicePointer);
}

int tile_empty(const symm_tile_t &t)
{
    return symm_plan_tile_empty(&t);
}

/* The shared argument checks' view of a stream form (coll/check.h). */
symm_check_where_t gpu_where(const char *fn)
{
    symm_check_where_t w;
    memset(&w, 0, sizeof w);
    w.fn = fn;
    w.in_heap = in_gpu_heap;
    w.heap_what = "in the GPU symmetric heap (symm_gpu_malloc)";
    w.align = 1;
    return w;
}

/* symm_tm::tile_flat_ok with the heap deltas taken here: in -> out takes the kernels'
 * flat vector path (all row starts 16-byte aligned on every PE, whole vectors per row;
 * an empty tile does not). Every PE that passes the
 * same symmetric tiles gets the same answer: the heap deltas are all multiples of 16 on
 * every PE or on none. */
bool host_flat_ok(const symm_tile_t &out, const symm_tile_t &in, size_t es)
{
    bool d16 = !tile_empty(in);
    for (int pe = 0; pe < symm_n_pes() && d16; pe++) {
        const uint8_t *q = (const uint8_t *)symm_gpu_ptr(in.base, pe);
        d16 = q && (((uintptr_t)q - (uintptr_t)in.base) & 15) == 0;
    }
    return symm_tm::tile_flat_ok(out, in, es, d16);
}

symm_status_t launched(const char *fn, symm_status_t st)
{
    if (st) return st;
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

} // namespace

/* kind TILE_ALL: in[0] -> every out; TILE_MULTI: in[k] -> roots[k]'s out. */
symm_status_t symm_cuda_tile_launch(const char *fn, const symm_dev_pool_t &dp,
                                    const symm_cuda_fast_t &fast, int kind, symm_tile_t out,
                                    const symm_tile_t *in, const int *roots, int nroots,
                                    symm_type_t type, symm_op_t op, int nblocks, bool share,
                                    cudaStream_t stream)
{
    const int me = dp.me;
    const size_t es = symm_type_size(type);
    const symm_check_where_t w = gpu_where(fn);
    symm_tiles_checked_t chk;
    symm_status_t local = symm_check_tiles(&w, kind == symm_tm::TILE_ALL, &out, in, roots,
                                           nroots, type, op, dp.n, me, &chk);
    /* Only this root sees a problem of its out: it fails, but still takes part. */
    if (local && !chk.local) return local;
    const size_t bytes = chk.bytes; /* per member, for the block count */
    bool out_symm = false; /* a root's out in the symmetric heap: its reduction may be shared */
    if (kind != symm_tm::TILE_ALL && chk.mine >= 0 && !tile_empty(in[chk.mine])) {
        out_symm = share && !local && chk.ohi > chk.olo &&
                   in_gpu_heap((const void *)chk.olo, chk.ohi - chk.olo);
        if (!local && out.base && !out_symm && !dev_accessible(out.base))
            local = symm_error_set(SYMM_ERR_INVALID_ARG,
                                   "%s: out %p of root %d is not "
                                   "memory this GPU can write",
                                   fn, out.base, me);
    }
    /* The flat vector path when the tiles allow it: the same choice on every member of an
     * allreduce. Multi-root (per kernel, i.e. per chunk of roots): every member's kernel
     * has the flat path when every tile of the chunk is flat (so that the members can
     * share a root's reduction, tile__funcs.cuh), except a root whose own out cannot
     * take it (it then publishes that, and every root of the chunk pulls alone); the grid
     * is sized for the worse of the two kernels. */
    int cap = kind == symm_tm::TILE_ALL
                  ? resident_cap(tile_kernel(type, host_flat_ok(out, in[0], es)))
                  : resident_cap(tile_kernel(type, true), tile_kernel(type, false));
    int nb;
    CHECK(pick_blocks(fn, cap, dp, 0, bytes, nblocks, &nb));
    char why[512] = "";
    if (local) snprintf(why, sizeof why, "%s", symm_last_error());

    tile_params p;
    memset(&p, 0, sizeof p);
    p.fast = fast;
    p.kind = kind;
    p.op = op;
    p.work = !local;
    p.out = out;
    symm_dev_pool_t dpc = dp;
    void *args[] = {&dpc, &p};
    symm_status_t st = SYMM_SUCCESS;
    if (kind == symm_tm::TILE_ALL) {
        p.in[0] = in[0];
        st = symm_cuda_launch_pdl(tile_kernel(type, host_flat_ok(out, in[0], es)), dim3(nb),
                                  dim3(kThreads), args, 0, stream);
    } else {
        p.out_symm = out_symm;
        /* Chunks of roots, one kernel each (every member launches the same ones). */
        int k0 = 0;
        do {
            int cnt = nroots - k0 < kMultiMax ? nroots - k0 : kMultiMax;
            bool in_flat = true;
            int mine = -1;
            p.nroots = cnt;
            for (int k = 0; k < cnt; k++) {
                p.in[k] = in[k0 + k];
                p.roots[k] = roots[k0 + k];
                in_flat = in_flat &&
                          (tile_empty(in[k0 + k]) || host_flat_ok(in[k0 + k], in[k0 + k], es));
                if (roots[k0 + k] == me) mine = k0 + k;
            }
            bool flat = in_flat;
            if (mine >= 0 && !local && !tile_empty(in[mine]))
                flat = host_flat_ok(out, in[mine], es);
            st = launched(fn, symm_cuda_launch_pdl(tile_kernel(type, flat), dim3(nb),
                                                   dim3(kThreads), args, 0, stream));
            k0 += cnt;
        } while (!st && k0 < nroots);
    }
    st = launched(fn, st);
    if (st) return st;
    if (local) return symm_error_set(local, "%s", why);
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- copies
 * Broadcast, fcollect and alltoall on the engine: block b claims duplicate b, meets the
 * other members' block b (their src is ready), copies its grid-stride share of every
 * piece, and meets them again (its share is read everywhere) before it leaves. A member's
 * kernel ends once all its blocks have passed their second round: every member has then
 * read what it needed of this member's src. */
namespace
{

struct copy_params {
    symm_cuda_fast_t fast;
    int kind, root;
    void *dest;
    const void *src;
    size_t nbytes;
};

/* n bytes from a peer's src to dst by threads i0, i0 + step, ... of the grid: four 16-byte
 * words in flight per thread where everything is 16-byte aligned (a thread's loads are
 * issued before its stores), else copy_part. */
__device__ __forceinline__ void copy_wide(void *dst, const void *src, size_t n, uint32_t i0,
                                          uint32_t step)
{
    if ((((uintptr_t)dst | (uintptr_t)src | n) & 15) != 0) {
        symm_detail::copy_part<true>(dst, src, n, i0, step);
        return;
    }
    uint4 *d = (uint4 *)dst;
    const uint4 *s = (const uint4 *)src;
    const size_t w = n / 16, st = step;
    size_t i = i0;
    for (; i + 3 * st < w; i += 4 * st) {
        const uint4 a = __ldcg(s + i), b = __ldcg(s + i + st), c = __ldcg(s + i + 2 * st),
                    e = __ldcg(s + i + 3 * st);
        d[i] = a;
        d[i + st] = b;
        d[i + 2 * st] = c;
        d[i + 3 * st] = e;
    }
    for (; i < w; i += st)
        d[i] = __ldcg(s + i);
}

__global__ void __launch_bounds__(kThreads)
    k_copy(symm_dev_pool_t pool, const __grid_constant__ copy_params p)
{
    using namespace symm_detail;
    __shared__ __align__(16) copy_params sp;
    params_to_shared(p, sp);
    const symm_dev_team_t t = team_of(pool, sp.fast, blockIdx.x);
    const uint32_t W = sp.kind == SYMM_CUDA_COPY_BROADCAST  ? SYMM_DEV_WHAT_BROADCAST
                       : sp.kind == SYMM_CUDA_COPY_FCOLLECT ? SYMM_DEV_WHAT_FCOLLECT
                                                            : SYMM_DEV_WHAT_ALLTOALL;
    pdl_wait();
    int owned = 0;
    int rc = enter_block(t, W, &owned);
    if (rc) return;
    rc = round_block(t, W); /* every member's src is ready */
    pdl_launch_dependents();
    if (!rc) {
        const uint32_t i0 = blockIdx.x * blockDim.x + threadIdx.x,
                       step = gridDim.x * blockDim.x;
        const size_t nb = sp.nbytes;
        if (sp.kind == SYMM_CUDA_COPY_BROADCAST) {
            if (!(t.me == sp.root && sp.dest == sp.src))
                copy_wide(sp.dest, peer(t, sp.src, sp.root), nb, i0, step);
        } else {
            const size_t soff = sp.kind == SYMM_CUDA_COPY_ALLTOALL ? (size_t)t.me * nb : 0;
            for (int j = 0; j < t.n; j++)
                copy_wide((char *)sp.dest + (size_t)j * nb,
                          (const char *)peer(t, sp.src, j) + soff, nb, i0, step);
        }
        __syncthreads();
        round_block(t, W); /* my share is read and written everywhere */
    }
    leave_block(t, owned);
}

} // namespace

symm_status_t symm_cuda_copy_launch(const char *fn, const symm_dev_pool_t &dp,
                                    const symm_cuda_fast_t &fast, int kind, void *dest,
                                    const void *src, size_t nbytes, int root, int nblocks,
                                    cudaStream_t stream)
{
    const size_t moved = kind == SYMM_CUDA_COPY_BROADCAST ? nbytes : nbytes * (size_t)dp.n;
    int nb;
    CHECK(pick_blocks(fn, resident_cap((const void *)k_copy), dp, 0, moved, nblocks, &nb));
    copy_params p;
    memset(&p, 0, sizeof p);
    p.fast = fast;
    p.kind = kind;
    p.root = root;
    p.dest = dest;
    p.src = src;
    p.nbytes = nbytes;
    symm_dev_pool_t d = dp;
    void *args[] = {&d, &p};
    return launched(fn, symm_cuda_launch_pdl((const void *)k_copy, dim3(nb), dim3(kThreads),
                                             args, 0, stream));
}

namespace
{

symm_status_t tile_run(const char *fn, symm_pool_t pool, int kind, symm_tile_t out,
                       const symm_tile_t *in, const int *roots, int nroots, symm_type_t type,
                       symm_op_t op, int nblocks, cudaStream_t stream)
{
    symm_dev_pool_t dp;
    symm_cuda_fast_t fast;
    CHECK(get_pool(fn, pool, &dp, &fast, stream));
    return symm_cuda_tile_launch(fn, dp, fast, kind, out, in, roots, nroots, type, op, nblocks,
                                 true, stream);
}

symm_status_t a2a_run(const char *fn, symm_pool_t pool, symm_tm::a2a_args a, int nblocks,
                      cudaStream_t stream)
{
    symm_dev_pool_t dp;
    symm_cuda_fast_t fast;
    CHECK(get_pool(fn, pool, &dp, &fast, stream));
    const symm_check_where_t w = gpu_where(fn);
    size_t nsplit;
    CHECK(symm_check_a2a_shape(&w, dp.n, a.ne, a.row_bytes, &nsplit));
    size_t wsb = symm_tm_a2a_ws_bytes(dp.n, a.ne);
    if (!wsb)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %d members x %d experts is too many", fn,
                              dp.n, a.ne);
    if (!in_gpu_heap(a.ws, wsb) || (uintptr_t)a.ws % 8)
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: workspace %p (+%zu bytes, symm_cuda_a2a_workspace_bytes) is "
                              "not an 8-byte aligned range of the GPU symmetric heap",
                              fn, a.ws, wsb);
    /* Local arguments: a failure is published on the device, so every member fails. A NULL
     * in holds no rows (in_capacity is then ignored): it is valid if this member sends
     * none, which only the device sees (its splits are there); the kernel fails every
     * member with SYMM_ERR_INVALID_ARG otherwise. */
    symm_status_t local = SYMM_SUCCESS;
    size_t in_bytes = 0, out_bytes = 0;
    uintptr_t wlo = (uintptr_t)a.ws, whi = wlo + wsb;
    if (a.in && __builtin_mul_overflow(a.in_capacity, a.row_bytes, &in_bytes))
        local = symm_error_set(SYMM_ERR_OVERFLOW,
                               "%s: in_capacity %zu rows of %zu bytes "
                               "overflows",
                               fn, a.in_capacity, a.row_bytes);
    else if (in_bytes && !in_gpu_heap(a.in, in_bytes))
        local =
            symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                           "%s: in %p + %zu bytes (%zu rows of %zu bytes) is not in the GPU "
                           "symmetric heap",
                           fn, a.in, in_bytes, a.in_capacity, a.row_bytes);
    else if ((local = symm_check_a2a_out(&w, a.out, a.out_capacity, a.row_bytes, a.in, in_bytes,
                                         &out_bytes)))
        ;
    else if (out_bytes && !dev_accessible(a.out))
        local = symm_error_set(SYMM_ERR_INVALID_ARG,
                               "%s: out %p (out_capacity %zu) is not "
                               "memory this GPU can write",
                               fn, a.out, a.out_capacity);
    else if (symm_check_overlap(wlo, whi, (uintptr_t)a.in, (uintptr_t)a.in + in_bytes) ||
             symm_check_overlap(wlo, whi, (uintptr_t)a.out, (uintptr_t)a.out + out_bytes))
        local =
            symm_error_set(SYMM_ERR_INVALID_ARG, "%s: the workspace overlaps in or out", fn);
    else if (!a.in_splits || !dev_accessible(a.in_splits))
        local = symm_error_set(SYMM_ERR_INVALID_ARG,
                               "%s: in_splits %p is not memory this GPU "
                               "can read",
                               fn, (const void *)a.in_splits);
    else if (a.kind == SYMM_TM_A2A_COMBINE && (!a.in_offsets || !dev_accessible(a.in_offsets)))
        local = symm_error_set(SYMM_ERR_INVALID_ARG,
                               "%s: in_offsets %p is not memory this GPU "
                               "can read",
                               fn, (const void *)a.in_offsets);
    else if ((a.out_splits && !dev_accessible(a.out_splits)) ||
             (a.out_offsets && !dev_accessible(a.out_offsets)) ||
             (a.out_rows && !dev_accessible(a.out_rows)))
        local = symm_error_set(SYMM_ERR_INVALID_ARG,
                               "%s: out_splits, out_offsets or out_rows "
                               "is not memory this GPU can write",
                               fn);
    int nb;
    CHECK(pick_blocks(fn, resident_cap((const void *)k_a2a, nullptr, kA2aThreads), dp, 1, 0,
                      nblocks, &nb, kA2aThreads));
    char why[512] = "";
    if (local) {
        snprintf(why, sizeof why, "%s", symm_last_error());
        a.fail = local;
        a.out = nullptr;
        a.out_capacity = 0;
        a.out_splits = a.out_offsets = a.out_rows = nullptr;
    }
    a2a_params p;
    memset(&p, 0, sizeof p);
    p.pool = dp;
    p.fast = fast;
    p.a = a;
    p.a.trigger = 1;
    void *args[] = {&p};
    symm_status_t st = launched(fn, symm_cuda_launch_pdl((const void *)k_a2a, dim3(nb),
                                                         dim3(kA2aThreads), args, 0, stream));
    if (st) return st;
    if (local) return symm_error_set(local, "%s", why);
    return SYMM_SUCCESS;
}

} // namespace

extern "C" symm_status_t symm_tile_reduce_on_stream(symm_pool_t pool, symm_tile_t out,
                                                    symm_tile_t in, symm_type_t type,
                                                    symm_op_t op, int root, int nblocks,
                                                    cudaStream_t stream)
{
    return tile_run(__func__, pool, symm_tm::TILE_MULTI, out, &in, &root, 1, type, op, nblocks,
                    stream);
}

extern "C" symm_status_t symm_tile_allreduce_on_stream(symm_pool_t pool, symm_tile_t out,
                                                       symm_tile_t in, symm_type_t type,
                                                       symm_op_t op, int nblocks,
                                                       cudaStream_t stream)
{
    return tile_run(__func__, pool, symm_tm::TILE_ALL, out, &in, nullptr, 0, type, op, nblocks,
                    stream);
}

extern "C" symm_status_t symm_tile_reduce_multi_on_stream(symm_pool_t pool, symm_tile_t out,
                                                          const symm_tile_t *in,
                                                          const int *roots, int nroots,
                                                          symm_type_t type, symm_op_t op,
                                                          int nblocks, cudaStream_t stream)
{
    return tile_run(__func__, pool, symm_tm::TILE_MULTI, out, in, roots, nroots, type, op,
                    nblocks, stream);
}

extern "C" size_t symm_cuda_a2a_workspace_bytes(int n, int ne)
{
    return symm_tm_a2a_ws_bytes(n, ne);
}

extern "C" symm_status_t
symm_all_to_all_v_on_stream(symm_pool_t pool, void *out, size_t out_capacity, const void *in,
                            size_t in_capacity, const size_t *in_splits, size_t row_bytes,
                            size_t *out_splits, size_t *out_offsets, size_t *out_rows,
                            void *workspace, int nblocks, cudaStream_t stream)
{
    return a2a_run(__func__, pool,
                   symm_tm::a2a_args_make(SYMM_TM_A2A_1D, out, out_capacity, in, in_capacity,
                                          in_splits, nullptr, 1, row_bytes, 0, out_splits,
                                          out_offsets, out_rows, workspace),
                   nblocks, stream);
}

extern "C" symm_status_t symm_moe_dispatch_on_stream(
    symm_pool_t pool, void *out, size_t out_capacity, const void *in, size_t in_capacity,
    const size_t *in_splits, int ne, size_t row_bytes, size_t major_align, size_t *out_splits,
    size_t *out_offsets, size_t *out_rows, void *workspace, int nblocks, cudaStream_t stream)
{
    return a2a_run(__func__, pool,
                   symm_tm::a2a_args_make(SYMM_TM_A2A_DISPATCH, out, out_capacity, in,
                                          in_capacity, in_splits, nullptr, ne, row_bytes,
                                          major_align, out_splits, out_offsets, out_rows,
                                          workspace),
                   nblocks, stream);
}

extern "C" symm_status_t
symm_moe_combine_on_stream(symm_pool_t pool, void *out, size_t out_capacity, const void *in,
                           size_t in_capacity, const size_t *in_splits,
                           const size_t *in_offsets, int ne, size_t row_bytes,
                           size_t *out_splits, size_t *out_offsets, size_t *out_rows,
                           void *workspace, int nblocks, cudaStream_t stream)
{
    return a2a_run(__func__, pool,
                   symm_tm::a2a_args_make(SYMM_TM_A2A_COMBINE, out, out_capacity, in,
                                          in_capacity, in_splits, in_offsets, ne, row_bytes, 0,
                                          out_splits, out_offsets, out_rows, workspace),
                   nblocks, stream);
}

extern "C" int symm_cuda_tile_moe_auto_blocks(symm_pool_t pool, int kind, size_t bytes)
{
    symm_dev_pool_t dp;
    if (symm_cuda_pool_device(pool, &dp) || dp.size < 1) return 0;
    int cap = kind == 0 ? resident_cap(tile_kernel(SYMM_FLOAT, true))
                        : resident_cap((const void *)k_a2a, nullptr, kA2aThreads);
    return auto_blocks(cap, dp, kind, bytes);
}
