/* symm_cuda.h — the host API of symm's GPU transport (C-callable): the GPU symmetric
 * heap of the PEs of one node (CUDA IPC), pools of teams on the device, a launch helper
 * that keeps waiting blocks resident, device error reports, and collectives on GPU
 * buffers enqueued on a CUDA stream. Device-side calls are in symm_device.cuh. */
#ifndef SYMM_CUDA_H
#define SYMM_CUDA_H

#include <cuda_runtime_api.h>

#include "symm.h"
#include "symm/impl/dev__types.cuh"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- init */
/* Collective over the world, after symm_init. Picks this PE's GPU (SYMM_GPU_DEVICE if
 * >= 0, else world rank mod the number of visible GPUs), allocates its GPU heap
 * (SYMM_GPU_HEAP_SIZE, plus a team region for pool state) and maps every other PE's heap
 * through CUDA IPC. SYMM_ERR_UNSUPPORTED (message "no CUDA device") where there is no GPU
 * or SYMM_GPU=off. symm_finalize releases everything (after a device synchronisation). */
symm_status_t symm_cuda_init(void);
int symm_cuda_initialized(void);
/* The CUDA device this PE uses; -1 before symm_cuda_init. */
int symm_cuda_device(void);
/* Number of PEs of the node that share this PE's GPU (MPS), >= 1. */
int symm_cuda_device_sharers(void);

/* ---------------------------------------------------------------- GPU symmetric heap */
/* Collective over the world (same calls on every PE, like symm_malloc); the object has
 * the same offset in every PE's GPU heap. Device memory, not zeroed. NULL on error. */
void *symm_gpu_malloc(size_t size);
/* Collective; synchronises this PE's device first (no kernel may still use it). */
symm_status_t symm_gpu_free(void *ptr);
/* PE pe's copy (as mapped in this process: a device address usable by this PE's
 * kernels and cudaMemcpy) of the GPU symmetric object at addr; NULL if not symmetric. */
void *symm_gpu_ptr(const void *addr, int pe);

typedef struct symm_cuda_info {
    size_t heap_size, heap_used; /* user GPU heap */
    size_t team_size, team_used; /* GPU state of teams and pools */
    int device, sharers;
} symm_cuda_info_t;
symm_status_t symm_cuda_get_info(symm_cuda_info_t *out);

/* ---------------------------------------------------------------- pools on the device */
/* symm_pool_create plus the pool's GPU state: collective over team's members, O(1)
 * rounds whatever n. symm_pool_destroy / symm_pool_release / symm_finalize free the GPU
 * state too. */
symm_status_t symm_cuda_pool_create(symm_team_t team, size_t n, symm_pool_t *out);
/* The pool as a kernel argument (by value). Collective over the members when the pool
 * has no GPU state yet or has grown (symm_pool_grow / symm_pool_get) since the last call
 * (one exchange: O(1) rounds); otherwise local and cheap. Values from before a growth
 * stay valid for the duplicates they cover. */
symm_status_t symm_cuda_pool_device(symm_pool_t pool, symm_dev_pool_t *out);
/* One team (a pool duplicate, a plain team, WORLD or NODE) as a kernel argument; same
 * collective rule as symm_cuda_pool_device. */
symm_status_t symm_cuda_team_device(symm_team_t team, symm_dev_team_t *out);

/* SMs this PE can count on having at once, so that the grids of all the PEs on its GPU
 * can be resident together: an equal part, among them, of the SMs the device reports to
 * this process. Under MPS, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE reduces what a process sees,
 * and which SMs its blocks get the driver decides: symm_cuda_init then measures how many
 * blocks per PE stay resident together (a probe, up to what the process sees, to within
 * an eighth of an equal part) and counts on that much less than the most that did. 0
 * before symm_cuda_init. */
int symm_cuda_sm_share(void);

/* The library's two halves of symm_cuda_launch below, which runs the occupancy query and
 * the launch in the caller's CUDA runtime (a program built with the static runtime has
 * its kernels registered there only). admit: SYMM_SUCCESS if blocks of threads each,
 * blocks_per_sm of them per SM, can all be resident on this PE's share, else
 * SYMM_ERR_INVALID_ARG naming the limit. failed: SYMM_ERR_CUDA from a launch's error. */
symm_status_t symm_cuda_launch_admit(const char *fn, const void *kernel,
                                     unsigned long long blocks, int threads, int blocks_per_sm);
