/* test_gpu_coll.cu — the GPU transport at any PE count (several PEs may share one GPU
 * under MPS): the GPU heap and its peer mappings; every stream collective on WORLD, on a
 * pool duplicate and on a team numbered in reverse, over every type and op, against
 * serial references on random data (bitwise); a kernel where many blocks each run every
 * device collective on their own duplicate; the two-blocks-one-duplicate report; pool
 * growth, the registry, and that destroying gives back every byte of GPU team memory.
 * "--quick" runs a smaller subset (for compute-sanitizer). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#include <vector>

#include "gpu_test.h"
#include "symm_device.cuh"

static int g_me, g_n;
static bool g_quick;
static cudaStream_t g_stream;

/* ---------------------------------------------------------------- type traits */
template <typename S, typename A, symm_type_t TY> struct tr_base {
    typedef S store;
    typedef A accum;
    static constexpr symm_type_t type = TY;
};
template <typename S, symm_type_t TY> struct tr_int : tr_base<S, S, TY> {
    static S gen(uint64_t seed, int pe, size_t i) { return (S)gt_bits(seed, pe, i); }
    static S in(S v) { return v; }
    static S out(S v) { return v; }
    static S step(S v) { return v; }
    static constexpr bool integer = true;
};
template <typename S, symm_type_t TY> struct tr_flt : tr_base<S, S, TY> {
    static S gen(uint64_t seed, int pe, size_t i) { return (S)gt_unit(seed, pe, i); }
    static S in(S v) { return v; }
    static S out(S v) { return v; }
    static S step(S v) { return v; }
    static constexpr bool integer = false;
};
struct tr_fp16 : tr_base<uint16_t, float, SYMM_FP16> {
    static uint16_t gen(uint64_t s, int pe, size_t i)
    {
        return symm_float_to_fp16((float)gt_unit(s, pe, i));
    }
    static float in(uint16_t v) { return symm_fp16_to_float(v); }
    static uint16_t out(float v) { return symm_float_to_fp16(v); }
    static float step(float v) { return in(out(v)); } /* rounded after every combine */
    static constexpr bool integer = false;
};
struct tr_bf16 : tr_base<uint16_t, float, SYMM_BF16> {
    static uint16_t gen(uint64_t s, int pe, size_t i)
    {
        return symm_float_to_bf16((float)gt_unit(s, pe, i));
    }
    static float in(uint16_t v) { return symm_bf16_to_float(v); }
    static uint16_t out(float v) { return symm_float_to_bf16(v); }
    static float step(float v) { return in(out(v)); }
    static constexpr bool integer = false;
};

/* The device's order and expressions, on the host. Integers wrap (computed unsigned). */
template <typename A> static A ref_op(A a, A b, symm_op_t op)
{
    if constexpr (std::is_integral<A>::value) {
        typedef typename std::make_unsigned<A>::type U;
        switch (op) {
        case SYMM_OP_SUM:
            return (A)(U)((U)a + (U)b);
        case SYMM_OP_PROD:
            return (A)(U)((U)a * (U)b);
        case SYMM_OP_AND:
            return (A)(a & b);
        case SYMM_OP_OR:
            return (A)(a | b);
        case SYMM_OP_XOR:
            return (A)(a ^ b);
        default:
            break;
        }
    } else {
        if (op == SYMM_OP_SUM) return a + b;
        if (op == SYMM_OP_PROD) return a * b;
    }
    if (op == SYMM_OP_MIN) return b < a ? b : a;
    return b > a ? b : a;
}

/* ---------------------------------------------------------------- stream collectives */
static uint64_t g_seed = 1;

/* cudaMemcpy from pageable memory and cudaMemset run on the legacy stream and may still be
 * in flight when they return; the collectives run on a non-blocking stream. */
