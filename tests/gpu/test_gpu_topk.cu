/* test_gpu_topk.cu — the device top-k MoE dispatch and weighted combine against the serial
 * model of tests/tilemoe/topk_ref.h (the CPU test's): random routings with k = 1..8, 1..32
 * experts per PE, tokens on one PE, tokens with none, empty and deaf PEs, major_align
 * 0/1/16/128 and others, side payloads, rows of odd sizes and of whole 16-byte vectors,
 * float/fp16/bf16 combines bit for bit the CPU's float accumulation; the decode shape
 * (128 tokens of 7168 fp8 bytes with 56 float scales, top-8, bf16 combine of 7168);
 * the stream forms with 1, 2, 3 and the automatic block count, the per-block device forms
 * from a kernel of our own; the route spread over every block of a member (up to 1024
 * tokens, k 8 and 5, 3/4/5 and the automatic block count, over 256 experts with
 * major_align 1, members on both sides of SYMM_PLAN_TOPK_SPREAD in one call, blocks of 128
 * threads, a dispatch captured in a CUDA graph and replayed on new data); concurrent
 * sub-teams (2-D split) and 1-PE teams; bad expert ids, a NULL in that routes tokens, an
 * output one row short and a member's bad in failing every PE with nothing written, and
 * the team working afterwards, on a small shape and on a spread one; the stream forms
 * captured in CUDA graphs and replayed; the low-latency forms
 * (symm_moe_topk_dispatch_ll_on_stream / _combine_ll_on_stream) on random routings and the
 * decode shape, directly and from CUDA graphs, a member with too many tokens failing every
 * PE. --quick: fewer cases and no decode shape (for compute-sanitizer). */
#include "gpu_test.h"
#include "symm_device.cuh"
#include "tilemoe/topk_ref.h"

static int me, npes, quick; /* quick: fewer cases (under compute-sanitizer) */
static uint64_t seed;

#define MAXTOK   128
#define MANYTOK  1024 /* the spread route's cases: up to 8192 slots a member */
#define MAXK     8
#define BIGRB    7168
#define MAXSIDE  3
#define MAXHID   7168
#define SENTINEL 0xC3
#define SRC_SENT 0x5a
/* rows a member may receive: every slot of every token of 4 PEs, plus padding; MANYROWS
 * for rows of at most 100 bytes (MAXROWS rows of BIGRB bytes, at most MANYROWS rows) */
#define MAXROWS  (4 * MAXTOK * MAXK + 32 * 128)
#define MANYROWS (4 * MANYTOK * MAXK + 32 * 128)

static uint8_t *din, *dside[MAXSIDE], *deo; /* GPU symmetric */
static uint8_t *ws[2];                      /* GPU symmetric workspaces */
static size_t ws_bytes;
static uint8_t *dout, *dsideout[MAXSIDE], *dcout; /* device */
static symm_moe_src_t *dsrc;
static int64_t *didx, *dtrows;
static float *dw;
static size_t *dcounts, *doffsets, *drows;
static cudaStream_t stream;

typedef struct {
    topk_case_t c;
    int rank;
    size_t rb, srb[MAXSIDE];
    int nside;
    symm_type_t type;
    size_t hidden;
    int weighted, nblocks, null_in;
} tcase_t;

static void tcase_team(tcase_t *tc, symm_team_t team)
{
    tc->c.n = symm_team_n_pes(team);
    tc->rank = symm_team_my_pe(team);
    for (int i = 0; i < tc->c.n; i++)
        tc->c.world[i] = symm_team_world_pe(team, i);
}

static const symm_type_t row_types[3] = {SYMM_FLOAT, SYMM_FP16, SYMM_BF16};

static void random_case(tcase_t *tc, symm_team_t team, uint64_t tag)
{
    test_rng_t r;
    test_rng_seed(&r, test_mix(seed, tag));
    static const size_t aligns[] = {0, 1, 16, 128, 3, 7};
    static const size_t rbs[] = {1, 5, 16, 24, 48, 64, 72, 100};
    static const size_t srbs[] = {1, 4, 7, 16, 56, 64};
    memset(tc, 0, sizeof *tc);
    tcase_team(tc, team);
    tc->c.tag = test_mix(seed, tag + 1);
    tc->c.k = 1 + (int)test_rng_below(&r, MAXK);
    tc->c.ne = 1 + (int)test_rng_below(&r, 32);
    tc->c.align = aligns[test_rng_below(&r, 6)];
    tc->c.maxtok = test_rng_below(&r, 49);
    tc->c.empty = test_rng_below(&r, 3) == 0 ? (int)test_rng_below(&r, (uint64_t)tc->c.n) : -1;
    tc->c.deaf = test_rng_below(&r, 3) == 0 ? (int)test_rng_below(&r, (uint64_t)tc->c.n) : -1;
    tc->c.one_pe = test_rng_below(&r, 6) == 0;
    tc->c.none_every = (int)test_rng_below(&r, 4);
    tc->rb = rbs[test_rng_below(&r, 8)];
    tc->nside = (int)test_rng_below(&r, MAXSIDE + 1);
    for (int p = 0; p < tc->nside; p++)
        tc->srb[p] = srbs[test_rng_below(&r, 6)];
    tc->type = row_types[test_rng_below(&r, 3)];
    tc->hidden = 1 + test_rng_below(&r, 72);
    tc->weighted = test_rng_below(&r, 4) != 0;
    tc->nblocks = (int)test_rng_below(&r, 4); /* 0: automatic */
    tc->null_in = (int)test_rng_below(&r, 2);
}

/* ---------------------------------------------------------------- one round trip */
typedef struct {
    std::vector<uint8_t> out, side[MAXSIDE], cout;
    std::vector<symm_moe_src_t> src;
    std::vector<int64_t> trows;
    size_t counts[TOPK_REF_MAXNE], offsets[TOPK_REF_MAXNE], rows;
} host_t;