symm_status_t symm_cuda_launch_failed(const char *fn, int cuda_error, const char *name,
                                      const char *text);

/* Blocks of kernel per SM (with threads per block and shared_mem), in the caller's CUDA
 * runtime; remembered per thread for the last few kernels. 0 when it cannot be had. */
static inline int symm_cuda_blocks_per_sm_(const void *kernel, int threads, size_t shared_mem)
{
    static __thread struct {
        const void *kernel;
        int threads, per_sm;
        size_t smem;
    } memo[8];
    static __thread unsigned next;
    for (unsigned i = 0; i < 8; i++)
        if (memo[i].kernel == kernel && memo[i].threads == threads &&
            memo[i].smem == shared_mem)
            return memo[i].per_sm;
    int per_sm = 0;
    if (!kernel || cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads,
                                                                 shared_mem) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    unsigned i = next++ % 8;
    memo[i].kernel = kernel;
    memo[i].threads = threads;
    memo[i].smem = shared_mem;
    memo[i].per_sm = per_sm;
    return per_sm;
}

/* Most blocks of kernel (with block threads and shared_mem) that symm_cuda_launch accepts. */
static inline int symm_cuda_max_resident_blocks(const void *kernel, int threads,
                                                size_t shared_mem)
{
    return symm_cuda_blocks_per_sm_(kernel, threads, shared_mem) * symm_cuda_sm_share();
}

/* Launches kernel (cudaLaunchKernel arguments) after checking that all grid blocks can
 * be resident at once on this PE's share of the GPU (blocks waiting on peers would
 * otherwise wait for ever): SYMM_ERR_INVALID_ARG naming the limit if not. Inline, so
 * that it works for kernels of a program built with the static CUDA runtime (plain
 * `nvcc`) as with the shared one. */
static inline symm_status_t symm_cuda_launch(const void *kernel, dim3 grid, dim3 block,
                                             void **args, size_t shared_mem,
                                             cudaStream_t stream)
{
    static const char fn[] = "symm_cuda_launch";
    unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    int threads = (int)(block.x * block.y * block.z);
    symm_status_t st = symm_cuda_launch_admit(
        fn, kernel, blocks, threads,
        kernel ? symm_cuda_blocks_per_sm_(kernel, threads, shared_mem) : 0);
    if (st != SYMM_SUCCESS) return st;
    cudaError_t e = cudaLaunchKernel(kernel, grid, block, args, shared_mem, stream);
    if (e == cudaSuccess) return SYMM_SUCCESS;
    return symm_cuda_launch_failed(fn, (int)e, cudaGetErrorName(e), cudaGetErrorString(e));
}

/* Synchronises the device and reads this PE's device error buffer: SYMM_SUCCESS, or the
 * first error a device call met since the last check (SYMM_ERR_TEAM_BUSY naming the
 * pool, duplicate and both blocks; SYMM_ERR_TIMEOUT naming the missing team PE), with
 * the count in the message. Clears the buffer. Also reports CUDA errors. */
symm_status_t symm_cuda_check(void);

/* ---------------------------------------------------------------- collectives on a stream */
/* Collectives on GPU buffers enqueued on stream. Buffers are in the GPU symmetric heap;
 * every member calls with the same arguments. The call returns once the work is enqueued
 * (argument errors at once, device-side errors through symm_cuda_check). Results are
 * bytewise those of the CPU calls (reductions combine in team order, member 0 first).
 * - Up to about 4 KiB contributed per member: the latency path, one launch of one block:
 *   each member writes its bytes as words that carry the call's episode and reads the
 *   others' words as they arrive (no round before the reads).
 * - Above: the multi-block kernels of the tile reduce and MoE calls (one block per 32 KiB
 *   moved, up to what this PE's share of the GPU holds), block b on duplicate b of a pool
 *   of the team that symm keeps for it. An allreduce is a one-row tile allreduce.
 * SYMM_GPU_COLL_BLOCKS=N >= 2 runs every size on N blocks; 1, every size on one block of
 * the team's own duplicate (also the form used where the team's pool cannot be made).
 * The first call on a team makes its GPU state and that pool (collective, through the
 * host): make it outside a CUDA graph capture (a captured first call fails with
 * SYMM_ERR_UNSUPPORTED). Every call can then be captured and replayed. */
symm_status_t symm_barrier_on_stream(symm_team_t team, cudaStream_t stream);
symm_status_t symm_broadcast_on_stream(symm_team_t team, void *dest, const void *src,
                                       size_t nbytes, int root, cudaStream_t stream);
