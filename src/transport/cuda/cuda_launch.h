/* cuda_launch.h — what CUDA C++ files (the stream collectives) need from the GPU
 * transport; kept apart from cuda_transport.h, which pulls in C11-only headers
 * (stdatomic). */
#ifndef SYMM_TRANSPORT_CUDA_LAUNCH_H
#define SYMM_TRANSPORT_CUDA_LAUNCH_H

#include "symm_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* SYMM_ERR_CUDA with fn, this PE, its device and e's name and text. */
symm_status_t symm_cuda_error(const char *fn, cudaError_t e);
/* symm_cuda_launch with programmatic dependent launch (SYMM_GPU_PDL): only for symm's own
 * kernels, which execute griddepcontrol.wait (symm_detail::pdl_wait) before they read or
 * write anything that earlier work on the stream may touch. */
symm_status_t symm_cuda_launch_pdl(const void *kernel, dim3 grid, dim3 block, void **args,
                                   size_t shared_mem, cudaStream_t stream);
/* The residency probe (residency.cu): 1 if `blocks` one-block-per-SM blocks of mine all
 * saw `total` blocks counted in *count within spin_ns, 0 if not, -1 on a CUDA error (*st
 * set). met: a zeroed word of my GPU memory. */
int symm_cuda_residency_probe(const char *fn, unsigned *count, unsigned total, int blocks,
                              unsigned long long spin_ns, unsigned *met, symm_status_t *st);
#ifdef __cplusplus
}
#endif
#endif