/* My inputs on the device; *in_null: this member passes NULL ins (it routes nothing). */
static size_t upload(const tcase_t *tc, const topk_routes_t *R, int *in_null)
{
    size_t T = R->tokens[tc->rank];
    int routed = 0;
    for (size_t q = 0; q < T * (size_t)tc->c.k; q++)
        routed |= R->idx[tc->rank][q] >= 0;
    *in_null = tc->null_in && !routed;
    std::vector<uint8_t> h(T * tc->rb + 1);
    for (size_t t = 0; t < T; t++)
        test_fill_pattern(&h[t * tc->rb], tc->rb, topk_ref_row_tag(&tc->c, tc->rank, t, 0));
    if (T) GT_CUDA(gt_memcpy_sync(din, h.data(), T * tc->rb, cudaMemcpyHostToDevice));
    for (int p = 0; p < tc->nside; p++) {
        std::vector<uint8_t> hs(T * tc->srb[p] + 1);
        for (size_t t = 0; t < T; t++)
            test_fill_pattern(&hs[t * tc->srb[p]], tc->srb[p],
                              topk_ref_row_tag(&tc->c, tc->rank, t, 1 + p));
        if (T)
            GT_CUDA(
                gt_memcpy_sync(dside[p], hs.data(), T * tc->srb[p], cudaMemcpyHostToDevice));
    }
    if (T) {
        GT_CUDA(gt_memcpy_sync(didx, R->idx[tc->rank], T * tc->c.k * sizeof(int64_t),
                               cudaMemcpyHostToDevice));
        std::vector<float> w(T * tc->c.k);
        for (size_t t = 0; t < T; t++)
            for (int i = 0; i < tc->c.k; i++)
                w[t * tc->c.k + i] = topk_ref_weight(&tc->c, tc->rank, t, i);
        GT_CUDA(gt_memcpy_sync(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice));
    }
    GT_CUDA(gt_memset_sync(dout, SENTINEL, (size_t)MAXROWS * BIGRB));
    for (int p = 0; p < MAXSIDE; p++)
        GT_CUDA(gt_memset_sync(dsideout[p], SENTINEL, (size_t)MANYROWS * 256));
    GT_CUDA(gt_memset_sync(dsrc, SRC_SENT, sizeof(symm_moe_src_t) * MANYROWS));
    GT_CUDA(gt_memset_sync(dcout, SENTINEL, (size_t)MAXTOK * MAXHID * 4));
    GT_CUDA(gt_memset_sync(dtrows, 0x77, sizeof(int64_t) * MANYTOK * MAXK));
    GT_CUDA(gt_memset_sync(dcounts, 0x77, sizeof(size_t) * TOPK_REF_MAXNE));
    GT_CUDA(gt_memset_sync(doffsets, 0x77, sizeof(size_t) * TOPK_REF_MAXNE));
    GT_CUDA(gt_memset_sync(drows, 0x77, sizeof(size_t)));
    return T;
}

static void download(const tcase_t *tc, size_t T, host_t *h, size_t maxrows)
{
    h->out.resize(maxrows * tc->rb);
    GT_CUDA(gt_memcpy_sync(h->out.data(), dout, h->out.size(), cudaMemcpyDeviceToHost));
    for (int p = 0; p < tc->nside; p++) {
        h->side[p].resize(maxrows * tc->srb[p]);
        GT_CUDA(gt_memcpy_sync(h->side[p].data(), dsideout[p], h->side[p].size(),
                               cudaMemcpyDeviceToHost));
    }
    h->src.resize(maxrows);
    GT_CUDA(gt_memcpy_sync(h->src.data(), dsrc, maxrows * sizeof(symm_moe_src_t),
                           cudaMemcpyDeviceToHost));
    h->trows.resize(T * tc->c.k + 1);
    if (T)
        GT_CUDA(gt_memcpy_sync(h->trows.data(), dtrows, T * tc->c.k * sizeof(int64_t),
                               cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(h->counts, dcounts, sizeof h->counts, cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(h->offsets, doffsets, sizeof h->offsets, cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(&h->rows, drows, sizeof h->rows, cudaMemcpyDeviceToHost));
}

static void check_dispatch(const tcase_t *tc, const topk_routes_t *R, const host_t *h,
                           size_t maxrows, const char *what)
{
    topk_got_t g;
    memset(&g, 0, sizeof g);
    g.out = h->out.data();
    g.rb = tc->rb;
    g.nside = tc->nside;
    for (int p = 0; p < tc->nside; p++) {
        g.side_out[p] = h->side[p].data();
        g.srb[p] = tc->srb[p];
    }
    g.src = h->src.data();
    g.counts = h->counts;
    g.offsets = h->offsets;
    g.rows = &h->rows;
    g.trows = h->trows.data();
    g.maxrows = maxrows;
    g.sentinel = SENTINEL;
    g.src_sentinel = SRC_SENT;
    topk_ref_check_dispatch(&tc->c, R, tc->rank, &g, what);
}

/* The combine's input from what the dispatch returned, on the device. */
static void upload_expert_out(const tcase_t *tc, const host_t *h)
{
    const size_t rb = tc->hidden * symm_type_size(tc->type);
    std::vector<uint8_t> eo(h->rows * rb + 1);
    topk_ref_fill_expert_out(&tc->c, tc->rank, tc->type, tc->hidden, h->rows, h->counts,
                             h->offsets, h->src.data(), eo.data());
    if (h->rows) GT_CUDA(gt_memcpy_sync(deo, eo.data(), h->rows * rb, cudaMemcpyHostToDevice));
}

static void check_combine(const tcase_t *tc, const topk_routes_t *R, size_t T, const char *what)
{
    const size_t bytes = (size_t)MAXTOK * MAXHID * 4;
    std::vector<uint8_t> out(bytes);
    GT_CUDA(gt_memcpy_sync(out.data(), dcout, bytes, cudaMemcpyDeviceToHost));
    (void)T;
    topk_ref_check_combine(&tc->c, R, tc->rank, tc->type, tc->hidden, tc->weighted, out.data(),
                           bytes, SENTINEL, what);
}

static void sides_of(const tcase_t *tc, int null_in, symm_moe_side_t *side)
{
    for (int p = 0; p < tc->nside; p++) {
        side[p].in = null_in ? NULL : dside[p];
        side[p].out = dsideout[p];
        side[p].row_bytes = tc->srb[p];
    }
}

/* Runs f (a stream call on `stream`) directly (replays 0), or captured into a CUDA graph
 * that is then launched `replays` times. */
template <typename F> static void on_stream(int replays, F f)
{
    if (!replays) {
        GT_OK(f());
        return;
    }
    cudaGraph_t g;
    cudaGraphExec_t ge;
    GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
    const symm_status_t st = f();
    GT_CUDA(cudaStreamEndCapture(stream, &g));
    GT_OK(st);
    GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < replays; i++)
        GT_CUDA(cudaGraphLaunch(ge, stream));
    GT_CUDA(cudaStreamSynchronize(stream));
    GT_CUDA(cudaGraphExecDestroy(ge));
    GT_CUDA(cudaGraphDestroy(g));
}

/* Dispatch and combine with the stream forms on pool, both checked; replays > 0: each
 * call captured in a CUDA graph and replayed that many times. */
static void round_trip(const tcase_t *tc, symm_pool_t pool, const char *what, int replays = 0)
{
    topk_routes_t R;
    topk_ref_routes(&tc->c, &R);
    int nul;
    size_t T = upload(tc, &R, &nul);
    symm_moe_side_t side[MAXSIDE];
    sides_of(tc, nul, side);
    size_t cap = (size_t)MAXROWS * BIGRB / tc->rb;
    if (cap > MANYROWS) cap = MANYROWS;
    char w[160];
    snprintf(w, sizeof w, "%s (n %d k %d ne %d align %zu rb %zu nside %d nblocks %d)", what,
             tc->c.n, tc->c.k, tc->c.ne, tc->c.align, tc->rb, tc->nside, tc->nblocks);
    on_stream(replays, [&] {
        return symm_moe_topk_dispatch_on_stream(
            pool, dout, cap, nul ? NULL : din, T, tc->rb, didx, tc->c.k, tc->c.ne, tc->c.align,
            tc->nside ? side : NULL, tc->nside, dcounts, doffsets, dsrc, drows, dtrows, ws[0],
            tc->nblocks, stream);
    });
    GT_CUDA(cudaStreamSynchronize(stream));
    GT_OK(symm_cuda_check());
    host_t h;
    download(tc, T, &h, cap);
    check_dispatch(tc, &R, &h, cap, w);
    upload_expert_out(tc, &h);
    on_stream(replays, [&] {
        return symm_moe_topk_combine_on_stream(
            pool, dcout, T, h.rows ? deo : NULL, h.rows, tc->hidden, tc->type, didx, dtrows,
            tc->weighted ? dw : NULL, tc->c.k, tc->c.ne, ws[0], tc->nblocks, stream);
    });
    GT_CUDA(cudaStreamSynchronize(stream));
    GT_OK(symm_cuda_check());
    check_combine(tc, &R, T, w);
    topk_ref_routes_free(&tc->c, &R);
}

static void test_random(symm_pool_t pool)
{
    for (int it = 0; it < (quick ? 8 : 24); it++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 100 + (uint64_t)it);
        if (it < 8) {
            tc.c.k = 1 + it;
            tc.c.align = (size_t[]){1, 16, 128, 0}[it % 4];
        }
        round_trip(&tc, pool, "random");
    }
}

/* The decode shape: up to 128 tokens of 7168 fp8 bytes with 56 float scales, top-8, a
 * bf16 combine of 7168 elements. */
static void test_decode(symm_pool_t pool)
{
    for (int v = 0; v < (quick ? 0 : 2); v++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 500 + (uint64_t)v);
        tc.c.maxtok = MAXTOK;
        tc.c.k = 8;
        tc.c.ne = v ? 32 : 8;
        tc.c.align = v ? 128 : 0;
        tc.c.empty = -1;
        tc.c.none_every = 0;
        tc.c.one_pe = 0;
        tc.rb = BIGRB;
        tc.nside = 1;
        tc.srb[0] = 56 * 4;
        tc.type = SYMM_BF16;
        tc.hidden = MAXHID;
        tc.weighted = 1;
        tc.nblocks = v ? 0 : 3;
        round_trip(&tc, pool, "decode shape");
    }
}

