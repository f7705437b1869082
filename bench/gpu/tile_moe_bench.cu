/* tile_moe_bench.cu — bandwidth of the device tile reduce and MoE dispatch/combine
 * (stream forms, one pool duplicate per block), against a device-to-device copy of the
 * same bytes measured in the same run, and their scaling with the block count.
 * Run under symmrun (several PEs may share a GPU under MPS). Every PE times its own stream
 * (CUDA events, after a host barrier) with its calls queued behind a kernel that holds the
 * stream, so time_us is the GPU's time per call; host_us is the host's time to issue one
 * call (when it is the larger, a loop of calls runs at the host's pace). The slowest PE's
 * times are reported. Output: Markdown
 * tables printed by PE 0, to paste into docs/PERFORMANCE.md ("GPU tile reduce and MoE").
 *   bytes   per member: the tile (float sum), or rows moved by dispatch (= by combine)
 *   GB/s    bytes / time  (allreduce: each member reads and writes the tile's bytes once,
 *           as a copy of the same bytes does)
 *   copy    cudaMemcpyAsync device-to-device of the same bytes on this PE's GPU
 * Usage: symm-gpu-tile-moe-bench [--quick] [--tokens N] (MoE tokens per PE, default 4096)
 *        [--prof] (the MoE dispatch alone: a short run, to profile with ncu)
 *        [--blocks N] (--prof: N blocks, default automatic)
 *        [--scale-bytes B] (the block scaling's tile allreduce: B bytes, default 16 MiB) */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "symm_cuda.h"

#include "bench_check.h"
#include "bench_time.h"

