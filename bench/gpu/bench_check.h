/* bench_check.h — what every GPU benchmark starts and checks with: bench_gpu_init (symm and
 * the GPU transport, or SKIP without a GPU); OK(symm call) and CU(CUDA runtime call) stop
 * at the first failed call, naming it and the PE. */
#ifndef SYMM_BENCH_GPU_BENCH_CHECK_H
#define SYMM_BENCH_GPU_BENCH_CHECK_H

#include <cstdio>
#include <cstdlib>

#include "symm_cuda.h"

#define OK(x)                                                                                  \
    do {                                                                                       \
        symm_status_t s_ = (x);                                                                \
        if (s_) {                                                                              \
            fprintf(stderr, "[PE %d] %s: %s\n", symm_my_pe(), #x, symm_last_error());          \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CU(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "[PE %d] %s: %s\n", symm_my_pe(), #x, cudaGetErrorString(e_));     \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* symm_init and symm_cuda_init; false where this machine has no GPU (PE 0 printed "SKIP: no
 * CUDA device" and symm is finalized: the benchmark returns 0). */
static inline bool bench_gpu_init(void)
{
    OK(symm_init());
    symm_status_t st = symm_cuda_init();
    if (st == SYMM_ERR_UNSUPPORTED) {
        if (symm_my_pe() == 0) printf("SKIP: no CUDA device\n");
        symm_finalize();
        return false;
    }
    OK(st);
    return true;
}

#endif
