/* gpu_test.h — helpers of the GPU tests (CUDA C++): failure reporting that names the PE,
 * the "no GPU" skip, and a deterministic per-(PE, element) value generator so that any
 * PE can compute every other PE's input for the serial references. */
#ifndef SYMM_GPU_TEST_H
#define SYMM_GPU_TEST_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "symm.h"
#include "symm_cuda.h"

static inline void gt_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL %s:%d [PE %d]: %s (last error: %s)\n", file, line, symm_my_pe(), msg,
            symm_last_error());
    fflush(stderr);
    exit(1);
}
#define GT_FAIL(...) gt_fail(__FILE__, __LINE__, __VA_ARGS__)
#define GT_OK(expr)                                                                       \
    do {                                                                                  \
        symm_status_t s_ = (expr);                                                        \
        if (s_ != SYMM_SUCCESS) GT_FAIL("%s returned %d (%s)", #expr, (int)s_,            \
                                        symm_strerror(s_));                               \
    } while (0)
#define GT_CUDA(expr)                                                                     \
    do {                                                                                  \
        cudaError_t e_ = (expr);                                                          \
        if (e_ != cudaSuccess) GT_FAIL("%s: %s", #expr, cudaGetErrorString(e_));          \
    } while (0)
#define GT_TRUE(cond, ...)                                                                \
    do {                                                                                  \
        if (!(cond)) GT_FAIL(__VA_ARGS__);                                                \
    } while (0)

/* symm_init + symm_cuda_init; returns 0 after printing the skip line if no GPU. */
static inline int gt_init(void)
{
    GT_OK(symm_init());
    symm_status_t st = symm_cuda_init();
    if (st == SYMM_ERR_UNSUPPORTED) {
        if (symm_my_pe() == 0) printf("SKIP: no CUDA device (%s)\n", symm_last_error());
        fflush(stdout);
        symm_finalize();
        return 0;
    }
    GT_OK(st);
    return 1;
}

static inline uint64_t gt_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* 64 random bits for (seed, pe, i); never constant over i. */
static inline uint64_t gt_bits(uint64_t seed, int pe, size_t i)
{
    return gt_mix(seed * 1000003u + gt_mix((uint64_t)pe * 0x100000001b3ull + i));
}
/* A double in [-1, 1). */
static inline double gt_unit(uint64_t seed, int pe, size_t i)
{
    return (double)(gt_bits(seed, pe, i) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

#endif
