/* test_gpu_moe_in.cu — where a member's MoE input lies, on the GPU: the stream forms and
 * the block-scoped calls from a user's kernel, at any PE count, against serial references
 * computed on the host from every PE's deterministic input:
 *  - a "mute" member passes in = NULL to the dispatch (or 1-D all-to-all-v) and sends no
 *    rows, yet receives rows; a "deaf" member receives nothing, so it passes in = NULL to
 *    the combine; with "alt", odd members pass another symmetric object, at an offset of
 *    their own, as in, while garbage fills the object the others use: a reader that looked
 *    for a peer's rows at its own in's place would read garbage (or through NULL);
 *  - dispatch (major_align 0..3), 1-D and the combine of their device outputs: rows,
 *    out_splits, out_offsets, out_rows and untouched padding; combine gives back every
 *    input exactly;
 *  - a member whose splits send rows from a NULL in makes every member fail with
 *    SYMM_ERR_INVALID_ARG (symm_cuda_check, and the block-scoped calls' status) and
 *    nothing is written; the pool still works afterwards. */
#include <algorithm>
#include <vector>

#include "gpu_test.h"
#include "moe_ref.h"
#include "symm_device.cuh"

static int g_me, g_n;
static cudaStream_t g_stream;
static symm_pool_t g_pool;
static symm_dev_pool_t g_dp;
static int *g_rc; /* device: the block-scoped calls' status */

static const uint8_t kGarbage = 0xEE, kOutFill = 0x5C, kBackFill = 0x11;

/* ---------------------------------------------------------------- the model */
/* The rows each member sends and their bytes: moe_ref.h, with a mute and a deaf member. */
struct moe_case : moe_ref_case {
    bool alt;   /* odd members' in is another object at another offset */
    bool one_d; /* 1-D all-to-all-v instead of the dispatch (ne 1, align 0) */
    int form;   /* 0: stream forms; 1: block-scoped calls in a user's kernel */
    int nb;     /* blocks (stream form: 0 = automatic) */
};

/* ---------------------------------------------------------------- the calls */
struct call_args {
    int kind; /* SYMM_TM_A2A_* */
    void *out;
    size_t out_capacity;
    const void *in;
    size_t in_capacity;
    const size_t *in_splits, *in_offsets;
    int ne;
    size_t row_bytes, major_align;
    size_t *out_splits, *out_offsets, *out_rows;
    void *ws;
    int *rc;
};

/* A user's kernel: block b runs the block-scoped call on duplicate b. */
__global__ void k_user_a2a(symm_dev_pool_t pool, call_args a)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int r;
    if (a.kind == SYMM_TM_A2A_1D)
        r = symm_dev_all_to_all_v_block(t, a.out, a.out_capacity, a.in, a.in_capacity,
                                        a.in_splits, a.row_bytes, a.out_splits, a.out_offsets,
                                        a.out_rows, a.ws, blockIdx.x, gridDim.x);
    else if (a.kind == SYMM_TM_A2A_DISPATCH)
        r = symm_dev_moe_dispatch_block(t, a.out, a.out_capacity, a.in, a.in_capacity,
                                        a.in_splits, a.ne, a.row_bytes, a.major_align,
                                        a.out_splits, a.out_offsets, a.out_rows, a.ws,
                                        blockIdx.x, gridDim.x);
    else
        r = symm_dev_moe_combine_block(
            t, a.out, a.out_capacity, a.in, a.in_capacity, a.in_splits, a.in_offsets, a.ne,
            a.row_bytes, a.out_splits, a.out_offsets, a.out_rows, a.ws, blockIdx.x, gridDim.x);
    if (threadIdx.x == 0 && r) atomicExch(a.rc, r);
}

/* Runs one call in form 0 (stream) or 1 (user's kernel of nb blocks, nb >= 1) and waits
 * for it; returns the host call's status (form 0) and, in *dev, the agreed status
 * (symm_cuda_check; form 1: also the blocks' status, which must match it). */