symm_status_t symm_reduce_on_stream(symm_team_t team, void *dest, const void *src, size_t count,
                                    symm_type_t type, symm_op_t op, int root,
                                    cudaStream_t stream);
symm_status_t symm_allreduce_on_stream(symm_team_t team, void *dest, const void *src,
                                       size_t count, symm_type_t type, symm_op_t op,
                                       cudaStream_t stream);
/* src holds n_pes blocks of count elements; member r gets the reduction of block r. */
symm_status_t symm_reduce_scatter_on_stream(symm_team_t team, void *dest, const void *src,
                                            size_t count, symm_type_t type, symm_op_t op,
                                            cudaStream_t stream);
symm_status_t symm_fcollect_on_stream(symm_team_t team, void *dest, const void *src,
                                      size_t nbytes, cudaStream_t stream);
symm_status_t symm_alltoall_on_stream(symm_team_t team, void *dest, const void *src,
                                      size_t nbytes, cudaStream_t stream);

/* ---------------------------------------------------------------- tile reduce and MoE on a
 * stream */
/* (src/coll/cuda/tile_moe.cu; the device calls are declared in symm_device.cuh.)
 * The CPU calls of symm.h run by a kernel of nblocks blocks on pool's duplicates
 * 0..nblocks-1 (block b, on its own duplicate, handles the chunks dealt to it: tiles
 * with 16-byte aligned rows of whole 16-byte vectors are cut into 32 KiB chunks, MoE rows
 * into chunks of at most 64 KiB, dealt round-robin over the blocks), enqueued on stream;
 * the results are bytewise those of the CPU calls. nblocks = 0 chooses from the problem
 * and the GPU (occupancy, SM count, PEs sharing the GPU, pool size): members must reach
 * the same count, which they do when their GPUs are alike and equally shared; otherwise
 * pass it. An nblocks larger than the pool, or than the blocks that can be resident at
 * once on this PE's share of the GPU (blocks wait on their peers), is refused
 * (SYMM_ERR_INVALID_ARG) before anything is launched. Buffers are in the GPU symmetric heap
 * except where said; every member passes the same arguments. Argument errors are reported at
 * once (and, where only this member can see them, its kernel still takes part in the
 * synchronisation so that peers do not wait for ever); device-side errors through
 * symm_cuda_check(). */

/* Tiles (symm_tile_t of symm.h): in (and out of the allreduce) symmetric and aligned to
 * the element size; a rooted out may be any memory of the root's GPU. Every type and op
 * of symm_tile_reduce, any shape and ld, empty tiles (still collective). Rooted and
 * multi-root: when a root's out is in the GPU symmetric heap (only the root's out: the
 * others' are not read) and the tiles have 16-byte aligned rows of whole 16-byte
 * vectors, every member reduces a share of that tile straight into the root's out, as
 * the allreduce shares its work; otherwise the root reads every member's tile itself. */
symm_status_t symm_tile_reduce_on_stream(symm_pool_t pool, symm_tile_t out, symm_tile_t in,
                                         symm_type_t type, symm_op_t op, int root, int nblocks,
                                         cudaStream_t stream);
symm_status_t symm_tile_allreduce_on_stream(symm_pool_t pool, symm_tile_t out, symm_tile_t in,
                                            symm_type_t type, symm_op_t op, int nblocks,
                                            cudaStream_t stream);
symm_status_t symm_tile_reduce_multi_on_stream(symm_pool_t pool, symm_tile_t out,
                                               const symm_tile_t *in, const int *roots,
                                               int nroots, symm_type_t type, symm_op_t op,
                                               int nblocks, cudaStream_t stream);

/* MoE (the symm.h calls, counts and offsets in rows, as size_t). The split tables are
 * exchanged on the device, never through the host: in_splits / in_offsets and the
 * outputs out_splits / out_offsets / *out_rows (each may be NULL) are in this GPU's
 * memory (device, managed or registered host memory), read and written by the kernel.
 * in (symmetric) holds in_capacity rows: every member checks its own splits against it
 * on the device. As in symm.h, members may pass different symmetric objects as in, and in
 * may be NULL on a member that sends no rows (in_capacity is then ignored); a member whose
 * splits send rows from a NULL in fails every member with SYMM_ERR_INVALID_ARG (from
 * symm_cuda_check). out (out_capacity rows) is this GPU's memory, symmetric or not, and must
 * not overlap in. workspace is a symmetric buffer of at least
 * symm_cuda_a2a_workspace_bytes(n, ne) bytes (n = team size), used by one call at a time:
 * it may be reused by the next call on the same stream. Failures agreed on the device
 * (a member's splits beyond its in_capacity, an output beyond its out_capacity, members
 * passing different common arguments) fail every member (SYMM_ERR_OVERFLOW /
 * SYMM_ERR_MISMATCH from symm_cuda_check) and nothing is written. */
