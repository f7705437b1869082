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
 *        [--skel] (the dispatch's skeleton, see k_skel)
 *        [--prof] (the MoE dispatch alone: a short run, to profile with ncu)
 *        [--blocks N] (--prof: N blocks, default automatic) */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "symm_cuda.h"
#include "symm_device.cuh"
#include "symm/impl/tile_moe__funcs.cuh"
#include "transport/cuda/cuda_coll.h"

#include "bench_check.h"

static int g_me, g_n, g_iters = 20;
static cudaStream_t g_s;
static symm_pool_t g_pool;

/* Holds the stream for ns nanoseconds (one thread spinning on the global timer), so that
 * the calls issued behind it queue up and run back to back at the GPU's pace. */
__global__ void k_hold(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

/* Nothing: the floor of a launch of the same grid. */
__global__ void k_empty(void) {}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The slowest PE's value of x (collectives take symmetric buffers). */
static double worst_of(double x)
{
    static double *sym;
    if (!sym && !(sym = (double *)symm_malloc(2 * sizeof(double)))) {
        fprintf(stderr, "symm_malloc: %s\n", symm_last_error());
        exit(1);
    }
    sym[0] = x;
    OK(symm_allreduce(SYMM_TEAM_WORLD, &sym[1], &sym[0], 1, SYMM_DOUBLE, SYMM_OP_MAX));
    return sym[1];
}

/* Host time to issue one call, the slowest PE's (set by timed). */
static double g_host;

/* Seconds per call of fn on the GPU (after warm-up), the slowest PE's; < 0 if a call
 * failed. The calls are issued behind k_hold, so the GPU runs them back to back: the time
 * is the GPU's, not the host's issue rate (g_host says that one). */
template <typename F> static double timed(F fn)
{
    for (int i = 0; i < 3; i++)
        if (fn()) {
            cudaStreamSynchronize(g_s);
            symm_cuda_check();
            return -1;
        }
    CU(cudaStreamSynchronize(g_s));
    cudaEvent_t a, b;
    CU(cudaEventCreate(&a));
    CU(cudaEventCreate(&b));
    int bad = 0;
    double ms_per = 0, host = 0;
    for (unsigned long long hold = 200000 + 40000ull * g_iters;; hold *= 2) {
        OK(symm_barrier_all());
        k_hold<<<1, 1, 0, g_s>>>(hold);
        CU(cudaEventRecord(a, g_s));
        double h0 = now_s();
        for (int i = 0; i < g_iters && !bad; i++) bad = fn() != SYMM_SUCCESS;
        host = now_s() - h0;
        CU(cudaEventRecord(b, g_s));
        CU(cudaEventSynchronize(b));
        float ms = 0;
        CU(cudaEventElapsedTime(&ms, a, b));
        ms_per = ms * 1e-3 / g_iters;
        /* every PE's calls were all queued before its hold ended, or hold longer */
        if (bad || worst_of(host * 1e9 > 0.8 * hold) == 0 || hold > 1000000000ull) break;
    }
    CU(cudaEventDestroy(a));
    CU(cudaEventDestroy(b));
    if (symm_cuda_check() != SYMM_SUCCESS) bad = 1;
    g_host = worst_of(host / g_iters);
    double worst = worst_of(bad ? 1e30 : ms_per);
    return worst >= 1e29 ? -1 : worst;
}

static double copy_time(void *dst, const void *src, size_t bytes)
{
    return timed([&] {
        return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, g_s) == cudaSuccess
                   ? SYMM_SUCCESS
                   : SYMM_ERR_CUDA;
    });
}

static void row(const char *op, size_t bytes, int nb, double t, double tc)
{
    if (g_me) return;
    if (t < 0) {
        printf("| %-22s | %10zu | %6d | %9s | %8s | %8.1f | %6s | %7s |\n", op, bytes, nb, "n/a",
               "n/a", bytes / tc * 1e-9, "n/a", "n/a");
        return;
    }
    if (bytes == 0) /* a time only (the launch floor, or nothing to move) */
        printf("| %-22s | %10zu | %6d | %9.1f | %8s | %8s | %6s | %7.1f |\n", op, bytes, nb,
               t * 1e6, "-", "-", "-", g_host * 1e6);
    else
        printf("| %-22s | %10zu | %6d | %9.1f | %8.1f | %8.1f | %5.0f%% | %7.1f |\n", op, bytes,
               nb, t * 1e6, bytes / t * 1e-9, bytes / tc * 1e-9, 100.0 * tc / t, g_host * 1e6);
    fflush(stdout);
}

/* The skeleton's copies through shared memory. */
#define SKEL_DEV __device__ __forceinline__
namespace skel {
using symm_tm::st_once;

/* Bulk copies through shared memory (sm_90's tensor memory accelerator, plain bulk form):
 * one thread keeps up to SKEL_TMA_AHEAD + 1 pieces of the copy loading into a ring of
 * SKEL_TMA_SLOTS slots of the stage while it stores the earlier ones, so that the
 * bytes in flight are set by the stage's size, not by registers (the dispatch's register
 * copy has a 64 KiB chunk per block in flight at most). Pieces are multiples of 16 bytes
 * at 16-byte aligned addresses. Measured in sessions 9-10 in the dispatch itself too: no
 * faster than the register copy (docs/PERFORMANCE.md), so only the skeleton has it. */
#define SKEL_TMA_SLOTS 8
#define SKEL_TMA_AHEAD 5
struct tma_pipe {
    uint8_t *stage;
    uint32_t piece; /* bytes a slot */
    uint32_t j;     /* pieces issued */
    uint64_t pol;   /* L2 policy of the copies (evict first, as the dispatch's .cs hint) */
    uint64_t *mbar; /* [SLOTS] in shared memory */
    uint8_t **dst;  /* [SLOTS]: each slot's destination and bytes */
    uint32_t *bytes;
};
SKEL_DEV uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
SKEL_DEV void tma_begin(tma_pipe &p)
{
    for (int i = 0; i < SKEL_TMA_SLOTS; i++)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(p.mbar + i))
                     : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    /* the peers' rows were seen through generic loads (the round); the bulk loads are in
     * the async proxy */
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p.pol));
    p.j = 0;
}
SKEL_DEV void tma_store_piece(tma_pipe &p, uint32_t k)
{
    const uint32_t ks = k % SKEL_TMA_SLOTS, par = (k / SKEL_TMA_SLOTS) & 1;
    const uint32_t m = smem_u32(p.mbar + ks);
    uint32_t done;
    do {
        asm volatile("{ .reg .pred q; mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2; "
                     "selp.u32 %0, 1, 0, q; }"
                     : "=r"(done)
                     : "r"(m), "r"(par)
                     : "memory");
    } while (!done);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint"
                 " [%0], [%1], %2, %3;" ::"l"(p.dst[ks]),
                 "r"(smem_u32(p.stage + (size_t)ks * p.piece)),
                 "r"(p.bytes[ks]), "l"(p.pol)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
/* One piece (bytes <= p.piece, a multiple of 16; src, dst 16-byte aligned). */
SKEL_DEV void tma_piece(tma_pipe &p, uint8_t *dst, const uint8_t *src, uint32_t bytes)
{
    constexpr uint32_t S = SKEL_TMA_SLOTS, L = SKEL_TMA_AHEAD;
    static_assert(L + 1 <= S, "a slot is reloaded only after its store was issued");
    const uint32_t j = p.j, slot = j % S;
    /* slot's last piece, j - S, was stored among pieces 0 .. j - 1 - L: all but the
     * S - 1 - L latest store groups must have read their slots */
    if (j >= S) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(S - 1 - L) : "memory");
    p.dst[slot] = dst;
    p.bytes[slot] = bytes;
    const uint32_t m = smem_u32(p.mbar + slot);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(m), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"(smem_u32(p.stage + (size_t)slot * p.piece)), "l"(src), "r"(bytes),
                 "r"(m), "l"(p.pol)
                 : "memory");
    if (j >= L) tma_store_piece(p, j - L);
    p.j = j + 1;
}
/* nbytes (a multiple of 16; src, dst 16-byte aligned) in pieces of at most p.piece. */
SKEL_DEV void tma_copy(tma_pipe &p, uint8_t *dst, const uint8_t *src, uint64_t nbytes)
{
    for (uint64_t o = 0; o < nbytes; o += p.piece)
        tma_piece(p, dst + o, src + o, (uint32_t)(nbytes - o < p.piece ? nbytes - o : p.piece));
}
/* Stores what is left, waits until every store is complete, and makes the stores visible
 * to the generic proxy (the closing round's release follows). */
