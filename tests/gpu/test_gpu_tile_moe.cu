/* test_gpu_tile_moe.cu — the device tile reduce and MoE all-to-all-v (stream forms, one
 * pool duplicate per block) at any PE count, against serial references computed on the
 * host from every PE's deterministic input:
 *  - tiles: every type x op, odd shapes and strides, empty tiles, misaligned row starts
 *    (scalar heads/tails), 1..7 blocks and the automatic count; allreduce (separate out
 *    and in place), rooted (non-symmetric out; symmetric out, which the members share;
 *    in place), multi-root (every PE a root of a tile of its own shape; flat tiles with
 *    symmetric and local outs, some members roots, sharing turned off by one root's out
 *    ld); reference = the CPU library's own reduction kernels, bitwise; bytes
 *    between rows and on non-roots untouched;
 *  - MoE: 1-D, dispatch (major_align 0, 1, 3, 8) and combine of the dispatch output with
 *    its own out_splits / out_offsets (device arrays, never copied to the host in
 *    between), empty splits, odd row widths; rows, padding (untouched), out_splits,
 *    out_offsets and out_rows checked; combine gives back every input exactly;
 *  - agreement: a too-small out_capacity or in_capacity on one PE fails every PE
 *    (symm_cuda_check) and writes nothing; a local argument error on one PE likewise;
 *  - the block-scoped device calls from a user's kernel: tile allreduce and rooted reduce
 *    with out_symmetric (flat and general paths) against the serial reference, dispatch
 *    against the stream form.
 * "--quick": fewer cases (for compute-sanitizer). */
#include <vector>

#include "gpu_test.h"
#include "moe_ref.h"
#include "symm_device.cuh"

extern "C" {
#include "coll/reduce_ops.h"
}

static int g_me, g_n;
static bool g_quick;
static cudaStream_t g_stream;
static symm_pool_t g_pool;
static const int kBlocks[] = {0, 1, 3, 7};

/* ---------------------------------------------------------------- tiles */
struct shape {
    size_t rows, cols, ld;
};
/* Shapes 9 and 12 start 16-byte aligned (in offset si % 3 == 0) with rows of whole 16-byte
 * vectors for every type: with out offset 0 they take the kernels' flat vector path, with
 * out offset 1 (the other half of the ops) the general one. */
static const shape kShapes[] = {{0, 4, 4},     {3, 0, 1},        {1, 1, 1},       {3, 7, 9},
                                {17, 33, 40},  {5, 301, 307},    {2, 9000, 9001}, {40, 5, 5},
                                {1, 64, 64},   {33, 1024, 1040}, {3, 48, 48},     {2, 16, 16},
                                {257, 96, 112}};
static const int kNShapes = sizeof kShapes / sizeof kShapes[0];

static size_t span_elems(const shape &s)
{
    return (s.rows && s.cols) ? (s.rows - 1) * s.ld + s.cols : 0;
}

template <int TY> static typename symm_tm::ty<TY>::T gen(uint64_t seed, int pe, size_t i)
{
    typedef typename symm_tm::ty<TY>::T T;
    if constexpr (TY == SYMM_FP16)
        return symm_float_to_fp16((float)gt_unit(seed, pe, i));
    else if constexpr (TY == SYMM_BF16)
        return symm_float_to_bf16((float)gt_unit(seed, pe, i));
    else if constexpr (TY == SYMM_FP8_E4M3)
        return symm_float_to_fp8_e4m3((float)(4 * gt_unit(seed, pe, i)));
    else if constexpr (TY == SYMM_FP8_E5M2)
        return symm_float_to_fp8_e5m2((float)(4 * gt_unit(seed, pe, i)));
    else if constexpr (symm_tm::ty<TY>::integer)
        return (T)gt_bits(seed, pe, i);
    else
        return (T)gt_unit(seed, pe, i);
}

/* Reference of element i of a tile of every PE: the CPU kernels, member 0 first (fp8: the
 * CPU's float accumulation). */
template <int TY>
static typename symm_tm::ty<TY>::T ref_elem(symm_reduce_fn_t kern, symm_op_t op, uint64_t seed,
                                            size_t i)
{
    typedef typename symm_tm::ty<TY>::T T;
    if constexpr (symm_tm::fp8_of<TY>::yes) {
        float f = 0;
        for (int m = 0; m < g_n; m++) {
            T v = gen<TY>(seed, m, i);
            symm_reduce_fp8_fold((symm_type_t)TY, op, &f, &v, 1, m == 0);
        }
        T r;
        symm_reduce_fp8_store((symm_type_t)TY, &r, &f, 1);
        return r;
    }
    T acc = gen<TY>(seed, 0, i);
    for (int m = 1; m < g_n; m++) {
        T v = gen<TY>(seed, m, i);
        kern(op, &acc, &acc, &v, 1);
    }
    return acc;
}

