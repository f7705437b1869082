/* topk_bench.cu — top-k MoE dispatch and weighted combine on the GPU (the stream forms) at
 * DeepEP's shapes: hidden 7168, top-8 of 256 experts in all (256 / PEs per PE), uniform
 * random routing with distinct experts; dispatch of fp8 rows (7168 bytes) with their 56
 * float scales (one per 128 channels) as a side payload, combine of bf16 expert outputs
 * with weights. Tokens per PE: 4096 (the normal shape) and 128 (decode), or --tokens N.
 * Timing and table as tile_moe_bench.cu (bench_time.h); the anchors in the same run: a
 * device-to-device copy of the bytes each call moves on this PE, and symm's device
 * barrier (symm_barrier_on_stream), the floor of a call that synchronises its members.
 * At up to kLLMaxTokens tokens the low-latency forms (symm_moe_topk_dispatch_ll_on_stream,
 * _combine_ll_on_stream) are timed too, on the same routes and bytes.
 *   dispatch bytes: rows this PE receives x (7168 + 224)
 *   combine bytes:  slots of this PE's tokens x 7168 x 2 (the bf16 rows it reads)
 * Usage: symm-gpu-topk-bench [--tokens N] [--ll-blocks B] [--graph] [--quick] (needs
 * SYMM_GPU_HEAP_SIZE >= 1G at 4096 tokens; --ll-blocks: the low-latency forms on B blocks,
 * default automatic; --graph: every row's calls replayed from a CUDA graph, bench_time.h). */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "symm_cuda.h"

#include "bench_check.h"
#include "bench_time.h"

static const int kHidden = 7168, kTopk = 8, kExperts = 256, kScales = 56;
static const size_t kLLMaxTokens = 256;
static int g_ll_blocks = 0;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* PE pe's routes: tokens x top-8 distinct experts, uniform. */
static void routes(int pe, size_t tokens, std::vector<int64_t> *idx)
{
    idx->assign(tokens * kTopk, -1);
    uint64_t s = mix(0x70b4 + (uint64_t)pe);
    for (size_t t = 0; t < tokens; t++)
        for (int i = 0; i < kTopk; i++)
            for (;;) {
                s = mix(s);
                int64_t g = (int64_t)(s % kExperts);
                bool dup = false;
                for (int q = 0; q < i; q++)
                    dup |= (*idx)[t * kTopk + q] == g;
                if (!dup) {
                    (*idx)[t * kTopk + i] = g;
                    break;
                }
            }
}