SKEL_DEV void tma_end(tma_pipe &p)
{
    for (uint32_t k = p.j > SKEL_TMA_AHEAD ? p.j - SKEL_TMA_AHEAD : 0; k < p.j; k++)
        tma_store_piece(p, k);
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    for (int i = 0; i < SKEL_TMA_SLOTS; i++)
        asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(p.mbar + i))
                     : "memory");
}
#else
SKEL_DEV void tma_begin(tma_pipe &) {}
SKEL_DEV void tma_copy(tma_pipe &, uint8_t *, const uint8_t *, uint64_t) {}
SKEL_DEV void tma_end(tma_pipe &) {}
#endif

/* Copy through shared memory with per-thread async copies (cp.async, sm_80 on): the
 * pieces of a block's copy go in turn into the two halves of a stage; while piece p loads
 * into one half, every thread stores piece p - 1 from the other (each thread the 16-byte
 * vectors it loaded itself, so no block barrier), so that a block keeps up to two
 * pieces' bytes in flight with no registers holding them. Pieces: bytes <= half, a
 * multiple of 16, src and dst 16-byte aligned. */
struct cpa_pipe {
    uint8_t *stage;  /* 2 * half bytes of shared memory, 16-byte aligned */
    uint32_t half;   /* bytes a half */
    uint32_t p;      /* pieces issued */
    uint8_t *pdst;   /* the last piece's destination and bytes (not yet stored) */
    uint32_t pbytes;
};
SKEL_DEV void cpa_store_last(cpa_pipe &c, uint32_t tid, uint32_t nthr)
{
    const uint8_t *buf = c.stage + ((c.p - 1) & 1) * c.half;
    uint4 *d4 = (uint4 *)c.pdst;
#pragma unroll 4
    for (uint32_t v = tid; v < c.pbytes / 16; v += nthr)
        st_once(d4 + v, *(const uint4 *)(buf + (size_t)v * 16));
}
SKEL_DEV void cpa_piece(cpa_pipe &c, uint8_t *dst, const uint8_t *src, uint32_t bytes,
                        uint32_t tid, uint32_t nthr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint8_t *buf = c.stage + (c.p & 1) * c.half;
#pragma unroll 4
    for (uint32_t v = tid; v < bytes / 16; v += nthr)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                         smem_u32(buf + (size_t)v * 16)),
                     "l"(src + (size_t)v * 16)
                     : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (c.p) {
        asm volatile("cp.async.wait_group 1;" ::: "memory");
        cpa_store_last(c, tid, nthr);
    }