size_t symm_cuda_a2a_workspace_bytes(int n, int ne);
symm_status_t symm_all_to_all_v_on_stream(symm_pool_t pool, void *out, size_t out_capacity,
                                          const void *in, size_t in_capacity,
                                          const size_t *in_splits, size_t row_bytes,
                                          size_t *out_splits, size_t *out_offsets,
                                          size_t *out_rows, void *workspace, int nblocks,
                                          cudaStream_t stream);
symm_status_t symm_moe_dispatch_on_stream(symm_pool_t pool, void *out, size_t out_capacity,
                                          const void *in, size_t in_capacity,
                                          const size_t *in_splits, int ne, size_t row_bytes,
                                          size_t major_align, size_t *out_splits,
                                          size_t *out_offsets, size_t *out_rows,
                                          void *workspace, int nblocks, cudaStream_t stream);
symm_status_t symm_moe_combine_on_stream(symm_pool_t pool, void *out, size_t out_capacity,
                                         const void *in, size_t in_capacity,
                                         const size_t *in_splits, const size_t *in_offsets,
                                         int ne, size_t row_bytes, size_t *out_splits,
                                         size_t *out_offsets, size_t *out_rows, void *workspace,
                                         int nblocks, cudaStream_t stream);
/* Top-k MoE (symm_moe_topk_dispatch / _combine of symm.h) on a stream: the layout is
 * worked out on the device, never through the host. topk_idx, topk_weights, topk_rows,
 * the side array's outs and every output are in this GPU's memory (device, managed or
 * registered host memory); side itself (nside entries) is read on the host at the call.
 * in and the side ins (tokens rows, NULL on a member that routes nothing) and the
 * combine's in are in the GPU symmetric heap; outs are this GPU's memory. workspace is a
 * symmetric buffer of at least symm_cuda_moe_topk_workspace_bytes(n, ne, tokens, k) bytes
 * for this member's tokens (a combine needs it for 0 tokens), 16-byte aligned, zeroed
 * once before its first use, used by one call at a time (the next call on the same
 * stream may reuse it). Block 0 of the kernel runs the rounds on pool duplicate 0, the
 * others share the rows; nblocks = 0: one block per SM of this PE's share (at most the
 * pool's size). The kernel is launched plainly (stream order, no programmatic dependent
 * launch). Failures agreed on the device come back through symm_cuda_check(). */
size_t symm_cuda_moe_topk_workspace_bytes(int n, int ne, size_t tokens, int k);
symm_status_t symm_moe_topk_dispatch_on_stream(
    symm_pool_t pool, void *out, size_t out_capacity, const void *in, size_t tokens,
    size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows, void *workspace, int nblocks,
    cudaStream_t stream);
symm_status_t symm_moe_topk_combine_on_stream(symm_pool_t pool, void *out, size_t tokens,
                                              const void *in, size_t in_rows, size_t hidden,
                                              symm_type_t type, const int64_t *topk_idx,
                                              const int64_t *topk_rows,
                                              const float *topk_weights, int k, int ne,
                                              void *workspace, int nblocks,
                                              cudaStream_t stream);
