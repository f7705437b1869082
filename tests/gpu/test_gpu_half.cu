/* test_gpu_half.cu — fp16/bf16 reductions give the same bits on the CPU and the GPU: the
 * same random data through the host collectives (symm_allreduce, symm_reduce,
 * symm_tile_allreduce on the CPU heap) and the stream ones (symm_*_on_stream on the GPU
 * heap), both checked bit for bit against a serial reference of the documented rule
 * (members folded in team order, every combine computed in float and rounded to the half
 * type). For 3 members and more the data is checked to tell that rule from a float
 * accumulator rounded once at the end, so a device that accumulates cannot pass. */
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gpu_test.h"

static cudaStream_t g_stream;
static int g_me, g_n;
static uint64_t g_seed = 100;

static float h2f(symm_type_t ty, uint16_t v)
{
    return ty == SYMM_FP16 ? symm_fp16_to_float(v) : symm_bf16_to_float(v);
}
static uint16_t f2h(symm_type_t ty, float v)
{
    return ty == SYMM_FP16 ? symm_float_to_fp16(v) : symm_float_to_bf16(v);
}
static uint16_t gen(symm_type_t ty, uint64_t seed, int pe, size_t i)
{
    /* [-2, 2) with varied exponents: sums and products round */
    return f2h(ty, (float)(2.0 * gt_unit(seed, pe, i)));
}
static float op_f(symm_op_t op, float u, float v)
{
    switch (op) {
    case SYMM_OP_SUM:
        return u + v;
    case SYMM_OP_PROD:
        return u * v;
    case SYMM_OP_MIN:
        return v < u ? v : u;
    default:
        return v > u ? v : u;
    }
}
/* The rule: ((m0 op m1) op m2) ..., rounded to the half type after every combine. */
static uint16_t ref_step(symm_type_t ty, symm_op_t op, uint64_t seed, size_t i)
{
    uint16_t a = gen(ty, seed, 0, i);
    for (int j = 1; j < g_n; j++)
        a = f2h(ty, op_f(op, h2f(ty, a), h2f(ty, gen(ty, seed, j, i))));
    return a;
}
/* What the rule is not: a float accumulator rounded once. */
static uint16_t ref_once(symm_type_t ty, symm_op_t op, uint64_t seed, size_t i)
{
    float a = h2f(ty, gen(ty, seed, 0, i));
    for (int j = 1; j < g_n; j++)
        a = op_f(op, a, h2f(ty, gen(ty, seed, j, i)));
    return f2h(ty, a);
}

static void compare(const char *what, symm_type_t ty, symm_op_t op, size_t count,
                    const uint16_t *cpu, const uint16_t *gpu, uint64_t seed)
{
    for (size_t i = 0; i < count; i++) {
        uint16_t want = ref_step(ty, op, seed, i);
        if (cpu[i] != want || gpu[i] != want)
            GT_FAIL(
                "%s %s %s count %zu on %d PEs: element %zu CPU 0x%04x GPU 0x%04x, rule 0x%04x",
                symm_type_name(ty), what, symm_op_name(op), count, g_n, i, cpu[i], gpu[i],
                want);
    }
}

