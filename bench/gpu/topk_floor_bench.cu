/* topk_floor_bench.cu — the floor under the low-latency top-k dispatch
 * (symm_moe_topk_dispatch_ll_on_stream): its steps rebuilt without symm, on one GPU, one
 * block of 512 threads per SM, at DeepEP's decode shape (fp8 rows of 7168 bytes, top-8 of
 * 256 experts, uniform routing with distinct experts), each step added to the previous:
 *   empty      a kernel that does nothing, same grid (the launch floor)
 *   copy       cudaMemcpyAsync of the bytes the rows take
 *   rows       every token's row read once and stored into the rows of its 8 slots in the
 *              low-latency layout (expert regions of max_tokens rows), destinations given
 *   ranks      each slot's row found by a global atomic per slot first, as the dispatch does
 *   flags      then every block adds to a counter (a release) and block 0 waits for all
 *   counts     and the last block to arrive (an atomic per block) writes the 256 counts
 *   hist       flags, with the ranks and counts of shared memory instead: every block counts
 *              the slots of the tokens before its own per expert, ranks its own slots on
 *              from there, and the last block (which has counted them all) writes the counts
 * Work split as the dispatch's: block b takes tokens [T b / G, T (b + 1) / G), its warps
 * the pieces of their rows. µs per call: the best of 5 loops of 1000 launches.
 *   symm-gpu-topk-floor [--tokens T] [--max-tokens M] */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "floor_check.h"

namespace
{

const int kTopk = 8, kExperts = 256, kThreads = 512;
const size_t kRowBytes = 7168;

enum step_t { ROWS, RANKS, FLAGS, COUNTS, HIST };

struct floor_args {
    uint8_t *out;
    const uint8_t *in;
    const int64_t *idx;       /* [tokens][k] experts */
    const int64_t *given;     /* [tokens][k] destination rows (ROWS) */
    unsigned long long *rank; /* [experts] */
    int64_t *slot;            /* [tokens][k] */
    unsigned long long *flag, *arrived, *counts;
    int tokens;
    int64_t max_tokens;
    unsigned long long ep;
    int step;
};

__global__ void k_empty() {}

__global__ void __launch_bounds__(kThreads, 1) k_floor(const floor_args a)
{
    const int nw = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t0 = (int)((int64_t)a.tokens * blockIdx.x / gridDim.x);
    const int t1 = (int)((int64_t)a.tokens * (blockIdx.x + 1) / gridDim.x);
    __shared__ unsigned hist[kExperts];
    if (a.step == HIST) {
        for (int g = (int)threadIdx.x; g < kExperts; g += blockDim.x)
            hist[g] = 0;
        __syncthreads();
        for (int q = (int)threadIdx.x; q < t0 * kTopk; q += blockDim.x)
            atomicAdd(&hist[a.idx[q]], 1u);
        __syncthreads();
        for (int q = t0 * kTopk + (int)threadIdx.x; q < t1 * kTopk; q += blockDim.x)
            a.slot[q] = (int64_t)atomicAdd(&hist[a.idx[q]], 1u);
        __syncthreads();
        if (blockIdx.x == gridDim.x - 1)
            for (int g = (int)threadIdx.x; g < kExperts; g += blockDim.x)
                a.counts[g] = hist[g];
    } else if (a.step >= RANKS)
        for (int q = t0 * kTopk + (int)threadIdx.x; q < t1 * kTopk; q += blockDim.x)
            a.slot[q] = (int64_t)atomicAdd(&a.rank[a.idx[q]], 1ull);
    __syncthreads();
    __shared__ int last;
    if (a.step == COUNTS && threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(a.arrived, 1ull) + 1 == gridDim.x;
    }
    __syncthreads();
    if (a.step == COUNTS && last && warp == 0) {
        __threadfence();
        for (int g = lane; g < kExperts; g += 32) {
            a.counts[g] = __ldcg(&a.rank[g]);
            a.rank[g] = 0;
        }
        if (lane == 0) *a.arrived = 0;
    }
    /* at ranks and flags nobody clears the ranks: the rows wrap around their regions */
    const int items = t1 - t0;
    const int P = items ? (nw / items > 1 ? nw / items : 1) : 1;
    for (int u = warp; u < items * P; u += nw) {
        const int tk = t0 + u / P, piece = u % P;
        uint8_t *d = nullptr;
        if (lane < kTopk) {
            const int q = tk * kTopk + lane;
            const int64_t row = a.step == ROWS
                                    ? a.given[q]
                                    : a.idx[q] * a.max_tokens + a.slot[q] % a.max_tokens;
            d = a.out + row * kRowBytes;
        }
        const int m = __popc(__ballot_sync(0xffffffffu, d != nullptr));
        const size_t nv = kRowBytes / 16, per = (nv + P - 1) / P;
        const size_t u0 = piece * per, u1 = u0 + per < nv ? u0 + per : nv;
        const uint4 *s = (const uint4 *)(a.in + (size_t)tk * kRowBytes);
        for (size_t v0 = u0; v0 < u1; v0 += 64) {
            const size_t v = v0 + lane, w = v + 32;
            uint4 x = {}, y = {};
            if (v < u1) x = __ldcs(s + v);
            if (w < u1) y = __ldcs(s + w);
            for (int j = 0; j < m; j++) {
                uint4 *dd = (uint4 *)__shfl_sync(0xffffffffu, (uintptr_t)d, j);
                if (v < u1) dd[v] = x;
                if (w < u1) dd[w] = y;
            }
        }
    }
    if (a.step < FLAGS) return;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(a.flag, 1ull);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        const unsigned long long want = a.ep * gridDim.x;
        volatile unsigned long long *f = a.flag;
        while ((long long)(*f - want) < 0)
            ;
        __threadfence();
    }
}

} // namespace