static void shape(size_t tokens, const char *title)
{
    const int ne = kExperts / g_n;
    const size_t rb = kHidden, srb = kScales * 4, ob = (size_t)kHidden * 2;
    /* the rows I receive (every PE's routes are known to all: seeded by the PE) */
    /* every PE's routes are known to all: the receive buffer (symmetric, so the same size
     * on every PE) holds the most rows any PE receives */
    std::vector<size_t> need(g_n, 0);
    std::vector<int64_t> idx, mine;
    for (int pe = 0; pe < g_n; pe++) {
        routes(pe, tokens, &idx);
        for (int64_t g : idx)
            need[g / ne]++;
        if (pe == g_me) mine = idx;
    }
    size_t cap = 1;
    for (size_t v : need)
        cap = v + 1 > cap ? v + 1 : cap;
    const size_t rows_in = need[g_me];
    uint8_t *in = (uint8_t *)symm_gpu_malloc(tokens * rb + 16);
    uint8_t *sin = (uint8_t *)symm_gpu_malloc(tokens * srb + 16);
    uint8_t *eo = (uint8_t *)symm_gpu_malloc(cap * ob);
    const size_t wsb = symm_cuda_moe_topk_workspace_bytes(g_n, ne, tokens, kTopk);
    void *ws = symm_gpu_malloc(wsb);
    if (!in || !sin || !eo || !ws) OK(symm_last_status());
    uint8_t *out, *sout, *cout;
    int64_t *d_idx, *d_rows;
    float *d_w;
    symm_moe_src_t *d_src;
    size_t *d_cnt, *d_off, *d_nrows;
    CU(cudaMalloc(&out, cap * rb));
    CU(cudaMalloc(&sout, cap * srb));
    CU(cudaMalloc(&cout, tokens * ob + 16));
    CU(cudaMalloc(&d_idx, tokens * kTopk * 8 + 8));
    CU(cudaMalloc(&d_rows, tokens * kTopk * 8 + 8));
    CU(cudaMalloc(&d_w, tokens * kTopk * 4 + 4));
    CU(cudaMalloc(&d_src, cap * sizeof(symm_moe_src_t)));
    CU(cudaMalloc(&d_cnt, ne * 8));
    CU(cudaMalloc(&d_off, ne * 8));
    CU(cudaMalloc(&d_nrows, 8));
    CU(cudaMemset(in, 0x3c, tokens * rb + 16));
    CU(cudaMemset(sin, 0x3c, tokens * srb + 16));
    CU(cudaMemset(eo, 0x3c, cap * ob));
    CU(cudaMemset(ws, 0, wsb));
    std::vector<float> w(tokens * kTopk, 0.125f);
    if (tokens) {
        CU(cudaMemcpy(d_idx, mine.data(), tokens * kTopk * 8, cudaMemcpyHostToDevice));
        CU(cudaMemcpy(d_w, w.data(), tokens * kTopk * 4, cudaMemcpyHostToDevice));
    }
    CU(cudaDeviceSynchronize());
    OK(symm_barrier_all());
    symm_moe_side_t side = {sin, sout, srb};

    header(title);
    const double tb = timed([&] { return symm_barrier_on_stream(SYMM_TEAM_WORLD, g_s); });
    row("device barrier", 0, 1, tb, 1);
    const size_t db = rows_in * (rb + srb), cb = tokens * kTopk * ob, cpb = db > cb ? db : cb;
    uint8_t *cp; /* the copies' source and destination */
    CU(cudaMalloc(&cp, 2 * cpb + 32));
    const double tcd = copy_time(cp, cp + cpb + 16, db), tcc = copy_time(cp, cp + cpb + 16, cb);
    CU(cudaFree(cp));
    const double td = timed([&] {
        return symm_moe_topk_dispatch_on_stream(g_pool, out, cap, in, tokens, rb, d_idx, kTopk,
                                                ne, 0, &side, 1, d_cnt, d_off, d_src, d_nrows,
                                                d_rows, ws, 0, g_s);
    });
    row("topk_dispatch fp8+scales", db, 0, td, tcd);
    const double tcm = timed([&] {
        return symm_moe_topk_combine_on_stream(g_pool, cout, tokens, eo, rows_in, kHidden,
                                               SYMM_BF16, d_idx, d_rows, d_w, kTopk, ne, ws, 0,
                                               g_s);
    });
    row("topk_combine bf16", cb, 0, tcm, tcc);
    if (tokens <= kLLMaxTokens) {
        /* the low-latency forms: (expert, source) regions of max_tokens rows, symmetric
         * outs; every PE passes the most tokens any PE routes to one expert or has */
        size_t mt = tokens ? tokens : 1;
        for (int pe = 0; pe < g_n; pe++) {
            std::vector<int64_t> r;
            routes(pe, tokens, &r);
            std::vector<size_t> per(kExperts, 0);
            for (int64_t g : r)
                if (++per[g] > mt) mt = per[g];
        }
        const size_t lrows = (size_t)g_n * ne * mt;
        uint8_t *lout = (uint8_t *)symm_gpu_malloc(lrows * rb);
        uint8_t *lsout = (uint8_t *)symm_gpu_malloc(lrows * srb);
        size_t *lcnt = (size_t *)symm_gpu_malloc((size_t)g_n * ne * sizeof(size_t));
        symm_moe_src_t *lsrc =
            (symm_moe_src_t *)symm_gpu_malloc(lrows * sizeof(symm_moe_src_t));
        const size_t lwsb = symm_cuda_moe_topk_ll_workspace_bytes(g_n, ne, mt, kTopk, ob);
        void *lws = symm_gpu_malloc(lwsb);
        /* the expert output, laid out as the low-latency out: symmetric (its owners read
         * it in place), and device memory (pushed to its owners, each row moved twice) */
        uint8_t *lsin = (uint8_t *)symm_gpu_malloc(lrows * ob), *lin;
        if (!lout || !lsout || !lcnt || !lsrc || !lws || !lsin) OK(symm_last_status());
        CU(cudaMalloc(&lin, lrows * ob));
        CU(cudaMemset(lin, 0x3c, lrows * ob));
        CU(cudaMemset(lsin, 0x3c, lrows * ob));
        CU(cudaMemset(lws, 0, lwsb));
        CU(cudaDeviceSynchronize());
        OK(symm_barrier_all());
        symm_moe_side_t lside = {sin, lsout, srb};
        const double tld = timed([&] {
            return symm_moe_topk_dispatch_ll_on_stream(g_pool, lout, in, tokens, mt, rb, d_idx,
                                                       kTopk, ne, &lside, 1, lcnt, lsrc, lws,
                                                       g_ll_blocks, g_s);
        });
        row("topk_dispatch_ll", db, 0, tld, tcd);
        const double tlc = timed([&] {
            return symm_moe_topk_combine_ll_on_stream(g_pool, cout, tokens, lsin, mt, kHidden,
                                                      SYMM_BF16, d_idx, d_w, kTopk, ne, lcnt,
                                                      lsrc, lws, g_ll_blocks, g_s);
        });
        row("topk_combine_ll bf16", cb, 0, tlc, tcc);
        const double tlp = timed([&] {
            return symm_moe_topk_combine_ll_on_stream(g_pool, cout, tokens, lin, mt, kHidden,
                                                      SYMM_BF16, d_idx, d_w, kTopk, ne, lcnt,
                                                      lsrc, lws, g_ll_blocks, g_s);
        });
        row("topk_combine_ll pushed", cb, 0, tlp, tcc);
        CU(cudaDeviceSynchronize());
        OK(symm_barrier_all());
        cudaFree(lin);
        OK(symm_gpu_free(lsin));
        OK(symm_gpu_free(lws));
        OK(symm_gpu_free(lsrc));
        OK(symm_gpu_free(lcnt));
        OK(symm_gpu_free(lsout));
        OK(symm_gpu_free(lout));
    }
    if (g_me == 0)
        printf("\n%zu tokens per PE, %d experts per PE, %zu rows received by PE 0; barrier "
               "%.1f us\n",
               tokens, ne, rows_in, tb * 1e6);
    CU(cudaDeviceSynchronize());
    OK(symm_barrier_all());
    cudaFree(out);
    cudaFree(sout);
    cudaFree(cout);
    cudaFree(d_idx);
    cudaFree(d_rows);
    cudaFree(d_w);
    cudaFree(d_src);
    cudaFree(d_cnt);
    cudaFree(d_off);
    cudaFree(d_nrows);
    OK(symm_gpu_free(ws));
    OK(symm_gpu_free(eo));
    OK(symm_gpu_free(sin));
    OK(symm_gpu_free(in));
}

int main(int argc, char **argv)
{
    size_t ntok = 0;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            ntok = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--ll-blocks") && i + 1 < argc)
            g_ll_blocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--graph"))
            g_graph = true;
    }
    if (!bench_gpu_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    if (kExperts % g_n) {
        if (g_me == 0) printf("SKIP: %d PEs do not divide %d experts\n", g_n, kExperts);
        OK(symm_finalize());
        return 0;
    }
    if (quick) g_iters = 5;
    CU(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 264, &g_pool));
    if (ntok) {
        shape(ntok, "MoE top-k");
    } else {
        shape(128, "MoE top-k, decode shape (128 tokens per PE)");
        if (!quick) shape(4096, "MoE top-k, normal shape (4096 tokens per PE)");
    }
    OK(symm_pool_destroy(g_pool));
    OK(symm_finalize());
    return 0;
}
