/* moe_topk.cu — the stream forms of the device top-k MoE dispatch and weighted combine
 * (symm/impl/topk__funcs.cuh): the checks this member can make on the host, the block
 * count, and one kernel whose block 0 holds pool duplicate 0 and runs the rounds while
 * every block shares the rows. A failure only this member can see is published on the
 * device (the kernel still takes part), so every member fails alike. The packed forms are
 * launched plainly (not with programmatic dependent launch): the member's blocks meet on
 * barrier words of the workspace, which a kernel still draining on the stream may hold.
 * The low-latency forms, whose blocks never meet, launch with it. */
#include <cstdio>
#include <cstring>

#include "symm_device.cuh"

extern "C" {
#include "core/log.h"
}
#include "coll/cuda/cuda_coll.h"
#include "team/cuda/cuda_pool_dev.h"

namespace
{

const int kThreads = 512;

struct topk_params {
    symm_dev_pool_t pool;
    symm_tm::topk_args a;
};

__global__ void __launch_bounds__(kThreads, 1)
    k_topk_dispatch(const __grid_constant__ topk_params p)
{
    const symm_dev_team_t t = symm_dev_pool_team(p.pool, blockIdx.x);
    symm_tm::topk_dispatch_impl(t, p.a, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kThreads, 1)
    k_topk_combine(const __grid_constant__ topk_params p)
{
    const symm_dev_team_t t = symm_dev_pool_team(p.pool, blockIdx.x);
    symm_tm::topk_combine_impl(t, p.a, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kThreads, 1)
    k_topk_dispatch_ll(const __grid_constant__ topk_params p)
{
    const symm_dev_team_t t = symm_dev_pool_team(p.pool, 0);
    symm_tm::topk_ll_dispatch_impl(t, p.a, blockIdx.x, gridDim.x);
}

__global__ void __launch_bounds__(kThreads, 1)
    k_topk_combine_ll(const __grid_constant__ topk_params p)
{
    const symm_dev_team_t t = symm_dev_pool_team(p.pool, 0);
    symm_tm::topk_ll_combine_impl(t, p.a, blockIdx.x, gridDim.x);
}

/* [p, p + bytes) inside this PE's GPU heap (bytes > 0). */
bool in_gpu_heap(const void *p, size_t bytes)
{
    const int me = symm_my_pe();
    return p && symm_gpu_ptr(p, me) && symm_gpu_ptr((const uint8_t *)p + (bytes - 1), me) &&
           (uintptr_t)p + bytes > (uintptr_t)p;
}

/* Readable and writable by this GPU's kernels (device, managed or registered host). */
bool dev_accessible(const void *p)
{
    if (symm_gpu_ptr(p, symm_my_pe())) return true;
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged ||
           (at.type == cudaMemoryTypeHost && at.devicePointer);
}

bool overlap(const void *a, size_t na, const void *b, size_t nb)
{
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* The pool (its GPU state made unless stream is being captured into a CUDA graph), the
 * shape every member passes alike, and the block count (0: one per resident block of this
 * PE's share, at most the pool's size). */
symm_status_t prepare(const char *fn, symm_pool_t pool, const void *kernel, int ne,
                      size_t tokens, int k, int nblocks, symm_dev_pool_t *dp, int *nb,
                      cudaStream_t stream)
{
    CHECK(symm_cuda_pool_device_fast(fn, pool, dp, nullptr, stream));
    if (dp->n < 1 || dp->me < 0 || dp->size < 1)
        return symm_error_set(SYMM_ERR_TEAM_INVALID, "%s: pool %lld has no usable GPU state",
                              fn, (long long)pool);
    switch (symm_plan_topk_shape(dp->n, ne, tokens, k)) {
    case SYMM_PLAN_TOPK_OK:
        break;
    case SYMM_PLAN_TOPK_K:
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: k = %d (must be 1..%d)", fn, k,
                              SYMM_MOE_TOPK_MAX);
    case SYMM_PLAN_TOPK_NE:
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: ne = %d (must be >= 1)", fn, ne);
    case SYMM_PLAN_TOPK_EXPERTS:
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %d members x %d experts is 2^31 or more",
                              fn, dp->n, ne);
    default:
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu tokens x k = %d is 2^32 or more", fn,
                              tokens, k);
    }
    const int cap = symm_cuda_max_resident_blocks(kernel, kThreads, 0);
    if (nblocks < 0 || (uint64_t)nblocks > dp->size || (cap > 0 && nblocks > cap))
        return symm_error_set(
            SYMM_ERR_INVALID_ARG,
            "%s: nblocks = %d (0: automatic; at most the pool's %u duplicates "
            "and the %d blocks of %d threads resident on this PE's share)",
            fn, nblocks, dp->size, cap, kThreads);
    long want = nblocks;
    if (!want) {
        want = symm_cuda_sm_share();
        if (cap > 0 && want > cap) want = cap;
        if (want > (long)dp->size) want = (long)dp->size;
        if (want < 1) want = 1;
    }
    *nb = (int)want;
    return SYMM_SUCCESS;
}

/* ws: b bytes (sized by the call `sizer` for tokens; 0: too many), a 16-byte aligned range
 * of the GPU heap. */
symm_status_t check_ws_range(const char *fn, const void *ws, size_t b, const char *sizer,
                             size_t tokens)
{
    if (!b || !in_gpu_heap(ws, b) || (uintptr_t)ws % 16)
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: workspace %p (+%zu bytes, %s for %zu tokens) is not a "
                              "16-byte aligned range of the GPU symmetric heap",
                              fn, ws, b, sizer, tokens);
    return SYMM_SUCCESS;
}