static void expect_device_failure(symm_status_t want, const char *what);

/* ---------------------------------------------------------------- CUDA graphs */
static void test_graphs(symm_pool_t pool)
{
    for (int it = 0; it < (quick ? 1 : 3); it++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 600 + (uint64_t)it);
        round_trip(&tc, pool, "CUDA graph", 2);
    }
}

/* ---------------------------------------------------------------- the spread route */
/* From SYMM_PLAN_TOPK_SPREAD slots on, a member of several blocks routes its slots in every
 * block, below it in its lead block alone; members of one call may do either. */
static size_t spread_tokens(int k) /* the fewest tokens of a spread route */
{
    return (SYMM_PLAN_TOPK_SPREAD + (size_t)k - 1) / (size_t)k;
}
static int spread_ne(void) /* more than 256 experts in the team: counted in the workspace */
{
    return 300 / npes + 1;
}

/* Up to MANYTOK tokens a member, at least mintok; ne 0: the random case's. */
static void spread_case(tcase_t *tc, uint64_t tag, int k, int ne, size_t align, int nblocks,
                        size_t mintok)
{
    random_case(tc, SYMM_TEAM_WORLD, tag);
    tc->c.k = k;
    if (ne) {
        tc->c.ne = ne;
        tc->c.align = align;
    }
    tc->c.maxtok = MANYTOK;
    tc->c.mintok = mintok;
    tc->nblocks = nblocks;
}

/* The dispatch captured once in a CUDA graph and replayed on new routes and rows of the
 * same shape (every member's tokens fixed): the member's barrier and route flags live in
 * its workspace, nothing of the route is fixed at capture. The combine runs directly
 * after each replay. */
static void test_spread_graph(symm_pool_t pool)
{
    tcase_t tc;
    spread_case(&tc, 1750, 8, 16, 16, 0, 700);
    tc.c.maxtok = 700;
    tc.c.empty = -1;
    tc.null_in = 0;
    symm_moe_side_t side[MAXSIDE];
    sides_of(&tc, 0, side);
    const size_t cap = MANYROWS; /* rows of at most 100 bytes */
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    for (int v = 0; v < (quick ? 2 : 3); v++) {
        tc.c.tag = test_mix(seed, 1760 + (uint64_t)v); /* new routes and rows */
        topk_routes_t R;
        topk_ref_routes(&tc.c, &R);
        int nul;
        const size_t T = upload(&tc, &R, &nul);
        GT_TRUE(T == 700 && !nul, "the graph's case: %zu tokens", T);
        char w[160];
        snprintf(
            w, sizeof w,
            "spread route, CUDA graph replay %d (n %d k %d ne %d align %zu rb %zu nside %d)", v,
            tc.c.n, tc.c.k, tc.c.ne, tc.c.align, tc.rb, tc.nside);
        if (!ge) {
            GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
            const symm_status_t st = symm_moe_topk_dispatch_on_stream(
                pool, dout, cap, din, T, tc.rb, didx, tc.c.k, tc.c.ne, tc.c.align,
                tc.nside ? side : NULL, tc.nside, dcounts, doffsets, dsrc, drows, dtrows, ws[0],
                tc.nblocks, stream);
            GT_CUDA(cudaStreamEndCapture(stream, &g));
            GT_OK(st);
            GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
        }
        for (int r = 0; r < (v ? 1 : 2); r++)
            GT_CUDA(cudaGraphLaunch(ge, stream));
        GT_CUDA(cudaStreamSynchronize(stream));
        GT_OK(symm_cuda_check());
        host_t h;
        download(&tc, T, &h, cap);
        check_dispatch(&tc, &R, &h, cap, w);
        upload_expert_out(&tc, &h);
        GT_OK(symm_moe_topk_combine_on_stream(
            pool, dcout, T, h.rows ? deo : NULL, h.rows, tc.hidden, tc.type, didx, dtrows,
            tc.weighted ? dw : NULL, tc.c.k, tc.c.ne, ws[0], tc.nblocks, stream));
        GT_CUDA(cudaStreamSynchronize(stream));
        GT_OK(symm_cuda_check());
        check_combine(&tc, &R, T, w);
        topk_ref_routes_free(&tc.c, &R);
    }
    GT_CUDA(cudaGraphExecDestroy(ge));
    GT_CUDA(cudaGraphDestroy(g));
}

static void test_spread(symm_pool_t pool)
{
    static const struct {
        int k, ne;
        size_t align;
        int nblocks;
        int below; /* tokens from below the threshold up */
        const char *what;
    } v[] = {
        {8, 8, 16, 0, 0, "spread route"},
        {5, 32, 128, 3, 0, "spread route"},
        {8, -1, 1, 4, 0, "spread route, over 256 experts"},
        {5, 0, 0, 5, 1, "spread route or not, by member"},
    };
    for (int i = 0; i < 4; i++) {
        if (quick && i % 2) continue;
        tcase_t tc;
        const int ne = v[i].ne < 0 ? spread_ne() : v[i].ne;
        const size_t least = spread_tokens(v[i].k);
        spread_case(&tc, 1700 + 2 * (uint64_t)i, v[i].k, ne, v[i].align, v[i].nblocks,
                    v[i].below ? least - least / 8 : least);
        round_trip(&tc, pool, v[i].what);
    }
    test_spread_graph(pool);
}

