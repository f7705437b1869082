/* bench_time.h — how the GPU benchmarks time a call and print a row (tile_moe_bench.cu,
 * topk_bench.cu): every PE times its own stream (CUDA events, after a host barrier) with its
 * calls queued behind a kernel that holds the stream, so time_us is the GPU's time per
 * call; host_us is the host's time to issue one call. With g_graph set (--graph) the calls
 * are captured once into a CUDA graph of g_iters calls, which is replayed behind the hold:
 * time_us is then a call's time inside a graph, as a decode step captured whole runs it,
 * and host_us the launch of the graph divided by its calls. The slowest PE's times are
 * reported; rows are Markdown, printed by PE 0, against a device-to-device copy of the
 * same bytes measured in the same run. One translation unit per program: the state is
 * static. */
#ifndef SYMM_BENCH_GPU_BENCH_TIME_H
#define SYMM_BENCH_GPU_BENCH_TIME_H

#include <cstdio>
#include <cstring>
#include <ctime>

#include "symm_cuda.h"

#include "bench_check.h"

static int g_me, g_n, g_iters = 20;
static bool g_graph = false;
static cudaStream_t g_s;
static symm_pool_t g_pool;

/* Holds the stream for ns nanoseconds (one thread spinning on the global timer), so that
 * the calls issued behind it queue up and run back to back at the GPU's pace. */
__global__ void k_hold(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

/* Nothing: the floor of a launch of the same grid. */
__global__ void k_empty(void) {}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The slowest PE's value of x (collectives take symmetric buffers). */
static double worst_of(double x)
{
    static double *sym;
    if (!sym && !(sym = (double *)symm_malloc(2 * sizeof(double)))) {
        fprintf(stderr, "symm_malloc: %s\n", symm_last_error());
        exit(1);
    }
    sym[0] = x;
    OK(symm_allreduce(SYMM_TEAM_WORLD, &sym[1], &sym[0], 1, SYMM_DOUBLE, SYMM_OP_MAX));
    return sym[1];
}

/* Host time to issue one call, the slowest PE's (set by timed). */
static double g_host;

/* Seconds per call of fn on the GPU (after warm-up), the slowest PE's; < 0 if a call
 * failed. The calls are issued behind k_hold, so the GPU runs them back to back: the time
 * is the GPU's, not the host's issue rate (g_host says that one). */
template <typename F> static double timed(F fn)
{
    for (int i = 0; i < 3; i++)
        if (fn()) {
            cudaStreamSynchronize(g_s);
            symm_cuda_check();
            return -1;
        }
    CU(cudaStreamSynchronize(g_s));
    /* --graph: the g_iters calls captured once, the graph replayed in their place */
    cudaGraphExec_t exec = nullptr;
    if (g_graph) {
        cudaGraph_t graph = nullptr;
        CU(cudaStreamBeginCapture(g_s, cudaStreamCaptureModeGlobal));
        int failed = 0;
        for (int i = 0; i < g_iters; i++)
            failed |= fn() != SYMM_SUCCESS;
        cudaError_t e = cudaStreamEndCapture(g_s, &graph);
        if (!failed && e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
        if (graph) cudaGraphDestroy(graph);
        const bool mine = failed || e != cudaSuccess;
        if (mine) {
            (void)cudaGetLastError();
            fprintf(stderr, "PE %d: a call could not be captured in a graph: %s\n", g_me,
                    failed ? symm_last_error() : cudaGetErrorString(e));
        }
        if (worst_of(mine ? 1 : 0) > 0) { /* every PE leaves the row alike */
            if (exec) cudaGraphExecDestroy(exec);
            return -1;
        }
        CU(cudaGraphLaunch(exec, g_s));
        CU(cudaStreamSynchronize(g_s));
    }
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    int bad = 0;
    double ms_per = 0, host = 0;
    for (unsigned long long hold = 200000 + 40000ull * g_iters;; hold *= 2) {
        OK(symm_barrier_all());
        k_hold<<<1, 1, 0, g_s>>>(hold);
        CU(cudaEventRecord(a, g_s));
        double h0 = now_s();
        if (exec)
            bad = cudaGraphLaunch(exec, g_s) != cudaSuccess;
        else
            for (int i = 0; i < g_iters && !bad; i++)
                bad = fn() != SYMM_SUCCESS;
        host = now_s() - h0;
        CU(cudaEventRecord(b, g_s));
        CU(cudaEventSynchronize(b));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, a, b));
        ms_per = ms * 1e-3 / g_iters;
        /* every PE's calls were all queued before its hold ended, or hold longer */
        if (bad || worst_of(host * 1e9 > 0.8 * hold) == 0 || hold > 1000000000ull) break;
    }
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    if (exec) CU(cudaGraphExecDestroy(exec));
    if (symm_cuda_check() != SYMM_SUCCESS) bad = 1;
    g_host = worst_of(host / g_iters);
    double worst = worst_of(bad ? 1e30 : ms_per);
    return worst >= 1e29 ? -1 : worst;
}

static double copy_time(void *dst, const void *src, size_t bytes)
{
    return timed([&] {
        return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_s) == cudaSuccess
                   ? SYMM_SUCCESS
                   : SYMM_ERR_CUDA;
    });
}

static void row(const char *op, size_t bytes, int nb, double t, double tc)
{
    if (g_me) return;
    if (t < 0) {
        printf("| %-22s | %10zu | %6d | %9s | %8s | %8.1f | %6s | %7s |\n", op, bytes, nb,
               "n/a", "n/a", bytes / tc * 1e-9, "n/a", "n/a");
        return;
    }
    if (bytes == 0) /* a time only (the launch floor, or nothing to move) */
        printf("| %-22s | %10zu | %6d | %9.1f | %8s | %8s | %6s | %7.1f |\n", op, bytes, nb,
               t * 1e6, "-", "-", "-", g_host * 1e6);
    else
        printf("| %-22s | %10zu | %6d | %9.1f | %8.1f | %8.1f | %5.0f%% | %7.1f |\n", op, bytes,
               nb, t * 1e6, bytes / t * 1e-9, bytes / tc * 1e-9, 100.0 * tc / t, g_host * 1e6);
    fflush(stdout);
}

static void header(const char *title)
{
    if (g_me) return;
    printf("\n### %s (%d PEs%s)\n\n", title, g_n,
           g_graph ? ", every row's calls replayed from a CUDA graph" : "");
    printf("| %-22s | %10s | %6s | %9s | %8s | %8s | %6s | %7s |\n", "operation", "bytes/PE",
           "blocks", "time_us", "GB/s", "copyGB/s", "%copy", "host_us");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------", "------------",
           "--------", "-----------", "----------", "----------", "--------", "---------");
}

#endif
