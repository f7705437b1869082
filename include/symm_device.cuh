/* symm_device.cuh — symm's device API: pools of teams passed to kernels by value, and
 * block/warp/thread-scoped collectives and RMA on the GPU symmetric heap of the PEs of
 * one node, tile reduce and MoE all-to-all-v by the blocks of a kernel. Declarations only;
 * the bodies are in symm/impl/: dev__funcs.cuh (teams, synchronisation, collectives, RMA),
 * tile__funcs.cuh (tile reduce), a2a__funcs.cuh (all-to-all-v, MoE dispatch and combine),
 * topk__funcs.cuh (top-k MoE dispatch and weighted combine), topk_ll__funcs.cuh (their
 * low-latency stream forms).
 *
 * Usage (one duplicate per block, so that blocks never share synchronisation state):
 *
 *     __global__ void k(symm_dev_pool_t pool, float *buf, size_t n) {
 *         symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
 *         int rc = symm_dev_allreduce_block(t, buf, buf, n, SYMM_OP_SUM);
 *         ...
 *     }
 *     symm_dev_pool_t dp;  symm_cuda_pool_device(pool, &dp);   // host, see symm_cuda.h
 *     symm_cuda_launch((void *)k, grid, block, args, 0, stream); // all blocks resident
 *
 * Rules:
 * - PE numbers are team-relative (0..n-1). Addresses are this PE's addresses of objects
 *   in the GPU symmetric heap (symm_gpu_malloc); the library translates them per peer.
 * - A *_block call must be reached by every thread of the block (it uses __syncthreads),
 *   a *_warp call by every lane of the warp; plain calls by one thread.
 * - Collectives return 0 or a negative symm_status_t, the same value in every thread of
 *   the block. A failure is also recorded in the PE's device error buffer, which the host
 *   reads with symm_cuda_check(): SYMM_ERR_TEAM_BUSY when two blocks use one duplicate at
 *   once (the second one returns without communicating), SYMM_ERR_TIMEOUT when a member
 *   did not arrive within SYMM_TIMEOUT, SYMM_ERR_TEAM_INVALID for an index beyond the pool.
 * - Blocks that wait on peers must all be resident at once: launch with symm_cuda_launch,
 *   which checks the occupancy (counting the PEs that share the GPU) and refuses otherwise.
 * - Collective buffers must not be reused by the caller before the call returns; after it
 *   returns they may (every collective ends with a synchronisation). */
#ifndef SYMM_DEVICE_CUH
#define SYMM_DEVICE_CUH

#include "symm.h"
#include "symm/impl/dev__types.cuh"

#ifdef __CUDACC__

#define SYMM_DEV __device__ __forceinline__

/* ---------------------------------------------------------------- teams */
/* Duplicate i of the pool, O(1). An out-of-range i gives a team with n == 0, on which
 * every call returns SYMM_ERR_TEAM_INVALID. */
SYMM_DEV symm_dev_team_t symm_dev_pool_team(const symm_dev_pool_t &pool, uint32_t i);
SYMM_DEV int symm_dev_team_my_pe(const symm_dev_team_t &t);
SYMM_DEV int symm_dev_team_n_pes(const symm_dev_team_t &t);
/* Member pe's address of the symmetric GPU object at my address addr (load/store-able
 * from this GPU). */
template <typename T> SYMM_DEV T *symm_dev_ptr(const symm_dev_team_t &t, T *addr, int pe);

/* Holds the duplicate for this block across several calls (each collective otherwise
 * claims and releases it itself). Returns SYMM_ERR_TEAM_BUSY if another block holds it. */
SYMM_DEV int symm_dev_team_claim_block(const symm_dev_team_t &t);
SYMM_DEV void symm_dev_team_release_block(const symm_dev_team_t &t);

/* ---------------------------------------------------------------- synchronisation */
/* barrier: completes this block's earlier stores/puts to peers, then synchronises. */
SYMM_DEV int symm_dev_barrier_block(const symm_dev_team_t &t);
SYMM_DEV int symm_dev_barrier_warp(const symm_dev_team_t &t);
SYMM_DEV int symm_dev_barrier(const symm_dev_team_t &t); /* one thread */
/* sync: synchronisation only (orders nothing beyond the flags themselves). */
SYMM_DEV int symm_dev_sync_block(const symm_dev_team_t &t);

