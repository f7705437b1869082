/* gpu_test.h — helpers of the GPU tests (CUDA C++): failure reporting that names the PE,
 * the "no GPU" skip, copies that finish before the next kernel, and a deterministic
 * per-(PE, element) value generator so that any PE can compute every other PE's input for
 * the serial references. */
#ifndef SYMM_GPU_TEST_H
#define SYMM_GPU_TEST_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../common/test_util.h"
#include "symm.h"
#include "symm_cuda.h"

/* The GPU tests report failures as the CPU tests do (common/test_util.h): GT_OK and
 * GT_TRUE are CHECK_OK and CHECK_TRUE; GT_FAIL is TEST_FAIL with the last error. */
#define GT_FAIL(...) test_fail_last_(__FILE__, __LINE__, __VA_ARGS__)
#define GT_OK(expr)  CHECK_OK(expr)
#define GT_CUDA(expr)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (expr);                                                               \
        if (e_ != cudaSuccess) GT_FAIL("%s: %s", #expr, cudaGetErrorString(e_));               \
    } while (0)
#define GT_TRUE(cond, ...) CHECK_TRUE(cond, __VA_ARGS__)

/* The library's kernels run on a non-blocking stream, which does not wait for work on the
 * legacy stream: a cudaMemset of device memory, or a cudaMemcpy from pageable host
 * memory, may still be landing when the next kernel starts. These finish them first. */
static inline cudaError_t gt_memset_sync(void *p, int v, size_t n)
{
    cudaError_t e = cudaMemset(p, v, n);
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}
static inline cudaError_t gt_memcpy_sync(void *d, const void *s, size_t n, cudaMemcpyKind k)
{
    cudaError_t e = cudaMemcpy(d, s, n, k);
    return e != cudaSuccess ? e : cudaDeviceSynchronize();
}
/* n size_t values from device memory. */
static inline std::vector<size_t> gt_d2h(const size_t *d, size_t n)
{
    std::vector<size_t> h(n);
    if (n) GT_CUDA(gt_memcpy_sync(h.data(), d, n * sizeof(size_t), cudaMemcpyDeviceToHost));
    return h;
}

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
