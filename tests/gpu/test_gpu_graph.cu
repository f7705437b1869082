/* test_gpu_graph.cu — every stream call captured in a CUDA graph (global capture mode) and
 * replayed many times (SYMM_TEST_REPLAYS, default 1000) on changing data: the graph first
 * copies input set (replay % kSets) into the call's input, on the device (MoE: the split
 * table too, so that the splits change between replays without the host), then runs the
 * call, then counts the replay; after every replay the output is checked against the
 * serial reference of that set. Also: a call on a team without GPU state fails at capture
 * with a clear error, leaves the stream usable, and works once the state exists. */
#include <string>
#include <vector>

#include "gpu_test.h"
#include "moe_ref.h"
#include "symm_device.cuh"

static int g_me, g_n, g_replays = 1000;
static cudaStream_t g_stream;
static int *g_epoch; /* device: replays run so far */
static const int kSets = 5;

__global__ void k_select(uint8_t *dst, const uint8_t *sets, size_t bytes, size_t stride,
                         const int *epoch)
{
    const uint8_t *src = sets + (size_t)(*epoch % kSets) * stride;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < bytes;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
__global__ void k_tick(int *epoch)
{
    *epoch += 1;
}

/* The input sets of every PE: set k of PE pe, element i. */
static int64_t val(int k, int pe, size_t i)
{
    return (int64_t)gt_bits(0x6a09e667u + (uint64_t)k, pe, i);
}

struct captured {
    cudaGraphExec_t exec;
};

/* An input the graph selects: bytes at dst from set (replay % kSets) of sets, whose sets
 * lie stride bytes apart. */
struct sel {
    void *dst;
    const void *sets;
    size_t bytes, stride;
};

/* Captures body (which enqueues the call on g_stream) between the selects and the tick. */
template <typename Body>
static captured capture(const char *what, const std::vector<sel> &in, Body body)
{
    cudaGraph_t g;
    GT_CUDA(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
    for (const sel &x : in)
        k_select<<<64, 256, 0, g_stream>>>((uint8_t *)x.dst, (const uint8_t *)x.sets, x.bytes,
                                           x.stride, g_epoch);
    symm_status_t st = body();
    k_tick<<<1, 1, 0, g_stream>>>(g_epoch);
    cudaError_t e = cudaStreamEndCapture(g_stream, &g);
    GT_TRUE(st == SYMM_SUCCESS, "%s: captured call returned %s (%s)", what, symm_strerror(st),
            symm_last_error());
    GT_TRUE(e == cudaSuccess, "%s: end of capture: %s", what, cudaGetErrorString(e));
    captured c;
    GT_CUDA(cudaGraphInstantiate(&c.exec, g, 0));
    GT_CUDA(cudaGraphDestroy(g));
    return c;
}

/* Replays c g_replays times from epoch 0; check(k) verifies replay k's output. */
template <typename Check> static void replay(const char *what, captured c, Check check)
{
    GT_CUDA(gt_memset_sync(g_epoch, 0, sizeof(int)));
    GT_OK(symm_barrier_all());
    for (int r = 0; r < g_replays; r++) {
        GT_CUDA(cudaGraphLaunch(c.exec, g_stream));
        GT_CUDA(cudaStreamSynchronize(g_stream));
        check(r % kSets, r);
    }
    GT_OK(symm_cuda_check());
    GT_CUDA(cudaGraphExecDestroy(c.exec));
    GT_OK(symm_barrier_all());
    if (g_me == 0) printf("ok: %s, %d replays\n", what, g_replays);
}

/* kSets input sets of `count` int64 per PE (this PE's), on the device. */
static int64_t *make_sets(size_t count)
{
    std::vector<int64_t> h((size_t)kSets * count);
    for (int k = 0; k < kSets; k++)
        for (size_t i = 0; i < count; i++)
            h[(size_t)k * count + i] = val(k, g_me, i);
    int64_t *d;
    GT_CUDA(cudaMalloc(&d, h.size() * 8));
    GT_CUDA(gt_memcpy_sync(d, h.data(), h.size() * 8, cudaMemcpyHostToDevice));
    return d;
}

static std::vector<int64_t> d2h64(const int64_t *d, size_t n)
{
    std::vector<int64_t> h(n);
    GT_CUDA(gt_memcpy_sync(h.data(), d, n * 8, cudaMemcpyDeviceToHost));
    return h;
}

static int64_t sum_of(int k, size_t i, int n)
{
    uint64_t s = 0;
    for (int p = 0; p < n; p++)
        s += (uint64_t)val(k, p, i);
    return (int64_t)s;
}

/* The collectives on team (team numbering = world numbering here), count int64 each. */
static void test_colls(symm_team_t team, const char *tname, size_t count)
{
    const int n = g_n, me = g_me, root = n - 1;
    char what[128];
    int64_t *src = (int64_t *)symm_gpu_malloc(count * n * 8);
    int64_t *dst = (int64_t *)symm_gpu_malloc(count * n * 8);
    GT_TRUE(src && dst, "symm_gpu_malloc");
    int64_t *sets = make_sets(count * n);
    const size_t cb = count * 8;
    /* The first call of each kind outside a capture: the team's GPU state exists. */
    GT_OK(symm_barrier_on_stream(team, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));

    snprintf(what, sizeof what, "allreduce on %s, %zu int64", tname, count);
    captured c = capture(what, {{src, sets, cb, cb * n}}, [&] {
        return symm_allreduce_on_stream(team, dst, src, count, SYMM_INT64, SYMM_OP_SUM,
                                        g_stream);
    });
    replay(what, c, [&](int k, int r) {
        std::vector<int64_t> h = d2h64(dst, count);
        for (size_t i = 0; i < count; i++)
            if (h[i] != sum_of(k, i, n)) GT_FAIL("%s: replay %d element %zu", what, r, i);
    });

    snprintf(what, sizeof what, "reduce to %d on %s, %zu int64", root, tname, count);
    c = capture(what, {{src, sets, cb, cb * n}}, [&] {
        return symm_reduce_on_stream(team, dst, src, count, SYMM_INT64, SYMM_OP_SUM, root,
                                     g_stream);
    });
    replay(what, c, [&](int k, int r) {
        if (me != root) return;
        std::vector<int64_t> h = d2h64(dst, count);
        for (size_t i = 0; i < count; i++)
            if (h[i] != sum_of(k, i, n)) GT_FAIL("%s: replay %d element %zu", what, r, i);
    });

    snprintf(what, sizeof what, "reduce_scatter on %s, %zu int64 each", tname, count);
    c = capture(what, {{src, sets, cb * n, cb * n}}, [&] {
        return symm_reduce_scatter_on_stream(team, dst, src, count, SYMM_INT64, SYMM_OP_SUM,
                                             g_stream);
    });
    replay(what, c, [&](int k, int r) {
        std::vector<int64_t> h = d2h64(dst, count);
        for (size_t i = 0; i < count; i++)
            if (h[i] != sum_of(k, (size_t)me * count + i, n))
                GT_FAIL("%s: replay %d element %zu", what, r, i);
    });

    snprintf(what, sizeof what, "broadcast from %d on %s, %zu bytes", root, tname, cb);
    c = capture(what, {{src, sets, cb, cb * n}},
                [&] { return symm_broadcast_on_stream(team, dst, src, cb, root, g_stream); });
    replay(what, c, [&](int k, int r) {
        std::vector<int64_t> h = d2h64(dst, count);
        for (size_t i = 0; i < count; i++)
            if (h[i] != val(k, root, i)) GT_FAIL("%s: replay %d element %zu", what, r, i);
    });

    snprintf(what, sizeof what, "fcollect on %s, %zu bytes each", tname, cb);
    c = capture(what, {{src, sets, cb, cb * n}},
                [&] { return symm_fcollect_on_stream(team, dst, src, cb, g_stream); });
    replay(what, c, [&](int k, int r) {
        std::vector<int64_t> h = d2h64(dst, count * n);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                if (h[(size_t)p * count + i] != val(k, p, i))
                    GT_FAIL("%s: replay %d block %d element %zu", what, r, p, i);
    });

    snprintf(what, sizeof what, "alltoall on %s, %zu bytes each", tname, cb);
    c = capture(what, {{src, sets, cb * n, cb * n}},
                [&] { return symm_alltoall_on_stream(team, dst, src, cb, g_stream); });
    replay(what, c, [&](int k, int r) {
        std::vector<int64_t> h = d2h64(dst, count * n);
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < count; i++)
                if (h[(size_t)p * count + i] != val(k, p, (size_t)me * count + i))
                    GT_FAIL("%s: replay %d block %d element %zu", what, r, p, i);
    });

    snprintf(what, sizeof what, "barrier on %s", tname);
    c = capture(what, {}, [&] { return symm_barrier_on_stream(team, g_stream); });
    replay(what, c, [&](int, int) {});

    GT_CUDA(cudaFree(sets));
    GT_OK(symm_gpu_free(dst));
    GT_OK(symm_gpu_free(src));
}

/* Tile allreduce and rooted tile reduce on pool: rows x cols int64, ld cols + 3. */
static void test_tiles(symm_pool_t pool, size_t rows, size_t cols, int nblocks)
{
    const int n = g_n, me = g_me, root = 0;
    const size_t ld = cols + 3, span = rows * ld, sb = span * 8;
    char what[128];
    int64_t *in = (int64_t *)symm_gpu_malloc(sb), *out = (int64_t *)symm_gpu_malloc(sb);
    GT_TRUE(in && out, "symm_gpu_malloc");
    int64_t *sets = make_sets(span);
    symm_tile_t tin = {in, rows, cols, ld}, tout = {out, rows, cols, ld};
    /* the pool's GPU state outside the capture */
    GT_OK(symm_tile_allreduce_on_stream(pool, tout, tin, SYMM_INT64, SYMM_OP_SUM, nblocks,
                                        g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    auto check = [&](int k, int r) {
        std::vector<int64_t> h = d2h64(out, span);
        for (size_t i = 0; i < rows; i++)
            for (size_t j = 0; j < cols; j++)
                if (h[i * ld + j] != sum_of(k, i * ld + j, n))
                    GT_FAIL("%s: replay %d element (%zu, %zu)", what, r, i, j);
    };
    snprintf(what, sizeof what, "tile allreduce %zux%zu, %d blocks", rows, cols, nblocks);
    captured c = capture(what, {{in, sets, sb, sb}}, [&] {
        return symm_tile_allreduce_on_stream(pool, tout, tin, SYMM_INT64, SYMM_OP_SUM, nblocks,
                                             g_stream);
    });
    replay(what, c, check);
    snprintf(what, sizeof what, "tile reduce to %d %zux%zu, %d blocks", root, rows, cols,
             nblocks);
    c = capture(what, {{in, sets, sb, sb}}, [&] {
        return symm_tile_reduce_on_stream(pool, tout, tin, SYMM_INT64, SYMM_OP_SUM, root,
                                          nblocks, g_stream);
    });
    replay(what, c, [&](int k, int r) {
        if (me == root) check(k, r);
    });
    GT_CUDA(cudaFree(sets));
    GT_OK(symm_gpu_free(out));
    GT_OK(symm_gpu_free(in));
}

/* Dispatch then combine in one graph, kSets routings whose splits the graph selects on
 * the device. */
static void test_moe(symm_pool_t pool, int ne, size_t rb, size_t align, int nblocks)
{
    const int n = g_n, me = g_me;
    const size_t N = (size_t)n * ne;
    moe_ref_case cs[kSets];
    size_t in_cap = 1, out_cap = 1;
    for (int k = 0; k < kSets; k++) {
        cs[k] = moe_ref_case{ne, rb, align, 0x9e37u + (uint64_t)k * 7919u, false};
        size_t mi, mo;
        moe_max_rows(n, cs[k], &mi, &mo);
        in_cap = std::max(in_cap, mi);
        out_cap = std::max(out_cap, mo);
    }
    std::vector<std::vector<uint8_t>> hin(kSets);
    std::vector<std::vector<size_t>> hsp(kSets);
    std::vector<uint8_t> all_in((size_t)kSets * in_cap * rb, 0);
    std::vector<size_t> all_sp((size_t)kSets * N);
    for (int k = 0; k < kSets; k++) {
        moe_input(n, cs[k], me, &hin[k], &hsp[k]);
        std::copy(hin[k].begin(), hin[k].end(), all_in.begin() + (size_t)k * in_cap * rb);
        std::copy(hsp[k].begin(), hsp[k].end(), all_sp.begin() + (size_t)k * N);
    }
    uint8_t *in = (uint8_t *)symm_gpu_malloc(in_cap * rb);
    uint8_t *mid = (uint8_t *)symm_gpu_malloc(out_cap * rb);
    void *ws = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    GT_TRUE(in && mid && ws, "symm_gpu_malloc");
    uint8_t *back, *sets_in;
    size_t *sp, *osp, *oof, *bsp, *bof, *rows, *sets_sp;
    GT_CUDA(cudaMalloc(&back, in_cap * rb));
    GT_CUDA(cudaMalloc(&sets_in, all_in.size()));
    GT_CUDA(cudaMalloc(&sets_sp, all_sp.size() * 8));
    GT_CUDA(cudaMalloc(&sp, N * 8));
    GT_CUDA(cudaMalloc(&osp, N * 8));
    GT_CUDA(cudaMalloc(&oof, N * 8));
    GT_CUDA(cudaMalloc(&bsp, N * 8));
    GT_CUDA(cudaMalloc(&bof, N * 8));
    GT_CUDA(cudaMalloc(&rows, 16));
    GT_CUDA(gt_memcpy_sync(sets_in, all_in.data(), all_in.size(), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(sets_sp, all_sp.data(), all_sp.size() * 8, cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(sp, all_sp.data(), N * 8, cudaMemcpyHostToDevice));
    /* the pool's GPU state outside the capture */
    GT_OK(symm_moe_dispatch_on_stream(pool, mid, out_cap, in, in_cap, sp, ne, rb, align, osp,
                                      oof, rows, ws, nblocks, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());

    char what[128];
    snprintf(what, sizeof what, "dispatch + combine, %d experts per PE, rows of %zu, align %zu",
             ne, rb, align);
    captured c = capture(
        what, {{in, sets_in, in_cap * rb, in_cap * rb}, {sp, sets_sp, N * 8, N * 8}}, [&] {
            cudaMemsetAsync(mid, 0xEE, out_cap * rb, g_stream);
            cudaMemsetAsync(back, 0x11, in_cap * rb, g_stream);
            symm_status_t st =
                symm_moe_dispatch_on_stream(pool, mid, out_cap, in, in_cap, sp, ne, rb, align,
                                            osp, oof, rows, ws, nblocks, g_stream);
            if (st) return st;
            return symm_moe_combine_on_stream(pool, back, in_cap, mid, out_cap, osp, oof, ne,
                                              rb, bsp, bof, rows + 1, ws, nblocks, g_stream);
        });
    replay(what, c, [&](int k, int r) {
        char w[160];
        snprintf(w, sizeof w, "%s, replay %d", what, r);
        std::vector<size_t> rsp, rof, hr = gt_d2h(rows, 2);
        std::vector<uint8_t> hmid(out_cap * rb), hback(in_cap * rb), hk = hin[k];
        GT_CUDA(gt_memcpy_sync(hmid.data(), mid, hmid.size(), cudaMemcpyDeviceToHost));
        moe_check_dispatch(n, cs[k], me, w, gt_d2h(osp, N), gt_d2h(oof, N), hr[0], hmid, 0xEE,
                           &rsp, &rof);
        GT_CUDA(gt_memcpy_sync(hback.data(), back, hback.size(), cudaMemcpyDeviceToHost));
        hk.resize(in_cap * rb, 0);
        moe_check_combine(w, rb, hsp[k], gt_d2h(bsp, N), gt_d2h(bof, N), hr[1], hk, hback,
                          0x11);
    });
    for (void *p : {(void *)back, (void *)sets_in, (void *)sets_sp, (void *)sp, (void *)osp,
                    (void *)oof, (void *)bsp, (void *)bof, (void *)rows})
        GT_CUDA(cudaFree(p));
    GT_OK(symm_gpu_free(ws));
    GT_OK(symm_gpu_free(mid));
    GT_OK(symm_gpu_free(in));
}

/* A call that would create GPU state (a collective exchange through the host) cannot be
 * captured: it fails at capture, the capture ends cleanly, and the call works afterwards. */
static void test_uncapturable(void)
{
    std::vector<int> rev(g_n);
    for (int j = 0; j < g_n; j++)
        rev[j] = g_n - 1 - j;
    symm_team_t team;
    GT_OK(symm_team_create(rev.data(), g_n, &team));
    int64_t *buf = (int64_t *)symm_gpu_malloc(64 * 8);
    GT_TRUE(buf, "symm_gpu_malloc");
    cudaGraph_t g = nullptr;
    GT_CUDA(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeGlobal));
    symm_status_t st =
        symm_allreduce_on_stream(team, buf, buf, 64, SYMM_INT64, SYMM_OP_SUM, g_stream);
    std::string msg = symm_last_error();
    cudaError_t e = cudaStreamEndCapture(g_stream, &g);
    GT_TRUE(st == SYMM_ERR_UNSUPPORTED, "capture of a team's first call: %s (%s)",
            symm_strerror(st), msg.c_str());
    GT_TRUE(msg.find("capture") != std::string::npos, "message: %s", msg.c_str());
    GT_TRUE(e == cudaSuccess, "end of capture: %s", cudaGetErrorString(e));
    if (g) GT_CUDA(cudaGraphDestroy(g));
    GT_OK(symm_allreduce_on_stream(team, buf, buf, 64, SYMM_INT64, SYMM_OP_SUM, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    GT_OK(symm_gpu_free(buf));
    GT_OK(symm_team_destroy(team));
    if (g_me == 0)
        printf("ok: a call that needs GPU state is refused at capture: %s\n", msg.c_str());
}

int main(void)
{
    if (!gt_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    const char *r = getenv("SYMM_TEST_REPLAYS");
    if (r && atoi(r) > 0) g_replays = atoi(r);
    GT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    GT_CUDA(cudaMalloc(&g_epoch, sizeof(int)));
    test_uncapturable();
    test_colls(SYMM_TEAM_WORLD, "WORLD", 37);            /* the latency path */
    test_colls(SYMM_TEAM_WORLD, "WORLD", 65536 / 8 + 5); /* the multi-block engine */
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    test_colls(symm_pool_team(pool, 5), "pool dup 5", 1001);
    test_tiles(pool, 33, 65, 3);
    test_tiles(pool, 64, 1024, 0);
    test_moe(pool, 3, 16, 0, 2);
    test_moe(pool, 2, 1000, 8, 0);
    GT_OK(symm_pool_destroy(pool));
    GT_CUDA(cudaFree(g_epoch));
    GT_CUDA(cudaStreamDestroy(g_stream));
    GT_OK(symm_finalize());
    if (g_me == 0)
        printf("PASS test_gpu_graph (%d PEs, %d replays per graph)\n", g_n, g_replays);
    return 0;
}
