/* gpu_bench.cu — symm's GPU benchmarks (run under symmrun; several PEs may share a GPU
 * under MPS):
 *   pool     creating a device pool of 1..4096 duplicates (CPU pool + GPU state), median
 *   barrier  device barrier latency, 1..128 blocks each on its own duplicate
 *   coll     allreduce (float sum) on a stream, one block, with the D2D copy ceiling
 *   graph    a small allreduce on a stream: eager calls against CUDA graph replays
 * Output: OSU-style tables, printed by PE 0. */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "symm_cuda.h"
#include "symm_device.cuh"

#include "bench_check.h"

static double now_us(void)
{
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void bench_pool(int me)
{
    static const size_t counts[] = {1, 4, 16, 64, 256, 1024, 4096};
    if (me == 0)
        printf("# symm pool creation (symm_cuda_pool_create over WORLD, %d PEs)\n"
               "# dups   create_us(median)  min_us   max_us  cpu_only_us  destroy_us\n",
               symm_n_pes());
    for (size_t n : counts) {
        std::vector<double> tc, tcpu, td;
        for (int r = 0; r < 9; r++) {
            OK(symm_barrier_all());
            double t0 = now_us();
            symm_pool_t p;
            OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, n, &p));
            double t1 = now_us();
            OK(symm_pool_destroy(p));
            double t2 = now_us();
            OK(symm_barrier_all());
            double t3 = now_us();
            OK(symm_pool_create(SYMM_TEAM_WORLD, n, &p));
            double t4 = now_us();
            OK(symm_pool_destroy(p));
            tc.push_back(t1 - t0);
            td.push_back(t2 - t1);
            tcpu.push_back(t4 - t3);
        }
        if (me == 0)
            printf("%6zu %14.1f %10.1f %8.1f %12.1f %11.1f\n", n, median(tc),
                   *std::min_element(tc.begin(), tc.end()),
                   *std::max_element(tc.begin(), tc.end()), median(tcpu), median(td));
    }
    fflush(stdout);
}

__global__ void k_barrier(symm_dev_pool_t pool, int iters, int *rc)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int r = 0;
    for (int i = 0; i < iters && !r; i++)
        r = symm_dev_barrier_block(t);
    if (threadIdx.x == 0 && r) atomicExch(rc, r);
}

static void bench_barrier(int me)
{
    static const int blocks[] = {1, 2, 4, 8, 16, 32, 64, 128};
    const int iters = 2000;
    if (me == 0)
        printf("# symm device barrier (symm_dev_barrier_block, each block its own duplicate, "
               "%d PEs, %d iterations)\n# blocks  latency_us(median of 5)  min_us\n",
               symm_n_pes(), iters);
    int *rc;
    CU(cudaMalloc(&rc, sizeof(int)));
    CU(cudaMemset(rc, 0, sizeof(int)));
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    for (int b : blocks) {
        symm_pool_t pool;
        OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, (size_t)b, &pool));
        symm_dev_pool_t dp;
        OK(symm_cuda_pool_device(pool, &dp));
        int warm = 100;
        void *wargs[] = {&dp, &warm, &rc};
        OK(symm_cuda_launch((const void *)k_barrier, dim3(b), dim3(128), wargs, 0, s));
        CU(cudaStreamSynchronize(s));
        std::vector<double> lat;
        int it = iters;
        void *args[] = {&dp, &it, &rc};
        for (int r = 0; r < 5; r++) {
            OK(symm_barrier_all());
            CU(cudaEventRecord(e0, s));
            OK(symm_cuda_launch((const void *)k_barrier, dim3(b), dim3(128), args, 0, s));
            CU(cudaEventRecord(e1, s));
            CU(cudaEventSynchronize(e1));
            float ms;
            CU(cudaEventElapsedTime(&ms, e0, e1));
            lat.push_back(ms * 1000.0 / iters);
        }
        OK(symm_cuda_check());
        if (me == 0)
            printf("%7d %16.3f %12.3f\n", b, median(lat),
                   *std::min_element(lat.begin(), lat.end()));
        OK(symm_pool_destroy(pool));
    }
    int h = 0;
    CU(cudaMemcpy(&h, rc, sizeof h, cudaMemcpyDeviceToHost));
    if (h) fprintf(stderr, "[PE %d] barrier kernel returned %d\n", me, h);
    CU(cudaFree(rc));
    CU(cudaStreamDestroy(s));
    fflush(stdout);
}

