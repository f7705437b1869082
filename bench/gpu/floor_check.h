/* floor_check.h — CK(CUDA runtime call) for the floor benchmarks, which run without symm:
 * stop at the first failed call, naming it and its line. */
#ifndef SYMM_BENCH_GPU_FLOOR_CHECK_H
#define SYMM_BENCH_GPU_FLOOR_CHECK_H

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s at line %d: %s\n", #x, __LINE__, cudaGetErrorString(e_));      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
