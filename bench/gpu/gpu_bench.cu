/* gpu_bench.cu — symm's GPU benchmarks (run under symmrun; several PEs may share a GPU
 * under MPS):
 *   pool     creating a device pool of 1..4096 duplicates (CPU pool + GPU state), median
 *   barrier  device barrier latency, 1..128 blocks each on its own duplicate
 *   coll     every collective on a stream against a device copy of the same bytes
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

/* A graph of iters calls of enqueue on s, instantiated. */
template <typename F> static cudaGraphExec_t graph_of(cudaStream_t s, int iters, F enqueue)
{
    cudaGraph_t g;
    cudaGraphExec_t x;
    CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < iters; i++)
        enqueue();
    CU(cudaStreamEndCapture(s, &g));
    CU(cudaGraphInstantiate(&x, g, 0));
    CU(cudaGraphDestroy(g));
    return x;
}

/* Every collective on a stream, float sum for the reductions, against a device copy of
 * the same bytes in the same run (alternating). size: the larger per-member buffer (an
 * fcollect's or alltoall's dest, a reduce_scatter's src); "%copy" = copy time / call
 * time. Median of 5 alternations of back-to-back calls timed by events, issued one by one
 * (call_us, copy_us) and replayed from a CUDA graph of the same calls (graph_us, gcopy_us:
 * the device's time per call without the host's time to issue it). */
static void bench_coll(int me)
{
    static const size_t sizes[] = {8, 1024, 4096, 65536, 1 << 20, 16 << 20, 64 << 20};
    const int n = symm_n_pes(), reps = 5;
    const size_t maxb = (size_t)64 << 20;
    float *src = (float *)symm_gpu_malloc(maxb), *dst = (float *)symm_gpu_malloc(maxb);
    if (!src || !dst) OK(symm_last_status());
    CU(cudaMemset(src, 0, maxb));
    uint8_t *cp;
    CU(cudaMalloc(&cp, 2 * maxb));
    CU(cudaDeviceSynchronize());
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const char *ops[] = {"barrier",        "broadcast", "reduce",  "allreduce",
                                "reduce_scatter", "fcollect",  "alltoall"};
    if (me == 0)
        printf("# collectives on a stream (float sum), %d PEs; us per call, median of %d; "
               "copy: cudaMemcpyAsync of size bytes on this PE\n"
               "# %-15s %9s %10s %10s %10s %10s %8s %8s\n",
               n, reps, "op", "size(B)", "call_us", "copy_us", "graph_us", "gcopy_us", "%copy",
               "%gcopy");
    for (const char *op : ops) {
        for (size_t size : sizes) {
            const bool bar = !strcmp(op, "barrier");
            if (bar && size != 8) continue;
            const bool per_pe = !strcmp(op, "fcollect") || !strcmp(op, "alltoall") ||
                                !strcmp(op, "reduce_scatter");
            if (per_pe && size < 4 * (size_t)n) continue;
            const size_t piece = per_pe ? size / (size_t)n / 4 * 4 : size;
            const size_t count = piece / 4;
            auto call = [&] {
                if (bar)
                    OK(symm_barrier_on_stream(SYMM_TEAM_WORLD, s));
                else if (!strcmp(op, "broadcast"))
                    OK(symm_broadcast_on_stream(SYMM_TEAM_WORLD, dst, src, piece, 0, s));
                else if (!strcmp(op, "reduce"))
                    OK(symm_reduce_on_stream(SYMM_TEAM_WORLD, dst, src, count, SYMM_FLOAT,
                                             SYMM_OP_SUM, 0, s));
                else if (!strcmp(op, "allreduce"))
                    OK(symm_allreduce_on_stream(SYMM_TEAM_WORLD, dst, src, count, SYMM_FLOAT,
                                                SYMM_OP_SUM, s));
                else if (!strcmp(op, "reduce_scatter"))
                    OK(symm_reduce_scatter_on_stream(SYMM_TEAM_WORLD, dst, src, count,
                                                     SYMM_FLOAT, SYMM_OP_SUM, s));
                else if (!strcmp(op, "fcollect"))
                    OK(symm_fcollect_on_stream(SYMM_TEAM_WORLD, dst, src, piece, s));
                else
                    OK(symm_alltoall_on_stream(SYMM_TEAM_WORLD, dst, src, piece, s));
            };
            const int iters = size >= (16u << 20) ? 20 : size >= (1u << 20) ? 50 : 200;
            auto copy = [&] {
                CU(cudaMemcpyAsync(cp + maxb, cp, size ? size : 1, cudaMemcpyDeviceToDevice,
                                   s));
            };
            call();
            CU(cudaStreamSynchronize(s));
            /* the same calls replayed from CUDA graphs: the device's time, without the host's
             * time to issue each call */
            cudaGraphExec_t gc = graph_of(s, iters, call), gm = graph_of(s, iters, copy);
            std::vector<double> tc, tm, gtc, gtm;
            for (int r = 0; r < reps; r++) {
                tc.push_back(per_call_us(s, iters, [&] {
                    for (int i = 0; i < iters; i++)
                        call();
                }));
                tm.push_back(per_call_us(s, iters, [&] {
                    for (int i = 0; i < iters; i++)
                        copy();
                }));
                gtc.push_back(per_call_us(s, iters, [&] { CU(cudaGraphLaunch(gc, s)); }));
                gtm.push_back(per_call_us(s, iters, [&] { CU(cudaGraphLaunch(gm, s)); }));
            }
            CU(cudaGraphExecDestroy(gc));
            CU(cudaGraphExecDestroy(gm));
            const double uc = median(tc), um = median(tm), guc = median(gtc), gum = median(gtm);
            if (me == 0) {
                if (bar)
                    printf("  %-15s %9s %10.2f %10s %10.2f %10s %8s %8s\n", op, "-", uc, "-",
                           guc, "-", "-", "-");
                else
                    printf("  %-15s %9zu %10.2f %10.2f %10.2f %10.2f %7.0f%% %7.0f%%\n", op,
                           size, uc, um, guc, gum, 100.0 * um / uc, 100.0 * gum / guc);
            }
            OK(symm_barrier_all());
        }
    }
    OK(symm_cuda_check());
    OK(symm_gpu_free(src));
    OK(symm_gpu_free(dst));
    CU(cudaFree(cp));
    CU(cudaStreamDestroy(s));
    fflush(stdout);
}

static void bench_graph(int me)
{
    static const size_t sizes[] = {0, 8, 1024, 65536}; /* 0: symm_barrier_on_stream */
    const int n = symm_n_pes(), iters = 200, reps = 5;
    float *src = (float *)symm_gpu_malloc(65536), *dst = (float *)symm_gpu_malloc(65536);
    if (!src || !dst) OK(symm_last_status());
    CU(cudaMemset(src, 0, 65536));
    CU(cudaDeviceSynchronize());
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (me == 0)
        printf("# symm_allreduce_on_stream float sum (and symm_barrier_on_stream), eager calls "
               "against CUDA graphs, %d PEs; "
               "us per call, median of %d runs of %d calls\n"
               "# size(B)  eager_us  graph_1_call_replayed_us  graph_%d_calls_us\n",
               n, reps, iters, iters);
    for (size_t nb : sizes) {
        auto call = [&] {
            if (!nb)
                OK(symm_barrier_on_stream(SYMM_TEAM_WORLD, s));
            else
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
        if (me == 0 && !nb)
            printf("%9s %9.2f %25.2f %18.2f\n", "barrier", median(eager), median(one),
                   median(many));
        else if (me == 0)
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