/* ---------------------------------------------------------------- collectives (block) */
/* root's src (nbytes) into every member's dest. */
SYMM_DEV int symm_dev_broadcast_block(const symm_dev_team_t &t, void *dest, const void *src,
                                      size_t nbytes, int root);
/* dest[i] = op over members of src[i], folded in team order ((m0 op m1) op m2) ...;
 * dest written on root only / on every member. T: any C integer, float, double, __half,
 * __nv_bfloat16 (fp16/bf16: each combine computed in float and rounded to nearest even,
 * as symm_reduce does on the CPU). Results are bitwise equal on every member and to the
 * host collectives' on the same data. */
template <typename T>
SYMM_DEV int symm_dev_reduce_block(const symm_dev_team_t &t, T *dest, const T *src,
                                   size_t count, symm_op_t op, int root);
template <typename T>
SYMM_DEV int symm_dev_allreduce_block(const symm_dev_team_t &t, T *dest, const T *src,
                                      size_t count, symm_op_t op);
/* dest = every member's src (nbytes each) in team order. */
SYMM_DEV int symm_dev_fcollect_block(const symm_dev_team_t &t, void *dest, const void *src,
                                     size_t nbytes);
/* Block j (nbytes) of src goes to member j's dest at block (my team pe). */
SYMM_DEV int symm_dev_alltoall_block(const symm_dev_team_t &t, void *dest, const void *src,
                                     size_t nbytes);

/* ---------------------------------------------------------------- RMA */
/* dest (put) / src (get) is symmetric; the other side is any memory of this GPU.
 * Visible to pe after a later barrier, or use put_signal. */
SYMM_DEV void symm_dev_put_block(const symm_dev_team_t &t, void *dest, const void *src,
                                 size_t nbytes, int pe);
SYMM_DEV void symm_dev_get_block(const symm_dev_team_t &t, void *dest, const void *src,
                                 size_t nbytes, int pe);
SYMM_DEV void symm_dev_put_warp(const symm_dev_team_t &t, void *dest, const void *src,
                                size_t nbytes, int pe);
SYMM_DEV void symm_dev_get_warp(const symm_dev_team_t &t, void *dest, const void *src,
                                size_t nbytes, int pe);
SYMM_DEV void symm_dev_put(const symm_dev_team_t &t, void *dest, const void *src, size_t nbytes,
                           int pe);
SYMM_DEV void symm_dev_get(const symm_dev_team_t &t, void *dest, const void *src, size_t nbytes,
                           int pe);
/* Put, then (once the data is visible to pe) set or add signal to pe's *sig. */
SYMM_DEV void symm_dev_put_signal_block(const symm_dev_team_t &t, void *dest, const void *src,
                                        size_t nbytes, uint64_t *sig, uint64_t signal,
                                        symm_sigop_t sigop, int pe);
SYMM_DEV void symm_dev_put_signal(const symm_dev_team_t &t, void *dest, const void *src,
                                  size_t nbytes, uint64_t *sig, uint64_t signal,
                                  symm_sigop_t sigop, int pe);
/* Signal only (no data). */
SYMM_DEV void symm_dev_signal(const symm_dev_team_t &t, uint64_t *sig, uint64_t signal,
                              symm_sigop_t sigop, int pe);
/* One thread: waits until the local *sig compares true against value (acquire); returns
 * 0 and *value_out (may be NULL), or SYMM_ERR_TIMEOUT after the team's timeout. */
SYMM_DEV int symm_dev_signal_wait_until(const symm_dev_team_t &t, uint64_t *sig, symm_cmp_t cmp,
                                        uint64_t value, uint64_t *value_out);
/* Completes this thread's earlier puts (system-scope fence). */
SYMM_DEV void symm_dev_quiet(void);

