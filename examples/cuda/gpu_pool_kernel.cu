/* gpu_pool_kernel.cu — a kernel of your own whose every block runs its own collective: a
 * pool of team duplicates made once, passed to the kernel by value, block b on duplicate b
 * reducing its tile row with every PE, launched with symm_cuda_launch (all blocks
 * resident on this PE's share of the GPU). Built with plain nvcc (static CUDA runtime) and
 * with -cudart shared; both work.
 *
 *   symmrun -n 4 build/bin/gpu_pool_kernel          (several PEs on one GPU: start MPS) */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "symm.h"
#include "symm_cuda.h"
#include "symm_device.cuh"

#define OK(call)                                                                               \
    do {                                                                                       \
        symm_status_t st_ = (call);                                                            \
        if (st_ != SYMM_SUCCESS) {                                                             \
            fprintf(stderr, "PE %d: %s: %s\n", symm_my_pe(), #call, symm_last_error());        \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static const int kCols = 4096; /* floats each block reduces */

/* Block b: row b of x, summed over every PE into row b of sum, on duplicate b. */
__global__ void k_rows(symm_dev_pool_t pool, float *sum, const float *x, int *failed)
{
    symm_dev_team_t team = symm_dev_pool_team(pool, blockIdx.x);
    size_t row = (size_t)blockIdx.x * kCols;
    int rc = symm_dev_allreduce_block(team, sum + row, x + row, (size_t)kCols, SYMM_OP_SUM);
    if (rc && threadIdx.x == 0) atomicAdd(failed, 1);
}

int main(void)
{
    OK(symm_init());
    symm_status_t st = symm_cuda_init();
    if (st == SYMM_ERR_UNSUPPORTED) {
        if (symm_my_pe() == 0) printf("no GPU here (%s)\n", symm_last_error());
        symm_finalize();
        return 0;
    }
    OK(st);
    const int me = symm_my_pe(), n = symm_n_pes();
    /* As many blocks as can be resident on every PE's share, at most 64. */
    int blocks = symm_cuda_max_resident_blocks((const void *)k_rows, 256, 0);
    int *all = (int *)symm_malloc(sizeof(int) * (size_t)(n + 1));
    all[n] = blocks;
    OK(symm_fcollect(SYMM_TEAM_WORLD, all, all + n, sizeof(int)));
    for (int j = 0; j < n; j++)
        if (all[j] < blocks) blocks = all[j];
    if (blocks > 64) blocks = 64;

    symm_pool_t pool;
    OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, (size_t)blocks, &pool));
    symm_dev_pool_t dev_pool;
    OK(symm_cuda_pool_device(pool, &dev_pool));
    size_t len = (size_t)blocks * kCols;
    float *x = (float *)symm_gpu_malloc(len * sizeof(float));
    float *sum = (float *)symm_gpu_malloc(len * sizeof(float));
    int *failed = nullptr;
    cudaMalloc(&failed, sizeof(int));
    cudaMemset(failed, 0, sizeof(int));
    std::vector<float> h(len);
    for (size_t i = 0; i < len; i++)
        h[i] = (float)(me + 1) * 0.5f + (float)(i % 7);
    cudaMemcpy(x, h.data(), len * sizeof(float), cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
    OK(symm_barrier_all()); /* every PE's x is in place */

    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    void *args[] = {&dev_pool, &sum, &x, &failed};
    OK(symm_cuda_launch((const void *)k_rows, dim3(blocks), dim3(256), args, 0, s));
    cudaStreamSynchronize(s);
    OK(symm_cuda_check());

    int nfailed = 0;
    cudaMemcpy(&nfailed, failed, sizeof(int), cudaMemcpyDeviceToHost);
    cudaMemcpy(h.data(), sum, len * sizeof(float), cudaMemcpyDeviceToHost);
    size_t wrong = 0;
    for (size_t i = 0; i < len; i++) {
        float want = 0;
        for (int j = 0; j < n; j++)
            want += (float)(j + 1) * 0.5f + (float)(i % 7);
        wrong += h[i] != want;
    }
    if (me == 0)
        printf("%d PEs, %d blocks each on its own pool duplicate: %zu of %zu sums wrong, %d "
               "blocks failed\n",
               n, blocks, wrong, len, nfailed);

    cudaStreamDestroy(s);
    cudaFree(failed);
    OK(symm_gpu_free(sum));
    OK(symm_gpu_free(x));
    OK(symm_pool_destroy(pool));
    symm_free(all);
    OK(symm_finalize());
    return wrong || nfailed ? 1 : 0;
}