static void upload(void *dst, const void *src, size_t n)
{
    GT_CUDA(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    GT_CUDA(cudaDeviceSynchronize());
}
static void download(void *dst, const void *src, size_t n)
{
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    GT_CUDA(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

/* allreduce (root < 0) or reduce to root, on both paths. */
static void check_flat(symm_type_t ty, symm_op_t op, size_t count, int root, uint16_t *hsrc,
                       uint16_t *hdst, uint16_t *gsrc, uint16_t *gdst)
{
    uint64_t seed = ++g_seed;
    std::vector<uint16_t> in(count), cpu(count), gpu(count);
    for (size_t i = 0; i < count; i++)
        in[i] = gen(ty, seed, g_me, i);
    memcpy(hsrc, in.data(), count * 2);
    upload(gsrc, in.data(), count * 2);
    if (root < 0) {
        GT_OK(symm_allreduce(SYMM_TEAM_WORLD, hdst, hsrc, count, ty, op));
        GT_OK(symm_allreduce_on_stream(SYMM_TEAM_WORLD, gdst, gsrc, count, ty, op, g_stream));
    } else {
        GT_OK(symm_reduce(SYMM_TEAM_WORLD, hdst, hsrc, count, ty, op, root));
        GT_OK(
            symm_reduce_on_stream(SYMM_TEAM_WORLD, gdst, gsrc, count, ty, op, root, g_stream));
    }
    memcpy(cpu.data(), hdst, count * 2);
    download(gpu.data(), gdst, count * 2);
    if (root >= 0 && g_me != root) return;
    compare(root < 0 ? "allreduce" : "reduce", ty, op, count, cpu.data(), gpu.data(), seed);
}

/* tile allreduce of a rows x cols tile, on both paths (ld = cols with cols a multiple of
 * 8: the 16-byte chunked path; otherwise the scalar one). */
static void check_tile(symm_pool_t pool, symm_type_t ty, symm_op_t op, size_t rows, size_t cols,
                       size_t ld, uint16_t *hsrc, uint16_t *hdst, uint16_t *gsrc,
                       uint16_t *gdst)
{
    uint64_t seed = ++g_seed;
    const size_t total = rows * ld;
    std::vector<uint16_t> in(total), cpu(total), gpu(total), rc(rows * cols), rg(rows * cols);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            in[r * ld + c] = gen(ty, seed, g_me, r * cols + c);
    memcpy(hsrc, in.data(), total * 2);
    upload(gsrc, in.data(), total * 2);
    symm_tile_t hi = {hsrc, rows, cols, ld}, ho = {hdst, rows, cols, ld};
    symm_tile_t gi = {gsrc, rows, cols, ld}, go = {gdst, rows, cols, ld};
    GT_OK(symm_tile_allreduce(SYMM_TEAM_WORLD, ho, hi, ty, op));
    GT_OK(symm_tile_allreduce_on_stream(pool, go, gi, ty, op, 0, g_stream));
    memcpy(cpu.data(), hdst, total * 2);
    download(gpu.data(), gdst, total * 2);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            rc[r * cols + c] = cpu[r * ld + c];
            rg[r * cols + c] = gpu[r * ld + c];
        }
    compare("tile allreduce", ty, op, rows * cols, rc.data(), rg.data(), seed);
}

/* The data tells the rule from rounding once (3 members and more: with 2 they agree). */
static void check_discriminates(symm_type_t ty)
{
    if (g_n < 3) return;
    uint64_t seed = 7;
    size_t differ = 0;
    for (size_t i = 0; i < 4096; i++)
        differ += ref_step(ty, SYMM_OP_SUM, seed, i) != ref_once(ty, SYMM_OP_SUM, seed, i);
    GT_TRUE(differ > 0, "%s: per-combine and once-at-end rounding agree on all data",
            symm_type_name(ty));
}

int main(void)
{
    if (!gt_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    GT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const size_t cap = 70000 * 2;
    uint16_t *hsrc = (uint16_t *)symm_malloc(cap), *hdst = (uint16_t *)symm_malloc(cap);
    uint16_t *gsrc = (uint16_t *)symm_gpu_malloc(cap), *gdst = (uint16_t *)symm_gpu_malloc(cap);
    GT_TRUE(hsrc && hdst && gsrc && gdst, "symmetric buffers of %zu bytes", cap);
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    static const size_t counts[] = {1, 7, 1001, 65537}; /* 65537: the grid and 16-byte paths */
    const symm_type_t types[] = {SYMM_FP16, SYMM_BF16};
    for (symm_type_t ty : types) {
        check_discriminates(ty);
        for (int op = SYMM_OP_SUM; op <= SYMM_OP_MAX; op++) {
            for (size_t count : counts) {
                check_flat(ty, (symm_op_t)op, count, -1, hsrc, hdst, gsrc, gdst);
                check_flat(ty, (symm_op_t)op, count, g_n - 1, hsrc, hdst, gsrc, gdst);
            }
            check_tile(pool, ty, (symm_op_t)op, 5, 9, 12, hsrc, hdst, gsrc, gdst);
            check_tile(pool, ty, (symm_op_t)op, 129, 253, 256, hsrc, hdst, gsrc, gdst);
            check_tile(pool, ty, (symm_op_t)op, 131, 256, 256, hsrc, hdst, gsrc, gdst);
        }
    }
    GT_OK(symm_pool_destroy(pool));
    GT_OK(symm_gpu_free(gsrc));
    GT_OK(symm_gpu_free(gdst));
    GT_OK(symm_free(hsrc));
    GT_OK(symm_free(hdst));
    GT_CUDA(cudaStreamDestroy(g_stream));
    GT_OK(symm_finalize());
    if (g_me == 0) printf("PASS test_gpu_half (%d PEs)\n", g_n);
    return 0;
}
