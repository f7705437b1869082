/* test_gpu_launch.cu — symm_cuda_launch for a program's own kernel, built twice: with the
 * static CUDA runtime (plain nvcc) and with the shared one. Every block of a grid as
 * large as this PE's share allows runs an allreduce and a barrier on its own pool
 * duplicate, checked against a serial reference; one block more is refused with
 * SYMM_ERR_INVALID_ARG and nothing launched; a NULL kernel and a launch before
 * symm_cuda_init are refused; the share is what CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and the
 * PEs on the GPU leave. */
#include <vector>

#include "gpu_test.h"
#include "symm_device.cuh"

static const int kM = 777; /* floats per block: an odd length */

__global__ void k_blocks(symm_dev_pool_t pool, float *dst, const float *src, int *rc,
                         int *touched, int *smid)
{
    if (threadIdx.x == 0) {
        int id;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
        smid[blockIdx.x] = id;
    }
    const int b = blockIdx.x;
    symm_dev_team_t t = symm_dev_pool_team(pool, b);
    int r = symm_dev_allreduce_block(t, dst + (size_t)b * kM, src + (size_t)b * kM, (size_t)kM,
                                     SYMM_OP_SUM);
    int r2 = symm_dev_barrier_block(t);
    if (threadIdx.x == 0) {
        rc[b] = r ? r : r2;
        atomicAdd(touched, 1);
    }
}

static void check_share(void)
{
    int share = symm_cuda_sm_share(), seen = 0;
    GT_CUDA(cudaDeviceGetAttribute(&seen, cudaDevAttrMultiProcessorCount, symm_cuda_device()));
    int sharers = symm_cuda_device_sharers();
    GT_TRUE(share >= 1 && share <= seen, "share %d of %d SMs", share, seen);
    const char *p = getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    double pct = p && *p ? atof(p) : 100.0;
    /* The shares of all PEs on the GPU fit in the whole GPU. */
    double whole = pct > 0 && pct < 100 ? seen * 100.0 / pct : seen;
    GT_TRUE(share * sharers <= (int)(whole + 0.5), "share %d x %d PEs > %.0f SMs", share,
            sharers, whole);
    if (symm_my_pe() == 0)
        printf("ok: %d of %d SMs seen here (%d PEs on the GPU, %s%% of it each)\n", share, seen,
               sharers, p && *p ? p : "100");
}