/* ---------------------------------------------------------------- low-latency forms */
#define LL_ROWS   49152 /* n x ne x max_tokens, at most */
#define LL_BYTES  ((size_t)64 << 20)
#define LL_COUNTS 1200                             /* n x ne, at most */
static uint8_t *ll_out, *ll_side[MAXSIDE], *ll_ws; /* GPU symmetric */
static size_t *ll_cnt;
static symm_moe_src_t *ll_src;
static size_t ll_ws_bytes;
static uint8_t *ll_in;     /* device: the expert output (its rows pushed to their owners) */
static uint8_t *ll_in_sym; /* GPU symmetric: the same (its rows read in place) */

/* The region size the case needs on every member: the most tokens of any member, and the
 * most slots any member routes to one expert. */
static size_t ll_max_tokens(const tcase_t *tc, const topk_routes_t *R)
{
    size_t mt = 1;
    const int E = tc->c.n * tc->c.ne;
    std::vector<size_t> cnt(E);
    for (int s = 0; s < tc->c.n; s++) {
        const size_t T = R->tokens[s];
        if (T > mt) mt = T;
        std::fill(cnt.begin(), cnt.end(), 0);
        for (size_t q = 0; q < T * (size_t)tc->c.k; q++)
            if (R->idx[s][q] >= 0 && ++cnt[(size_t)R->idx[s][q]] > mt)
                mt = cnt[(size_t)R->idx[s][q]];
    }
    return mt;
}

/* The low-latency dispatch's results on this member against the routes: every region's
 * count, and each of its rows (source, bytes, side bytes) once per routed slot. Fills the
 * expert output of the rows (eo_dev) for the combine. */
