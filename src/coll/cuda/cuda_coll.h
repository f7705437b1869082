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
 * checked), attaches the team's GPU state if needed (collective; refused while stream is
 * captured into a CUDA graph), and fills *t. */
symm_status_t symm_cuda_coll_prepare(const char *fn, symm_team_t team, symm_dev_team_t *t,
                                     const void *dest, size_t dest_bytes, const void *src,
                                     size_t src_bytes, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