int main(int argc, char **argv)
{
    bool quick = false, prof = false;
    size_t ntok = 4096;
    int pblocks = 0;        /* --prof: the dispatch's block count (0: automatic) */
    size_t scale_bytes = 0; /* the block scaling's tile (0: 16 MiB, or 1 MiB with --quick) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--prof"))
            prof = true;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            ntok = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc)
            pblocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale-bytes") && i + 1 < argc)
            scale_bytes = strtoull(argv[++i], nullptr, 10);
    }
    if (!bench_gpu_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    if (quick) g_iters = 5;
    CU(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
    OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 264, &g_pool));

    const size_t cols = 4096;
    std::vector<size_t> sizes = {(size_t)1 << 20, (size_t)16 << 20, (size_t)64 << 20};
    if (quick) sizes = {(size_t)1 << 20};
    size_t maxb = sizes.back() > scale_bytes ? sizes.back() : scale_bytes;
    float *A = (float *)symm_gpu_malloc(maxb), *B = (float *)symm_gpu_malloc(maxb);
    if (!A || !B) OK(symm_last_status());
    CU(cudaMemset(A, 0, maxb));
    CU(cudaMemset(B, 0, maxb));
    float *L = nullptr; /* a rooted out outside the symmetric heap: the root pulls alone */
    CU(cudaMalloc(&L, maxb));

    /* ---- tiles: float sum, automatic block count, vs copy */
    if (!prof) header("Tile reduce, float sum, 4096 columns");
    for (size_t bytes : prof ? std::vector<size_t>() : sizes) {
        symm_tile_t t = {A, bytes / 4 / cols, cols, cols}, o = {B, t.rows, cols, cols};
        double tc = copy_time(B, A, bytes);
        int nb = symm_cuda_tile_moe_auto_blocks(g_pool, 0, bytes);
        row("tile_allreduce", bytes, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, 0,
                                                     g_s);
            }),
            tc);
        row("tile_allreduce in place", bytes, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, t, t, SYMM_FLOAT, SYMM_OP_SUM, 0,
                                                     g_s);
            }),
            tc);
        row("tile_reduce (root 0)", bytes, nb, timed([&] {
                return symm_tile_reduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, 0, 0,
                                                  g_s);
            }),
            tc);
        symm_tile_t lo = {L, t.rows, cols, cols};
        row("tile_reduce (root 0, local out)", bytes, nb, timed([&] {
                return symm_tile_reduce_on_stream(g_pool, lo, t, SYMM_FLOAT, SYMM_OP_SUM, 0, 0,
                                                  g_s);
            }),
            tc);
    }

    /* ---- MoE: 4096 tokens of 7168 bytes per PE, 8 experts per PE, near-even splits */
    const int ne = 8;
    const size_t rb = 7168, tokens = quick ? 512 : ntok, N = (size_t)g_n * ne;
    std::vector<size_t> hs(N);
    for (size_t k = 0; k < N; k++)
        hs[k] = tokens / N + (k < tokens % N ? 1 : 0);
    const size_t align = 16, cap = tokens + N * align + 64;
    uint8_t *in = (uint8_t *)symm_gpu_malloc(cap * rb),
            *mid = (uint8_t *)symm_gpu_malloc(cap * rb);
    void *ws = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(g_n, ne));
    if (!in || !mid || !ws) OK(symm_last_status());
    uint8_t *back;
    size_t *d_sp, *d_osp, *d_oof, *d_bsp, *d_bof;
    CU(cudaMalloc(&back, cap * rb));
    CU(cudaMalloc(&d_sp, N * 8));
    CU(cudaMalloc(&d_osp, N * 8));
    CU(cudaMalloc(&d_oof, N * 8));
    CU(cudaMalloc(&d_bsp, N * 8));
    CU(cudaMalloc(&d_bof, N * 8));
    CU(cudaMemcpy(d_sp, hs.data(), N * 8, cudaMemcpyHostToDevice));
    CU(cudaMemset(in, 1, cap * rb));
    const size_t mb = tokens * rb;
    double tc = copy_time(back, in, mb);
    auto dispatch = [&](int nb) {
        return symm_moe_dispatch_on_stream(g_pool, mid, cap, in, cap, d_sp, ne, rb, align,
                                           d_osp, d_oof, nullptr, ws, nb, g_s);
    };
    auto combine = [&](int nb) {
        return symm_moe_combine_on_stream(g_pool, back, cap, mid, cap, d_osp, d_oof, ne, rb,
                                          d_bsp, d_bof, nullptr, ws, nb, g_s);
    };
    int nauto = symm_cuda_tile_moe_auto_blocks(g_pool, 1, mb);
    if (prof) { /* the dispatch alone: a short run, to profile with ncu */
        const int nb = pblocks ? pblocks : nauto;
        double tp = timed([&] { return dispatch(pblocks); });
        if (!g_me)
            printf("PROF dispatch, %zu tokens, %d blocks: %.2f us per call\n", tokens, nb,
                   tp * 1e6);
        OK(symm_finalize());
        return 0;
    }
    header("MoE, 7168-byte rows, 8 experts per PE, major_align 16");
    row("empty kernel (floor)", 0, nauto, timed([&] {
            k_empty<<<nauto, 512, 0, g_s>>>();
            return cudaGetLastError() == cudaSuccess ? SYMM_SUCCESS : SYMM_ERR_CUDA;
        }),
        tc);
    row("dispatch", mb, nauto, timed([&] { return dispatch(0); }), tc);
    row("combine", mb, nauto, timed([&] { return combine(0); }), tc);
    row("dispatch + combine", 2 * mb, nauto, timed([&] {
            symm_status_t s = dispatch(0);
            return s ? s : combine(0);
        }),
        tc * 2);

    /* ---- block scaling: 16 MiB tile allreduce and the dispatch above */
    static const int nbs[] = {1, 2, 4, 8, 16, 32, 64, 132, 264};
    size_t tb = scale_bytes ? scale_bytes : quick ? sizes[0] : sizes[1];
    symm_tile_t t = {A, tb / 4 / cols, cols, cols}, o = {B, t.rows, cols, cols};
    double tct = copy_time(B, A, tb);
    header("Block scaling (n/a: more blocks than can be resident on this PE's share)");
    for (int nb : nbs) {
        row("tile_allreduce", tb, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, nb,
                                                     g_s);
            }),
            tct);
    }
    for (int nb : nbs)
        row("dispatch", mb, nb, timed([&] { return dispatch(nb); }), tc);

    CU(cudaFree(back));
    CU(cudaFree(d_sp));
    CU(cudaFree(d_osp));
    CU(cudaFree(d_oof));
    CU(cudaFree(d_bsp));
    CU(cudaFree(d_bof));
    OK(symm_gpu_free(ws));
    OK(symm_gpu_free(mid));
    OK(symm_gpu_free(in));
    OK(symm_gpu_free(B));
    CU(cudaFree(L));
    OK(symm_gpu_free(A));
    OK(symm_pool_destroy(g_pool));
    OK(symm_finalize());
    return 0;
}