static symm_status_t run_call(int form, int nb, call_args a, symm_status_t *dev)
{
    symm_status_t st = SYMM_SUCCESS;
    if (form == 0) {
        if (a.kind == SYMM_TM_A2A_1D)
            st = symm_all_to_all_v_on_stream(g_pool, a.out, a.out_capacity, a.in, a.in_capacity,
                                             a.in_splits, a.row_bytes, a.out_splits,
                                             a.out_offsets, a.out_rows, a.ws, nb, g_stream);
        else if (a.kind == SYMM_TM_A2A_DISPATCH)
            st = symm_moe_dispatch_on_stream(g_pool, a.out, a.out_capacity, a.in, a.in_capacity,
                                             a.in_splits, a.ne, a.row_bytes, a.major_align,
                                             a.out_splits, a.out_offsets, a.out_rows, a.ws, nb,
                                             g_stream);
        else
            st = symm_moe_combine_on_stream(
                g_pool, a.out, a.out_capacity, a.in, a.in_capacity, a.in_splits, a.in_offsets,
                a.ne, a.row_bytes, a.out_splits, a.out_offsets, a.out_rows, a.ws, nb, g_stream);
        GT_CUDA(cudaStreamSynchronize(g_stream));
        *dev = symm_cuda_check();
        return st;
    }
    GT_CUDA(gt_memset_sync(g_rc, 0, sizeof(int)));
    a.rc = g_rc;
    void *args[] = {&g_dp, &a};
    GT_OK(symm_cuda_launch((const void *)k_user_a2a, dim3(nb), dim3(256), args, 0, g_stream));
    GT_CUDA(cudaStreamSynchronize(g_stream));
    *dev = symm_cuda_check();
    int rc = -1;
    GT_CUDA(gt_memcpy_sync(&rc, g_rc, sizeof rc, cudaMemcpyDeviceToHost));
    GT_TRUE(rc == (int)*dev, "block-scoped call (kind %d): status %d, symm_cuda_check %d",
            a.kind, rc, (int)*dev);
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- round trips */
static void run_case(const moe_case &c)
{
    const int n = g_n, ne = c.ne, me = g_me;
    const size_t rb = c.row_bytes, N = (size_t)n * ne;
    char what[160];
    snprintf(what, sizeof what, "%s ne %d align %zu rb %zu, mute %d deaf %d, %s, %s nb %d",
             c.one_d ? "1-D" : "dispatch", ne, c.align, rb, c.mute, c.deaf,
             c.alt ? "other objects" : "one object", c.form ? "block-scoped" : "stream", c.nb);
    size_t max_in, max_need;
    moe_max_rows(n, c, &max_in, &max_need);
    const size_t in_cap = max_in + 2, out_cap = max_need + 3, kShift = 6;
    /* symmetric (the same sizes on every PE): the usual in and another object for the
     * dispatch; mid (the dispatch's out, the combine's usual in) and another object for
     * the combine; the workspace */
    uint8_t *A = (uint8_t *)symm_gpu_malloc(in_cap * rb);
    uint8_t *B = (uint8_t *)symm_gpu_malloc((in_cap + kShift) * rb);
    uint8_t *mid = (uint8_t *)symm_gpu_malloc(out_cap * rb);
    uint8_t *mid2 = (uint8_t *)symm_gpu_malloc((out_cap + kShift) * rb);
    void *ws = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    GT_TRUE(A && B && mid && mid2 && ws, "symm_gpu_malloc (%s)", what);
    uint8_t *back;
    size_t *d;
    GT_CUDA(cudaMalloc(&back, in_cap * rb));
    GT_CUDA(cudaMalloc(&d, (5 * N + 2) * sizeof(size_t)));
    size_t *d_sp = d, *d_osp = d + N, *d_oof = d + 2 * N, *d_bsp = d + 3 * N,
           *d_bof = d + 4 * N, *d_rows = d + 5 * N;

    /* ---- my input, at the place I pass (none for the mute member) */
    const bool odd = c.alt && me % 2;
    std::vector<uint8_t> hin;
    std::vector<size_t> hsp;
    moe_input(n, c, me, &hin, &hsp);
    const size_t my_in = hin.size() / rb, shift = 1 + (size_t)me % 5;
    GT_CUDA(gt_memset_sync(A, kGarbage, in_cap * rb));
    GT_CUDA(gt_memset_sync(B, kGarbage, (in_cap + kShift) * rb));
    uint8_t *din = me == c.mute ? nullptr : odd ? B + shift * rb : A;
    GT_TRUE(din || my_in == 0, "the mute member sends rows (%s)", what);
    if (my_in) GT_CUDA(gt_memcpy_sync(din, hin.data(), hin.size(), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(d_sp, hsp.data(), N * sizeof(size_t), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memset_sync(mid, kOutFill, out_cap * rb));
    GT_CUDA(gt_memset_sync(mid2, kGarbage, (out_cap + kShift) * rb));
    GT_CUDA(gt_memset_sync(back, kBackFill, in_cap * rb));
    GT_OK(symm_barrier_all());

    /* ---- dispatch (or 1-D); a NULL in with any in_capacity (it is ignored) */
    const int nb = c.form == 1 && c.nb == 0 ? 4 : c.nb;
    call_args a;
    memset(&a, 0, sizeof a);
    a.kind = c.one_d ? SYMM_TM_A2A_1D : SYMM_TM_A2A_DISPATCH;
    a.out = mid;
    a.out_capacity = out_cap;
    a.in = din;
    a.in_capacity = din ? in_cap : (c.seed & 1) ? 7 : 0;
    a.in_splits = d_sp;
    a.ne = ne;
    a.row_bytes = rb;
    a.major_align = c.align;
    a.out_splits = d_osp;
    a.out_offsets = d_oof;
    a.out_rows = d_rows;
    a.ws = ws;
    symm_status_t dev;
    GT_OK(run_call(c.form, nb, a, &dev));
    GT_TRUE(dev == SYMM_SUCCESS, "%s: device status %d (%s)", what, (int)dev,
            symm_last_error());

    std::vector<uint8_t> hmid(out_cap * rb);
    GT_CUDA(gt_memcpy_sync(hmid.data(), mid, hmid.size(), cudaMemcpyDeviceToHost));
    std::vector<size_t> rsp, rof;
    moe_check_dispatch(n, c, me, what, gt_d2h(d_osp, N), gt_d2h(d_oof, N), gt_d2h(d_rows, 1)[0],
                       hmid, kOutFill, &rsp, &rof);

    /* ---- combine back; the deaf member received nothing and passes in = NULL; odd
     * members move their dispatch output to another object, leaving garbage in mid */
    if (me == c.deaf)
        for (size_t i = 0; i < N; i++)
            GT_TRUE(rsp[i] == 0, "%s: the deaf member receives rows", what);
    const size_t shift2 = 5 - (size_t)me % 4;
    uint8_t *cin = me == c.deaf ? nullptr : odd ? mid2 + shift2 * rb : mid;
    if (odd && cin) {
        GT_CUDA(gt_memcpy_sync(cin, mid, out_cap * rb, cudaMemcpyDeviceToDevice));
        GT_CUDA(gt_memset_sync(mid, kGarbage, out_cap * rb));
    }
    GT_OK(symm_barrier_all());
    memset(&a, 0, sizeof a);
    a.kind = SYMM_TM_A2A_COMBINE;
    a.out = back;
    a.out_capacity = in_cap;
    a.in = cin;
    a.in_capacity = cin ? out_cap : (c.seed & 2) ? 5 : 0;
    a.in_splits = d_osp;
    a.in_offsets = d_oof;
    a.ne = c.one_d ? 1 : ne;
    a.row_bytes = rb;
    a.out_splits = d_bsp;
    a.out_offsets = d_bof;
    a.out_rows = d_rows + 1;
    a.ws = ws;
    GT_OK(run_call(c.form, nb, a, &dev));
    GT_TRUE(dev == SYMM_SUCCESS, "combine after %s: device status %d (%s)", what, (int)dev,
            symm_last_error());
    std::vector<uint8_t> hback(in_cap * rb);
    GT_CUDA(gt_memcpy_sync(hback.data(), back, hback.size(), cudaMemcpyDeviceToHost));
    moe_check_combine(what, rb, hsp, gt_d2h(d_bsp, N), gt_d2h(d_bof, N),
                      gt_d2h(d_rows + 1, 1)[0], hin, hback, kBackFill);

    GT_OK(symm_barrier_all());
    GT_CUDA(cudaFree(d));
    GT_CUDA(cudaFree(back));
    GT_OK(symm_gpu_free(ws));
    GT_OK(symm_gpu_free(mid2));
    GT_OK(symm_gpu_free(mid));
    GT_OK(symm_gpu_free(B));
    GT_OK(symm_gpu_free(A));
}

static void test_where_in(void)
{
    static const struct {
        int ne;
        size_t align, rb;
    } cases[] = {{1, 0, 8}, {3, 2, 12}, {5, 1, 40}, {2, 0, 64}, {3, 3, 13}};
    const int n = g_n;
    const int who[][2] = {{n - 1, 0}, {0, n - 1}, {n / 2, n / 2}, {-1, -1}}; /* mute, deaf */
    static const int nbs[] = {0, 1, 3};
    uint64_t seed = 7100;
    int count = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int w = 0; w < 4; w++)
            for (int alt = 0; alt < 2; alt++)
                for (int form = 0; form < 2; form++) {
                    moe_case c = {{cases[i].ne, cases[i].rb, cases[i].align, seed++, false,
                                   who[w][0], who[w][1]},
                                  alt != 0,
                                  false,
                                  form,
                                  nbs[(i + (size_t)w + (size_t)alt) % 3]};
                    run_case(c);
                    count++;
                    if (c.ne != 1) continue;
                    c.one_d = true;
                    c.align = 0;
                    c.seed = seed++;
                    run_case(c);
                    count++;
                }
    /* more entries than one layout window (the windowed layout, not the early one) */
    for (int form = 0; form < 2; form++) {
        moe_case big = {{100, 8, 2, seed++, false, n - 1, 0}, true, false, form, 3};
        run_case(big);
        count++;
    }
    if (g_me == 0) printf("where in lies: %d round trips ok\n", count);
}

/* ---------------------------------------------------------------- agreed failure */
/* The last member sends rows from in = NULL: every member fails with SYMM_ERR_INVALID_ARG
 * on the device, in every kind and form, and nothing is written. */
static void test_null_in_sending(void)
{
    const int n = g_n, me = g_me, ne = 2, bad = n - 1;
    /* capacities that hold every member's rows (splits of at most 8 rows an entry), so that
     * the NULL in is the only failure */
    const size_t rb = 8, N = (size_t)n * ne, in_cap = 8 * N + 16, out_cap = 16 * N + 8;
    uint8_t *in = (uint8_t *)symm_gpu_malloc(in_cap * rb);
    uint8_t *out = (uint8_t *)symm_gpu_malloc(out_cap * rb);
    void *ws = symm_gpu_malloc(symm_cuda_a2a_workspace_bytes(n, ne));
    GT_TRUE(in && out && ws, "symm_gpu_malloc for the NULL-in case");
    size_t *d;
    GT_CUDA(cudaMalloc(&d, (4 * N + 1) * sizeof(size_t)));
    size_t *d_sp = d, *d_off = d + N, *d_osp = d + 2 * N, *d_oof = d + 3 * N,
           *d_rows = d + 4 * N;
    std::vector<uint8_t> hin(in_cap * rb);
    for (size_t i = 0; i < hin.size(); i++)
        hin[i] = (uint8_t)gt_bits(515, me, i);
    GT_CUDA(gt_memcpy_sync(in, hin.data(), hin.size(), cudaMemcpyHostToDevice));
    /* random splits of at most 8 rows; the bad member surely sends (entry 0); combine
     * offsets 0, 2, 4, ..: inside in */
    std::vector<size_t> hsp(N), hoff(N);
    for (size_t k = 0; k < N; k++) {
        hsp[k] = (size_t)(gt_bits(616, me, k) % 9);
        hoff[k] = 2 * k;
    }
    if (me == bad) hsp[0] = 2;
    GT_CUDA(gt_memcpy_sync(d_sp, hsp.data(), N * sizeof(size_t), cudaMemcpyHostToDevice));
    GT_CUDA(gt_memcpy_sync(d_off, hoff.data(), N * sizeof(size_t), cudaMemcpyHostToDevice));
    static const char *const kinds[] = {"1-D", "dispatch", "combine"};
    int count = 0;
    for (int kind = SYMM_TM_A2A_1D; kind <= SYMM_TM_A2A_COMBINE; kind++)
        for (int form = 0; form < 2; form++) {
            GT_CUDA(gt_memset_sync(out, kOutFill, out_cap * rb));
            GT_CUDA(gt_memset_sync(d_osp, 0x5a, 2 * N * sizeof(size_t)));
            GT_CUDA(gt_memset_sync(d_rows, 0x33, sizeof(size_t)));
            GT_OK(symm_barrier_all());
            call_args a;
            memset(&a, 0, sizeof a);
            a.kind = kind;
            a.out = out;
            a.out_capacity = out_cap;
            a.in = me == bad ? nullptr : in;
            a.in_capacity = in_cap;
            a.in_splits = d_sp;
            a.in_offsets = d_off;
            a.ne = kind == SYMM_TM_A2A_1D ? 1 : ne;
            a.row_bytes = rb;
            a.major_align = kind == SYMM_TM_A2A_DISPATCH ? 1 : 0;
            a.out_splits = d_osp;
            a.out_offsets = d_oof;
            a.out_rows = d_rows;
            a.ws = ws;
            symm_status_t dev;
            /* the host call cannot see the splits: it accepts a NULL in */
            GT_OK(run_call(form, form ? 3 : 0, a, &dev));
            GT_TRUE(dev == SYMM_ERR_INVALID_ARG,
                    "%s (%s form), PE %d sends from a NULL in: status %d (%s), want "
                    "INVALID_ARG",
                    kinds[kind], form ? "block-scoped" : "stream", bad, (int)dev,
                    symm_last_error());
            std::vector<uint8_t> ho(out_cap * rb);
            GT_CUDA(gt_memcpy_sync(ho.data(), out, ho.size(), cudaMemcpyDeviceToHost));
            for (size_t i = 0; i < ho.size(); i++)
                GT_TRUE(ho[i] == kOutFill, "failed %s wrote out byte %zu", kinds[kind], i);
            std::vector<size_t> hs = gt_d2h(d_osp, 2 * N + 1);
            for (size_t i = 0; i < 2 * N; i++)
                GT_TRUE(hs[i] == 0x5a5a5a5a5a5a5a5aull,
                        "failed %s wrote out_splits / out_offsets entry %zu", kinds[kind], i);
            GT_TRUE(hs[2 * N] == 0x3333333333333333ull, "failed %s wrote out_rows",
                    kinds[kind]);
            count++;
        }
    GT_OK(symm_barrier_all());
    GT_CUDA(cudaFree(d));
    GT_OK(symm_gpu_free(ws));
    GT_OK(symm_gpu_free(out));
    GT_OK(symm_gpu_free(in));
    /* the pool still works */
    moe_case c = {{3, 24, 2, 8800, false, n - 1, -1}, true, false, 0, 0};
    run_case(c);
    if (g_me == 0) printf("NULL in that sends: %d calls fail alike, ok\n", count);
}

int main(void)
{
    if (!gt_init()) return 0;
    g_me = symm_my_pe();
    g_n = symm_n_pes();
    GT_CUDA(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 8, &g_pool));
    GT_OK(symm_cuda_pool_device(g_pool, &g_dp));
    GT_CUDA(cudaMalloc(&g_rc, sizeof(int)));
    test_where_in();
    test_null_in_sending();
    GT_OK(symm_cuda_check());
    GT_CUDA(cudaFree(g_rc));
    GT_OK(symm_pool_destroy(g_pool));
    GT_CUDA(cudaStreamDestroy(g_stream));
    GT_OK(symm_barrier_all());
    if (g_me == 0) printf("PASS test_gpu_moe_in (%d PEs)\n", g_n);
    GT_OK(symm_finalize());
    return 0;
}