#endif
    c.pdst = dst;
    c.pbytes = bytes;
    c.p++;
}
SKEL_DEV void cpa_copy(cpa_pipe &c, uint8_t *dst, const uint8_t *src, uint64_t nbytes,
                       uint32_t tid, uint32_t nthr)
{
    for (uint64_t o = 0; o < nbytes; o += c.half)
        cpa_piece(c, dst + o, src + o, (uint32_t)(nbytes - o < c.half ? nbytes - o : c.half),
                  tid, nthr);
}
SKEL_DEV void cpa_end(cpa_pipe &c, uint32_t tid, uint32_t nthr)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (c.p) {
        asm volatile("cp.async.wait_group 0;" ::: "memory");
        cpa_store_last(c, tid, nthr);
    }
#endif
    c.p = 0;
}
} // namespace skel

/* --skel: the MoE step's skeleton, to find the floor of its structure. Block b copies
 * chunks b, b + nb, ... of `rows` rows of rb bytes (R rows a chunk, as the dispatch lays
 * them out) from the member the chunk's rows come from (rows split evenly over the
 * members, as the dispatch's column is) into out, with the dispatch's copy loop. ROUNDS: a
 * claim and a round on duplicate b before the copy, a closing round after it (the
 * dispatch less its tables and layout); else the copy alone. MODE: SK_STATIC as above;
 * SK_TMA with the bulk copies through 128 KiB of shared memory (skel::tma_pipe); SK_DYN the blocks take chunks in turn from a counter of this PE
 * (atomicAdd) instead; SK_DYN_ALL the blocks of every member take chunks of every
 * member's output from one counter on member 0 (ROUNDS only: a member's output is whole
 * after the closing round); SK_CPA with cp.async through the two halves of the stage
 * (skel::cpa_pipe). Launched with programmatic dependent launch, as the dispatch
 * is. (A closing round without the first one may hang under MPS: the next call's blocks,
 * let in after the copy, can take the SMs that a peer's blocks of this call still wait
 * for.) */