static void bench_coll(int me)
{
    static const size_t sizes[] = {8, 1024, 65536, 1 << 20, 16 << 20};
    const int n = symm_n_pes();
    size_t maxb = 16 << 20;
    float *src = (float *)symm_gpu_malloc(maxb), *dst = (float *)symm_gpu_malloc(maxb);
    if (!src || !dst) OK(symm_last_status());
    CU(cudaMemset(src, 0, maxb));
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    if (me == 0)
        printf(
            "# symm_allreduce_on_stream float sum (one block below 64 KiB, else a grid), %d "
            "PEs\n"
            "# size(B)  count  type  op  latency_us  algbw(GB/s)  busbw(GB/s)  d2d_copy_GB/s\n",
            n);
    for (size_t nb : sizes) {
        int iters = nb >= (1u << 20) ? 10 : 50;
        OK(symm_allreduce_on_stream(SYMM_TEAM_WORLD, dst, src, nb / 4, SYMM_FLOAT, SYMM_OP_SUM,
                                    s));
        CU(cudaStreamSynchronize(s));
        OK(symm_barrier_all());
        CU(cudaEventRecord(e0, s));
        for (int i = 0; i < iters; i++)
            OK(symm_allreduce_on_stream(SYMM_TEAM_WORLD, dst, src, nb / 4, SYMM_FLOAT,
                                        SYMM_OP_SUM, s));
        CU(cudaEventRecord(e1, s));
        CU(cudaEventSynchronize(e1));
        float ms;
        CU(cudaEventElapsedTime(&ms, e0, e1));
        double us = ms * 1000.0 / iters;
        CU(cudaEventRecord(e0, s));
        for (int i = 0; i < iters; i++)
            CU(cudaMemcpyAsync(dst, src, nb, cudaMemcpyDeviceToDevice, s));
        CU(cudaEventRecord(e1, s));
        CU(cudaEventSynchronize(e1));
        float cms;
        CU(cudaEventElapsedTime(&cms, e0, e1));
        double algbw = nb / us / 1e3, copybw = 2.0 * nb * iters / (cms * 1e6);
        if (me == 0)
            printf("%9zu %9zu float sum %10.2f %11.2f %11.2f %13.1f\n", nb, nb / 4, us, algbw,
                   algbw * 2.0 * (n - 1) / n, copybw);
        OK(symm_barrier_all());
    }
    OK(symm_cuda_check());
    OK(symm_gpu_free(src));
    OK(symm_gpu_free(dst));
    CU(cudaStreamDestroy(s));
    fflush(stdout);
}

/* µs per call of what enqueue() puts on s, over iters calls, timed by events. */
template <typename F> static double per_call_us(cudaStream_t s, int iters, F enqueue)
{
    cudaEvent_t e0, e1;
    CU(cudaEventCreate(&e0));
    CU(cudaEventCreate(&e1));
    OK(symm_barrier_all());
    CU(cudaEventRecord(e0, s));
    enqueue();
    CU(cudaEventRecord(e1, s));
    CU(cudaEventSynchronize(e1));
    float ms;
    CU(cudaEventElapsedTime(&ms, e0, e1));
    CU(cudaEventDestroy(e0));
    CU(cudaEventDestroy(e1));
    return ms * 1000.0 / iters;
}

static void bench_graph(int me)
{
    static const size_t sizes[] = {8, 1024, 65536};
    const int n = symm_n_pes(), iters = 200, reps = 5;
    float *src = (float *)symm_gpu_malloc(65536), *dst = (float *)symm_gpu_malloc(65536);
    if (!src || !dst) OK(symm_last_status());
    CU(cudaMemset(src, 0, 65536));
    CU(cudaDeviceSynchronize());
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (me == 0)
        printf("# symm_allreduce_on_stream float sum, eager calls against CUDA graphs, %d PEs; "
               "us per call, median of %d runs of %d calls\n"
               "# size(B)  eager_us  graph_1_call_replayed_us  graph_%d_calls_us\n",
               n, reps, iters, iters);
    for (size_t nb : sizes) {
        auto call = [&] {
            OK(symm_allreduce_on_stream(SYMM_TEAM_WORLD, dst, src, nb / 4, SYMM_FLOAT,
                                        SYMM_OP_SUM, s));
        };
        call(); /* the team's GPU state, outside any capture */
        CU(cudaStreamSynchronize(s));
        cudaGraph_t g1, gn;
        cudaGraphExec_t x1, xn;
        CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        call();
        CU(cudaStreamEndCapture(s, &g1));
        CU(cudaGraphInstantiate(&x1, g1, 0));
        CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < iters; i++)
            call();
        CU(cudaStreamEndCapture(s, &gn));
        CU(cudaGraphInstantiate(&xn, gn, 0));
        std::vector<double> eager, one, many;
        for (int r = 0; r < reps; r++) {
            eager.push_back(per_call_us(s, iters, [&] {
                for (int i = 0; i < iters; i++)
                    call();
            }));
            one.push_back(per_call_us(s, iters, [&] {
                for (int i = 0; i < iters; i++)
                    CU(cudaGraphLaunch(x1, s));
            }));
            many.push_back(per_call_us(s, iters, [&] { CU(cudaGraphLaunch(xn, s)); }));
        }
        if (me == 0)
            printf("%9zu %9.2f %25.2f %18.2f\n", nb, median(eager), median(one), median(many));
        CU(cudaGraphExecDestroy(x1));
        CU(cudaGraphExecDestroy(xn));
        CU(cudaGraphDestroy(g1));
        CU(cudaGraphDestroy(gn));
        OK(symm_barrier_all());
    }
    OK(symm_cuda_check());
    OK(symm_gpu_free(src));
    OK(symm_gpu_free(dst));
    CU(cudaStreamDestroy(s));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (!bench_gpu_init()) return 0;
    int me = symm_my_pe();
    bool all = argc < 2;
    for (int i = 1; i < argc || all; i++) {
        const char *m = all ? "all" : argv[i];
        if (!strcmp(m, "pool") || !strcmp(m, "all")) bench_pool(me);
        if (!strcmp(m, "barrier") || !strcmp(m, "all")) bench_barrier(me);
        if (!strcmp(m, "coll") || !strcmp(m, "all")) bench_coll(me);
        if (!strcmp(m, "graph") || !strcmp(m, "all")) bench_graph(me);
        if (all) break;
    }
    OK(symm_finalize());
    return 0;
}