static uint8_t *g_A, *g_B; /* symmetric: inputs, allreduce outputs */
static uint8_t *g_L;       /* local: rooted outputs */
static size_t g_tile_bytes;

/* Uploads my input of tile (in elements at elem offset eoff of g_A; values by index of the
 * tile span, gaps included). */
template <int TY> static void upload(uint64_t seed, size_t eoff, size_t nspan)
{
    typedef typename symm_tm::ty<TY>::T T;
    std::vector<T> h(nspan);
    for (size_t i = 0; i < nspan; i++)
        h[i] = gen<TY>(seed, g_me, i);
    if (nspan)
        GT_CUDA(gt_memcpy_sync((T *)g_A + eoff, h.data(), nspan * sizeof(T),
                               cudaMemcpyHostToDevice));
}

template <int TY>
static void check_tile(const char *what, const uint8_t *dev, const shape &s, size_t ld_out,
                       size_t nspan_out, symm_op_t op, uint64_t seed, bool expect_written,
                       uint8_t sentinel, bool gaps_are_input, int nb)
{
    typedef typename symm_tm::ty<TY>::T T;
    if (!nspan_out) return;
    std::vector<T> h(nspan_out);
    GT_CUDA(gt_memcpy_sync(h.data(), dev, nspan_out * sizeof(T), cudaMemcpyDeviceToHost));
    symm_reduce_fn_t kern = symm_reduce_kernel((symm_type_t)TY, op);
    GT_TRUE(kern || symm_tm::fp8_of<TY>::yes, "no CPU kernel for %s %s",
            symm_type_name((symm_type_t)TY), symm_op_name(op));
    for (size_t i = 0; i < nspan_out; i++) {
        size_t r = i / ld_out, c = i % ld_out;
        bool elem = r < s.rows && c < s.cols;
        T want;
        if (elem && expect_written) {
            want = ref_elem<TY>(kern, op, seed, r * s.ld + c);
        } else if (gaps_are_input) {
            want = gen<TY>(seed, g_me, i);
        } else {
            memset(&want, sentinel, sizeof want);
        }
        if (memcmp(&want, &h[i], sizeof(T)) != 0) {
            unsigned long long w = 0, g = 0;
            memcpy(&w, &want, sizeof(T));
            memcpy(&g, &h[i], sizeof(T));
            GT_FAIL("%s %s %s %zux%zu ld %zu (out ld %zu) nblocks %d: element (%zu,%zu) %s = "
                    "0x%llx, want 0x%llx",
                    what, symm_type_name((symm_type_t)TY), symm_op_name(op), s.rows, s.cols,
                    s.ld, ld_out, nb, r, c, elem ? "value" : "gap", g, w);
        }
    }
}

/* Multi-root over flat tiles (16-byte rows, aligned starts): the roots with an even tile
 * index take a symmetric out (the members share its reduction), the others a local one
 * (they pull alone); on some ops one root's out has an odd ld, which turns sharing off for
 * the call; on odd ops only some members are roots. Non-roots' symmetric outs untouched. */