const size_t kSkelStage = (size_t)128 << 10;
enum { SK_STATIC, SK_TMA, SK_DYN, SK_DYN_ALL, SK_CPA, SK_MODES };
/* SK_DYN's counters, of this PE: chunks taken, blocks done (the last one zeroes both) */
__device__ unsigned long long g_skel_ctr[2];
template <bool ROUNDS, int MODE>
__global__ void __launch_bounds__(512) k_skel(symm_dev_pool_t pool, uint8_t *out,
                                              const uint8_t *in, uint64_t rows, uint64_t rb,
                                              uint64_t R, unsigned long long *ctr_all)
{
    using namespace symm_detail;
    __shared__ uint64_t s_ep, s_next;
    __shared__ int s_own;
    __shared__ uint64_t s_mbar[SKEL_TMA_SLOTS];
    __shared__ uint8_t *s_pdst[SKEL_TMA_SLOTS];
    __shared__ uint32_t s_pbytes[SKEL_TMA_SLOTS];
    extern __shared__ __align__(128) uint8_t stage[];
    const symm_dev_team_t t = symm_dev_pool_team(pool, blockIdx.x);
    const uint32_t tid = threadIdx.x, nthr = blockDim.x;
    pdl_wait();
    if (ROUNDS && tid == 0) {
        uint64_t ep;
        s_own = claim(t, SYMM_DEV_WHAT_MOE, holder_tag(SUB_BLOCK), &ep) == 1;
        s_ep = ep;
    }
    __syncthreads();
    if (ROUNDS) {
        round_part(t, s_ep + 1, tid, nthr, SYMM_DEV_WHAT_MOE);
        __syncthreads();
    }
    pdl_launch_dependents();
    const int n = pool.n;
    const uint64_t nch = (rows + R - 1) / R, per = (rows + n - 1) / n;
    const bool all = MODE == SK_DYN_ALL;
    unsigned long long *ctr =
        all ? (unsigned long long *)((char *)ctr_all + pool.heap_delta[0]) : g_skel_ctr;
    const uint64_t ntake = all ? nch * n : nch;
    const uint64_t nblk = all ? (uint64_t)gridDim.x * n : gridDim.x;
    /* chunk c of member d's output: fn(dst, src, bytes) for each piece by source member */
    auto one_chunk = [&](uint64_t c, int d, auto &&fn) {
        const uint64_t c1 = (c + 1) * R < rows ? (c + 1) * R : rows;
        uint8_t *o = out + pool.heap_delta[d];
        for (uint64_t r0 = c * R, r1; r0 < c1; r0 = r1) {
            const int s = (int)(r0 / per);
            r1 = (s + 1) * per < c1 ? (s + 1) * per : c1;
            /* member s's rows for d: its input's rows [d * per, (d + 1) * per) */
            const uint64_t src = (uint64_t)d * per + (r0 - s * per);
            fn(o + r0 * rb, in + pool.heap_delta[s] + src * rb, (r1 - r0) * rb);
        }
    };
    auto each_chunk = [&](auto &&fn) {
        if constexpr (MODE == SK_DYN || MODE == SK_DYN_ALL) {
            for (;;) {
                if (tid == 0) s_next = atomicAdd(ctr, 1ull);
                __syncthreads();
                const uint64_t k = s_next;
                __syncthreads();
                if (k >= ntake) break;
                /* members interleaved, so that every output fills at the same pace */
                one_chunk(all ? k / n : k, all ? (int)(k % n) : pool.me, fn);
            }
            if (tid == 0) {
                __threadfence();
                if (atomicAdd(ctr + 1, 1ull) == nblk - 1) { /* every block has taken its last */
                    ctr[0] = 0;
                    ctr[1] = 0;
                    __threadfence();
                }
            }
        } else {
            for (uint64_t c = blockIdx.x; c < nch; c += gridDim.x) one_chunk(c, pool.me, fn);
        }
    };
    if constexpr (MODE == SK_CPA) {
        skel::cpa_pipe cp = {stage, (uint32_t)(kSkelStage / 2), 0, nullptr, 0};
        each_chunk([&](uint8_t *d, const uint8_t *sr, uint64_t nb) {
            skel::cpa_copy(cp, d, sr, nb, tid, nthr);
        });
        skel::cpa_end(cp, tid, nthr);
    } else if constexpr (MODE == SK_TMA) {
        if (tid == 0) {
            skel::tma_pipe tp = {stage, (uint32_t)(kSkelStage / SKEL_TMA_SLOTS), 0, 0,
                                 s_mbar, s_pdst, s_pbytes};
            skel::tma_begin(tp);
            each_chunk([&](uint8_t *d, const uint8_t *sr, uint64_t nb) {
                skel::tma_copy(tp, d, sr, nb);
            });
            skel::tma_end(tp);
        }
    } else {
        each_chunk([&](uint8_t *d, const uint8_t *sr, uint64_t nb) {
            symm_tm::copy_from_peer(d, sr, nb);
        });
    }
    if (ROUNDS) {
        __syncthreads();
        round_part(t, s_ep + 2, tid, nthr, SYMM_DEV_WHAT_MOE);
        __syncthreads();
        if (tid == 0) {
            if (s_own) unclaim_ep(t, s_ep + 2);
            else set_episode(t, s_ep + 2);
        }
    }
}

