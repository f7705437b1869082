/* transport.c — the GPU symmetric heap: one cudaMalloc per PE (user heap + team region),
 * exported by CUDA IPC and mapped by every other PE of the node (its collective
 * allocation is lib/cuda/heap.c); device error reports; the resident-launch helper;
 * the team region's allocator; the CUDA transport's ops table (device heap, IPC peer
 * pointers), registered with the transport layer so that symm_finalize cleans up. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "transport/cuda/cuda_transport.h"
#include "transport/transport.h"

symm_cuda_state_t symm_cuda = {.device = -1};

symm_status_t symm_cuda_error(const char *fn, cudaError_t e)
{
    return symm_error_set(SYMM_ERR_CUDA, "%s: CUDA error on PE %d (device %d): %s (%s)", fn,
                          symm_g.me, symm_cuda.device, cudaGetErrorString(e),
                          cudaGetErrorName(e));
}

symm_status_t symm_cuda_require(const char *fn)
{
    SYMM_REQUIRE_INIT();
    if (!symm_cuda.initialized)
        return symm_error_set(SYMM_ERR_NOT_INITIALIZED, "%s: call symm_cuda_init first", fn);
    return SYMM_SUCCESS;
}

#define CUDA_CHECK_GOTO(fn, expr, st, label)                                                   \
    do {                                                                                       \
        cudaError_t ce_ = (expr);                                                              \
        if (ce_ != cudaSuccess) {                                                              \
            (st) = symm_cuda_error(fn, ce_);                                                   \
            goto label;                                                                        \
        }                                                                                      \
    } while (0)

int symm_cuda_in_heap(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)symm_cuda.base;
    return symm_cuda.initialized && a >= b && a - b <= symm_cuda.heap_size &&
           n <= symm_cuda.heap_size - (a - b);
}

/* What each PE publishes at init, in the CPU symmetric heap. */
typedef struct gpu_card {
    cudaIpcMemHandle_t handle;
    char bus_id[32];
    uint64_t size;
    int32_t ok;
    int32_t device;
} gpu_card_t;

static const symm_transport_ops_t cuda_transport;

int symm_cuda_region_alloc(size_t size, uint64_t *off)
{
    pthread_mutex_lock(&symm_cuda.lock);
    int rc = symm_arena_alloc(&symm_cuda.team_arena, size ? size : 1, 256, off);
    pthread_mutex_unlock(&symm_cuda.lock);
    return rc;
}

void symm_cuda_region_free(uint64_t off)
{
    pthread_mutex_lock(&symm_cuda.lock);
    symm_arena_free(&symm_cuda.team_arena, off);
    pthread_mutex_unlock(&symm_cuda.lock);
}

static void unmap_peers(void)
{
    if (!symm_cuda.peer_base) return;
    for (int j = 0; j < symm_g.npes; j++)
        if (j != symm_g.me && symm_cuda.peer_base[j])
            cudaIpcCloseMemHandle(symm_cuda.peer_base[j]);
    free(symm_cuda.peer_base);
    free(symm_cuda.delta);
    free(symm_cuda.same_gpu);
    symm_cuda.peer_base = NULL;
    symm_cuda.delta = NULL;
    symm_cuda.same_gpu = NULL;
}

static void release_all(void)
{
    unmap_peers();
    if (symm_cuda.stream) cudaStreamDestroy(symm_cuda.stream);
    if (symm_cuda.base) cudaFree(symm_cuda.base);
    symm_arena_destroy(&symm_cuda.heap_arena);
    symm_arena_destroy(&symm_cuda.team_arena);
    pthread_mutex_destroy(&symm_cuda.lock);
    memset(&symm_cuda, 0, sizeof symm_cuda);
    symm_cuda.device = -1;
}

/* The SMs this PE counts on (symm_cuda_sm_share) before any probe: an equal part of the
 * SMs it sees. Without CUDA_MPS_ACTIVE_THREAD_PERCENTAGE every PE on the GPU may use
 * every SM, and that part is exact: the grids of all the PEs fit on the GPU at once. */
static int sm_share(int seen, int sharers)
{
    int share = seen / (sharers > 0 ? sharers : 1);
    return share > 0 ? share : 1;
}