symm_status_t check_ws(const char *fn, const void *ws, int n, int ne, size_t tokens, int k)
{
    return check_ws_range(fn, ws, symm_tm_topk_ws_bytes(n, ne, tokens, k),
                          "symm_cuda_moe_topk_workspace_bytes", tokens);
}

/* Launches kernel; a failure only this member sees (local) is published: the kernel still
 * takes part, moving no rows, so that every member fails alike. low_latency: the
 * low-latency forms keep their outs (the other members' rows land there whatever this
 * member does) and launch with programmatic dependent launch (their bodies wait before
 * they touch memory, and only block 0, at its end, lets the next kernel launch). */
symm_status_t launch(const char *fn, const void *kernel, const symm_dev_pool_t &dp,
                     symm_tm::topk_args a, int nb, cudaStream_t stream, symm_status_t local,
                     bool low_latency = false)
{
    char why[512] = "";
    if (local) {
        snprintf(why, sizeof why, "%s", symm_last_error());
        a.fail = local;
        a.tokens = 0;
    }
    if (local && !low_latency) {
        a.out = nullptr;
        a.out_capacity = 0;
        a.out_counts = a.out_offsets = a.out_rows = nullptr;
        a.out_src = nullptr;
        a.rows_out = nullptr;
        for (int p = 0; p < SYMM_MOE_SIDE_MAX; p++)
            a.side[p].out = nullptr;
    }
    topk_params p;
    memset(&p, 0, sizeof p);
    p.pool = dp;
    p.a = a;
    void *args[] = {&p};
    symm_status_t st =
        low_latency ? symm_cuda_launch_pdl(kernel, dim3(nb), dim3(kThreads), args, 0, stream)
                    : symm_cuda_launch(kernel, dim3(nb), dim3(kThreads), args, 0, stream);
    if (!st) {
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = symm_cuda_error(fn, e);
    }
    if (st) return st;
    if (local) return symm_error_set(local, "%s", why);
    return SYMM_SUCCESS;
}