static void check_launch(const char *runtime)
{
    const int me = symm_my_pe(), n = symm_n_pes();
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int cap = symm_cuda_max_resident_blocks((const void *)k_blocks, 256, 0);
    int per_sm = 0;
    GT_CUDA(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, (const void *)k_blocks, 256, 0));
    GT_TRUE(cap == per_sm * symm_cuda_sm_share() && cap >= 1,
            "%s runtime: max resident %d, %d per SM x %d SMs", runtime, cap, per_sm,
            symm_cuda_sm_share());
    /* Every PE uses the smallest cap, so that the grids match. */
    int *caps = (int *)symm_malloc(sizeof(int) * (size_t)(n + 1));
    GT_TRUE(caps, "symm_malloc");
    caps[n] = cap;
    GT_OK(symm_fcollect(SYMM_TEAM_WORLD, caps, caps + n, sizeof(int)));
    int blocks = cap;
    for (int j = 0; j < n; j++)
        if (caps[j] < blocks) blocks = caps[j];
    if (blocks > 256) blocks = 256;
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, (size_t)blocks, &pool));
    symm_dev_pool_t dp;
    GT_OK(symm_cuda_pool_device(pool, &dp));
    size_t len = (size_t)blocks * kM;
    float *src = (float *)symm_gpu_malloc(len * 4), *dst = (float *)symm_gpu_malloc(len * 4);
    int *rc = (int *)symm_gpu_malloc((size_t)blocks * 4), *touched = (int *)symm_gpu_malloc(4);
    int *smid = (int *)symm_gpu_malloc((size_t)(cap + 1) * 4);
    GT_TRUE(src && dst && rc && touched && smid, "symm_gpu_malloc");
    uint64_t seed = 0x51a7;
    std::vector<float> h(len);
    for (size_t i = 0; i < len; i++)
        h[i] = (float)gt_unit(seed, dp.me, i);
    GT_CUDA(gt_memcpy_sync(src, h.data(), len * 4, cudaMemcpyHostToDevice));
    GT_CUDA(gt_memset_sync(rc, 0xff, (size_t)blocks * 4));
    GT_CUDA(gt_memset_sync(touched, 0, 4));
    GT_OK(symm_barrier_all());

    /* One block too many: refused, nothing runs. */
    void *args[] = {&dp, &dst, &src, &rc, &touched, &smid};
    symm_status_t st =
        symm_cuda_launch((const void *)k_blocks, dim3(cap + 1), dim3(256), args, 0, s);
    GT_TRUE(st == SYMM_ERR_INVALID_ARG, "%s runtime: %d blocks (> %d) gave %s", runtime,
            cap + 1, cap, symm_strerror(st));
    GT_TRUE(strstr(symm_last_error(), "cannot be resident"), "message: %s", symm_last_error());
    st = symm_cuda_launch(NULL, dim3(1), dim3(32), args, 0, s);
    GT_TRUE(st == SYMM_ERR_INVALID_ARG, "NULL kernel gave %s", symm_strerror(st));
    GT_CUDA(cudaStreamSynchronize(s));
    int hit = -1;
    GT_CUDA(cudaMemcpy(&hit, touched, 4, cudaMemcpyDeviceToHost));
    GT_TRUE(hit == 0, "a refused launch ran %d blocks", hit);

    GT_OK(symm_cuda_launch((const void *)k_blocks, dim3(blocks), dim3(256), args, 0, s));
    GT_CUDA(cudaStreamSynchronize(s));
    GT_OK(symm_cuda_check());
    std::vector<int> hrc(blocks);
    GT_CUDA(cudaMemcpy(hrc.data(), rc, (size_t)blocks * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        GT_TRUE(hrc[b] == 0, "block %d returned %d", b, hrc[b]);
    GT_CUDA(cudaMemcpy(h.data(), dst, len * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < len; i++) {
        float r = (float)gt_unit(seed, 0, i);
        for (int j = 1; j < dp.n; j++)
            r = r + (float)gt_unit(seed, j, i);
        if (memcmp(&r, &h[i], 4))
            GT_FAIL("%s runtime: element %zu: %g, not %g", runtime, i, (double)h[i], (double)r);
    }
    /* Where the blocks ran: SMs of this PE that another PE's blocks used too (shown, not
     * checked: MPS decides). */
    std::vector<int> hs(blocks);
    GT_CUDA(cudaMemcpy(hs.data(), smid, (size_t)blocks * 4, cudaMemcpyDeviceToHost));
    uint64_t *masks = (uint64_t *)symm_malloc(8 * 4 * (size_t)(n + 1));
    GT_TRUE(masks, "symm_malloc");
    uint64_t *mine = masks + 4 * (size_t)n;
    memset(mine, 0, 32);
    for (int b = 0; b < blocks; b++)
        if (hs[b] >= 0 && hs[b] < 256) mine[hs[b] / 64] |= 1ull << (hs[b] % 64);
    GT_OK(symm_fcollect(SYMM_TEAM_WORLD, masks, mine, 32));
    int used = 0, shared = 0, all_used = 0;
    for (int w = 0; w < 4; w++) {
        uint64_t others = 0, every = 0;
        for (int j = 0; j < n; j++) {
            if (j != me) others |= masks[4 * j + w];
            every |= masks[4 * j + w];
        }
        used += __builtin_popcountll(mine[w]);
        shared += __builtin_popcountll(mine[w] & others);
        all_used += __builtin_popcountll(every);
    }
    if (me == 0)
        printf("ok: PE 0's %d blocks ran on %d SMs, %d of them also used by other PEs; all "
               "PEs' blocks on %d SMs\n",
               blocks, used, shared, all_used);
    symm_free(masks);
    GT_OK(symm_barrier_all());
    GT_OK(symm_gpu_free(smid));
    GT_OK(symm_gpu_free(touched));
    GT_OK(symm_gpu_free(rc));
    GT_OK(symm_gpu_free(dst));
    GT_OK(symm_gpu_free(src));
    GT_OK(symm_pool_destroy(pool));
    symm_free(caps);
    GT_CUDA(cudaStreamDestroy(s));
    if (me == 0)
        printf("ok: %d blocks of a kernel built with the %s CUDA runtime, %d refused\n", blocks,
               runtime, cap + 1);
}

int main(void)
{
    const char *runtime = SYMM_TEST_RUNTIME;
    GT_OK(symm_init());
    /* Before symm_cuda_init: refused, not launched. */
    void *none[] = {NULL};
    symm_status_t st = symm_cuda_launch((const void *)k_blocks, dim3(1), dim3(32), none, 0, 0);
    GT_TRUE(st == SYMM_ERR_NOT_INITIALIZED, "launch before symm_cuda_init gave %s",
            symm_strerror(st));
    st = symm_cuda_init();
    if (st == SYMM_ERR_UNSUPPORTED) {
        if (symm_my_pe() == 0) printf("SKIP: no CUDA device (%s)\n", symm_last_error());
        symm_finalize();
        return 0;
    }
    GT_OK(st);
    const int me = symm_my_pe(), n = symm_n_pes();
    check_share();
    check_launch(runtime);
    GT_OK(symm_finalize());
    if (me == 0) printf("PASS test_gpu_launch (%s runtime, %d PEs)\n", runtime, n);
    return 0;
}