/* ---------------------------------------------------------------- tile reduce (block) */
/* symm_tile_reduce, symm_tile_allreduce and symm_tile_reduce_multi of symm.h by the
 * blocks of a kernel: every member launches the same grid, and each block calls with its
 * own duplicate, part = blockIdx.x, nparts = gridDim.x and the same other arguments as on
 * every member; block `part` handles its share of the tile. The results are bytewise
 * those of the CPU calls (members folded in team order, fp16/bf16 rounded after every
 * combine, fp8 folded in float and rounded once). T: int8_t .. uint64_t, float, double,
 * __half, __nv_bfloat16, __nv_fp8_e4m3, __nv_fp8_e5m2. Tiles
 * (symm_tile_t): element-aligned, in the GPU symmetric heap; a rooted out may be any
 * memory of the root's GPU. Tiles whose rows start 16-byte aligned and hold whole 16-byte
 * vectors take the fast path. Arguments every member passes alike are checked alike: each
 * member returns the same error without communicating; a root whose own out is bad still
 * takes part (nothing is written anywhere) and returns the error.
 *
 *     symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
 *     int rc = symm_dev_tile_allreduce_block<float>(t, out, in, SYMM_OP_SUM,
 *                                                   blockIdx.x, gridDim.x);
 *
 * out_symmetric (rooted forms): the caller vouches that the root's out is in the GPU
 * symmetric heap, so that on the fast path every member reduces a share straight into it
 * (otherwise the root reads every member's tile alone). */
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_block(const symm_dev_team_t &t, symm_tile_t out,
                                        symm_tile_t in, symm_op_t op, int root, uint32_t part,
                                        uint32_t nparts, bool out_symmetric = false);
template <typename T>
SYMM_DEV int symm_dev_tile_allreduce_block(const symm_dev_team_t &t, symm_tile_t out,
                                           symm_tile_t in, symm_op_t op, uint32_t part,
                                           uint32_t nparts);
/* in[] and roots[] (nroots each) must be readable by the device (device memory, or a
 * __grid_constant__ kernel parameter). */
template <typename T>
SYMM_DEV int symm_dev_tile_reduce_multi_block(const symm_dev_team_t &t, symm_tile_t out,
                                              const symm_tile_t *in, const int *roots,
                                              int nroots, symm_op_t op, uint32_t part,
                                              uint32_t nparts, bool out_symmetric = false);

/* ---------------------------------------------------------------- MoE all-to-all-v (block) */
/* symm_all_to_all_v, symm_moe_dispatch and symm_moe_combine of symm.h by the blocks of a
 * kernel, called as the tile calls above (part = blockIdx.x, nparts = gridDim.x), with the
 * CPU calls' arguments and:
 * - in_capacity: the rows of in; every member checks its own splits against it (ignored
 *   when in is NULL). in is symmetric, any object on each member, or NULL on a member that
 *   sends no rows (one whose splits send rows from a NULL in fails every member with
 *   SYMM_ERR_INVALID_ARG).
 * - ws: a workspace of symm_tm_a2a_ws_bytes(n, ne) bytes in the GPU symmetric heap (the
 *   host's symm_cuda_a2a_workspace_bytes gives the same), through which the split tables
 *   are exchanged on the device. Two calls that follow each other in one kernel must use
 *   different workspaces (a peer's block may still be reading the first).
 * - the count arrays (size_t) are in this GPU's memory; part 0 writes out_splits,
 *   out_offsets and *out_rows (each may be NULL).
 * Every member reaches the same verdict: a bad status or argument anywhere, or an output
 * that would not fit, fails every member, and nothing is written.
 *
 *     rc = symm_dev_moe_dispatch_block(t, out, cap, in, in_cap, splits, ne, row_bytes,
 *                                      align, out_splits, out_offsets, &rows, ws,
 *                                      blockIdx.x, gridDim.x);
 */
/* Bytes of workspace for n members with ne experts each (0 when n * ne >= 2^31). */
static __host__ __device__ __forceinline__ size_t symm_tm_a2a_ws_bytes(int n, int ne);
SYMM_DEV int symm_dev_all_to_all_v_block(const symm_dev_team_t &t, void *out,
                                         size_t out_capacity, const void *in,
                                         size_t in_capacity, const size_t *in_splits,
                                         size_t row_bytes, size_t *out_splits,
                                         size_t *out_offsets, size_t *out_rows, void *ws,
                                         uint32_t part, uint32_t nparts);