static void ll_check_dispatch(const tcase_t *tc, const topk_routes_t *R, size_t mt,
                              const char *what, uint8_t *eo_dev)
{
    const int n = tc->c.n, ne = tc->c.ne, k = tc->c.k, me_t = tc->rank;
    const size_t rows = (size_t)n * ne * mt, crb = tc->hidden * symm_type_size(tc->type);
    std::vector<size_t> cnt((size_t)n * ne);
    std::vector<symm_moe_src_t> src(rows);
    std::vector<uint8_t> out(rows * tc->rb), want(BIGRB + 256), eo(rows * crb, 0xff);
    GT_CUDA(gt_memcpy_sync(cnt.data(), ll_cnt, cnt.size() * sizeof(size_t),
                           cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(src.data(), ll_src, rows * sizeof(symm_moe_src_t),
                           cudaMemcpyDeviceToHost));
    GT_CUDA(gt_memcpy_sync(out.data(), ll_out, out.size(), cudaMemcpyDeviceToHost));
    std::vector<std::vector<uint8_t>> side(tc->nside);
    for (int p = 0; p < tc->nside; p++) {
        side[p].resize(rows * tc->srb[p]);
        GT_CUDA(
            gt_memcpy_sync(side[p].data(), ll_side[p], side[p].size(), cudaMemcpyDeviceToHost));
    }
    for (int s = 0; s < n; s++) {
        const size_t T = R->tokens[s];
        std::vector<char> seen(T * (size_t)k, 0);
        for (int e = 0; e < ne; e++) {
            const int64_t g = (int64_t)me_t * ne + e;
            size_t ref = 0;
            for (size_t q = 0; q < T * (size_t)k; q++)
                ref += R->idx[s][q] == g;
            const size_t got = cnt[(size_t)e * n + s];
            CHECK_TRUE(got == ref,
                       "%s: out_counts[%d * %d + %d] = %zu, %zu slots of member %d "
                       "go to expert %lld",
                       what, e, n, s, got, ref, s, (long long)g);
            for (size_t j = 0; j < got && j < mt; j++) {
                const size_t x = ((size_t)e * n + s) * mt + j;
                const symm_moe_src_t sr = src[x];
                const bool ok = sr.pe == s && sr.slot >= 0 && sr.slot < k && sr.token >= 0 &&
                                (size_t)sr.token < T &&
                                R->idx[s][(size_t)sr.token * k + sr.slot] == g &&
                                !seen[(size_t)sr.token * k + sr.slot];
                CHECK_TRUE(ok,
                           "%s: row %zu's source (pe %d, slot %d, token %lld) is not an "
                           "unseen slot of member %d routed to expert %lld",
                           what, x, sr.pe, sr.slot, (long long)sr.token, s, (long long)g);
                if (!ok) continue;
                seen[(size_t)sr.token * k + sr.slot] = 1;
                test_fill_pattern(want.data(), tc->rb,
                                  topk_ref_row_tag(&tc->c, s, sr.token, 0));
                CHECK_BYTES(&out[x * tc->rb], want.data(), tc->rb,
                            "%s: row %zu (member %d, "
                            "token %lld)",
                            what, x, s, (long long)sr.token);
                for (int p = 0; p < tc->nside; p++) {
                    test_fill_pattern(want.data(), tc->srb[p],
                                      topk_ref_row_tag(&tc->c, s, sr.token, 1 + p));
                    CHECK_BYTES(&side[p][x * tc->srb[p]], want.data(), tc->srb[p],
                                "%s: side %d of row %zu", what, p, x);
                }
                for (size_t h = 0; h < tc->hidden; h++)
                    topk_ref_store(tc->type, &eo[x * crb], h,
                                   topk_ref_expert_value(&tc->c, g, s, (size_t)sr.token, h));
            }
        }
    }
    GT_CUDA(gt_memcpy_sync(eo_dev, eo.data(), eo.size(), cudaMemcpyHostToDevice));
}

/* Low-latency dispatch and combine on pool, both checked (replays > 0: through CUDA
 * graphs, each replayed once). sym_in: the combine's in is a symmetric object on this
 * member (its owners read its rows in place), else device memory (pushed to them). */
static void ll_round_trip(const tcase_t *tc, symm_pool_t pool, const char *what, int replays,
                          bool sym_in)
{
    uint8_t *eo_dev = sym_in ? ll_in_sym : ll_in;
    /* the workspace's layout follows the shape (n, ne, max_tokens, k): zeroed for each
     * case, on every member before any member's dispatch writes into it */
    GT_CUDA(gt_memset_sync(ll_ws, 0, ll_ws_bytes));
    GT_OK(symm_barrier_all());
    topk_routes_t R;
    topk_ref_routes(&tc->c, &R);
    int nul;
    const size_t T = upload(tc, &R, &nul);
    const size_t mt = ll_max_tokens(tc, &R);
    const size_t rows = (size_t)tc->c.n * tc->c.ne * mt;
    const size_t crb = tc->hidden * symm_type_size(tc->type);
    GT_TRUE(rows <= LL_ROWS && rows * tc->rb <= LL_BYTES && rows * crb <= LL_BYTES &&
                (size_t)tc->c.n * tc->c.ne <= LL_COUNTS &&
                symm_cuda_moe_topk_ll_workspace_bytes(tc->c.n, tc->c.ne, mt, tc->c.k, crb) <=
                    ll_ws_bytes,
            "low-latency case too big: %zu rows", rows);
    symm_moe_side_t side[MAXSIDE];
    for (int p = 0; p < tc->nside; p++) {
        side[p].in = nul ? NULL : dside[p];
        side[p].out = ll_side[p];
        side[p].row_bytes = tc->srb[p];
    }
    char w[160];
    snprintf(w, sizeof w,
             "%s (n %d k %d ne %d max_tokens %zu rb %zu nside %d nblocks %d, %s in)", what,
             tc->c.n, tc->c.k, tc->c.ne, mt, tc->rb, tc->nside, tc->nblocks,
             sym_in ? "symmetric" : "device");
    on_stream(replays, [&] {
        return symm_moe_topk_dispatch_ll_on_stream(
            pool, ll_out, nul ? NULL : din, T, mt, tc->rb, didx, tc->c.k, tc->c.ne,
            tc->nside ? side : NULL, tc->nside, ll_cnt, ll_src, ll_ws, tc->nblocks, stream);
    });
    GT_CUDA(cudaStreamSynchronize(stream));
    GT_OK(symm_cuda_check());
    ll_check_dispatch(tc, &R, mt, w, eo_dev);
    GT_OK(symm_barrier_all()); /* every member's expert output ready before any combine */
    on_stream(replays, [&] {
        return symm_moe_topk_combine_ll_on_stream(
            pool, dcout, T, eo_dev, mt, tc->hidden, tc->type, didx, tc->weighted ? dw : NULL,
            tc->c.k, tc->c.ne, ll_cnt, ll_src, ll_ws, tc->nblocks, stream);
    });
    GT_CUDA(cudaStreamSynchronize(stream));
    GT_OK(symm_cuda_check());
    check_combine(tc, &R, T, w);
    topk_ref_routes_free(&tc->c, &R);
}

/* A bad expert id on the last PE, among its slots far from the first (found by a thread
 * of a block that publishes nothing itself): the dispatch (in_dispatch), or else the
 * combine after a good dispatch, fails on every PE alike; a failed combine writes
 * nothing. tokens: MAXTOK, or LL_MANY_TOK (4400 slots: the bad one far from every block's
 * start), or fewer where ne makes the team's experts many. */
#define LL_MANY_TOK 1100
static void ll_bad_slot(symm_pool_t pool, bool in_dispatch, int nblocks, size_t tokens,
                        int ne = 4)
{
    tcase_t tc;
    random_case(&tc, SYMM_TEAM_WORLD, in_dispatch ? 1700 : 1710);
    tc.c.align = 0;
    tc.c.k = 4;
    tc.c.maxtok = tc.c.mintok = tokens;
    tc.c.ne = ne;
    tc.c.empty = -1;
    tc.rb = 64;
    tc.hidden = 48;
    tc.type = SYMM_FLOAT;
    tc.nside = 0;
    tc.nblocks = nblocks;
    GT_CUDA(gt_memset_sync(ll_ws, 0, ll_ws_bytes));
    GT_OK(symm_barrier_all());
    topk_routes_t R;
    topk_ref_routes(&tc.c, &R);
    int nul;
    const size_t T = upload(&tc, &R, &nul);
    const size_t mt = ll_max_tokens(&tc, &R);
    GT_TRUE(T * 4 > 300 || tokens < MAXTOK, "bad-slot case of %zu tokens", T);
    const int64_t bad = (int64_t)tc.c.n * tc.c.ne + 5;
    const size_t q = T * 4 / 2 + 1;
    char w[128];
    snprintf(w, sizeof w,
             "low-latency %s, bad expert id in slot %zu of %zu of PE %d (nblocks %d, ne %d)",
             in_dispatch ? "dispatch" : "combine", q, T * 4, npes - 1, nblocks, ne);
    auto spoil = [&] {
        if (me == npes - 1)
            GT_CUDA(gt_memcpy_sync(didx + q, &bad, sizeof bad, cudaMemcpyHostToDevice));
    };
    if (in_dispatch) spoil();
    GT_OK(symm_moe_topk_dispatch_ll_on_stream(pool, ll_out, nul ? NULL : din, T, mt, tc.rb,
                                              didx, 4, tc.c.ne, NULL, 0, ll_cnt, ll_src, ll_ws,
                                              nblocks, stream));
    if (in_dispatch) {
        expect_device_failure(SYMM_ERR_INVALID_ARG, w);
    } else {
        GT_CUDA(cudaStreamSynchronize(stream));
        GT_OK(symm_cuda_check());
        GT_OK(symm_barrier_all());
        spoil();
        GT_CUDA(gt_memset_sync(dcout, SENTINEL, (size_t)MAXTOK * MAXHID * 4));
        GT_OK(symm_barrier_all());
        GT_OK(symm_moe_topk_combine_ll_on_stream(pool, dcout, T, ll_in, mt, tc.hidden, tc.type,
                                                 didx, NULL, 4, tc.c.ne, ll_cnt, ll_src, ll_ws,
                                                 nblocks, stream));
        expect_device_failure(SYMM_ERR_INVALID_ARG, w);
        std::vector<uint8_t> o(4096);
        GT_CUDA(gt_memcpy_sync(o.data(), dcout, o.size(), cudaMemcpyDeviceToHost));
        CHECK_ALL_BYTES(o.data(), SENTINEL, o.size(), "%s: out written", w);
    }
    GT_OK(symm_barrier_all());
    topk_ref_routes_free(&tc.c, &R);
}

static void test_low_latency(symm_pool_t pool)
{
    for (int it = 0; it < (quick ? 6 : 16); it++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 1300 + (uint64_t)it);
        tc.c.align = 0;
        /* the combine's in: every member's symmetric, none, or every other member's */
        const int mode = it % 3;
        ll_round_trip(&tc, pool, it % 4 == 3 ? "low-latency, CUDA graph" : "low-latency",
                      it % 4 == 3, mode == 1 || (mode == 2 && me % 2 == 0));
    }
    for (int v = 0; v < (quick ? 0 : 2); v++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 1500 + (uint64_t)v);
        tc.c.maxtok = MAXTOK;
        tc.c.k = 8;
        tc.c.ne = 8;
        tc.c.empty = -1;
        tc.c.none_every = 0;
        tc.c.one_pe = 0;
        tc.rb = BIGRB;
        tc.nside = 1;
        tc.srb[0] = 56 * 4;
        tc.type = SYMM_BF16;
        tc.hidden = MAXHID;
        tc.weighted = 1;
        tc.nblocks = 0;
        ll_round_trip(&tc, pool, v ? "low-latency decode, CUDA graph" : "low-latency decode", v,
                      v != 1);
    }
    /* many slots a member: over 4096 on every member (at least 520 tokens of k = 8), or on
     * some of them */
    for (int v = 0; v < (quick ? 1 : 3); v++) {
        tcase_t tc;
        spread_case(&tc, 1550 + (uint64_t)v, 8, 4 + 2 * v, 0, v == 1 ? 3 : 0, v == 2 ? 0 : 520);
        tc.c.align = 0;
        ll_round_trip(&tc, pool,
                      v == 1 ? "low-latency, many slots, CUDA graph"
                             : "low-latency, many slots",
                      v == 1, v != 0);
    }
    /* many experts in the team, 1024 and past it: the last block of a member loads its
     * counts 256 at a time */
    for (int v = 0; v < 2; v++) {
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 1560 + (uint64_t)v);
        tc.c.align = 0;
        tc.c.ne = v ? 1024 / npes : 1100 / npes + 1;
        tc.c.maxtok = 24;
        ll_round_trip(&tc, pool,
                      v ? "low-latency, 1024 experts" : "low-latency, over 1024 experts", 0,
                      v == 1);
    }
    /* too many tokens on the last PE: every PE fails, and the next calls work */
    tcase_t tc;
    random_case(&tc, SYMM_TEAM_WORLD, 1600);
    tc.c.maxtok = 16;
    tc.c.k = 2;
    tc.c.ne = 2;
    tc.rb = 16;
    tc.nside = 0;
    topk_routes_t R;
    topk_ref_routes(&tc.c, &R);
    int nul;
    size_t T = upload(&tc, &R, &nul);
    const size_t mt = ll_max_tokens(&tc, &R);
    const size_t pass = me == npes - 1 ? mt + 1 : T;
    std::vector<int64_t> none(pass * 2 + 2, -1);
    GT_CUDA(gt_memcpy_sync(didx, none.data(), none.size() * sizeof(int64_t),
                           cudaMemcpyHostToDevice));
    symm_status_t st = symm_moe_topk_dispatch_ll_on_stream(
        pool, ll_out, din, pass, mt, 16, didx, 2, 2, NULL, 0, ll_cnt, ll_src, ll_ws, 2, stream);
    if (me == npes - 1) {
        GT_TRUE(st == SYMM_ERR_OVERFLOW, "too many tokens: %d (%s)", (int)st,
                symm_last_error());
        GT_CUDA(cudaStreamSynchronize(stream));
        (void)symm_cuda_check();
    } else {
        GT_OK(st);
        expect_device_failure(SYMM_ERR_OVERFLOW, "the last PE's tokens beyond max_tokens");
    }
    topk_ref_routes_free(&tc.c, &R);
    random_case(&tc, SYMM_TEAM_WORLD, 1601);
    ll_round_trip(&tc, pool, "low-latency after a failure", 0, true);
    for (int nb : {1, 3})
        for (size_t tok : {(size_t)MAXTOK, (size_t)LL_MANY_TOK}) {
            ll_bad_slot(pool, true, nb, tok);
            ll_bad_slot(pool, false, nb, tok);
        }
    /* past 1024 experts, the bad id found by a block that is not the last to arrive */
    ll_bad_slot(pool, true, 3, 24, 1100 / npes + 1);
    ll_bad_slot(pool, false, 3, 24, 1100 / npes + 1);
    random_case(&tc, SYMM_TEAM_WORLD, 1602);
    ll_round_trip(&tc, pool, "low-latency after bad expert ids", 0, false);
}