/* This member's dispatch arguments that the host can see (a failure is published). */
symm_status_t dispatch_local(const char *fn, const symm_tm::topk_args &a)
{
    if (a.row_bytes == 0) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: row_bytes is 0", fn);
    if (a.nside < 0 || a.nside > SYMM_MOE_SIDE_MAX)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: nside = %d (0..%d)", fn, a.nside,
                              SYMM_MOE_SIDE_MAX);
    if (a.tokens && !dev_accessible(a.topk_idx))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: topk_idx %p is not memory this GPU can read", fn,
                              (const void *)a.topk_idx);
    const void *ins[1 + SYMM_MOE_SIDE_MAX], *outs[1 + SYMM_MOE_SIDE_MAX];
    size_t ib[1 + SYMM_MOE_SIDE_MAX], ob[1 + SYMM_MOE_SIDE_MAX];
    for (int p = 0; p <= a.nside; p++) {
        const size_t rb = p ? a.side[p - 1].row_bytes : a.row_bytes;
        ins[p] = p ? a.side[p - 1].in : a.in;
        outs[p] = p ? a.side[p - 1].out : a.out;
        if (rb == 0)
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: side[%d].row_bytes is 0", fn,
                                  p - 1);
        if (__builtin_mul_overflow(a.tokens, rb, &ib[p]) ||
            __builtin_mul_overflow(a.out_capacity, rb, &ob[p]))
            return symm_error_set(SYMM_ERR_OVERFLOW, "%s: rows of %zu bytes overflow", fn, rb);
        if (!ins[p]) ib[p] = 0;
        if (ib[p] && !in_gpu_heap(ins[p], ib[p])) {
            char what[32] = "in";
            if (p) snprintf(what, sizeof what, "side[%d].in", p - 1);
            return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                                  "%s: %s %p (%zu tokens of %zu bytes) is not in the GPU "
                                  "symmetric heap",
                                  fn, what, ins[p], a.tokens, rb);
        }
        if (ob[p] && (!outs[p] || !dev_accessible(outs[p])))
            return symm_error_set(SYMM_ERR_INVALID_ARG,
                                  "%s: an out of %zu rows is %p, not memory this GPU can write",
                                  fn, a.out_capacity, outs[p]);
    }
    for (int p = 0; p <= a.nside; p++)
        for (int q = 0; q <= a.nside; q++)
            if (overlap(outs[p], ob[p], ins[q], ib[q]))
                return symm_error_set(SYMM_ERR_INVALID_ARG,
                                      "%s: an out overlaps an in: peers read the ins while the "
                                      "outs are written",
                                      fn);
    const void *optional[] = {a.out_counts, a.out_offsets, a.out_src, a.out_rows, a.rows_out};
    for (const void *o : optional)
        if (o && !dev_accessible(o))
            return symm_error_set(SYMM_ERR_INVALID_ARG,
                                  "%s: an output array (%p) is not memory this GPU can write",
                                  fn, o);
    return SYMM_SUCCESS;
}

symm_status_t combine_local(const char *fn, const symm_tm::topk_args &a)
{
    if (!symm_plan_topk_type_ok(a.type))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: type %d is not a combine row type (float, fp16 or bf16)", fn,
                              a.type);
    if (a.hidden == 0) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: hidden is 0", fn);
    const size_t es = a.type == SYMM_FLOAT ? 4 : 2;
    size_t rb, ib = 0, ob;
    if (__builtin_mul_overflow(a.hidden, es, &rb) ||
        (a.in && __builtin_mul_overflow(a.in_rows, rb, &ib)) ||
        __builtin_mul_overflow(a.tokens, rb, &ob))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: rows of %zu elements overflow", fn,
                              a.hidden);
    if (ib && !in_gpu_heap(a.in, ib))
        return symm_error_set(
            SYMM_ERR_NOT_SYMMETRIC,
            "%s: in %p (%zu rows of %zu bytes) is not in the GPU symmetric heap", fn, a.in,
            a.in_rows, rb);
    if (ob && (!a.out || !dev_accessible(a.out)))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: out %p is not memory this GPU can write", fn, a.out);
    if (overlap(a.out, ob, a.in, ib))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out overlaps in", fn);
    if (a.tokens && (!dev_accessible(a.topk_idx) || !dev_accessible(a.rows_in) ||
                     (a.weights && !dev_accessible(a.weights))))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: topk_idx, topk_rows or topk_weights is not memory this GPU "
                              "can read",
                              fn);
    return SYMM_SUCCESS;
}

} // namespace

extern "C" size_t symm_cuda_moe_topk_workspace_bytes(int n, int ne, size_t tokens, int k)
{
    return symm_tm_topk_ws_bytes(n, ne, tokens, k);
}

extern "C" symm_status_t symm_moe_topk_dispatch_on_stream(
    symm_pool_t pool, void *out, size_t out_capacity, const void *in, size_t tokens,
    size_t row_bytes, const int64_t *topk_idx, int k, int ne, size_t major_align,
    const symm_moe_side_t *side, int nside, size_t *out_counts, size_t *out_offsets,
    symm_moe_src_t *out_src, size_t *out_rows, int64_t *topk_rows, void *workspace, int nblocks,
    cudaStream_t stream)
{
    static const char *fn = "symm_moe_topk_dispatch_on_stream";
    symm_dev_pool_t dp;
    int nb;
    CHECK(prepare(fn, pool, (const void *)k_topk_dispatch, ne, tokens, k, nblocks, &dp, &nb,
                  stream));
    if (nside < 0 || nside > SYMM_MOE_SIDE_MAX || (nside && !side))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: nside = %d with side %p (0..%d)", fn,
                              nside, (const void *)side, SYMM_MOE_SIDE_MAX);
    CHECK(check_ws(fn, workspace, dp.n, ne, tokens, k));
    const symm_tm::topk_args a = symm_tm::topk_dispatch_args(
        out, out_capacity, in, tokens, row_bytes, topk_idx, k, ne, major_align, side, nside,
        out_counts, out_offsets, out_src, out_rows, topk_rows, workspace);
    return launch(fn, (const void *)k_topk_dispatch, dp, a, nb, stream, dispatch_local(fn, a));
}