/* With a percentage each process sees P% of the SMs, and which SMs its blocks get the
 * driver decides: measured on an H200 with four PEs at 25% (32 SMs seen each), 24
 * one-block-per-SM blocks per PE were resident together and 28 were not. So the share
 * is probed (collective over all PEs): rounds of one kernel per PE whose blocks wait for
 * every PE's blocks on the GPU, first of share + step, share + 2 step, ... blocks per PE
 * until a round fails on some PE of the GPU or reaches the SMs seen, then halving the
 * gap between the most that met and the least that did not, down to a fine step (a
 * quarter of a step); the share is then the most that met, less one fine step of margin.
 * A round that fails costs its wait (20 ms); a CUDA error in a round counts as a failed
 * round (this PE's next use of the GPU reports it). */
#define PROBE_ROUNDS  32
#define PROBE_SPIN_NS 20000000ull

/* One round on this PE: cand blocks against cand per PE on the GPU, counted in word
 * `round` of the lead PE's probe words (off: the probe words in every team region). */
static int probe_round(const char *fn, uint64_t off, int lead, int round, int cand)
{
    unsigned *count = (unsigned *)(symm_cuda.peer_base[lead] + symm_cuda.heap_size + off +
                                   4 * (uint64_t)round);
    unsigned *met = (unsigned *)symm_cuda_team_ptr(off);
    symm_status_t st = SYMM_SUCCESS;
    int ok = cudaMemset(met, 0, 4) == cudaSuccess &&
             symm_cuda_residency_probe(fn, count, (unsigned)(cand * symm_cuda.sharers), cand,
                                       PROBE_SPIN_NS, met, &st) == 1;
    if (!ok) cudaGetLastError();
    if (st) SYMM_DEBUG("%s: residency probe: %s", fn, symm_last_error());
    return ok;
}

/* Every PE's vote of a round (vote: symmetric, 2 ints; ran: this PE ran it, met: and all
 * its blocks met). Returns 1 if every PE of my GPU that ran it met, 0 if not, -1 if a
 * barrier failed; *any: some PE ran it (the rounds go on while one does). */
static int probe_vote(int *vote, int ran, int met, int *any)
{
    vote[0] = ran && !met;
    vote[1] = ran;
    *any = 0;
    if (symm_barrier_all()) return -1;
    int failed = 0;
    for (int j = 0; j < symm_g.npes; j++) {
        const int *v = symm_ptr(vote, j);
        if (!v) continue;
        if (symm_cuda.same_gpu[j]) failed |= v[0];
        *any |= v[1];
    }
    return symm_barrier_all() ? -1 : !failed;
}

static int probe_share(const char *fn, int base)
{
    const int seen = symm_cuda.sm_count, step = base / 2 > 0 ? base / 2 : 1;
    const int fine = step / 4 > 0 ? step / 4 : 1;
    const size_t words = (PROBE_ROUNDS + 1) * 4;
    int want = symm_cuda.sharers > 1 && getenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") &&
               base + step <= seen;
    int lead = symm_g.me;
    for (int j = symm_g.npes - 1; j >= 0; j--)
        if (symm_cuda.same_gpu[j]) lead = j;
    uint64_t off = 0;
    const int have = !symm_arena_alloc(&symm_cuda.team_arena, words, 256, &off);
    /* every PE's team region is alike: without the words, every PE goes without */
    if (!have || cudaMemset(symm_cuda_team_ptr(off), 0, words) != cudaSuccess ||
        cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
        want = 0;
    }
    int *vote = symm_malloc(2 * sizeof(int));
    int lo = base, hi = 0; /* the most blocks that met; the least that did not (0: none) */
    for (int r = 0; vote && r < PROBE_ROUNDS; r++) {
        int cand = 0;
        if (want && !hi)
            cand = lo + step <= seen ? lo + step : lo < seen ? seen : 0;
        else if (want && hi - lo > fine)
            cand = lo + (hi - lo) / 2;
        if (symm_barrier_all()) break; /* every PE's words are zero; rounds aligned */
        int any = 0;
        const int ok = probe_vote(vote, cand > 0,
                                  cand > 0 ? probe_round(fn, off, lead, r + 1, cand) : 1, &any);
        if (ok < 0 || !any) break;
        if (cand > 0 && ok) lo = cand;
        if (cand > 0 && !ok) hi = cand;
    }
    symm_free(vote);
    if (have) symm_arena_free(&symm_cuda.team_arena, off);
    if (lo > base)
        SYMM_DEBUG("%s: residency probe: %d blocks per PE met, %d did not", fn, lo, hi);
    return lo - fine > base ? lo - fine : base;
}