SYMM_DEV int symm_dev_moe_dispatch_block(const symm_dev_team_t &t, void *out,
                                         size_t out_capacity, const void *in,
                                         size_t in_capacity, const size_t *in_splits, int ne,
                                         size_t row_bytes, size_t major_align,
                                         size_t *out_splits, size_t *out_offsets,
                                         size_t *out_rows, void *ws, uint32_t part,
                                         uint32_t nparts);
SYMM_DEV int symm_dev_moe_combine_block(const symm_dev_team_t &t, void *out,
                                        size_t out_capacity, const void *in, size_t in_capacity,
                                        const size_t *in_splits, const size_t *in_offsets,
                                        int ne, size_t row_bytes, size_t *out_splits,
                                        size_t *out_offsets, size_t *out_rows, void *ws,
                                        uint32_t part, uint32_t nparts);

/* ---------------------------------------------------------------- MoE top-k (blocks) */
/* symm_moe_topk_dispatch and symm_moe_topk_combine of symm.h by the blocks of a kernel
 * (part = blockIdx.x, nparts = gridDim.x, the same arguments on every block of a member),
 * with the CPU calls' arguments and results (the same bytes and bits), and:
 * - the layout is worked out on the device: topk_idx (and side, nside entries), the
 *   weights and topk_rows are in this GPU's memory, as are the outputs;
 * - ws: a workspace of symm_tm_topk_ws_bytes(n, ne, tokens, k) bytes for this member's
 *   tokens (a combine needs the size for 0 tokens) in the GPU symmetric heap, 16-byte
 *   aligned, zeroed once before its first use (cudaMemset): the member's blocks meet on
 *   words of it (a barrier, the flags of a spread route), which every call leaves ready
 *   for the next. One call at a time per workspace; two calls that follow each other in
 *   one kernel use different ones.
 * - block 0 of each member runs the rounds between members on its duplicate t (the other
 *   blocks' duplicates are not used); the other blocks wait for it on the workspace, and
 *   from SYMM_PLAN_TOPK_SPREAD (4096) slots on route the member's slots with it. The
 *   nparts blocks of a member must be resident together.
 * Every member reaches the same verdict (a bad expert id or argument anywhere, an output
 * beyond a member's out_capacity, a topk_rows entry beyond its member's rows): every
 * block of every member returns it and nothing is written. */
static __host__ __device__ __forceinline__ size_t symm_tm_topk_ws_bytes(int n, int ne,
                                                                        size_t tokens, int k);
SYMM_DEV int
symm_dev_moe_topk_dispatch_block(const symm_dev_team_t &t, void *out, size_t out_capacity,
                                 const void *in, size_t tokens, size_t row_bytes,
                                 const int64_t *topk_idx, int k, int ne, size_t major_align,
                                 const symm_moe_side_t *side, int nside, size_t *out_counts,
                                 size_t *out_offsets, symm_moe_src_t *out_src, size_t *out_rows,
                                 int64_t *topk_rows, void *ws, uint32_t part, uint32_t nparts);
SYMM_DEV int symm_dev_moe_topk_combine_block(const symm_dev_team_t &t, void *out, size_t tokens,
                                             const void *in, size_t in_rows, size_t hidden,
                                             symm_type_t type, const int64_t *topk_idx,
                                             const int64_t *topk_rows,
                                             const float *topk_weights, int k, int ne, void *ws,
                                             uint32_t part, uint32_t nparts);

#include "symm/impl/dev__funcs.cuh"

#include "symm/impl/a2a__funcs.cuh"
#include "symm/impl/tile__funcs.cuh"
#include "symm/impl/topk__funcs.cuh"
#include "symm/impl/topk_ll__funcs.cuh"

#endif /* __CUDACC__ */
#endif /* SYMM_DEVICE_CUH */
