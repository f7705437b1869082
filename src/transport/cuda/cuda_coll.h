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

#ifdef __cplusplus
}
#endif
#endif