/* The skeletons the rows below time (null: none). */
static const void *const k_skels[2][SK_MODES] = {
    {(const void *)k_skel<false, SK_STATIC>, (const void *)k_skel<false, SK_TMA>, nullptr,
     nullptr, (const void *)k_skel<false, SK_CPA>},
    {(const void *)k_skel<true, SK_STATIC>, nullptr, (const void *)k_skel<true, SK_DYN>,
     (const void *)k_skel<true, SK_DYN_ALL>, (const void *)k_skel<true, SK_CPA>}};

/* one: reserve the TMA stage without TMA too, so that one block fits on an SM (the
 * dispatch's case: its registers allow no second one); split: chunks of R / split rows.
 * ctr_all: SK_DYN_ALL's counters (symmetric, zeroed). skel_prepare first. */
static symm_status_t skel_launch(bool rounds, int mode, int nb, symm_dev_pool_t dp,
                                 uint8_t *out, const uint8_t *in, uint64_t rows, uint64_t rb,
                                 unsigned long long *ctr_all, bool one = false, int split = 1)
{
    uint64_t R = symm_tm_moe_chunk_rows(rows, rb, (uint32_t)nb);
    R = R / split ? R / split : 1;
    void *args[] = {&dp, &out, &in, &rows, &rb, &R, &ctr_all};
    return symm_cuda_launch_pdl(k_skels[rounds][mode], dim3(nb), dim3(512), args,
                                mode == SK_TMA || mode == SK_CPA || one ? kSkelStage : 0, g_s);
}