/* ---------------------------------------------------------------- device forms */
struct dev_args {
    void *out;
    size_t cap;
    const void *in;
    size_t tokens, rb;
    const int64_t *idx;
    int k, ne;
    size_t align;
    const symm_moe_side_t *side;
    int nside;
    size_t *counts, *offsets, *rows;
    symm_moe_src_t *src;
    int64_t *trows;
    void *ws;
    /* combine */
    void *cout;
    const void *eo;
    size_t eo_rows, hidden;
    symm_type_t type;
    const float *w;
    int *rc;
};

__global__ void k_dev_dispatch(symm_dev_pool_t pool, dev_args a)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int rc = symm_dev_moe_topk_dispatch_block(
        t, a.out, a.cap, a.in, a.tokens, a.rb, a.idx, a.k, a.ne, a.align, a.side, a.nside,
        a.counts, a.offsets, a.src, a.rows, a.trows, a.ws, blockIdx.x, gridDim.x);
    if (threadIdx.x == 0 && rc) atomicCAS(a.rc, 0, rc);
}

__global__ void k_dev_combine(symm_dev_pool_t pool, dev_args a)
{
    symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    int rc = symm_dev_moe_topk_combine_block(t, a.cout, a.tokens, a.eo, a.eo_rows, a.hidden,
                                             a.type, a.idx, a.trows, a.w, a.k, a.ne, a.ws,
                                             blockIdx.x, gridDim.x);
    if (threadIdx.x == 0 && rc) atomicCAS(a.rc, 0, rc);
}

static void test_device_forms(symm_pool_t pool)
{
    symm_dev_pool_t dp;
    GT_OK(symm_cuda_pool_device(pool, &dp));
    int *drc;
    symm_moe_side_t *dsides;
    GT_CUDA(cudaMalloc(&drc, sizeof(int)));
    GT_CUDA(cudaMalloc(&dsides, sizeof(symm_moe_side_t) * MAXSIDE));
    const int nit = (quick ? 2 : 4) + 1;
    for (int it = 0; it < nit; it++) {
        /* the last: many tokens, routed in every block of 128 threads */
        const bool many = it == nit - 1;
        tcase_t tc;
        random_case(&tc, SYMM_TEAM_WORLD, 700 + (uint64_t)it);
        tc.c.maxtok = 48;
        if (many) {
            tc.c.k = 8;
            tc.c.maxtok = MANYTOK;
            tc.c.mintok = spread_tokens(8);
        }
        topk_routes_t R;
        topk_ref_routes(&tc.c, &R);
        int nul;
        size_t T = upload(&tc, &R, &nul);
        symm_moe_side_t side[MAXSIDE];
        sides_of(&tc, nul, side);
        GT_CUDA(gt_memcpy_sync(dsides, side, sizeof side, cudaMemcpyHostToDevice));
        GT_CUDA(gt_memset_sync(drc, 0, sizeof(int)));
        dev_args a;
        memset(&a, 0, sizeof a);
        a.out = dout;
        a.cap = MANYROWS; /* rows of at most 100 bytes */
        a.in = nul ? NULL : din;
        a.tokens = T;
        a.rb = tc.rb;
        a.idx = didx;
        a.k = tc.c.k;
        a.ne = tc.c.ne;
        a.align = tc.c.align;
        a.side = dsides;
        a.nside = tc.nside;
        a.counts = dcounts;
        a.offsets = doffsets;
        a.rows = drows;
        a.src = dsrc;
        a.trows = dtrows;
        a.ws = ws[it % 2];
        a.rc = drc;
        void *args[] = {&dp, &a};
        const int nb = many ? 3 : 1 + it % 3, threads = many || it % 2 ? 128 : 256;
        GT_OK(symm_cuda_launch((const void *)k_dev_dispatch, dim3(nb), dim3(threads), args, 0,
                               stream));
        GT_CUDA(cudaStreamSynchronize(stream));
        GT_OK(symm_cuda_check());
        int rc;
        GT_CUDA(gt_memcpy_sync(&rc, drc, sizeof rc, cudaMemcpyDeviceToHost));
        GT_TRUE(rc == 0, "device dispatch returned %d", rc);
        host_t h;
        download(&tc, T, &h, MANYROWS);
        check_dispatch(&tc, &R, &h, MANYROWS,
                       many ? "device dispatch, spread" : "device dispatch");
        upload_expert_out(&tc, &h);
        a.cout = dcout;
        a.eo = h.rows ? deo : NULL;
        a.eo_rows = h.rows;
        a.hidden = tc.hidden;
        a.type = tc.type;
        a.w = tc.weighted ? dw : NULL;
        a.ws = ws[(it + 1) % 2];
        GT_OK(symm_cuda_launch((const void *)k_dev_combine, dim3(nb), dim3(threads), args, 0,
                               stream));
        GT_CUDA(cudaStreamSynchronize(stream));
        GT_OK(symm_cuda_check());
        GT_CUDA(gt_memcpy_sync(&rc, drc, sizeof rc, cudaMemcpyDeviceToHost));
        GT_TRUE(rc == 0, "device combine returned %d", rc);
        check_combine(&tc, &R, T, many ? "device combine, spread" : "device combine");
        topk_ref_routes_free(&tc.c, &R);
    }
    cudaFree(dsides);
    cudaFree(drc);
}