extern "C" symm_status_t symm_moe_topk_combine_on_stream(
    symm_pool_t pool, void *out, size_t tokens, const void *in, size_t in_rows, size_t hidden,
    symm_type_t type, const int64_t *topk_idx, const int64_t *topk_rows,
    const float *topk_weights, int k, int ne, void *workspace, int nblocks, cudaStream_t stream)
{
    static const char *fn = "symm_moe_topk_combine_on_stream";
    symm_dev_pool_t dp;
    int nb;
    CHECK(prepare(fn, pool, (const void *)k_topk_combine, ne, tokens, k, nblocks, &dp, &nb,
                  stream));
    CHECK(check_ws(fn, workspace, dp.n, ne, 0, k));
    const symm_tm::topk_args a =
        symm_tm::topk_combine_args(out, tokens, in, in_rows, hidden, (int)type, topk_idx,
                                   topk_rows, topk_weights, k, ne, workspace);
    return launch(fn, (const void *)k_topk_combine, dp, a, nb, stream, combine_local(fn, a));
}

/* ---------------------------------------------------------------- low-latency forms */
namespace
{

/* n x ne x max_tokens rows of rb bytes, a symmetric object of the GPU heap (NULL allowed
 * where `optional`). */
symm_status_t check_ll_sym(const char *fn, const char *what, const void *p, size_t rows,
                           size_t rb, bool optional)
{
    if (!p && optional) return SYMM_SUCCESS;
    size_t b;
    if (__builtin_mul_overflow(rows, rb, &b))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu rows of %zu bytes overflow", fn, rows,
                              rb);
    if (!in_gpu_heap(p, b))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s %p (%zu rows of %zu bytes) is not in the GPU symmetric "
                              "heap",
                              fn, what, p, rows, rb);
    return SYMM_SUCCESS;
}

symm_status_t check_ll_ws(const char *fn, const void *ws, int n, int ne, size_t max_tokens,
                          int k, size_t crb)
{
    return check_ws_range(fn, ws, symm_tm_topk_ll_ws_bytes(n, ne, max_tokens, k, crb),
                          "symm_cuda_moe_topk_ll_workspace_bytes", max_tokens);
}

symm_status_t dispatch_ll_local(const char *fn, const symm_tm::topk_args &a, int n)
{
    if (a.row_bytes == 0) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: row_bytes is 0", fn);
    if (a.tokens > a.max_tokens)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu tokens, more than max_tokens = %zu",
                              fn, a.tokens, a.max_tokens);
    if (a.tokens && !dev_accessible(a.topk_idx))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: topk_idx %p is not memory this GPU can read", fn,
                              (const void *)a.topk_idx);
    const size_t rows = (size_t)n * (size_t)a.ne * a.max_tokens;
    CHECK(check_ll_sym(fn, "out", a.out, rows, a.row_bytes, false));
    CHECK(check_ll_sym(fn, "out_counts", a.out_counts, (size_t)n * (size_t)a.ne, sizeof(size_t),
                       false));
    CHECK(check_ll_sym(fn, "out_src", a.out_src, rows, sizeof(symm_moe_src_t), true));
    for (int p = 0; p < a.nside; p++) {
        if (a.side[p].row_bytes == 0)
            return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: side[%d].row_bytes is 0", fn, p);
        CHECK(
            check_ll_sym(fn, "a side's out", a.side[p].out, rows, a.side[p].row_bytes, false));
    }
    if (a.tokens && a.in && !dev_accessible(a.in))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: in %p is not memory this GPU can read",
                              fn, a.in);
    return SYMM_SUCCESS;
}