int main(int argc, char **argv)
{
    int tokens = 128;
    int64_t max_tokens = 128;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens"))
            tokens = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max-tokens"))
            max_tokens = atoll(argv[i + 1]);
    }
    if (tokens < 1 || max_tokens < tokens) {
        fprintf(stderr, "usage: symm-gpu-topk-floor [--tokens T >= 1] [--max-tokens M >= T]\n");
        return 2;
    }
    int dev = 0, sms = 0, ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        fprintf(stderr, "symm-gpu-topk-floor: no CUDA device is visible here\n");
        return 1;
    }
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));

    /* uniform routes, distinct experts per token; the rows in arrival order per expert */
    const int slots = tokens * kTopk;
    std::vector<int64_t> idx(slots), given(slots);
    std::vector<int64_t> filled(kExperts, 0);
    uint64_t s = 0x70b4;
    for (int t = 0; t < tokens; t++)
        for (int i = 0; i < kTopk; i++)
            for (;;) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                const int64_t g = (int64_t)((s >> 33) % kExperts);
                bool dup = false;
                for (int q = 0; q < i; q++)
                    dup |= idx[t * kTopk + q] == g;
                if (!dup) {
                    idx[t * kTopk + i] = g;
                    given[t * kTopk + i] = g * max_tokens + filled[g]++;
                    break;
                }
            }

    floor_args a = {};
    const size_t out_bytes = (size_t)kExperts * max_tokens * kRowBytes;
    const size_t bytes = (size_t)slots * kRowBytes;
    uint8_t *out, *in, *copy;
    int64_t *d_idx, *d_given, *d_slot;
    unsigned long long *words;
    CK(cudaMalloc(&out, out_bytes));
    CK(cudaMalloc(&copy, bytes));
    CK(cudaMalloc(&in, (size_t)tokens * kRowBytes));
    CK(cudaMemset(in, 0x5a, (size_t)tokens * kRowBytes));
    CK(cudaMalloc(&d_idx, slots * sizeof(int64_t)));
    CK(cudaMalloc(&d_given, slots * sizeof(int64_t)));
    CK(cudaMalloc(&d_slot, slots * sizeof(int64_t)));
    CK(cudaMalloc(&words, (2 * kExperts + 2) * sizeof(unsigned long long)));
    CK(cudaMemset(words, 0, (2 * kExperts + 2) * sizeof(unsigned long long)));
    CK(cudaMemcpy(d_idx, idx.data(), slots * sizeof(int64_t), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_given, given.data(), slots * sizeof(int64_t), cudaMemcpyHostToDevice));
    a.out = out;
    a.in = in;
    a.idx = d_idx;
    a.given = d_given;
    a.slot = d_slot;
    a.rank = words;
    a.counts = words + kExperts;
    a.flag = words + 2 * kExperts;
    a.arrived = a.flag + 1;
    a.tokens = tokens;
    a.max_tokens = max_tokens;

    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto timed = [&](const char *name, auto launch) {
        for (int i = 0; i < 200; i++)
            launch();
        CK(cudaStreamSynchronize(st));
        float best = 1e30f;
        for (int r = 0; r < 5; r++) {
            CK(cudaEventRecord(e0, st));
            for (int i = 0; i < 1000; i++)
                launch();
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            best = ms < best ? ms : best;
        }
        CK(cudaGetLastError());
        /* ms per 1000 calls = us per call */
        printf("| %-8s | %7.2f | %8.0f |\n", name, best, bytes / (best * 1e-6) / 1e9);
    };
    printf("%s, %d SMs: %d tokens x top-%d of %d experts, %d rows of %zu bytes (%.2f MB), "
           "max_tokens %lld\n\n| step | us/call | GB/s |\n|---|---:|---:|\n",
           prop.name, sms, tokens, kTopk, kExperts, slots, kRowBytes, bytes / 1e6,
           (long long)max_tokens);
    timed("empty", [&] { k_empty<<<sms, kThreads, 0, st>>>(); });
    timed("copy", [&] {
        CK(cudaMemcpyAsync(copy, out + out_bytes - bytes, bytes, cudaMemcpyDeviceToDevice, st));
    });
    const char *names[] = {"rows", "ranks", "flags", "counts", "hist"};
    for (int step = ROWS; step <= HIST; step++) {
        a.step = step;
        CK(cudaMemset(words, 0, (2 * kExperts + 2) * sizeof(unsigned long long)));
        a.ep = 0;
        timed(names[step], [&] {
            a.ep++;
            k_floor<<<sms, kThreads, 0, st>>>(a);
        });
    }
    return 0;
}