/* ---------------------------------------------------------------- sub-teams */
static void test_sub_teams(void)
{
    symm_team_t row = SYMM_TEAM_INVALID, col = SYMM_TEAM_INVALID, solo;
    GT_OK(symm_team_split_2d(SYMM_TEAM_WORLD, 2, &row, &col));
    GT_OK(symm_team_create(&me, 1, &solo));
    const symm_team_t teams[2] = {row, solo};
    for (int ti = 0; ti < 2; ti++) {
        symm_pool_t pool;
        GT_OK(symm_cuda_pool_create(teams[ti], 4, &pool));
        uint64_t tag =
            900 + (uint64_t)ti * 100 + (uint64_t)symm_team_world_pe(teams[ti], 0) * 7;
        for (int it = 0; it < (quick ? 1 : 4); it++) {
            tcase_t tc;
            random_case(&tc, teams[ti], tag + (uint64_t)it);
            if (tc.nblocks > 4) tc.nblocks = 4;
            round_trip(&tc, pool, ti ? "1-PE team" : "2-D split row");
        }
        GT_CUDA(cudaDeviceSynchronize());
        GT_OK(symm_barrier_all());
        GT_OK(symm_pool_destroy(pool));
    }
    GT_OK(symm_barrier_all());
    GT_OK(symm_team_destroy(solo));
    GT_OK(symm_team_destroy(row));
    GT_OK(symm_team_destroy(col));
}

/* ---------------------------------------------------------------- failures */
static void expect_device_failure(symm_status_t want, const char *what)
{
    GT_CUDA(cudaStreamSynchronize(stream));
    symm_status_t st = symm_cuda_check();
    GT_TRUE(st == want, "%s: symm_cuda_check %d (%s), expected %d (%s): %s", what, (int)st,
            symm_strerror(st), (int)want, symm_strerror(want), symm_last_error());
}

static void check_untouched(const char *what)
{
    std::vector<uint8_t> o(4096);
    GT_CUDA(gt_memcpy_sync(o.data(), dout, o.size(), cudaMemcpyDeviceToHost));
    CHECK_ALL_BYTES(o.data(), SENTINEL, o.size(), "%s: out written", what);
    std::vector<uint8_t> s(sizeof(symm_moe_src_t) * 64);
    GT_CUDA(gt_memcpy_sync(s.data(), dsrc, s.size(), cudaMemcpyDeviceToHost));
    CHECK_ALL_BYTES(s.data(), SRC_SENT, s.size(), "%s: out_src written", what);
    size_t r;
    GT_CUDA(gt_memcpy_sync(&r, drows, sizeof r, cudaMemcpyDeviceToHost));
    GT_TRUE(r == 0x7777777777777777ull, "%s: out_rows written", what);
}

/* The failures on a small shape, and on one that every member routes in every block
 * (spread: MANYTOK tokens of k = 4 a member, SYMM_PLAN_TOPK_SPREAD slots or more each):
 * every PE fails alike, nothing written, and the team works afterwards. */
static void test_failures(symm_pool_t pool, bool spread)
{
    tcase_t tc;
    random_case(&tc, SYMM_TEAM_WORLD, spread ? 1120 : 1100);
    tc.c.maxtok = spread ? MANYTOK : 32;
    tc.c.mintok = spread ? MANYTOK : 0;
    tc.c.empty = -1;
    tc.c.none_every = 0;
    tc.c.k = 4;
    tc.c.ne = 3;
    tc.rb = 32;
    tc.nside = 0;
    tc.null_in = 0;
    tc.nblocks = spread ? 4 : 2;
    const int nb = tc.nblocks;
    const char *shape = spread ? "spread" : "small";
    char w[160];
    topk_routes_t R;
    topk_ref_routes(&tc.c, &R);
    int nul;
    size_t T = upload(&tc, &R, &nul);
    GT_TRUE(T > 0, "tokens");
    GT_TRUE(!spread || T * 4 >= SYMM_PLAN_TOPK_SPREAD, "%zu tokens: no spread route", T);
    const int last = npes - 1;
    int last_routes = 0;
    for (size_t x = 0; x < R.tokens[last] * 4; x++)
        last_routes |= R.idx[last][x] >= 0;
    /* a bad expert id on the last PE (past the experts in its last slot, then negative a
     * third of the way): every PE fails, nothing written */
    for (int b = 0; b < 2; b++) {
        std::vector<int64_t> bad(R.idx[tc.rank], R.idx[tc.rank] + T * 4);
        if (b == 0)
            bad[T * 4 - 1] = (int64_t)npes * 3;
        else
            bad[T * 4 / 3] = -2;
        if (me == last)
            GT_CUDA(gt_memcpy_sync(didx, bad.data(), T * 4 * sizeof(int64_t),
                                   cudaMemcpyHostToDevice));
        GT_OK(symm_moe_topk_dispatch_on_stream(pool, dout, MANYROWS, din, T, 32, didx, 4, 3,
                                               tc.c.align, NULL, 0, dcounts, doffsets, dsrc,
                                               drows, dtrows, ws[0], nb, stream));
        snprintf(w, sizeof w, "bad expert id %lld (%s)", (long long)(b ? -2 : npes * 3), shape);
        expect_device_failure(SYMM_ERR_INVALID_ARG, w);
        check_untouched(w);
        if (me == last)
            GT_CUDA(gt_memcpy_sync(didx, R.idx[tc.rank], T * 4 * sizeof(int64_t),
                                   cudaMemcpyHostToDevice));
    }
    /* a NULL in on the last PE, which routes tokens */
    if (last_routes) {
        GT_OK(symm_moe_topk_dispatch_on_stream(
            pool, dout, MANYROWS, me == last ? NULL : din, T, 32, didx, 4, 3, tc.c.align, NULL,
            0, dcounts, doffsets, dsrc, drows, dtrows, ws[0], nb, stream));
        snprintf(w, sizeof w, "a NULL in that routes tokens (%s)", shape);
        expect_device_failure(SYMM_ERR_INVALID_ARG, w);
        check_untouched(w);
    }
    /* the last PE's output one row short */
    size_t cnt[TOPK_REF_MAXNE], start[TOPK_REF_MAXNE];
    size_t need = topk_ref_layout(&tc.c, &R, last, cnt, start, NULL, -1, NULL);
    GT_OK(symm_moe_topk_dispatch_on_stream(pool, dout, me == last ? need - 1 : MANYROWS, din, T,
                                           32, didx, 4, 3, tc.c.align, NULL, 0, dcounts,
                                           doffsets, dsrc, drows, dtrows, ws[0], nb, stream));
    snprintf(w, sizeof w, "one row short (%s)", shape);
    expect_device_failure(SYMM_ERR_OVERFLOW, w);
    check_untouched(w);
    /* PE 0's in outside the GPU heap: it fails at once, the others on the device */
    void *local;
    GT_CUDA(cudaMalloc(&local, T * 32));
    symm_status_t st = symm_moe_topk_dispatch_on_stream(
        pool, dout, MANYROWS, me == 0 ? local : din, T, 32, didx, 4, 3, tc.c.align, NULL, 0,
        dcounts, doffsets, dsrc, drows, dtrows, ws[0], nb, stream);
    snprintf(w, sizeof w, "PE 0's in outside the heap (%s)", shape);
    if (me == 0) {
        GT_TRUE(st == SYMM_ERR_NOT_SYMMETRIC, "%s: %d (%s)", w, (int)st, symm_last_error());
        GT_CUDA(cudaStreamSynchronize(stream));
        (void)symm_cuda_check();
    } else {
        GT_OK(st);
        expect_device_failure(SYMM_ERR_NOT_SYMMETRIC, w);
    }
    check_untouched(w);
    GT_CUDA(cudaFree(local));
    /* combine: a row beyond its member's in on the last PE */
    snprintf(w, sizeof w, "before the combine failures (%s)", shape);
    round_trip(&tc, pool, w); /* dtrows, deo as for a combine */
    host_t h;
    download(&tc, T, &h, MANYROWS);
    size_t q = 0;
    while (q < T * 4 && R.idx[tc.rank][q] < 0)
        q++;
    if (last_routes) {
        std::vector<int64_t> br(h.trows.begin(), h.trows.begin() + T * 4);
        if (me == last) {
            br[q] = 1 << 30;
            GT_CUDA(gt_memcpy_sync(dtrows, br.data(), T * 4 * sizeof(int64_t),
                                   cudaMemcpyHostToDevice));
        }
        GT_CUDA(gt_memset_sync(dcout, SENTINEL, (size_t)MAXTOK * MAXHID * 4));
        GT_OK(symm_moe_topk_combine_on_stream(pool, dcout, T, h.rows ? deo : NULL, h.rows,
                                              tc.hidden, tc.type, didx, dtrows, NULL, 4, 3,
                                              ws[0], nb, stream));
        snprintf(w, sizeof w, "combine row beyond in (%s)", shape);
        expect_device_failure(SYMM_ERR_INVALID_ARG, w);
        std::vector<uint8_t> o(4096);
        GT_CUDA(gt_memcpy_sync(o.data(), dcout, o.size(), cudaMemcpyDeviceToHost));
        CHECK_ALL_BYTES(o.data(), SENTINEL, o.size(), "failed combine wrote out (%s)", shape);
    }
    /* the team still works */
    snprintf(w, sizeof w, "after failures (%s)", shape);
    round_trip(&tc, pool, w);
    topk_ref_routes_free(&tc.c, &R);
}

