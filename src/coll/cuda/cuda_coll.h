/* cuda_coll.h — what the stream collectives (coll.cu, tile_moe.cu: CUDA C++) need from
 * the C side: the common prologue of a collective on a team, the pool's device state and
 * the launch helper. */
#ifndef SYMM_COLL_CUDA_COLL_H
#define SYMM_COLL_CUDA_COLL_H

#include "symm_cuda.h"
#include "team/cuda/cuda_pool_dev.h"
#include "transport/cuda/cuda_launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For a collective on team enqueued on stream: requires symm_cuda_init and membership,
 * checks that dest (dest_bytes) and src (src_bytes) lie in the GPU heap (0 bytes: not
 * checked), attaches the team's GPU state and makes its engine if needed (collective;
 * refused while stream is captured into a CUDA graph), and fills *t (the team's own
 * duplicate) and *engine. */
symm_status_t symm_cuda_coll_prepare(const char *fn, symm_team_t team, symm_dev_team_t *t,
                                     const void *dest, size_t dest_bytes, const void *src,
                                     size_t src_bytes, cudaStream_t stream,
                                     symm_cuda_engine_t *engine);

#ifdef __cplusplus
}

/* The multi-block engine (tile_moe.cu), on a pool's device state dp / fast:
 * - symm_cuda_tile_launch: the tile reduce kernels (kind symm_tm::TILE_ALL or
 *   TILE_MULTI, as symm_tile_*_on_stream), nblocks 0 for the automatic count; share
 *   false: each root reduces its own tile alone (else the members share a root's tile
 *   when its out is symmetric);
 * - symm_cuda_copy_launch: broadcast (root's src into every dest), fcollect or alltoall
 *   (SYMM_CUDA_COPY_*) of nbytes per member, block b on duplicate b of dp.
 * Arguments checked by the caller, except what symm_cuda_tile_launch checks itself. */
enum { SYMM_CUDA_COPY_BROADCAST, SYMM_CUDA_COPY_FCOLLECT, SYMM_CUDA_COPY_ALLTOALL };
symm_status_t symm_cuda_tile_launch(const char *fn, const symm_dev_pool_t &dp,
                                    const symm_cuda_fast_t &fast, int kind, symm_tile_t out,
                                    const symm_tile_t *in, const int *roots, int nroots,
                                    symm_type_t type, symm_op_t op, int nblocks, bool share,
                                    cudaStream_t stream);
symm_status_t symm_cuda_copy_launch(const char *fn, const symm_dev_pool_t &dp,
                                    const symm_cuda_fast_t &fast, int kind, void *dest,
                                    const void *src, size_t nbytes, int root, int nblocks,
                                    cudaStream_t stream);
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
