/* cuda_coll.h — what coll.cu (CUDA C++) needs from the C side of the transport; kept
 * apart from cuda_transport.h, which pulls in C11-only headers (stdatomic). */
#ifndef SYMM_TRANSPORT_CUDA_COLL_H
#define SYMM_TRANSPORT_CUDA_COLL_H

#include "symm_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For a collective on team: requires symm_cuda_init and membership, checks that dest
 * (dest_bytes) and src (src_bytes) lie in the GPU heap (0 bytes: not checked), attaches
 * the team's GPU state if needed (collective), and fills *t. */
symm_status_t symm_cuda_coll_prepare(const char *fn, symm_team_t team, symm_dev_team_t *t,
                                     const void *dest, size_t dest_bytes, const void *src,
                                     size_t src_bytes);
symm_status_t symm_cuda_error(const char *fn, cudaError_t e);
/* A pool's first chunk of duplicates as kernel parameters: symm's stream kernels resolve
 * duplicate b < count from these (no loads of the pool's tables) when n <= the maximum. */
#define SYMM_CUDA_FAST_MAX 8
typedef struct symm_cuda_fast {
    uint32_t count;      /* duplicates [0, count) are in the first chunk; 0: none */
    uint32_t block_size; /* bytes per duplicate per member */
    uint8_t *base[SYMM_CUDA_FAST_MAX]; /* member j's chunk base, as mapped here */
    int64_t delta[SYMM_CUDA_FAST_MAX]; /* member j's GPU heap address - mine */
} symm_cuda_fast_t;
/* symm_cuda_pool_device, and (fast != NULL) the pool's first chunk in *fast (count 0 when
 * the pool has more than SYMM_CUDA_FAST_MAX members): one lookup of the handle. */
symm_status_t symm_cuda_pool_device_fast(symm_pool_t pool, symm_dev_pool_t *out,
                                         symm_cuda_fast_t *fast);
/* symm_cuda_launch with programmatic dependent launch (SYMM_GPU_PDL): only for symm's own
 * kernels, which execute griddepcontrol.wait (symm_detail::pdl_wait) before they read or
 * write anything that earlier work on the stream may touch. */
symm_status_t symm_cuda_launch_pdl(const void *kernel, dim3 grid, dim3 block, void **args,
                                   size_t shared_mem, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