symm_status_t symm_cuda_transport_init(const char *fn)
{
    SYMM_REQUIRE_INIT();
    if (symm_cuda.initialized)
        return symm_error_set(SYMM_ERR_ALREADY_INITIALIZED, "%s called twice", fn);
    const char *mode = symm_config.gpu ? symm_config.gpu : "auto";
    if (strcmp(mode, "off") == 0)
        return symm_error_set(SYMM_ERR_UNSUPPORTED, "%s: SYMM_GPU=off", fn);
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return symm_error_set(SYMM_ERR_UNSUPPORTED, "%s: no CUDA device", fn);
    }
    symm_status_t st = SYMM_SUCCESS;
    int dev = symm_config.gpu_device >= 0 ? symm_config.gpu_device : symm_g.me % ndev;
    size_t heap = (symm_config.gpu_heap_size + 255) & ~(size_t)255;
    gpu_card_t mine;
    memset(&mine, 0, sizeof mine);
    mine.ok = 0;
    mine.device = dev;
    mine.size = heap + SYMM_CUDA_TEAM_REGION;
    symm_cuda.device = dev;
    symm_cuda.heap_size = heap;
    symm_cuda.team_size = SYMM_CUDA_TEAM_REGION;
    pthread_mutex_init(&symm_cuda.lock, NULL);
    /* Local steps first; the outcome travels in the card, so that a PE that failed does
     * not leave the others waiting for its handle. */
    if (dev >= ndev) {
        st = symm_error_set(SYMM_ERR_INVALID_ARG,
                            "%s: SYMM_GPU_DEVICE=%d but only %d GPUs "
                            "are visible",
                            fn, dev, ndev);
    } else {
        cudaError_t e = cudaSetDevice(dev);
        if (e == cudaSuccess) e = cudaDeviceGetPCIBusId(mine.bus_id, sizeof mine.bus_id, dev);
        if (e == cudaSuccess)
            e = cudaDeviceGetAttribute(&symm_cuda.sm_count, cudaDevAttrMultiProcessorCount,
                                       dev);
        if (e == cudaSuccess) e = cudaMalloc((void **)&symm_cuda.base, mine.size);
        if (e == cudaSuccess) e = cudaIpcGetMemHandle(&mine.handle, symm_cuda.base);
        if (e == cudaSuccess)
            e = cudaStreamCreateWithFlags(&symm_cuda.stream, cudaStreamNonBlocking);
        if (e != cudaSuccess)
            st = symm_cuda_error(fn, e);
        else if (symm_arena_init(&symm_cuda.heap_arena, heap) ||
                 symm_arena_init(&symm_cuda.team_arena, SYMM_CUDA_TEAM_REGION))
            st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: GPU heap allocators", fn);
    }
    char why[512] = "";
    if (st) snprintf(why, sizeof why, "%s", symm_last_error());
    mine.ok = st == SYMM_SUCCESS;

    gpu_card_t *cards = symm_malloc(sizeof(gpu_card_t));
    if (!cards) {
        release_all();
        return symm_last_status();
    }
    *cards = mine;
    symm_status_t bst = symm_barrier_all();
    int bad = -1;
    symm_cuda.peer_base = calloc((size_t)symm_g.npes, sizeof(uint8_t *));
    symm_cuda.delta = calloc((size_t)symm_g.npes, sizeof(int64_t));
    symm_cuda.same_gpu = calloc((size_t)symm_g.npes, 1);
    if (!bst && !st && (!symm_cuda.peer_base || !symm_cuda.delta || !symm_cuda.same_gpu))
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    symm_cuda.sharers = 0;
    for (int j = 0; j < symm_g.npes && !bst; j++) {
        const gpu_card_t *c = symm_ptr(cards, j);
        if (!c->ok) {
            if (bad < 0) bad = j;
            continue;
        }
        if (st) continue;
        if (strcmp(c->bus_id, mine.bus_id) == 0) {
            symm_cuda.sharers++;
            symm_cuda.same_gpu[j] = 1;
        }
        if (j == symm_g.me) {
            symm_cuda.peer_base[j] = symm_cuda.base;
            continue;
        }
        void *p = NULL;
        cudaError_t e = cudaIpcOpenMemHandle(&p, c->handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            st = symm_cuda_error(fn, e);
            snprintf(why, sizeof why, "%s (opening PE %d's GPU heap)", symm_last_error(), j);
            continue;
        }
        symm_cuda.peer_base[j] = p;
        symm_cuda.delta[j] = (int64_t)((uint8_t *)p - symm_cuda.base);
    }
    /* Everyone has read the cards (and reports whether it mapped all heaps). */
    *cards = mine;
    cards->ok = !st && !bst;
    symm_status_t bst2 = symm_barrier_all();
    for (int j = 0; j < symm_g.npes && !bst2 && !bst; j++)
        if (!((const gpu_card_t *)symm_ptr(cards, j))->ok && bad < 0) bad = j;
    symm_status_t bst3 = symm_barrier_all();
    symm_free(cards);
    if (bst || bst2 || bst3 || st || bad >= 0) {
        release_all();
        if (st) return symm_error_set(st, "%s", why);
        if (bst || bst2 || bst3) return bst ? bst : bst2 ? bst2 : bst3;
        return symm_error_set(SYMM_ERR_CUDA, "%s: GPU setup failed on PE %d", fn, bad);
    }
    uint64_t off = 0;
    symm_arena_alloc(&symm_cuda.team_arena, sizeof(symm_dev_err_buf_t), 256, &off);
    symm_cuda.err = (symm_dev_err_buf_t *)symm_cuda_team_ptr(off);
    cudaMemset(symm_cuda.err, 0, sizeof(symm_dev_err_buf_t));
    cudaDeviceSynchronize();
    symm_cuda.timeout_ns = (uint64_t)(symm_config.timeout * 1e9);
    symm_cuda.sm_share = sm_share(symm_cuda.sm_count, symm_cuda.sharers);
    symm_cuda.sm_share = probe_share(fn, symm_cuda.sm_share);
    if ((st = symm_transport_register(&cuda_transport)) != SYMM_SUCCESS) {
        release_all();
        return st;
    }
    symm_cuda.initialized = 1;
    SYMM_DEBUG("GPU transport: device %d (%s), %d PEs on it, %d of its %d SMs here, heap %zu "
               "bytes",
               dev, mine.bus_id, symm_cuda.sharers, symm_cuda.sm_share, symm_cuda.sm_count,
               heap);
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- ops table */
/* Before finalize's barrier: no kernel of this PE touches any heap after it. */
static void cuda_quiesce(void)
{
    if (symm_cuda.initialized) cudaDeviceSynchronize();
}

