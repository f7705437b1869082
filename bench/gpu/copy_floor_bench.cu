/* copy_floor_bench.cu — the floor under symm's block-limited kernels: how fast G blocks of
 * 512 threads (one per SM) move bytes within one GPU, four ways, against cudaMemcpyAsync:
 * 16-byte loads in registers (8 in flight per thread, as symm's block copy), cp.async into
 * shared memory, and bulk copies (cp.async.bulk) through shared-memory stages. No symm:
 * several copies of it started together under MPS (the same start time) show what a share
 * gives each process.
 *   symm-gpu-copy-floor [--blocks G] [--bytes N] [--start UNIX_TIME] [--tag T]
 * Every way runs in its own 0.6 s window from the start time, timed in the middle of it. */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "floor_check.h"

namespace
{

/* Block b's contiguous share of n 16-byte words. */
__device__ void share_of(size_t n, size_t *b0, size_t *b1)
{
    const size_t per = (n + gridDim.x - 1) / gridDim.x;
    *b0 = blockIdx.x * per;
    *b1 = *b0 + per < n ? *b0 + per : n;
}

__global__ void __launch_bounds__(512, 1) k_regs(uint4 *d, const uint4 *s, size_t n)
{
    constexpr int U = 8;
    const size_t nt = blockDim.x;
    size_t b0, b1;
    share_of(n, &b0, &b1);
    for (size_t b = b0 + threadIdx.x; b < b1; b += U * nt) {
        uint4 v[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * nt < b1) v[k] = __ldcs(s + b + k * nt);
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * nt < b1) __stcs(d + b + k * nt, v[k]);
    }
}

/* S stages of V words per thread; a thread stores only the words it loaded itself, so
 * cp.async.wait_group alone orders its stage's reuse. */
template <int S, int V>
__global__ void __launch_bounds__(512, 1) k_async(uint4 *d, const uint4 *s, size_t n)
{
    extern __shared__ uint4 stage[];
    const uint32_t nt = blockDim.x, tid = threadIdx.x;
    const size_t C = (size_t)nt * V;
    size_t b0, b1;
    share_of(n, &b0, &b1);
    const size_t nch = b1 > b0 ? (b1 - b0 + C - 1) / C : 0;
    auto issue = [&](size_t k) {
        for (int v = 0; k < nch && v < V; v++) {
            const size_t i = b0 + k * C + v * nt + tid;
            if (i >= b1) break;
            const uint32_t sa =
                (uint32_t)__cvta_generic_to_shared(stage + (k % S) * C + v * nt + tid);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(s + i));
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    for (int k = 0; k < S - 1; k++)
        issue(k);
    for (size_t k = 0; k < nch; k++) {
        issue(k + S - 1);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1));
        for (int v = 0; v < V; v++) {
            const size_t i = b0 + k * C + v * nt + tid;
            if (i < b1) __stcs(d + i, stage[(k % S) * C + v * nt + tid]);
        }
    }
}

/* One thread drives S stages of CB bytes: bulk load (mbarrier), bulk store, and a stage
 * reloaded once the store before it has read it. */
