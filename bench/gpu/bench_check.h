/* bench_check.h — the GPU benchmarks stop at the first failed call, naming it and the PE:
 * OK(symm call), CU(CUDA runtime call). */
#ifndef SYMM_BENCH_GPU_BENCH_CHECK_H
#define SYMM_BENCH_GPU_BENCH_CHECK_H

#include <cstdio>
#include <cstdlib>

#include "symm.h"

#define OK(x)                                                                              \
    do {                                                                                   \
        symm_status_t s_ = (x);                                                            \
        if (s_) {                                                                          \
            fprintf(stderr, "[PE %d] %s: %s\n", symm_my_pe(), #x, symm_last_error());      \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define CU(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "[PE %d] %s: %s\n", symm_my_pe(), #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#endif