/* Every PE passed quiesce, pools are freed: unmap and free. */
static void cuda_finalize(void)
{
    if (symm_cuda.initialized) release_all();
}

/* Peers are mapped together by symm_cuda_init: opening a peer's IPC handle needs the
 * handle exchange, which is collective. */
static void cuda_unmap(int pe)
{
    if (!symm_cuda.peer_base || pe == symm_g.me || !symm_cuda.peer_base[pe]) return;
    cudaIpcCloseMemHandle(symm_cuda.peer_base[pe]);
    symm_cuda.peer_base[pe] = NULL;
}

/* A device pointer: loads and stores reach it from kernels (peer access), not from the
 * host. */
static void *cuda_ptr(const void *addr, int pe)
{
    return symm_gpu_ptr(addr, pe);
}

static symm_status_t cuda_copy(const char *fn, void *dest, const void *src, size_t n)
{
    cudaError_t e = cudaMemcpy(dest, src, n, cudaMemcpyDefault);
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

static symm_status_t cuda_put(void *dest, const void *src, size_t n, int pe)
{
    return n ? cuda_copy("cuda put", symm_gpu_ptr(dest, pe), src, n) : SYMM_SUCCESS;
}

static symm_status_t cuda_get(void *dest, const void *src, size_t n, int pe)
{
    return n ? cuda_copy("cuda get", dest, symm_gpu_ptr(src, pe), n) : SYMM_SUCCESS;
}

static symm_status_t cuda_sync(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error("cuda quiet", e);
}

/* Atomics and signals on GPU memory are device-side operations (symm_device.cuh):
 * the host table has none. */
static const symm_transport_ops_t cuda_transport = {
    .size = sizeof(symm_transport_ops_t),
    .name = "cuda",
    .quiesce = cuda_quiesce,
    .finalize = cuda_finalize,
    .unmap = cuda_unmap,
    .ptr = cuda_ptr,
    .put = cuda_put,
    .get = cuda_get,
    .fence = cuda_sync,
    .quiet = cuda_sync,
    .flush = cuda_sync,
};

int symm_cuda_initialized(void)
{
    return symm_cuda.initialized;
}
int symm_cuda_device(void)
{
    return symm_cuda.initialized ? symm_cuda.device : -1;
}
int symm_cuda_device_sharers(void)
{
    return symm_cuda.initialized ? symm_cuda.sharers : 1;
}

void *symm_gpu_ptr(const void *addr, int pe)
{
    if (!symm_cuda.initialized || pe < 0 || pe >= symm_g.npes || !symm_cuda_in_heap(addr, 1))
        return NULL;
    return symm_cuda.peer_base[pe] + ((const uint8_t *)addr - symm_cuda.base);
}

symm_status_t symm_cuda_get_info(symm_cuda_info_t *out)
{
    CHECK(symm_cuda_require(__func__));
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    pthread_mutex_lock(&symm_cuda.lock);
    out->heap_size = symm_cuda.heap_size;
    out->heap_used = symm_cuda.heap_arena.used;
    out->team_size = symm_cuda.team_size;
    out->team_used = symm_cuda.team_arena.used;
    pthread_mutex_unlock(&symm_cuda.lock);
    out->device = symm_cuda.device;
    out->sharers = symm_cuda.sharers;
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- launch and errors */
/* Blocks of kernel per SM, remembered: the library's stream calls ask on every launch
 * (to size the grid, then to check it), and the answer for (device, kernel, threads,
 * shared memory) does not change. 0 when it cannot be had. */
static int blocks_per_sm(const void *kernel, int threads, size_t shared_mem)
{
    /* room for symm's own kernels (tile: 12 types x 2 paths, MoE, collectives) and the
     * user's: a kernel not remembered asks the occupancy API on every launch */
    static struct {
        const void *kernel;
        int device, threads, per_sm;
        size_t smem;
    } memo[128];
    static int nmemo;
    static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
    int per_sm = -1;
    pthread_mutex_lock(&memo_lock);
    for (int i = 0; i < nmemo && per_sm < 0; i++)
        if (memo[i].kernel == kernel && memo[i].device == symm_cuda.device &&
            memo[i].threads == threads && memo[i].smem == shared_mem)
            per_sm = memo[i].per_sm;
    pthread_mutex_unlock(&memo_lock);
    if (per_sm >= 0) return per_sm;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, shared_mem) !=
        cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    pthread_mutex_lock(&memo_lock);
    if (nmemo < (int)(sizeof memo / sizeof memo[0])) {
        memo[nmemo].kernel = kernel;
        memo[nmemo].device = symm_cuda.device;
        memo[nmemo].threads = threads;
        memo[nmemo].smem = shared_mem;
        memo[nmemo].per_sm = per_sm;
        nmemo++;
    }
    pthread_mutex_unlock(&memo_lock);
    return per_sm;
}

int symm_cuda_sm_share(void)
{
    return symm_cuda.initialized ? symm_cuda.sm_share : 0;
}

symm_status_t symm_cuda_launch_admit(const char *fn, const void *kernel,
                                     unsigned long long blocks, int threads, int per_sm)
{
    CHECK(symm_cuda_require(fn));
    if (!kernel) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: kernel is NULL", fn);
    long long max = (long long)per_sm * symm_cuda.sm_share;
    if (blocks > (unsigned long long)max)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: a grid of %llu blocks of %d threads cannot be resident at "
                              "once on this PE's share of GPU %d (at most %lld: %d blocks per "
                              "SM on %d of the %d SMs this process sees, %d PEs on the GPU); "
                              "blocks that wait on peers would wait for ever",
                              fn, blocks, threads, symm_cuda.device, max, per_sm,
                              symm_cuda.sm_share, symm_cuda.sm_count, symm_cuda.sharers);
    return SYMM_SUCCESS;
}