/* Lets every skeleton kernel take the stage as dynamic shared memory. */
static void skel_prepare(void)
{
    for (auto &byr : k_skels)
        for (const void *k : byr)
            if (k)
                CU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)kSkelStage));
}

static void header(const char *title)
{
    if (g_me) return;
    printf("\n### %s (%d PEs)\n\n", title, g_n);
    printf("| %-22s | %10s | %6s | %9s | %8s | %8s | %6s | %7s |\n", "operation", "bytes/PE",
           "blocks", "time_us", "GB/s", "copyGB/s", "%copy", "host_us");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------", "------------", "--------",
           "-----------", "----------", "----------", "--------", "---------");
}

int main(int argc, char **argv)
{
    bool quick = false, prof = false, skel = false;
    size_t ntok = 4096;
    int pblocks = 0; /* --prof: the dispatch's block count (0: automatic) */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--prof")) prof = true;
        else if (!strcmp(argv[i], "--skel")) skel = true;
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) ntok = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--blocks") && i + 1 < argc) pblocks = atoi(argv[++i]);
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
    size_t maxb = sizes.back();
    float *A = (float *)symm_gpu_malloc(maxb), *B = (float *)symm_gpu_malloc(maxb);
    if (!A || !B) OK(symm_last_status());
    CU(cudaMemset(A, 0, maxb));
    CU(cudaMemset(B, 0, maxb));
    float *L = nullptr; /* a rooted out outside the symmetric heap: the root pulls alone */
    CU(cudaMalloc(&L, maxb));

    /* ---- tiles: float sum, automatic block count, vs copy */
    if (!prof && !skel) header("Tile reduce, float sum, 4096 columns");
    for (size_t bytes : prof || skel ? std::vector<size_t>() : sizes) {
        symm_tile_t t = {A, bytes / 4 / cols, cols, cols}, o = {B, t.rows, cols, cols};
        double tc = copy_time(B, A, bytes);
        int nb = symm_cuda_tile_moe_auto_blocks(g_pool, 0, bytes);
        row("tile_allreduce", bytes, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, 0, g_s);
            }), tc);
        row("tile_allreduce in place", bytes, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, t, t, SYMM_FLOAT, SYMM_OP_SUM, 0, g_s);
            }), tc);
        row("tile_reduce (root 0)", bytes, nb, timed([&] {
                return symm_tile_reduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, 0, 0, g_s);
            }), tc);
        symm_tile_t lo = {L, t.rows, cols, cols};
        row("tile_reduce (root 0, local out)", bytes, nb, timed([&] {
                return symm_tile_reduce_on_stream(g_pool, lo, t, SYMM_FLOAT, SYMM_OP_SUM, 0, 0, g_s);
            }), tc);
    }

    /* ---- MoE: 4096 tokens of 7168 bytes per PE, 8 experts per PE, near-even splits */
    const int ne = 8;
    const size_t rb = 7168, tokens = quick ? 512 : ntok, N = (size_t)g_n * ne;
    std::vector<size_t> hs(N);
    for (size_t k = 0; k < N; k++) hs[k] = tokens / N + (k < tokens % N ? 1 : 0);
    const size_t align = 16, cap = tokens + N * align + 64;
    uint8_t *in = (uint8_t *)symm_gpu_malloc(cap * rb), *mid = (uint8_t *)symm_gpu_malloc(cap * rb);
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
        return symm_moe_dispatch_on_stream(g_pool, mid, cap, in, cap, d_sp, ne, rb, align, d_osp,
                                           d_oof, nullptr, ws, nb, g_s);
    };
    auto combine = [&](int nb) {
        return symm_moe_combine_on_stream(g_pool, back, cap, mid, cap, d_osp, d_oof, ne, rb, d_bsp,
                                          d_bof, nullptr, ws, nb, g_s);
    };
    int nauto = symm_cuda_tile_moe_auto_blocks(g_pool, 1, mb);
    if (skel) { /* the dispatch's skeleton (see k_skel), against the copy and the dispatch */
        symm_dev_pool_t dp;
        OK(symm_cuda_pool_device(g_pool, &dp));
        skel_prepare();
        auto *ctr = (unsigned long long *)symm_gpu_malloc(2 * sizeof(unsigned long long));
        if (!ctr) OK(symm_last_status());
        CU(cudaMemset(ctr, 0, 2 * sizeof(unsigned long long)));
        OK(symm_barrier_all());
        header("MoE skeleton: the copy loop alone, with both rounds");
        auto skel_row = [&](const char *name, bool rounds, int mode, bool one, int split) {
            row(name, mb, nauto, timed([&] {
                    return skel_launch(rounds, mode, nauto, dp, mid, in, tokens, rb, ctr, one,
                                       split);
                }), tc);
        };
        for (int rep = 0; rep < 2; rep++) {
            row("copy (cudaMemcpyAsync)", mb, 0, copy_time(back, in, mb), tc);
            row("dispatch", mb, nauto, timed([&] { return dispatch(0); }), tc);
            skel_row("skel copy", false, SK_STATIC, false, 1);
            skel_row("skel 2 rounds", true, SK_STATIC, false, 1);
            skel_row("skel copy, TMA", false, SK_TMA, false, 1);
            skel_row("skel copy, 1 block/SM", false, SK_STATIC, true, 1);
            skel_row("skel copy, cp.async", false, SK_CPA, false, 1);
            skel_row("skel 2 rounds, cp.async", true, SK_CPA, false, 1);
            skel_row("skel 2 rounds, dyn", true, SK_DYN, false, 1);
            skel_row("skel 2 rounds, dyn/2", true, SK_DYN, false, 2);
            skel_row("skel 2 rounds, dyn all", true, SK_DYN_ALL, false, 1);
        }
        OK(symm_gpu_free(ctr));
        OK(symm_finalize());
        return 0;
    }
    if (prof) { /* the dispatch alone: a short run, to profile with ncu */
        const int nb = pblocks ? pblocks : nauto;
        double tp = timed([&] { return dispatch(pblocks); });
        if (!g_me) printf("PROF dispatch, %zu tokens, %d blocks: %.2f us per call\n", tokens,
                          nb, tp * 1e6);
        OK(symm_finalize());
        return 0;
    }
    header("MoE, 7168-byte rows, 8 experts per PE, major_align 16");
    row("empty kernel (floor)", 0, nauto, timed([&] {
            k_empty<<<nauto, 512, 0, g_s>>>();
            return cudaGetLastError() == cudaSuccess ? SYMM_SUCCESS : SYMM_ERR_CUDA;
        }), tc);
    row("dispatch", mb, nauto, timed([&] { return dispatch(0); }), tc);
    row("combine", mb, nauto, timed([&] { return combine(0); }), tc);
    row("dispatch + combine", 2 * mb, nauto, timed([&] {
            symm_status_t s = dispatch(0);
            return s ? s : combine(0);
        }), tc * 2);

    /* ---- block scaling: 16 MiB tile allreduce and the dispatch above */
    static const int nbs[] = {1, 2, 4, 8, 16, 32, 64, 132, 264};
    size_t tb = quick ? sizes[0] : sizes[1];
    symm_tile_t t = {A, tb / 4 / cols, cols, cols}, o = {B, t.rows, cols, cols};
    double tct = copy_time(B, A, tb);
    header("Block scaling (n/a: more blocks than can be resident on this PE's share)");
    for (int nb : nbs) {
        row("tile_allreduce", tb, nb, timed([&] {
                return symm_tile_allreduce_on_stream(g_pool, o, t, SYMM_FLOAT, SYMM_OP_SUM, nb, g_s);
            }), tct);
    }
    for (int nb : nbs) row("dispatch", mb, nb, timed([&] { return dispatch(nb); }), tc);

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