/* Low-latency top-k MoE, for small token counts (decode): one kernel per call, no
 * host synchronisation, capturable in CUDA graphs. Every (local expert e, source member s)
 * pair of a receiver has its own region of max_tokens rows, so a sender writes its rows
 * straight into the receivers' outs without waiting for anyone's counts, then raises one
 * flag per receiver with its counts: the dispatch is one one-way hop, and its blocks never
 * meet. Launched with programmatic dependent launch (as the tile and MoE stream kernels;
 * SYMM_GPU_PDL=0: plainly). These forms are chosen by calling them, as DeepEP's
 * low_latency_dispatch / _combine are: their layout (regions of max_tokens rows, symmetric
 * outs) is not the packed forms' (expert-major segments, major_align), so
 * symm_moe_topk_dispatch_on_stream never switches to them by itself, whatever the token
 * count.
 *  - Dispatch: slot i of token t (topk_idx as in symm_moe_topk_dispatch; tokens <=
 *    max_tokens) routed to expert j*ne + e lands on member j at row
 *    (e*n + me)*max_tokens + r of out, r its arrival order among this member's rows for
 *    that expert (not a fixed order: out_src says which token and slot each row holds).
 *    out (n*ne*max_tokens rows of row_bytes), the side outs (as many rows of their
 *    row_bytes), out_counts (n*ne: out_counts[e*n + s] the rows from member s for expert
 *    e) and out_src (as many rows as out; may be NULL if no combine follows) are each the
 *    same symmetric object of the GPU heap on every member, written by the senders; in,
 *    the side ins and topk_idx are this GPU's memory. A token names each expert at most
 *    once (more than max_tokens rows from one member for one expert fail with
 *    SYMM_ERR_OVERFLOW). No topk_rows, no alignment: rows are found through out_counts.
 *  - Combine: in is this member's expert output laid out as the dispatch's out (n*ne*
 *    max_tokens rows of hidden elements of type; only the rows the dispatch filled are
 *    read), counts and src the dispatch's out_counts and out_src; every member reduces its
 *    own tokens as symm_moe_topk_combine does (fmaf in slot order, rounded once: the same
 *    bits), with tokens, topk_idx and topk_weights as passed to the dispatch. Where in
 *    (all n*ne*max_tokens rows) lies in the GPU symmetric heap, the owners read its rows
 *    in place: each row moves once, and the call ends with a second hop (every member
 *    done reading) so that in may be rewritten once the call is over. Otherwise (in is
 *    other memory of this GPU) this member first pushes each row into its token's owner's
 *    workspace (it then moves twice). The choice is each member's own, made on the host
 *    from the pointer alone (the same at every replay of a captured call).
 *  - Calls alternate on a workspace: dispatch, combine, dispatch, ... on every member (the
 *    next dispatch writes into the receivers' outs, and the next combine into the owners'
 *    workspaces, without asking: the alternation is what tells them the last ones were
 *    read). max_tokens, k, ne, row_bytes, the sides' row_bytes, hidden and type are the
 *    same on every member; the block count is chosen as for the other stream forms and
 *    each kernel's blocks must all be resident at once.
 *  - workspace: a symmetric buffer of symm_cuda_moe_topk_ll_workspace_bytes(n, ne,
 *    max_tokens, k, hidden x the type's size) bytes (0 as the last argument if no combine
 *    is run), 16-byte aligned, zeroed before its first use with a shape (n, ne,
 *    max_tokens, k: its layout follows them; zeroed again, on every member before any
 *    member's next call, to serve another shape), the same one for a dispatch and the
 *    combine that follows it.
 *  - Failures (a bad expert id, more tokens than max_tokens, members passing different
 *    common arguments) fail every member alike through symm_cuda_check(); rows (of any
 *    member, the failing one's too) may already have landed, and out_counts are then
 *    unspecified. */
size_t symm_cuda_moe_topk_ll_workspace_bytes(int n, int ne, size_t max_tokens, int k,
                                             size_t combine_row_bytes);
symm_status_t symm_moe_topk_dispatch_ll_on_stream(symm_pool_t pool, void *out, const void *in,
                                                  size_t tokens, size_t max_tokens,
                                                  size_t row_bytes, const int64_t *topk_idx,
                                                  int k, int ne, const symm_moe_side_t *side,
                                                  int nside, size_t *out_counts,
                                                  symm_moe_src_t *out_src, void *workspace,
                                                  int nblocks, cudaStream_t stream);
symm_status_t
symm_moe_topk_combine_ll_on_stream(symm_pool_t pool, void *out, size_t tokens, const void *in,
                                   size_t max_tokens, size_t hidden, symm_type_t type,
                                   const int64_t *topk_idx, const float *topk_weights, int k,
                                   int ne, const size_t *counts, const symm_moe_src_t *src,
                                   void *workspace, int nblocks, cudaStream_t stream);
/* The block count nblocks = 0 would choose for a tile reduce of `bytes` bytes per member
 * (kind 0) or for the MoE calls (kind 1), for this PE and pool. */
int symm_cuda_tile_moe_auto_blocks(symm_pool_t pool, int kind, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif /* SYMM_CUDA_H */