symm_status_t symm_cuda_launch_failed(const char *fn, int cuda_error, const char *name,
                                      const char *text)
{
    return symm_error_set(SYMM_ERR_CUDA, "%s: CUDA error %d on PE %d (device %d): %s (%s)", fn,
                          cuda_error, symm_g.me, symm_cuda.device, text ? text : "?",
                          name ? name : "?");
}

/* pdl: launch with programmatic stream serialisation (symm's own kernels, which execute
 * griddepcontrol.wait before they read anything; SYMM_GPU_PDL=0 turns it off). */
static symm_status_t launch(const char *fn, const void *kernel, dim3 grid, dim3 block,
                            void **args, size_t shared_mem, cudaStream_t stream, int pdl)
{
    int threads = (int)(block.x * block.y * block.z);
    CHECK(symm_cuda_launch_admit(fn, kernel, (unsigned long long)grid.x * grid.y * grid.z,
                                 threads,
                                 kernel ? blocks_per_sm(kernel, threads, shared_mem) : 0));
    cudaError_t e;
    if (pdl && symm_config.gpu_pdl) {
        cudaLaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr.val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = shared_mem;
        cfg.stream = stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        e = cudaLaunchKernelExC(&cfg, kernel, args);
    } else {
        e = cudaLaunchKernel(kernel, grid, block, args, shared_mem, stream);
    }
    return e == cudaSuccess ? SYMM_SUCCESS : symm_cuda_error(fn, e);
}