int main(int argc, char **argv)
{
    quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (!gt_init()) return 0;
    me = symm_my_pe();
    npes = symm_n_pes();
    seed = test_seed();
    GT_TRUE(npes <= 4, "at most 4 PEs (the buffers are sized for them)");
    GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    din = (uint8_t *)symm_gpu_malloc((size_t)MAXTOK * BIGRB);
    for (int p = 0; p < MAXSIDE; p++) {
        dside[p] = (uint8_t *)symm_gpu_malloc((size_t)MANYTOK * 256);
        GT_CUDA(cudaMalloc(&dsideout[p], (size_t)MANYROWS * 256));
        GT_TRUE(dside[p] != NULL, "allocation");
    }
    deo = (uint8_t *)symm_gpu_malloc((size_t)MAXROWS * MAXHID * 2);
    ws_bytes = symm_cuda_moe_topk_workspace_bytes(npes, spread_ne(), MANYTOK, MAXK);
    for (int i = 0; i < 2; i++) {
        ws[i] = (uint8_t *)symm_gpu_malloc(ws_bytes);
        GT_TRUE(ws[i] != NULL, "workspace of %zu bytes", ws_bytes);
        GT_CUDA(gt_memset_sync(ws[i], 0, ws_bytes));
    }
    GT_TRUE(din && deo, "allocation");
    GT_CUDA(cudaMalloc(&dout, (size_t)MAXROWS * BIGRB));
    GT_CUDA(cudaMalloc(&dcout, (size_t)MAXTOK * MAXHID * 4));
    GT_CUDA(cudaMalloc(&dsrc, sizeof(symm_moe_src_t) * MANYROWS));
    GT_CUDA(cudaMalloc(&didx, sizeof(int64_t) * MANYTOK * MAXK));
    GT_CUDA(cudaMalloc(&dtrows, sizeof(int64_t) * MANYTOK * MAXK));
    GT_CUDA(cudaMalloc(&dw, sizeof(float) * MANYTOK * MAXK));
    GT_CUDA(cudaMalloc(&dcounts, sizeof(size_t) * TOPK_REF_MAXNE));
    GT_CUDA(cudaMalloc(&doffsets, sizeof(size_t) * TOPK_REF_MAXNE));
    GT_CUDA(cudaMalloc(&drows, sizeof(size_t)));
    ll_out = (uint8_t *)symm_gpu_malloc(LL_BYTES);
    for (int p = 0; p < MAXSIDE; p++)
        ll_side[p] = (uint8_t *)symm_gpu_malloc((size_t)LL_ROWS * 256);
    ll_cnt = (size_t *)symm_gpu_malloc(sizeof(size_t) * LL_COUNTS);
    ll_src = (symm_moe_src_t *)symm_gpu_malloc(sizeof(symm_moe_src_t) * LL_ROWS);
    ll_ws_bytes = symm_cuda_moe_topk_ll_workspace_bytes(npes, 32, 2 * MAXTOK, MAXK, MAXHID * 2);
    ll_ws = (uint8_t *)symm_gpu_malloc(ll_ws_bytes);
    GT_TRUE(ll_out && ll_side[0] && ll_side[1] && ll_side[2] && ll_cnt && ll_src && ll_ws,
            "low-latency allocations (workspace %zu bytes)", ll_ws_bytes);
    GT_CUDA(gt_memset_sync(ll_ws, 0, ll_ws_bytes));
    GT_CUDA(cudaMalloc(&ll_in, LL_BYTES));
    ll_in_sym = (uint8_t *)symm_gpu_malloc(LL_BYTES);
    GT_TRUE(ll_in_sym != NULL, "low-latency expert output of %zu bytes", LL_BYTES);
    GT_OK(symm_barrier_all()); /* every PE's workspace zeroed before anyone uses it */
    symm_pool_t pool;
    GT_OK(symm_cuda_pool_create(SYMM_TEAM_WORLD, 8, &pool));
    test_random(pool);
    if (me == 0) printf("ok: random routings\n");
    test_decode(pool);
    if (me == 0) printf("ok: decode shape\n");
    test_graphs(pool);
    if (me == 0) printf("ok: CUDA graphs\n");
    test_spread(pool);
    if (me == 0) printf("ok: spread route\n");
    test_low_latency(pool);
    if (me == 0) printf("ok: low-latency forms\n");
    test_device_forms(pool);
    if (me == 0) printf("ok: device forms\n");
    test_failures(pool, false);
    test_failures(pool, true);
    if (me == 0) printf("ok: failures, small and spread\n");
    GT_CUDA(cudaDeviceSynchronize());
    GT_OK(symm_barrier_all());
    GT_OK(symm_pool_destroy(pool));
    test_sub_teams();
    if (me == 0) printf("ok: sub-teams, 1-PE teams\n");
    GT_CUDA(cudaDeviceSynchronize());
    GT_OK(symm_barrier_all());
    if (me == 0) printf("PASS test_gpu_topk: %d PEs\n", npes);
    GT_OK(symm_finalize());
    return 0;
}