template <int S>
__global__ void __launch_bounds__(512, 1)
    k_bulk(uint4 *d, const uint4 *s, size_t n, uint32_t CB)
{
    extern __shared__ __align__(128) uint8_t smb[];
    __shared__ __align__(8) uint64_t bar[S];
    const size_t C = CB / 16;
    size_t per = (n + gridDim.x - 1) / gridDim.x;
    per = (per + C - 1) / C * C;
    const size_t b0 = blockIdx.x * per, b1 = b0 + per < n ? b0 + per : n;
    const size_t nch = b1 > b0 ? (b1 - b0 + C - 1) / C : 0;
    if (threadIdx.x == 0) {
        for (int i = 0; i < S; i++)
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(
                (uint32_t)__cvta_generic_to_shared(&bar[i])));
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::);
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    auto bytes = [&](size_t k) {
        const size_t e0 = b0 + k * C;
        return (uint32_t)(((e0 + C < b1 ? e0 + C : b1) - e0) * 16);
    };
    auto load = [&](size_t k) {
        if (k >= nch) return;
        const uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar[k % S]),
                       sa = (uint32_t)__cvta_generic_to_shared(smb + (k % S) * (size_t)CB);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(a),
                     "r"(bytes(k)));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], "
                     "[%1], %2, [%3];\n" ::"r"(sa),
                     "l"(s + b0 + k * C), "r"(bytes(k)), "r"(a)
                     : "memory");
    };
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    for (int k = 0; k < S; k++)
        load(k);
    for (size_t k = 0; k < nch; k++) {
        const uint32_t a = (uint32_t)__cvta_generic_to_shared(&bar[k % S]),
                       sa = (uint32_t)__cvta_generic_to_shared(smb + (k % S) * (size_t)CB);
        asm volatile("{\n.reg .pred p;\nW: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], "
                     "%1;\n@!p bra W;\n}\n" ::"r"(a),
                     "r"((uint32_t)((k / S) & 1))
                     : "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(
                         d + b0 + k * C),
                     "r"(sa), "r"(bytes(k))
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
        if (k >= 1) {
            asm volatile("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
            load(k - 1 + S);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

double now()
{
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

} // namespace

int main(int argc, char **argv)
{
    int G = 8;
    size_t bytes = (size_t)29 << 20;
    double T0 = 0;
    const char *tag = "";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--blocks"))
            G = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bytes"))
            bytes = (size_t)atoll(argv[i + 1]) / 16 * 16;
        else if (!strcmp(argv[i], "--start"))
            T0 = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--tag"))
            tag = argv[i + 1];
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no CUDA device\n");
        return 0;
    }
    if (G < 1 || bytes < 16) {
        fprintf(stderr, "--blocks must be >= 1 and --bytes >= 16\n");
        return 2;
    }
    if (T0 == 0) T0 = now() + 0.5;
    uint4 *s, *d;
    CK(cudaMalloc(&s, bytes));
    CK(cudaMalloc(&d, bytes));
    CK(cudaMemset(s, 7, bytes));
    const size_t n = bytes / 16;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const int SM = 128 * 1024; /* one block per SM, every way alike */
    CK(cudaFuncSetAttribute(k_regs, cudaFuncAttributeMaxDynamicSharedMemorySize, SM));
    CK(cudaFuncSetAttribute(k_async<4, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, SM));
    CK(cudaFuncSetAttribute(k_bulk<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, SM));
    const char *names[] = {"cudaMemcpyAsync", "registers, 8 in flight", "cp.async, 4 stages",
                           "bulk, 4 x 32 KB"};
    printf("| %s way | blocks | us | GB/s |\n|---|---:|---:|---:|\n", tag);
    for (int v = 0; v < 4; v++) {
        auto launch = [&]() {
            if (v == 0) CK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, st));
            if (v == 1) k_regs<<<G, 512, SM, st>>>(d, s, n);
            if (v == 2) k_async<4, 4><<<G, 512, SM, st>>>(d, s, n);
            if (v == 3) k_bulk<4><<<G, 512, SM, st>>>(d, s, n, 32768);
        };
        const double t0 = T0 + v * 0.6;
        while (now() < t0) {
        }
        CK(cudaMemset(d, 0, bytes));
        launch();
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        uint32_t last[4];
        CK(cudaMemcpy(last, (char *)d + bytes - 16, 16, cudaMemcpyDeviceToHost));
        if (last[3] != 0x07070707u) printf("WRONG: %s did not copy the last word\n", names[v]);
        while (now() < t0 + 0.15) {
        }
        cudaEvent_t a, b;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        int it = 0;
        CK(cudaEventRecord(a, st));
        while (now() < t0 + 0.45) {
            for (int j = 0; j < 5; j++, it++)
                launch();
            CK(cudaStreamSynchronize(st));
        }
        CK(cudaEventRecord(b, st));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        const double us = ms * 1e3 / it;
        printf("| %s | %d | %.1f | %.1f |\n", names[v], v ? G : 0, us, bytes / us / 1e3);
    }
    return 0;
}