symm_status_t symm_cuda_launch_pdl(const void *kernel, dim3 grid, dim3 block, void **args,
                                   size_t shared_mem, cudaStream_t stream)
{
    return launch("symm_cuda_launch_pdl", kernel, grid, block, args, shared_mem, stream, 1);
}

static const char *what_name(uint32_t w)
{
    static const char *const names[] = {
#define SYMM_DEV_WHAT_NAME_(e, s) s,
        SYMM_DEV_FOREACH_WHAT(SYMM_DEV_WHAT_NAME_)
#undef SYMM_DEV_WHAT_NAME_
    };
    return w < SYMM_DEV_WHAT_COUNT ? names[w] : "?";
}

symm_status_t symm_cuda_check(void)
{
    static const char fn[] = "symm_cuda_check";
    CHECK(symm_cuda_require(fn));
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return symm_cuda_error(fn, e);
    symm_dev_err_buf_t buf;
    e = cudaMemcpy(&buf, symm_cuda.err, sizeof buf, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return symm_cuda_error(fn, e);
    if (buf.count == 0) return SYMM_SUCCESS;
    static const uint32_t zero = 0;
    cudaMemcpy(&symm_cuda.err->count, &zero, sizeof zero, cudaMemcpyHostToDevice);
    const symm_dev_err_rec_t *r = &buf.rec[0];
    switch (r->status) {
    case SYMM_ERR_TEAM_BUSY:
        return symm_error_set(SYMM_ERR_TEAM_BUSY,
                              "device: block %u called %s on pool %u dup %u "
                              "while block %u (grid 0x%llx) of PE %d held that duplicate; give "
                              "each concurrent block its own duplicate "
                              "(symm_dev_pool_team(pool, blockIdx.x)) [%u device error(s)]",
                              r->block, what_name(r->what), r->pool_id, r->dup, r->other,
                              (unsigned long long)(r->holder >> 33), symm_g.me, buf.count);
    case SYMM_ERR_TIMEOUT:
        return symm_error_set(SYMM_ERR_TIMEOUT,
                              "device: block %u timed out in %s on pool %u "
                              "dup %u waiting for team PE %d (SYMM_TIMEOUT=%gs) [%u device "
                              "error(s)]",
                              r->block, what_name(r->what), r->pool_id, r->dup, (int)r->other,
                              symm_config.timeout, buf.count);
    default:
        return symm_error_set((symm_status_t)r->status,
                              "device: block %u: %s on pool %u dup %u: "
                              "%s [%u device error(s)]",
                              r->block, what_name(r->what), r->pool_id, r->dup,
                              symm_strerror((symm_status_t)r->status), buf.count);
    }
}