template <int TY> static void test_multi_shared(symm_op_t op)
{
    typedef typename symm_tm::ty<TY>::T T;
    const size_t es = sizeof(T);
    static const int kFlat[] = {8, 9, 10, 11, 12};
    const int nflat = 5;
    const int nroots = op % 2 ? (g_n + 1) / 2 : g_n;
    const bool odd_ld = op % 3 == 2;
    std::vector<symm_tile_t> tin(nroots);
    std::vector<int> roots(nroots);
    std::vector<size_t> toff(nroots);
    const uint64_t seed = 91000u + 100u * TY + op;
    size_t eoff = 0, maxspan = 0;
    int mine = -1;
    for (int k = 0; k < nroots; k++) {
        const shape &s = kShapes[kFlat[(k + op) % nflat]];
        tin[k] = {(T *)g_A + eoff, s.rows, s.cols, s.ld};
        toff[k] = eoff;
        roots[k] = (g_n - 1 - k + op) % g_n;
        if (roots[k] == g_me) mine = k;
        eoff += (span_elems(s) + 16) / 16 * 16;
        maxspan = std::max(maxspan, s.rows * (s.cols + 1));
    }
    for (int k = 0; k < nroots; k++)
        for (int j = 0; j < k; j++)
            GT_TRUE(roots[j] != roots[k], "test roots not distinct");
    upload<TY>(seed, 0, eoff);
    GT_CUDA(gt_memset_sync(g_B, 0x6B, maxspan * es));
    GT_CUDA(gt_memset_sync(g_L, 0x6B, maxspan * es));
    symm_tile_t out = {g_B, 0, 0, 1};
    size_t lld = 0;
    bool symm_out = false;
    if (mine >= 0) {
        const shape &s = kShapes[kFlat[(mine + op) % nflat]];
        symm_out = mine % 2 == 0;
        lld = s.cols + (odd_ld && mine == 0 ? 1 : 0);
        out = {symm_out ? (void *)g_B : (void *)g_L, s.rows, s.cols, lld};
    }
    int nb = kBlocks[(op + 1) % 4];
    GT_OK(symm_tile_reduce_multi_on_stream(g_pool, out, tin.data(), roots.data(), nroots,
                                           (symm_type_t)TY, op, nb, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    GT_OK(symm_barrier_all()); /* every member's stores into the roots' outs have landed */
    symm_reduce_fn_t kern = symm_reduce_kernel((symm_type_t)TY, op);
    std::vector<T> hb(maxspan), hl(maxspan);
    GT_CUDA(gt_memcpy_sync(hb.data(), g_B, maxspan * es, cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(hl.data(), g_L, maxspan * es, cudaMemcpyDeviceToHost));
    T sent;
    memset(&sent, 0x6B, sizeof sent);
    for (size_t i = 0; i < maxspan; i++) {
        T want_b = sent, want_l = sent;
        if (mine >= 0) {
            size_t r = i / lld, c = i % lld;
            if (r < out.rows && c < out.cols) {
                T v = ref_elem<TY>(kern, op, seed, toff[mine] + r * tin[mine].ld + c);
                (symm_out ? want_b : want_l) = v;
            }
        }
        GT_TRUE(!memcmp(&want_b, &hb[i], sizeof(T)) && !memcmp(&want_l, &hl[i], sizeof(T)),
                "multi shared %s %s: PE %d (tile %d of %d roots, %s out%s) element %zu wrong",
                symm_type_name((symm_type_t)TY), symm_op_name(op), g_me, mine, nroots,
                symm_out ? "symmetric" : "local", odd_ld ? ", sharing off" : "", i);
    }
}

template <int TY> static void test_tile_type()
{
    typedef typename symm_tm::ty<TY>::T T;
    const size_t es = sizeof(T);
    int cases = 0;
    for (int op = 0; op < SYMM_OP_COUNT; op++) {
        if (!symm_tm::op_valid(TY, op)) continue;
        for (int si = 0; si < kNShapes; si++) {
            if (g_quick && si % 3) continue;
            const shape &s = kShapes[si];
            const size_t nspan = span_elems(s);
            const uint64_t seed = 1000u * TY + 17u * op + si;
            const int nb = kBlocks[(si + op) % 4];
            const symm_op_t o = (symm_op_t)op;
            /* misaligned starts on some shapes: scalar heads and tails */
            const size_t ioff = (size_t)(si % 3), ooff = (size_t)((si + op) % 2);

            /* allreduce into a separate symmetric out */
            upload<TY>(seed, ioff, nspan);
            if (nspan) GT_CUDA(gt_memset_sync(g_B, 0xA5, (nspan + 2) * es));
            symm_tile_t in = {(T *)g_A + ioff, s.rows, s.cols, s.ld};
            symm_tile_t out = {(T *)g_B + ooff, s.rows, s.cols, s.ld};
            GT_OK(symm_tile_allreduce_on_stream(g_pool, out, in, (symm_type_t)TY, o, nb,
                                                g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            check_tile<TY>("allreduce", (const uint8_t *)out.base, s, s.ld, nspan, o, seed,
                           true, 0xA5, false, nb);

            /* in place */
            GT_OK(symm_tile_allreduce_on_stream(g_pool, in, in, (symm_type_t)TY, o, nb,
                                                g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            check_tile<TY>("allreduce in place", (const uint8_t *)in.base, s, s.ld, nspan, o,
                           seed, true, 0, true, nb);
            cases += 2;

            if (si % 2 && g_quick) continue;
            /* rooted, into a local out with its own ld */
            upload<TY>(seed, ioff, nspan);
            int root = (si + op) % g_n;
            size_t lld = s.cols + (ooff ? 3 : 16),
                   lspan = (s.rows && s.cols) ? (s.rows - 1) * lld + s.cols : 0;
            if (lspan) GT_CUDA(gt_memset_sync(g_L, 0x5A, (lspan + 2) * es));
            symm_tile_t lout = {(T *)g_L + ooff, s.rows, s.cols, lld};
            GT_OK(symm_tile_reduce_on_stream(g_pool, lout, in, (symm_type_t)TY, o, root, nb,
                                             g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            shape ls = s;
            check_tile<TY>("reduce", (const uint8_t *)lout.base, ls, lld, lspan, o, seed,
                           g_me == root, 0x5A, false, nb);
            cases++;

            /* rooted into a symmetric out: shared by the members where the tile is flat;
             * the non-roots' outs stay untouched */
            if (nspan) GT_CUDA(gt_memset_sync(g_B, 0xA5, (nspan + 2) * es));
            GT_OK(symm_tile_reduce_on_stream(g_pool, out, in, (symm_type_t)TY, o, root, nb,
                                             g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            check_tile<TY>("reduce symmetric out", (const uint8_t *)out.base, s, s.ld, nspan, o,
                           seed, g_me == root, 0xA5, false, nb);
            /* in place on the root; the non-roots' tiles stay as they were */
            GT_OK(symm_tile_reduce_on_stream(g_pool, in, in, (symm_type_t)TY, o, root, nb,
                                             g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            check_tile<TY>("reduce in place", (const uint8_t *)in.base, s, s.ld, nspan, o, seed,
                           g_me == root, 0, true, nb);
            cases += 2;
        }
        test_multi_shared<TY>((symm_op_t)op);
        cases++;
        /* multi-root: PE k's tile has shape kShapes[(k + op) % kNShapes], roots reversed */
        {
            std::vector<symm_tile_t> tin(g_n);
            std::vector<int> roots(g_n);
            size_t eoff = 0;
            const uint64_t seed = 77000u + 100u * TY + op;
            size_t total = 0;
            for (int k = 0; k < g_n; k++)
                total += (span_elems(kShapes[(k + op) % kNShapes]) + 16) / 16 * 16;
            upload<TY>(seed, 0, total);
            int mine = -1;
            for (int k = 0; k < g_n; k++) {
                const shape &s = kShapes[(k + op) % kNShapes];
                tin[k] = {(T *)g_A + eoff, s.rows, s.cols, s.ld};
                roots[k] = g_n - 1 - k;
                if (roots[k] == g_me) mine = k;
                eoff += (span_elems(s) + 16) / 16 * 16; /* 16-element aligned starts */
            }
            const shape &ms = kShapes[(mine + op) % kNShapes];
            size_t lld = ms.cols + (op % 2 ? 1 : 16),
                   lspan = (ms.rows && ms.cols) ? (ms.rows - 1) * lld + ms.cols : 0;
            if (lspan) GT_CUDA(gt_memset_sync(g_L, 0x3C, lspan * es));
            symm_tile_t lout = {(T *)g_L, ms.rows, ms.cols, lld};
            int nb = kBlocks[op % 4];
            GT_OK(symm_tile_reduce_multi_on_stream(g_pool, lout, tin.data(), roots.data(), g_n,
                                                   (symm_type_t)TY, (symm_op_t)op, nb,
                                                   g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            /* my tile's elements are numbered from its own offset in the upload */
            size_t moff = (size_t)((T *)tin[mine].base - (T *)g_A);
            std::vector<T> h(lspan);
            if (lspan)
                GT_CUDA(gt_memcpy_sync(h.data(), g_L, lspan * es, cudaMemcpyDeviceToHost));
            symm_reduce_fn_t kern = symm_reduce_kernel((symm_type_t)TY, (symm_op_t)op);
            for (size_t i = 0; i < lspan; i++) {
                size_t r = i / lld, c = i % lld;
                T want;
                if (c < ms.cols)
                    want = ref_elem<TY>(kern, (symm_op_t)op, seed, moff + r * ms.ld + c);
                else
                    memset(&want, 0x3C, sizeof want);
                GT_TRUE(!memcmp(&want, &h[i], sizeof(T)),
                        "multi %s %s: root %d element (%zu,%zu) wrong",
                        symm_type_name((symm_type_t)TY), symm_op_name((symm_op_t)op), g_me, r,
                        c);
            }
            cases++;
        }
    }
    if (g_me == 0) printf("  tile %-7s %d cases ok\n", symm_type_name((symm_type_t)TY), cases);
}

static void test_tiles(void)
{
    size_t maxspan = 0;
    for (int i = 0; i < kNShapes; i++)
        maxspan = std::max(maxspan, span_elems(kShapes[i]) + 4);
    size_t multi = 0;
    for (int i = 0; i < kNShapes; i++)
        multi += span_elems(kShapes[i]) + 16;
    maxspan = std::max(maxspan, multi * (size_t)(g_n / kNShapes + 1) + 4);
    g_tile_bytes = maxspan * 8 + 64;
    g_A = (uint8_t *)symm_gpu_malloc(g_tile_bytes);
    g_B = (uint8_t *)symm_gpu_malloc(g_tile_bytes);
    GT_TRUE(g_A && g_B, "symm_gpu_malloc of %zu bytes", g_tile_bytes);
    GT_CUDA(cudaMalloc(&g_L, g_tile_bytes + 64));
#define TT_(e, name, ctype) test_tile_type<e>();
    SYMM_FOREACH_TYPE(TT_)
#undef TT_

    /* argument errors: the same verdict on every PE, no launch */
    symm_tile_t t = {g_A, 2, 2, 2};
    GT_TRUE(symm_tile_allreduce_on_stream(g_pool, t, t, SYMM_FLOAT, SYMM_OP_XOR, 0, g_stream) ==
                SYMM_ERR_INVALID_ARG,
            "xor on float accepted");
    symm_tile_t mis = {g_A + 1, 2, 2, 2};
    GT_TRUE(symm_tile_allreduce_on_stream(g_pool, mis, mis, SYMM_INT32, SYMM_OP_SUM, 0,
                                          g_stream) == SYMM_ERR_ALIGNMENT,
            "misaligned int32 tile accepted");
    GT_TRUE(symm_tile_reduce_on_stream(g_pool, t, t, SYMM_FLOAT, SYMM_OP_SUM, g_n, 0,
                                       g_stream) == SYMM_ERR_PE_OUT_OF_RANGE,
            "root out of range accepted");
    /* a root whose own out is bad fails alone; the others finish */
    symm_tile_t in = {g_A, 3, 5, 5}, bad = {g_L, 3, 4, 4};
    symm_status_t st =
        symm_tile_reduce_on_stream(g_pool, bad, in, SYMM_FLOAT, SYMM_OP_SUM, 0, 2, g_stream);
    GT_TRUE(st == (g_me == 0 ? SYMM_ERR_INVALID_ARG : SYMM_SUCCESS), "bad root out: status %d",
            st);
    st = symm_cuda_check();
    GT_TRUE(st == (g_me == 0 ? SYMM_ERR_INVALID_ARG : SYMM_SUCCESS), "bad root out: device %d",
            st);
    GT_OK(symm_barrier_all());
    if (g_me == 0) printf("tiles ok\n");
}

/* ---------------------------------------------------------------- MoE */
typedef moe_ref_case moe_case;

static void run_moe_case(const moe_case &c, int nb, bool one_d)
{
    const int n = g_n, ne = c.ne;
    const size_t rb = c.row_bytes, N = (size_t)n * ne;
    size_t max_in, max_need;
    moe_max_rows(n, c, &max_in, &max_need);
    const size_t in_cap = max_in + 2, out_cap = max_need + 3;
    uint8_t *in = (uint8_t *)symm_gpu_malloc(in_cap * rb);
    uint8_t *mid = (uint8_t *)symm_gpu_malloc(out_cap * rb);
    void *ws = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    GT_TRUE(in && mid && ws, "symm_gpu_malloc for MoE");
    uint8_t *back;
    size_t *d_sp, *d_osp, *d_oof, *d_rows, *d_bsp, *d_bof;
    GT_CUDA(cudaMalloc(&back, in_cap * rb));
    GT_CUDA(cudaMalloc(&d_sp, N * 8));
    GT_CUDA(cudaMalloc(&d_osp, N * 8));
    GT_CUDA(cudaMalloc(&d_oof, N * 8));
    GT_CUDA(cudaMalloc(&d_bsp, N * 8));
    GT_CUDA(cudaMalloc(&d_bof, N * 8));
    GT_CUDA(cudaMalloc(&d_rows, 16));

    /* my input and splits */
    std::vector<uint8_t> hin;
    std::vector<size_t> hsp;
    moe_input(n, c, g_me, &hin, &hsp);
    const size_t my_in = hin.size() / rb;
    hin.resize(in_cap * rb, 0); /* the rows past my input are uploaded as zeros */
    GT_CUDA(gt_memcpy_sync(in, hin.data(), hin.size(), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(d_sp, hsp.data(), N * 8, cudaMemcpyHostToDevice));
    GT_CUDA(gt_memset_sync(mid, 0xEE, out_cap * rb));
    GT_CUDA(gt_memset_sync(back, 0x11, in_cap * rb));

    /* ---- dispatch (or 1-D) */
    if (one_d)
        GT_OK(symm_all_to_all_v_on_stream(g_pool, mid, out_cap, in, in_cap, d_sp, rb, d_osp,
                                          d_oof, d_rows, ws, nb, g_stream));
    else
        GT_OK(symm_moe_dispatch_on_stream(g_pool, mid, out_cap, in, in_cap, d_sp, ne, rb,
                                          c.align, d_osp, d_oof, d_rows, ws, nb, g_stream));
    /* ---- combine straight from the device outputs */
    GT_OK(symm_moe_combine_on_stream(g_pool, back, in_cap, mid, out_cap, d_osp, d_oof,
                                     one_d ? 1 : ne, rb, d_bsp, d_bof, d_rows + 1, ws, nb,
                                     g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());

    /* dispatch / 1-D outputs (1-D: the dispatch layout with ne = 1, align 0) */
    char what[96];
    snprintf(what, sizeof what, "%s ne %d align %zu rb %zu nb %d",
             one_d ? "all_to_all_v" : "dispatch", ne, c.align, rb, nb);
    std::vector<size_t> rsp, rof, rows = gt_d2h(d_rows, 2);
    std::vector<uint8_t> hmid(out_cap * rb);
    GT_CUDA(gt_memcpy_sync(hmid.data(), mid, hmid.size(), cudaMemcpyDeviceToHost));
    moe_check_dispatch(n, c, g_me, what, gt_d2h(d_osp, N), gt_d2h(d_oof, N), rows[0], hmid,
                       0xEE, &rsp, &rof);

    /* combine gave back my input, rows and splits */
    std::vector<uint8_t> hback(in_cap * rb);
    GT_CUDA(gt_memcpy_sync(hback.data(), back, hback.size(), cudaMemcpyDeviceToHost));
    moe_check_combine(what, rb, hsp, gt_d2h(d_bsp, N), gt_d2h(d_bof, N), rows[1], hin, hback,
                      0x11);

    /* ---- agreement: one PE's output too small -> every PE fails, nothing written */
    if (!c.empty && !one_d) {
        int victim = (int)(c.seed % (uint64_t)n);
        std::vector<size_t> vsp, vof;
        size_t vtotal =
            moe_dispatch_layout(g_n, c, victim, &vsp, &vof); /* the same on every PE */
        GT_CUDA(gt_memset_sync(back, 0x22, in_cap * rb));
        GT_CUDA(gt_memset_sync(d_rows, 0x33, 16));
        size_t cap = g_me == victim ? vtotal - 1 : out_cap;
        if (vtotal > 0) {
            GT_OK(symm_moe_dispatch_on_stream(g_pool, back, cap > in_cap ? in_cap : cap, in,
                                              in_cap, d_sp, ne, rb, c.align, d_osp, d_oof,
                                              d_rows, ws, nb, g_stream));
            symm_status_t st = symm_cuda_check();
            /* back holds in_cap rows: the victim's cap is one short of its need; others' need
             * may not fit in_cap either: any failure must be OVERFLOW and agreed */
            GT_TRUE(st == SYMM_ERR_OVERFLOW, "capacity agreement: status %d (%s)", st,
                    symm_last_error());
            std::vector<uint8_t> hb(in_cap * rb);
            GT_CUDA(gt_memcpy_sync(hb.data(), back, hb.size(), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < hb.size(); i++)
                GT_TRUE(hb[i] == 0x22, "failed dispatch wrote byte %zu", i);
            std::vector<size_t> r2 = gt_d2h(d_rows, 1);
            GT_TRUE(r2[0] == 0x3333333333333333ull, "failed dispatch wrote out_rows");
        }
        /* a local argument error on one PE (out NULL) fails every PE */
        symm_status_t st = symm_moe_dispatch_on_stream(
            g_pool, g_me == victim ? nullptr : mid, out_cap, in, in_cap, d_sp, ne, rb, c.align,
            d_osp, d_oof, d_rows, ws, nb, g_stream);
        GT_TRUE(st == (g_me == victim ? SYMM_ERR_INVALID_ARG : SYMM_SUCCESS), "local error: %d",
                st);
        st = symm_cuda_check();
        GT_TRUE(st == SYMM_ERR_INVALID_ARG, "local error agreed: status %d (%s)", st,
                symm_last_error());
        /* splits beyond in_capacity on one PE */
        st = symm_moe_dispatch_on_stream(g_pool, mid, out_cap, in,
                                         g_me == victim && my_in ? my_in - 1 : in_cap, d_sp, ne,
                                         rb, c.align, d_osp, d_oof, d_rows, ws, nb, g_stream);
        GT_OK(st);
        st = symm_cuda_check();
        bool victim_sends = moe_in_rows(g_n, c, victim) > 0;
        GT_TRUE(st == (victim_sends ? SYMM_ERR_OVERFLOW : SYMM_SUCCESS),
                "in_capacity agreement: status %d (%s)", st, symm_last_error());
    }

    GT_CUDA(cudaFree(back));
    GT_CUDA(cudaFree(d_sp));
    GT_CUDA(cudaFree(d_osp));
    GT_CUDA(cudaFree(d_oof));
    GT_CUDA(cudaFree(d_bsp));
    GT_CUDA(cudaFree(d_bof));
    GT_CUDA(cudaFree(d_rows));
    GT_OK(symm_gpu_free(ws));
    GT_OK(symm_gpu_free(mid));
    GT_OK(symm_gpu_free(in));
}

static void test_moe(void)
{
    static const size_t rbs[] = {16, 13, 1000};
    static const size_t aligns[] = {0, 1, 3, 8};
    int cases = 0;
    for (int ne = 1; ne <= 3; ne += 2)
        for (int ri = 0; ri < 3; ri++)
            for (int ai = 0; ai < 4; ai++) {
                if (g_quick && (ri + ai) % 3) continue;
                moe_case c = {ne, rbs[ri], aligns[ai], 500u + 31u * ne + 7u * ri + ai, false};
                run_moe_case(c, kBlocks[(ri + ai + ne) % 4], false);
                cases++;
            }
    /* 1-D (ne = 1, packed) */
    for (int ri = 0; ri < 3; ri++) {
        moe_case c = {1, rbs[ri], 0, 900u + ri, false};
        run_moe_case(c, kBlocks[ri % 4], true);
        cases++;
    }
    /* every split empty; many experts (more entries than one layout window) */
    moe_case e0 = {3, 24, 4, 1234, true};
    run_moe_case(e0, 0, false);
    moe_case big = {g_quick ? 40 : 300, 8, 2, 4321, false};
    run_moe_case(big, 3, false);
    cases += 2;
    if (g_me == 0) printf("moe: %d cases ok\n", cases);
}

/* ---------------------------------------------------------------- block-scoped calls */
/* A user's kernel: block b runs the block-scoped tile allreduce on duplicate b. */
__global__ void k_user_tile(symm_dev_pool_t pool, symm_tile_t out, symm_tile_t in, int *rc)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int r =
        symm_dev_tile_allreduce_block<float>(t, out, in, SYMM_OP_SUM, blockIdx.x, gridDim.x);
    if (threadIdx.x == 0 && r) atomicExch(rc, r);
}
/* A user's kernel: the block-scoped rooted reduce into a symmetric out (the members share
 * it where the tile takes the flat path). */
__global__ void k_user_rooted(symm_dev_pool_t pool, symm_tile_t out, symm_tile_t in, int root,
                              int *rc)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int r = symm_dev_tile_reduce_block<float>(t, out, in, SYMM_OP_SUM, root, blockIdx.x,
                                              gridDim.x, true);
    if (threadIdx.x == 0 && r) atomicExch(rc, r);
}
/* A user's kernel: the block-scoped MoE dispatch. */
__global__ void k_user_dispatch(symm_dev_pool_t pool, void *out, size_t cap, const void *in,
                                size_t in_cap, const size_t *splits, int ne, size_t rb,
                                size_t align, size_t *osp, size_t *oof, size_t *rows, void *ws,
                                int *rc)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int r = symm_dev_moe_dispatch_block(t, out, cap, in, in_cap, splits, ne, rb, align, osp,
                                        oof, rows, ws, blockIdx.x, gridDim.x);
    if (threadIdx.x == 0 && r) atomicExch(rc, r);
}

/* The device functions a user's kernel calls per block (no dynamic shared memory: their
 * register forms), against the serial reference (tiles: a shape that takes the flat
 * vector path and one that does not) and against the stream form (dispatch). */
static void test_block_api(void)
{
    symm_dev_pool_t dp;
    GT_OK(symm_cuda_pool_device(g_pool, &dp));
    int *d_rc;
    GT_CUDA(cudaMalloc(&d_rc, sizeof(int)));
    static const shape shapes[] = {{33, 1024, 1040}, {17, 33, 40}, {257, 96, 112}};
    static const int blocks[] = {5, 3, 1};
    for (int k = 0; k < 3; k++) {
        const shape &s = shapes[k];
        const size_t nspan = span_elems(s), off = (size_t)k % 2; /* offset 1: general path */
        const uint64_t seed = 31337u + k;
        upload<SYMM_FLOAT>(seed, off, nspan);
        GT_CUDA(gt_memset_sync(g_B, 0xA5, (nspan + 2) * 4));
        GT_CUDA(gt_memset_sync(d_rc, 0, sizeof(int)));
        symm_tile_t in = {(float *)g_A + off, s.rows, s.cols, s.ld};
        symm_tile_t out = {(float *)g_B + off, s.rows, s.cols, s.ld};
        void *args[] = {&dp, &out, &in, &d_rc};
        GT_OK(symm_cuda_launch((const void *)k_user_tile, dim3(blocks[k]), dim3(256), args, 0,
                               g_stream));
        GT_CUDA(cudaStreamSynchronize(g_stream));
        GT_OK(symm_cuda_check());
        int rc = -1;
        GT_CUDA(gt_memcpy_sync(&rc, d_rc, sizeof rc, cudaMemcpyDeviceToHost));
        GT_TRUE(rc == 0, "user tile kernel: status %d", rc);
        check_tile<SYMM_FLOAT>("block-scoped allreduce", (const uint8_t *)out.base, s, s.ld,
                               nspan, SYMM_OP_SUM, seed, true, 0xA5, false, blocks[k]);
        GT_OK(symm_barrier_all());

        /* rooted, out_symmetric: only the root's out is written */
        int root = (k + 1) % g_n;
        GT_CUDA(gt_memset_sync(g_B, 0x5C, (nspan + 2) * 4));
        GT_CUDA(gt_memset_sync(d_rc, 0, sizeof(int)));
        GT_OK(symm_barrier_all()); /* every out reset before any member writes the root's */
        void *rargs[] = {&dp, &out, &in, &root, &d_rc};
        GT_OK(symm_cuda_launch((const void *)k_user_rooted, dim3(blocks[k]), dim3(256), rargs,
                               0, g_stream));
        GT_CUDA(cudaStreamSynchronize(g_stream));
        GT_OK(symm_cuda_check());
        rc = -1;
        GT_CUDA(gt_memcpy_sync(&rc, d_rc, sizeof rc, cudaMemcpyDeviceToHost));
        GT_TRUE(rc == 0, "user rooted tile kernel: status %d", rc);
        check_tile<SYMM_FLOAT>("block-scoped rooted reduce", (const uint8_t *)out.base, s, s.ld,
                               nspan, SYMM_OP_SUM, seed, g_me == root, 0x5C, false, blocks[k]);
        GT_OK(symm_barrier_all());
    }

    /* dispatch: the stream form and a user's kernel of 4 blocks give the same bytes */
    const int ne = 3, n = g_n;
    const size_t rb = 40, align = 4, N = (size_t)n * ne;
    std::vector<size_t> hs(N);
    size_t rows = 0;
    for (size_t e = 0; e < N; e++)
        rows += hs[e] = (size_t)(gt_bits(4242, g_me, e) % 7);
    const size_t cap = 7 * N * n + N * align + 8;
    uint8_t *in = (uint8_t *)symm_gpu_malloc(cap * rb);
    uint8_t *o1 = (uint8_t *)symm_gpu_malloc(cap * rb),
            *o2 = (uint8_t *)symm_gpu_malloc(cap * rb);
    void *ws1 = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    void *ws2 = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    GT_TRUE(in && o1 && o2 && ws1 && ws2, "symm_gpu_malloc for the dispatch");
    size_t *d;
    GT_CUDA(cudaMalloc(&d, 7 * N * sizeof(size_t)));
    size_t *sp = d, *osp1 = d + N, *oof1 = d + 2 * N, *osp2 = d + 3 * N, *oof2 = d + 4 * N,
           *rows1 = d + 5 * N, *rows2 = d + 6 * N;
    std::vector<uint8_t> hin(rows * rb);
    for (size_t i = 0; i < hin.size(); i++)
        hin[i] = (uint8_t)gt_bits(777, g_me, i);
    if (rows) GT_CUDA(gt_memcpy_sync(in, hin.data(), hin.size(), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(sp, hs.data(), N * sizeof(size_t), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memset_sync(o1, 0x11, cap * rb));
    GT_CUDA(gt_memset_sync(o2, 0x11, cap * rb));
    GT_CUDA(gt_memset_sync(d_rc, 0, sizeof(int)));
    GT_OK(symm_barrier_all());
    GT_OK(symm_moe_dispatch_on_stream(g_pool, o1, cap, in, cap, sp, ne, rb, align, osp1, oof1,
                                      rows1, ws1, 0, g_stream));
    size_t cap_ = cap, rb_ = rb, align_ = align;
    int ne_ = ne;
    void *args[] = {&dp,  &o2,     &cap_, &in,   &cap_,  &sp,  &ne_,
                    &rb_, &align_, &osp2, &oof2, &rows2, &ws2, &d_rc};
    GT_OK(
        symm_cuda_launch((const void *)k_user_dispatch, dim3(4), dim3(256), args, 0, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    int rc = -1;
    GT_CUDA(gt_memcpy_sync(&rc, d_rc, sizeof rc, cudaMemcpyDeviceToHost));
    GT_TRUE(rc == 0, "user dispatch kernel: status %d", rc);
    std::vector<size_t> a = gt_d2h(osp1, 2 * N),
                        b = gt_d2h(osp2, 2 * N); /* out_splits, out_offsets */
    GT_TRUE(a == b, "user dispatch: out_splits / out_offsets differ from the stream form");
    size_t r1 = gt_d2h(rows1, 1)[0], r2 = gt_d2h(rows2, 1)[0];
    GT_TRUE(r1 == r2 && r1 <= cap, "user dispatch: out_rows %zu, stream form %zu", r2, r1);
    std::vector<uint8_t> h1(cap * rb), h2(cap * rb);
    GT_CUDA(gt_memcpy_sync(h1.data(), o1, cap * rb, cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(h2.data(), o2, cap * rb, cudaMemcpyDeviceToHost));
    GT_TRUE(h1 == h2, "user dispatch: output rows differ from the stream form");
    GT_OK(symm_barrier_all());
    GT_CUDA(cudaFree(d));
    GT_OK(symm_gpu_free(ws2));
    GT_OK(symm_gpu_free(ws1));
    GT_OK(symm_gpu_free(o2));
    GT_OK(symm_gpu_free(o1));
    GT_OK(symm_gpu_free(in));
    GT_CUDA(cudaFree(d_rc));
    if (g_me == 0) printf("block-scoped calls ok\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) g_quick = true;
    if (!gt_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    GT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 64, &g_pool));
    test_tiles();
    test_moe();
    test_block_api();
    GT_OK(symm_cuda_check());
    GT_OK(symm_pool_destroy(g_pool));
    GT_CUDA(cudaFree(g_L));
    GT_OK(symm_gpu_free(g_B));
    GT_OK(symm_gpu_free(g_A));
    GT_CUDA(cudaStreamDestroy(g_stream));
    GT_OK(symm_barrier_all());
    if (g_me == 0) printf("PASS test_gpu_tile_moe (%d PEs)\n", g_n);
    GT_OK(symm_finalize());
    return 0;
}