static void upload(void *dst, const void *src, size_t n)
{
    GT_CUDA(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
    GT_CUDA(cudaDeviceSynchronize());
}

template <class TR>
static void check_reduce(symm_team_t team, const char *tname, void *src, void *dst,
                         size_t count, symm_op_t op, int root, bool inplace)
{
    typedef typename TR::store S;
    typedef typename TR::accum A;
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team);
    uint64_t seed = ++g_seed;
    std::vector<S> in(count), out(count), ref(count);
    for (size_t i = 0; i < count; i++)
        in[i] = TR::gen(seed, me, i);
    upload(src, in.data(), count * sizeof(S));
    const uint16_t canary = 0x5a5a;
    if (!inplace) GT_CUDA(cudaMemset(dst, canary & 0xff, count * sizeof(S)));
    GT_CUDA(cudaDeviceSynchronize());
    void *d = inplace ? src : dst;
    if (root < 0)
        GT_OK(symm_allreduce_on_stream(team, d, src, count, TR::type, op, g_stream));
    else
        GT_OK(symm_reduce_on_stream(team, d, src, count, TR::type, op, root, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    GT_CUDA(cudaMemcpy(out.data(), d, count * sizeof(S), cudaMemcpyDeviceToHost));
    if (root >= 0 && me != root) return; /* dest of non-roots is not written */
    for (size_t i = 0; i < count; i++) {
        A a = TR::in(TR::gen(seed, 0, i));
        for (int j = 1; j < n; j++)
            a = TR::step(ref_op<A>(a, TR::in(TR::gen(seed, j, i)), op));
        S r = TR::out(a);
        if (memcmp(&r, &out[i], sizeof(S)) != 0) {
            unsigned long long got = 0, want = 0;
            memcpy(&got, &out[i], sizeof(S));
            memcpy(&want, &r, sizeof(S));
            GT_FAIL(
                "%s %s %s count %zu root %d%s on %d PEs: element %zu is 0x%llx, want 0x%llx",
                tname, root < 0 ? "allreduce" : "reduce", symm_op_name(op), count, root,
                inplace ? " in place" : "", n, i, got, want);
        }
    }
}

/* reduce_scatter: member r gets the reduction of block r (count elements) of every src. */
template <class TR>
static void check_reduce_scatter(symm_team_t team, const char *tname, void *src, void *dst,
                                 size_t count, symm_op_t op)
{
    typedef typename TR::store S;
    typedef typename TR::accum A;
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team);
    uint64_t seed = ++g_seed;
    std::vector<S> in(count * (size_t)n), out(count);
    for (size_t i = 0; i < count * (size_t)n; i++)
        in[i] = TR::gen(seed, me, i);
    upload(src, in.data(), in.size() * sizeof(S));
    GT_CUDA(cudaMemset(dst, 0x5a, count * sizeof(S)));
    GT_CUDA(cudaDeviceSynchronize());
    GT_OK(symm_reduce_scatter_on_stream(team, dst, src, count, TR::type, op, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    GT_CUDA(cudaMemcpy(out.data(), dst, count * sizeof(S), cudaMemcpyDeviceToHost));
    const size_t base = (size_t)me * count;
    for (size_t i = 0; i < count; i++) {
        A a = TR::in(TR::gen(seed, 0, base + i));
        for (int j = 1; j < n; j++)
            a = TR::step(ref_op<A>(a, TR::in(TR::gen(seed, j, base + i)), op));
        S r = TR::out(a);
        if (memcmp(&r, &out[i], sizeof(S)) != 0) {
            unsigned long long got = 0, want = 0;
            memcpy(&got, &out[i], sizeof(S));
            memcpy(&want, &r, sizeof(S));
            GT_FAIL("%s reduce_scatter %s count %zu on %d PEs: element %zu is 0x%llx, want "
                    "0x%llx",
                    tname, symm_op_name(op), count, n, i, got, want);
        }
    }
}

template <class TR>
static void check_type(symm_team_t team, const char *tname, void *src, void *dst)
{
    static const size_t counts[] = {1, 3, 1000, 65537};
    int n = symm_team_n_pes(team);
    int nops = TR::integer ? SYMM_OP_COUNT : SYMM_OP_AND;
    for (size_t c = 0; c < (g_quick ? 3u : 4u); c++)
        for (int op = 0; op < nops; op++) {
            check_reduce<TR>(team, tname, src, dst, counts[c], (symm_op_t)op, -1, false);
            check_reduce<TR>(team, tname, src, dst, counts[c], (symm_op_t)op, n - 1, false);
        }
    check_reduce<TR>(team, tname, src, dst, 4097, SYMM_OP_SUM, -1, true);
    check_reduce<TR>(team, tname, src, dst, 4097, SYMM_OP_MAX, 0, true);
    for (size_t c = 0; c < (g_quick ? 3u : 4u); c++) {
        check_reduce_scatter<TR>(team, tname, src, dst, counts[c], SYMM_OP_SUM);
        check_reduce_scatter<TR>(team, tname, src, dst, counts[c], SYMM_OP_MAX);
    }
}

static void check_bytes_colls(symm_team_t team, uint8_t *src, uint8_t *dst)
{
    int n = symm_team_n_pes(team), me = symm_team_my_pe(team);
    static const size_t sizes[] = {1, 13, 4096, 100003};
    for (size_t k = 0; k < (g_quick ? 3u : 4u); k++) {
        size_t nb = sizes[k];
        uint64_t seed = ++g_seed;
        std::vector<uint8_t> h(nb * (size_t)n), o(nb * (size_t)n);
        /* broadcast from each of two roots */
        for (int root : {0, n - 1}) {
            for (size_t i = 0; i < nb; i++)
                h[i] = (uint8_t)gt_bits(seed + root, me, i);
            upload(src, h.data(), nb);
            GT_OK(symm_broadcast_on_stream(team, dst, src, nb, root, g_stream));
            GT_CUDA(cudaStreamSynchronize(g_stream));
            GT_OK(symm_cuda_check());
            GT_CUDA(cudaMemcpy(o.data(), dst, nb, cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < nb; i++)
                if (o[i] != (uint8_t)gt_bits(seed + root, root, i))
                    GT_FAIL("broadcast %zu bytes root %d: byte %zu", nb, root, i);
        }
        /* fcollect */
        for (size_t i = 0; i < nb; i++)
            h[i] = (uint8_t)gt_bits(seed, me, i);
        upload(src, h.data(), nb);
        GT_OK(symm_fcollect_on_stream(team, dst, src, nb, g_stream));
        GT_CUDA(cudaStreamSynchronize(g_stream));
        GT_OK(symm_cuda_check());
        GT_CUDA(cudaMemcpy(o.data(), dst, nb * (size_t)n, cudaMemcpyDeviceToHost));
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < nb; i++)
                if (o[(size_t)j * nb + i] != (uint8_t)gt_bits(seed, j, i))
                    GT_FAIL("fcollect %zu bytes: block %d byte %zu", nb, j, i);
        /* alltoall: block j of PE p holds bits(seed, p, j*nb + i) */
        for (size_t i = 0; i < nb * (size_t)n; i++)
            h[i] = (uint8_t)gt_bits(seed + 7, me, i);
        upload(src, h.data(), nb * (size_t)n);
        GT_OK(symm_alltoall_on_stream(team, dst, src, nb, g_stream));
        GT_CUDA(cudaStreamSynchronize(g_stream));
        GT_OK(symm_cuda_check());
        GT_CUDA(cudaMemcpy(o.data(), dst, nb * (size_t)n, cudaMemcpyDeviceToHost));
        for (int j = 0; j < n; j++)
            for (size_t i = 0; i < nb; i++)
                if (o[(size_t)j * nb + i] != (uint8_t)gt_bits(seed + 7, j, (size_t)me * nb + i))
                    GT_FAIL("alltoall %zu bytes: block %d byte %zu", nb, j, i);
    }
    for (int i = 0; i < 10; i++)
        GT_OK(symm_barrier_on_stream(team, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
}

static void check_team(symm_team_t team, const char *what, void *src, void *dst)
{
    check_bytes_colls(team, (uint8_t *)src, (uint8_t *)dst);
    check_type<tr_int<int8_t, SYMM_INT8>>(team, "int8", src, dst);
    check_type<tr_int<int32_t, SYMM_INT32>>(team, "int32", src, dst);
    check_type<tr_int<uint64_t, SYMM_UINT64>>(team, "uint64", src, dst);
    check_type<tr_flt<float, SYMM_FLOAT>>(team, "float", src, dst);
    check_type<tr_fp16>(team, "fp16", src, dst);
    check_type<tr_bf16>(team, "bf16", src, dst);
    if (!g_quick) {
        check_type<tr_int<int16_t, SYMM_INT16>>(team, "int16", src, dst);
        check_type<tr_int<int64_t, SYMM_INT64>>(team, "int64", src, dst);
        check_type<tr_int<uint8_t, SYMM_UINT8>>(team, "uint8", src, dst);
        check_type<tr_int<uint16_t, SYMM_UINT16>>(team, "uint16", src, dst);
        check_type<tr_int<uint32_t, SYMM_UINT32>>(team, "uint32", src, dst);
        check_type<tr_flt<double, SYMM_DOUBLE>>(team, "double", src, dst);
    }
    if (g_me == 0)
        printf("ok: stream collectives on %s (%d PEs)\n", what, symm_team_n_pes(team));
}

/* ---------------------------------------------------------------- many blocks */
struct many_args {
    float *ar_src, *ar_dst;
    int *fc_src, *fc_dst, *a2a_src, *a2a_dst, *bc;
    uint64_t *ring, *ring_src, *sig;
    int *rc;
    int M, K, iters;
};

__global__ void k_many(symm_dev_pool_t pool, many_args a)
{
    const int b = blockIdx.x;
    symm_dev_team_t t = symm_dev_pool_team(pool, b);
    const int n = symm_dev_team_n_pes(t), me = symm_dev_team_my_pe(t);
    int rc = 0, r;
#define STEP(x)                                                                                \
    r = (x);                                                                                   \
    if (r && !rc) rc = r;
    STEP(symm_dev_allreduce_block(t, a.ar_dst + (size_t)b * a.M, a.ar_src + (size_t)b * a.M,
                                  (size_t)a.M, SYMM_OP_SUM));
    STEP(symm_dev_fcollect_block(t, a.fc_dst + (size_t)b * a.K * n, a.fc_src + (size_t)b * a.K,
                                 (size_t)a.K * 4));
    STEP(symm_dev_alltoall_block(t, a.a2a_dst + (size_t)b * a.K * n,
                                 a.a2a_src + (size_t)b * a.K * n, (size_t)a.K * 4));
    STEP(symm_dev_broadcast_block(t, a.bc + (size_t)b * a.K, a.bc + (size_t)b * a.K,
                                  (size_t)a.K * 4, b % n));
    /* ring of puts with signal: it-th value to the next member, then wait for mine */
    for (int it = 0; it < a.iters; it++) {
        if (threadIdx.x == 0) {
            uint64_t *s = a.ring_src + (size_t)b * a.iters + it;
            *s = ((uint64_t)me << 32) | ((uint64_t)b << 16) | (uint64_t)it;
            symm_dev_put_signal(t, a.ring + (size_t)b * a.iters + it, s, 8, a.sig + b, 1,
                                SYMM_SIGNAL_ADD, (me + 1) % n);
            r = symm_dev_signal_wait_until(t, a.sig + b, SYMM_CMP_GE, (uint64_t)it + 1, NULL);
            if (r && !rc) rc = r;
        }
        __syncthreads();
    }
    for (int it = 0; it < a.iters; it++) {
        STEP(symm_dev_barrier_block(t));
        if (threadIdx.x < 32) {
            r = symm_dev_barrier_warp(t);
            if (threadIdx.x == 0 && r && !rc) rc = r;
        }
        if (threadIdx.x == 0) {
            r = symm_dev_barrier(t);
            if (r && !rc) rc = r;
        }
        __syncthreads();
        STEP(symm_dev_sync_block(t));
    }
    if (threadIdx.x == 0) a.rc[b] = rc;
#undef STEP
}

static void check_many_blocks(symm_pool_t pool, int blocks)
{
    const int M = 3000, K = 37, iters = 20;
    symm_dev_pool_t dp;
    GT_OK(symm_cuda_pool_device(pool, &dp));
    /* Team numbering throughout (a registry pool may order the world ranks otherwise). */
    const int n = dp.n, me = dp.me;
    GT_TRUE((int)dp.size >= blocks, "pool of %u < %d blocks", dp.size, blocks);
    size_t fM = (size_t)blocks * M, iK = (size_t)blocks * K;
    many_args a;
    a.ar_src = (float *)symm_gpu_malloc(fM * 4);
    a.ar_dst = (float *)symm_gpu_malloc(fM * 4);
    a.fc_src = (int *)symm_gpu_malloc(iK * 4);
    a.fc_dst = (int *)symm_gpu_malloc(iK * n * 4);
    a.a2a_src = (int *)symm_gpu_malloc(iK * n * 4);
    a.a2a_dst = (int *)symm_gpu_malloc(iK * n * 4);
    a.bc = (int *)symm_gpu_malloc(iK * 4);
    a.ring = (uint64_t *)symm_gpu_malloc((size_t)blocks * iters * 8);
    a.ring_src = (uint64_t *)symm_gpu_malloc((size_t)blocks * iters * 8);
    a.sig = (uint64_t *)symm_gpu_malloc((size_t)blocks * 8);
    a.rc = (int *)symm_gpu_malloc((size_t)blocks * 4);
    GT_TRUE(a.ar_src && a.ar_dst && a.fc_src && a.fc_dst && a.a2a_src && a.a2a_dst && a.bc &&
                a.ring && a.ring_src && a.sig && a.rc,
            "symm_gpu_malloc");
    a.M = M;
    a.K = K;
    a.iters = iters;
    uint64_t seed = ++g_seed;
    std::vector<float> hf(fM);
    for (size_t i = 0; i < fM; i++)
        hf[i] = (float)gt_unit(seed, me, i);
    std::vector<int> hi(iK * n);
    for (size_t i = 0; i < iK; i++)
        hi[i] = (int)gt_bits(seed, me, i);
    upload(a.ar_src, hf.data(), fM * 4);
    upload(a.fc_src, hi.data(), iK * 4);
    upload(a.bc, hi.data(), iK * 4);
    for (size_t i = 0; i < iK * n; i++)
        hi[i] = (int)gt_bits(seed + 1, me, i);
    upload(a.a2a_src, hi.data(), iK * n * 4);
    GT_CUDA(cudaMemset(a.sig, 0, (size_t)blocks * 8));
    GT_CUDA(cudaMemset(a.rc, 0xff, (size_t)blocks * 4));
    GT_CUDA(cudaDeviceSynchronize());
    GT_OK(symm_barrier_all()); /* every PE's signals are zero before anyone puts */
    void *args[] = {&dp, &a};
    GT_OK(symm_cuda_launch((const void *)k_many, dim3(blocks), dim3(256), args, 0, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
    std::vector<int> rc(blocks);
    GT_CUDA(cudaMemcpy(rc.data(), a.rc, (size_t)blocks * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        GT_TRUE(rc[b] == 0, "block %d returned %d", b, rc[b]);
    /* allreduce */
    GT_CUDA(cudaMemcpy(hf.data(), a.ar_dst, fM * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < fM; i++) {
        float s = (float)gt_unit(seed, 0, i);
        for (int j = 1; j < n; j++)
            s = s + (float)gt_unit(seed, j, i);
        if (memcmp(&s, &hf[i], 4)) GT_FAIL("many-block allreduce: element %zu", i);
    }
    /* fcollect: block b's dest is [member j: K ints of j's slice b] */
    GT_CUDA(cudaMemcpy(hi.data(), a.fc_dst, iK * n * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < K; k++)
                if (hi[((size_t)b * n + j) * K + k] != (int)gt_bits(seed, j, (size_t)b * K + k))
                    GT_FAIL("many-block fcollect: block %d member %d int %d: got %d, want %d",
                            b, j, k, hi[((size_t)b * n + j) * K + k],
                            (int)gt_bits(seed, j, (size_t)b * K + k));
    GT_CUDA(cudaMemcpy(hi.data(), a.a2a_dst, iK * n * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < K; k++)
                if (hi[((size_t)b * n + j) * K + k] !=
                    (int)gt_bits(seed + 1, j, ((size_t)b * n + me) * K + k))
                    GT_FAIL("many-block alltoall: block %d member %d", b, j);
    GT_CUDA(cudaMemcpy(hi.data(), a.bc, iK * 4, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++)
        for (int k = 0; k < K; k++)
            if (hi[(size_t)b * K + k] != (int)gt_bits(seed, b % n, (size_t)b * K + k))
                GT_FAIL("many-block broadcast: block %d", b);
    std::vector<uint64_t> ring((size_t)blocks * iters);
    GT_CUDA(cudaMemcpy(ring.data(), a.ring, ring.size() * 8, cudaMemcpyDeviceToHost));
    int prev = (me + n - 1) % n;
    for (int b = 0; b < blocks; b++)
        for (int it = 0; it < iters; it++)
            GT_TRUE(ring[(size_t)b * iters + it] ==
                        (((uint64_t)prev << 32) | ((uint64_t)b << 16) | (uint64_t)it),
                    "put_signal ring: block %d round %d", b, it);
    void *bufs[] = {a.ar_src, a.ar_dst, a.fc_src,   a.fc_dst, a.a2a_src, a.a2a_dst,
                    a.bc,     a.ring,   a.ring_src, a.sig,    a.rc};
    for (void *p : bufs)
        GT_OK(symm_gpu_free(p));
    if (me == 0)
        printf("ok: %d blocks, each on its own duplicate, every device collective\n", blocks);
}

/* ---------------------------------------------------------------- busy detection */
__global__ void k_busy(symm_dev_pool_t pool, int *flags, int *out)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, 0);
    if (blockIdx.x == 0) {
        int r = symm_dev_team_claim_block(t);
        if (threadIdx.x == 0) {
            out[0] = r;
            atomicExch(&flags[0], 1);
            while (atomicAdd(&flags[1], 0) == 0) {
            }
        }
        __syncthreads();
        if (r == 0) symm_dev_team_release_block(t);
    } else {
        if (threadIdx.x == 0)
            while (atomicAdd(&flags[0], 0) == 0) {
            }
        __syncthreads();
        int r = symm_dev_barrier_block(t);
        if (threadIdx.x == 0) {
            out[1] = r;
            atomicExch(&flags[1], 1);
        }
    }
}

__global__ void k_invalid(symm_dev_pool_t pool, int *out)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, pool.size);
    int r = symm_dev_barrier_block(t);
    if (threadIdx.x == 0) out[0] = r;
}

static void check_busy(symm_pool_t pool)
{
    symm_dev_pool_t dp;
    GT_OK(symm_cuda_pool_device(pool, &dp));
    int *flags, *out;
    GT_CUDA(cudaMalloc(&flags, 2 * sizeof(int)));
    GT_CUDA(cudaMalloc(&out, 2 * sizeof(int)));
    GT_CUDA(cudaMemset(flags, 0, 2 * sizeof(int)));
    void *args[] = {&dp, &flags, &out};
    GT_OK(symm_cuda_launch((const void *)k_busy, dim3(2), dim3(128), args, 0, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    int h[2];
    GT_CUDA(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost));
    GT_TRUE(h[0] == 0 && h[1] == SYMM_ERR_TEAM_BUSY, "busy kernel: claim %d, second block %d",
            h[0], h[1]);
    symm_status_t st = symm_cuda_check();
    GT_TRUE(st == SYMM_ERR_TEAM_BUSY, "symm_cuda_check gave %d", (int)st);
    GT_TRUE(strstr(symm_last_error(), "dup 0") && strstr(symm_last_error(), "block 1"),
            "message does not name the duplicate and block: %s", symm_last_error());
    if (g_me == 0) printf("ok: two blocks on one duplicate reported: %s\n", symm_last_error());
    GT_OK(symm_cuda_check()); /* cleared */
    void *args2[] = {&dp, &out};
    GT_OK(symm_cuda_launch((const void *)k_invalid, dim3(1), dim3(64), args2, 0, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_CUDA(cudaMemcpy(h, out, sizeof(int), cudaMemcpyDeviceToHost));
    GT_TRUE(h[0] == SYMM_ERR_TEAM_INVALID, "index beyond the pool gave %d", h[0]);
    GT_TRUE(symm_cuda_check() == SYMM_ERR_TEAM_INVALID, "check after invalid index");
    GT_CUDA(cudaFree(flags));
    GT_CUDA(cudaFree(out));
    /* The pool is still usable on every PE (the refused block communicated nothing). */
    GT_OK(symm_barrier_on_stream(symm_pool_team(pool, 0), g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    GT_OK(symm_cuda_check());
}

/* ---------------------------------------------------------------- heap */
static void check_heap(void)
{
    symm_cuda_info_t i0, i1;
    GT_OK(symm_cuda_get_info(&i0));
    size_t nb = 1 << 20;
    uint32_t *buf = (uint32_t *)symm_gpu_malloc(nb);
    GT_TRUE(buf != NULL, "symm_gpu_malloc");
    std::vector<uint32_t> h(nb / 4);
    for (size_t i = 0; i < h.size(); i++)
        h[i] = (uint32_t)gt_bits(99, g_me, i);
    upload(buf, h.data(), nb);
    GT_CUDA(cudaDeviceSynchronize());
    GT_OK(symm_barrier_all());
    for (int j = 0; j < g_n; j++) {
        void *p = symm_gpu_ptr(buf, j);
        GT_TRUE(p != NULL, "symm_gpu_ptr(buf, %d)", j);
        GT_CUDA(cudaMemcpy(h.data(), p, nb, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < h.size(); i++)
            if (h[i] != (uint32_t)gt_bits(99, j, i)) GT_FAIL("PE %d's heap word %zu", j, i);
    }
    GT_TRUE(symm_gpu_ptr(h.data(), 0) == NULL, "symm_gpu_ptr of a host address");
    GT_OK(symm_gpu_free(buf));
    GT_OK(symm_cuda_get_info(&i1));
    GT_TRUE(i1.heap_used == i0.heap_used, "GPU heap use %zu after free, %zu before",
            i1.heap_used, i0.heap_used);
    if (g_me == 0)
        printf("ok: GPU heap mapped on %d PEs (device %d, %d PEs share it)\n", g_n, i0.device,
               i0.sharers);
}

/* ---------------------------------------------------------------- growth, registry, memory */
static void check_lifecycle(void)
{
    symm_cuda_info_t i0, i1;
    GT_OK(symm_cuda_get_info(&i0));
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    GT_OK(symm_pool_grow(pool, 40));
    check_many_blocks(pool, 40); /* symm_cuda_pool_device extends the GPU state */
    GT_OK(symm_pool_destroy(pool));
    std::vector<int> ranks(g_n);
    for (int j = 0; j < g_n; j++)
        ranks[j] = g_n - 1 - j;
    GT_OK(symm_pool_get("gpu-test", ranks.data(), g_n, 8, &pool));
    check_many_blocks(pool, 8);
    GT_OK(symm_pool_get("gpu-test", ranks.data(), g_n, 100, &pool));
    check_many_blocks(pool, 100);
    GT_OK(symm_pool_release("gpu-test"));
    GT_OK(symm_cuda_get_info(&i1));
    GT_TRUE(i1.team_used == i0.team_used,
            "GPU team memory %zu after destroy/release, %zu before", i1.team_used,
            i0.team_used);
    if (g_me == 0)
        printf("ok: growth, registry; GPU team memory back to %zu bytes\n", i1.team_used);
}

int main(int argc, char **argv)
{
    g_quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (!gt_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    GT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    check_heap();
    size_t big = (size_t)(65537 + 16) * 8 * (size_t)g_n + (1 << 20) * (size_t)g_n;
    void *src = symm_gpu_malloc(big), *dst = symm_gpu_malloc(big);
    GT_TRUE(src && dst, "symm_gpu_malloc(%zu)", big);
    check_team(SYMM_TEAM_WORLD, "WORLD", src, dst);
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 4, &pool));
    check_team(symm_pool_team(pool, 3), "pool dup 3", src, dst);
    std::vector<int> rev(g_n);
    for (int j = 0; j < g_n; j++)
        rev[j] = g_n - 1 - j;
    symm_team_t rteam;
    GT_OK(symm_team_create(rev.data(), g_n, &rteam));
    if (!g_quick) check_team(rteam, "a team in reverse order", src, dst);
    GT_OK(symm_gpu_free(src));
    GT_OK(symm_gpu_free(dst));
    check_busy(pool);
    int maxb = g_quick ? 16 : 128;
    int cap = symm_cuda_max_resident_blocks((const void *)k_many, 256, 0);
    GT_TRUE(cap >= 16, "only %d resident blocks", cap);
    if (maxb > cap) maxb = cap;
    symm_pool_t big_pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, (size_t)maxb, &big_pool));
    check_many_blocks(big_pool, maxb);
    GT_OK(symm_pool_destroy(big_pool));
    GT_OK(symm_team_destroy(rteam));
    GT_OK(symm_pool_destroy(pool));
    check_lifecycle();
    GT_CUDA(cudaStreamDestroy(g_stream));
    GT_OK(symm_finalize());
    if (g_me == 0) printf("PASS test_gpu_coll (%d PEs%s)\n", g_n, g_quick ? ", quick" : "");
    return 0;
}