symm_status_t combine_ll_local(const char *fn, const symm_tm::topk_args &a, int n)
{
    if (!symm_plan_topk_type_ok(a.type))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: type %d is not a combine row type (float, fp16 or bf16)", fn,
                              a.type);
    if (a.hidden == 0) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: hidden is 0", fn);
    if (a.tokens > a.max_tokens)
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu tokens, more than max_tokens = %zu",
                              fn, a.tokens, a.max_tokens);
    if (!a.in || !dev_accessible(a.in) || !a.out_counts || !dev_accessible(a.out_counts) ||
        !a.out_src || !dev_accessible(a.out_src))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: in, counts or src is not memory this GPU can read "
                              "(%d members x %d experts x %zu rows)",
                              fn, n, a.ne, a.max_tokens);
    if (a.tokens && (!a.out || !dev_accessible(a.out) || !dev_accessible(a.topk_idx) ||
                     (a.weights && !dev_accessible(a.weights))))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: out, topk_idx or topk_weights is not memory this GPU can "
                              "use",
                              fn);
    return SYMM_SUCCESS;
}

} // namespace

extern "C" size_t symm_cuda_moe_topk_ll_workspace_bytes(int n, int ne, size_t max_tokens, int k,
                                                        size_t combine_row_bytes)
{
    return symm_tm_topk_ll_ws_bytes(n, ne, max_tokens, k, combine_row_bytes);
}

extern "C" symm_status_t symm_moe_topk_dispatch_ll_on_stream(
    symm_pool_t pool, void *out, const void *in, size_t tokens, size_t max_tokens,
    size_t row_bytes, const int64_t *topk_idx, int k, int ne, const symm_moe_side_t *side,
    int nside, size_t *out_counts, symm_moe_src_t *out_src, void *workspace, int nblocks,
    cudaStream_t stream)
{
    static const char *fn = "symm_moe_topk_dispatch_ll_on_stream";
    symm_dev_pool_t dp;
    int nb;
    CHECK(prepare(fn, pool, (const void *)k_topk_dispatch_ll, ne, max_tokens, k, nblocks, &dp,
                  &nb, stream));
    if (nside < 0 || nside > SYMM_MOE_SIDE_MAX || (nside && !side))
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: nside = %d with side %p (0..%d)", fn,
                              nside, (const void *)side, SYMM_MOE_SIDE_MAX);
    CHECK(check_ll_ws(fn, workspace, dp.n, ne, max_tokens, k, 0));
    symm_tm::topk_args a = symm_tm::topk_dispatch_args(
        out, 0, in, tokens, row_bytes, topk_idx, k, ne, 0, side, nside, out_counts, nullptr,
        out_src, nullptr, nullptr, workspace);
    a.max_tokens = max_tokens;
    return launch(fn, (const void *)k_topk_dispatch_ll, dp, a, nb, stream,
                  dispatch_ll_local(fn, a, dp.n), true);
}

extern "C" symm_status_t
symm_moe_topk_combine_ll_on_stream(symm_pool_t pool, void *out, size_t tokens, const void *in,
                                   size_t max_tokens, size_t hidden, symm_type_t type,
                                   const int64_t *topk_idx, const float *topk_weights, int k,
                                   int ne, const size_t *counts, const symm_moe_src_t *src,
                                   void *workspace, int nblocks, cudaStream_t stream)
{
    static const char *fn = "symm_moe_topk_combine_ll_on_stream";
    symm_dev_pool_t dp;
    int nb;
    CHECK(prepare(fn, pool, (const void *)k_topk_combine_ll, ne, max_tokens, k, nblocks, &dp,
                  &nb, stream));
    const size_t es = type == SYMM_FLOAT ? 4 : 2;
    size_t crb = 0;
    if (__builtin_mul_overflow(hidden, es, &crb))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: rows of %zu elements overflow", fn,
                              hidden);
    CHECK(check_ll_ws(fn, workspace, dp.n, ne, max_tokens, k, crb));
    symm_tm::topk_args a =
        symm_tm::topk_combine_args(out, tokens, in, 0, hidden, (int)type, topk_idx, nullptr,
                                   topk_weights, k, ne, workspace);
    a.max_tokens = max_tokens;
    a.out_counts = (size_t *)counts;
    a.out_src = (symm_moe_src_t *)src;
    /* in a symmetric object: the owners read its rows in place (each row moved once);
     * else this member pushes them into the owners' workspaces first */
    size_t inb = 0;
    a.pull = in && !__builtin_mul_overflow((size_t)dp.n * (size_t)ne * max_tokens, crb, &inb) &&
             inb && in_gpu_heap(in, inb);
    return launch(fn, (const void *)k_topk_combine_ll, dp, a, nb, stream,
                  combine_ll_local(fn, a, dp.n), true);
}
