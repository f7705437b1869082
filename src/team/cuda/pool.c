/* pool.c — GPU state of teams and pools. A pool object (src/team) gets, on every member,
 * sync blocks in that member's GPU team region, created or extended in one exchange of
 * region offsets on the pool's control duplicate: O(1) collective rounds whatever the
 * number of duplicates. Device tables (chunk of each duplicate, member bases, heap
 * deltas) live in the team region too, so a pool costs no cudaMalloc. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/cuda/cuda_pool.h"

/* A duplicate's block: header and flags, then `extra` bytes (a multiple of 64) of
 * staging (the latency path's engine, cuda_pool_dev.h). */
static uint32_t gpu_block_size(int n, uint32_t extra)
{
    size_t s = SYMM_DEV_BLOCK_HDR + 8 * (size_t)n;
    s = (s + SYMM_DEV_BLOCK_ALIGN - 1) & ~(size_t)(SYMM_DEV_BLOCK_ALIGN - 1);
    return (uint32_t)(s + extra);
}

static void engines_destroy(symm_cuda_pool_t *g);

/* Waits for every kernel of this PE: its peers may free their blocks right after the
 * destroy exchange, and our kernels must not write into them any more. The engines of
 * the duplicates go first (every member has made the same ones). */
static void pool_quiesce(symm_pool_obj_t *p)
{
    cudaDeviceSynchronize();
    if (p->gpu) engines_destroy(p->gpu);
}

static void pool_release(symm_pool_obj_t *p)
{
    symm_cuda_pool_t *g = p->gpu;
    if (!g) return;
    p->gpu = NULL;
    if (symm_cuda.initialized) {
        cudaDeviceSynchronize();
        for (size_t i = 0; i < g->nchunks; i++) {
            symm_cuda_region_free(g->chunks[i].my_off);
            symm_cuda_region_free(g->chunks[i].bases_off);
        }
        if (g->nchunks) symm_cuda_region_free(g->delta_off);
        if (g->nchunks) symm_cuda_region_free(g->tables_off);
        for (size_t i = 0; i < g->nretired; i++)
            symm_cuda_region_free(g->retired[i]);
    }
    /* engines left here (finalize) are pool objects of their own, freed as such */
    for (size_t i = 0; i < g->nengines; i++)
        free(g->engines[i]);
    free(g->engines);
    free(g->chunks);
    free(g->retired);
    free(g);
}

const symm_team_pool_hooks_t symm_cuda_pool_hooks = {
    .pool_quiesce = pool_quiesce,
    .pool_release = pool_release,
};

/* Adds GPU state for duplicates [g->size, size of p): allocate and zero my blocks, one
 * exchange of offsets on the control duplicate, then upload new tables. */
static symm_status_t extend(symm_pool_obj_t *p, symm_cuda_pool_t *g)
{
    static const char fn[] = "GPU pool state";
    size_t target = atomic_load(&p->size), first = g->size, count = target - first;
    size_t n = (size_t)p->n;
    symm_status_t st = SYMM_SUCCESS;
    uint64_t my_off = UINT64_MAX, bases_off = UINT64_MAX, tables_off = UINT64_MAX;
    uint64_t delta_off = g->nchunks ? g->delta_off : UINT64_MAX;
    size_t nch = g->nchunks + 1;
    size_t tab_bytes =
        ((target * sizeof(uint32_t) + 15) & ~(size_t)15) + nch * sizeof(symm_dev_chunk_t);
    uint8_t *host = NULL;
    symm_cuda_chunk_t *chunks = realloc(g->chunks, nch * sizeof *chunks);
    if (!chunks) return symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    g->chunks = chunks;
    if (symm_cuda_region_alloc(count * g->block_size, &my_off) ||
        symm_cuda_region_alloc(n * sizeof(uint8_t *), &bases_off) ||
        symm_cuda_region_alloc(tab_bytes, &tables_off) ||
        (!g->nchunks && symm_cuda_region_alloc(n * sizeof(int64_t), &delta_off))) {
        st = symm_error_set(SYMM_ERR_NO_MEMORY,
                            "%s: %zu duplicates of %d members do not fit "
                            "in the GPU team region (%zu bytes)",
                            fn, count, p->n, symm_cuda.team_size);
    }
    if (!st) {
        cudaError_t e = cudaMemsetAsync(symm_cuda_team_ptr(my_off), 0, count * g->block_size,
                                        symm_cuda.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(symm_cuda.stream);
        if (e != cudaSuccess) st = symm_cuda_error(fn, e);
    }
    /* The exchange: my blocks are zeroed before any peer can learn where they are. */
    uint64_t *recv = malloc(n * sizeof *recv);
    if (!recv && !st) st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    symm_coll_t c;
    symm_team_t h = symm_team_handle(p, 0, p->kind == SYMM_KIND_POOL);
    symm_status_t xst = symm_coll_enter_dup(p, p->ctl, h, "gpu_pool", target, &c);
    if (!xst) {
        uint64_t scratch;
        xst = symm_coll_exchange(&c, NULL, st ? UINT64_MAX : my_off, recv ? recv : &scratch);
        symm_coll_leave(&c);
    }
    if (!st) st = xst;
    for (size_t j = 0; j < n && !st; j++)
        if (recv[j] == UINT64_MAX)
            st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: failed on world PE %d", fn,
                                p->world[j]);
    /* Device tables, one upload: [member bases of the new chunk][deltas][dup_chunk][chunks]. */
    size_t host_bytes = n * sizeof(uint8_t *) + n * sizeof(int64_t) + tab_bytes;
    if (!st && !(host = calloc(1, host_bytes)))
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "%s", fn);
    if (!st) {
        uint8_t **bases = (uint8_t **)host;
        int64_t *delta = (int64_t *)(host + n * sizeof(uint8_t *));
        uint8_t *tab = host + n * sizeof(uint8_t *) + n * sizeof(int64_t);
        uint32_t *dup_chunk = (uint32_t *)tab;
        symm_dev_chunk_t *dch =
            (symm_dev_chunk_t *)(tab + ((target * sizeof(uint32_t) + 15) & ~(size_t)15));
        for (size_t j = 0; j < n; j++) {
            int w = p->world[j];
            bases[j] = symm_cuda.peer_base[w] + symm_cuda.heap_size + recv[j];
            delta[j] = symm_cuda.delta[w];
        }
        if (!g->nchunks && n <= SYMM_CUDA_FAST_MAX) {
            g->fast.count = (uint32_t)count;
            g->fast.block_size = g->block_size;
            for (size_t j = 0; j < n; j++) {
                g->fast.base[j] = bases[j];
                g->fast.delta[j] = delta[j];
            }
        }
        chunks[g->nchunks] = (symm_cuda_chunk_t){my_off, bases_off, first, count};
        for (size_t k = 0; k < nch; k++) {
            dch[k].member_base = (uint8_t *const *)symm_cuda_team_ptr(chunks[k].bases_off);
            dch[k].first = (uint32_t)chunks[k].first;
            dch[k].count = (uint32_t)chunks[k].count;
            for (size_t i = chunks[k].first; i < chunks[k].first + chunks[k].count; i++)
                dup_chunk[i] = (uint32_t)k;
        }
        cudaError_t e =
            cudaMemcpyAsync(symm_cuda_team_ptr(bases_off), bases, n * sizeof(uint8_t *),
                            cudaMemcpyHostToDevice, symm_cuda.stream);
        if (e == cudaSuccess && !g->nchunks)
            e = cudaMemcpyAsync(symm_cuda_team_ptr(delta_off), delta, n * sizeof(int64_t),
                                cudaMemcpyHostToDevice, symm_cuda.stream);
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(symm_cuda_team_ptr(tables_off), tab, tab_bytes,
                                cudaMemcpyHostToDevice, symm_cuda.stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(symm_cuda.stream);
        if (e != cudaSuccess) st = symm_cuda_error(fn, e);
    }
    free(host);
    free(recv);
    if (st) {
        /* Peers that succeeded may hold our offset, but a failed exchange means nobody
         * attaches: every member sees the same failure. */
        if (my_off != UINT64_MAX) symm_cuda_region_free(my_off);
        if (bases_off != UINT64_MAX) symm_cuda_region_free(bases_off);
        if (tables_off != UINT64_MAX) symm_cuda_region_free(tables_off);
        if (!g->nchunks && delta_off != UINT64_MAX) symm_cuda_region_free(delta_off);
        return st;
    }
    /* Kernels launched with the old tables may still run: retire them with the pool. */
    if (g->nchunks) {
        uint64_t *r = realloc(g->retired, (g->nretired + 1) * sizeof *r);
        if (r) {
            g->retired = r;
            g->retired[g->nretired++] = g->tables_off;
        } /* else the old tables are simply kept (leaked into the region) until finalize */
    }
    g->delta_off = delta_off;
    g->tables_off = tables_off;
    g->nchunks = nch;
    g->size = target;
    symm_dev_pool_t *d = &g->dev;
    d->dup_chunk = (const uint32_t *)symm_cuda_team_ptr(tables_off);
    d->chunks = (const symm_dev_chunk_t *)(symm_cuda_team_ptr(tables_off) +
                                           ((target * sizeof(uint32_t) + 15) & ~(size_t)15));
    d->heap_delta = (const int64_t *)symm_cuda_team_ptr(delta_off);
    d->err = symm_cuda.err;
    d->timeout_ns = symm_cuda.timeout_ns;
    d->size = (uint32_t)target;
    d->block_size = g->block_size;
    d->n = p->n;
    d->me = p->me;
    d->pool_id = p->slot;
    /* Every member on my GPU (PEs sharing it under MPS): rounds at GPU scope. */
    int one_gpu = !symm_config.gpu_sync_sys;
    for (size_t j = 0; j < (size_t)p->n && one_gpu; j++)
        one_gpu = symm_cuda.same_gpu[p->world[j]];
    d->flags = one_gpu ? SYMM_DEV_ONE_GPU : 0;
    return SYMM_SUCCESS;
}

/* Whether stream is being captured into a CUDA graph. */
static int capturing(cudaStream_t stream)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

symm_status_t symm_cuda_pool_attach_on(symm_pool_obj_t *p, const char *fn, cudaStream_t stream)
{
    symm_cuda_pool_t *g = p->gpu;
    if (p->me >= 0 && g && g->size >= atomic_load(&p->size)) return SYMM_SUCCESS;
    if (capturing(stream))
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "%s: the pool (or team) has no GPU state for all its duplicates "
                              "yet, and making it is a collective exchange through the host, "
                              "which a CUDA graph capture cannot hold; make it before the "
                              "capture (symm_cuda_pool_device, symm_cuda_team_device, or one "
                              "call outside the capture)",
                              fn);
    return symm_cuda_pool_attach(p);
}

static symm_status_t attach_sized(symm_pool_obj_t *p, uint32_t extra)
{
    if (p->me < 0)
        return symm_error_set(SYMM_ERR_NOT_MEMBER, "GPU pool state: PE %d is not a member",
                              symm_g.me);
    symm_cuda_pool_t *g = p->gpu;
    if (g && g->size >= atomic_load(&p->size)) return SYMM_SUCCESS;
    int fresh = !g;
    if (fresh) {
        g = calloc(1, sizeof *g);
        if (!g) return symm_error_set(SYMM_ERR_NO_MEMORY, "GPU pool state");
        g->block_size = gpu_block_size(p->n, extra);
    }
    symm_status_t st = extend(p, g);
    if (st) {
        if (fresh) {
            free(g->chunks);
            free(g);
        }
        return st;
    }
    p->gpu = g;
    return SYMM_SUCCESS;
}

symm_status_t symm_cuda_pool_attach(symm_pool_obj_t *p)
{
    return attach_sized(p, 0);
}

void symm_cuda_dev_team(const symm_pool_obj_t *p, size_t i, symm_dev_team_t *out)
{
    const symm_cuda_pool_t *g = p->gpu;
    const symm_cuda_chunk_t *ch = NULL;
    for (size_t k = 0; k < g->nchunks && !ch; k++)
        if (i >= g->chunks[k].first && i < g->chunks[k].first + g->chunks[k].count)
            ch = &g->chunks[k];
    memset(out, 0, sizeof *out);
    out->heap_delta = g->dev.heap_delta;
    out->err = symm_cuda.err;
    out->timeout_ns = symm_cuda.timeout_ns;
    out->me = p->me;
    out->dup = (uint32_t)i;
    out->pool_id = p->slot;
    out->flags = g->dev.flags;
    if (!ch) return; /* n == 0: invalid */
    out->member_base = (uint8_t *const *)symm_cuda_team_ptr(ch->bases_off);
    out->off = (uint64_t)(i - ch->first) * g->block_size;
    out->n = p->n;
}

/* ---------------------------------------------------------------- engines */
static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;

static symm_cuda_engine_t *engine_get(symm_cuda_pool_t *g, size_t i)
{
    pthread_mutex_lock(&engine_lock);
    symm_cuda_engine_t *e = i < g->nengines ? g->engines[i] : NULL;
    pthread_mutex_unlock(&engine_lock);
    return e;
}

static symm_status_t engine_put(symm_cuda_pool_t *g, size_t i, symm_cuda_engine_t *e)
{
    symm_status_t st = SYMM_SUCCESS;
    pthread_mutex_lock(&engine_lock);
    if (i >= g->nengines) {
        size_t n = i + 1 > 2 * g->nengines ? i + 1 : 2 * g->nengines;
        symm_cuda_engine_t **a = realloc(g->engines, n * sizeof *a);
        if (a) {
            memset(a + g->nengines, 0, (n - g->nengines) * sizeof *a);
            g->engines = a;
            g->nengines = n;
        }
    }
    if (i < g->nengines)
        g->engines[i] = e;
    else
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "stream collectives: engine table");
    pthread_mutex_unlock(&engine_lock);
    return st;
}

/* Destroys the engine's pools (collective) and leaves it empty (ok == 0). */
static void engine_drop(symm_cuda_engine_t *e)
{
    if (e->bw_pool > 0) symm_pool_destroy(e->bw_pool);
    if (e->ll_pool > 0) symm_pool_destroy(e->ll_pool);
    memset(e, 0, sizeof *e);
}

static void engine_free(symm_cuda_engine_t *e)
{
    engine_drop(e);
    free(e);
}

static void engines_destroy(symm_cuda_pool_t *g)
{
    pthread_mutex_lock(&engine_lock);
    symm_cuda_engine_t **a = g->engines;
    size_t n = g->nengines;
    g->engines = NULL;
    g->nengines = 0;
    pthread_mutex_unlock(&engine_lock);
    for (size_t i = 0; i < n; i++)
        if (a[i]) engine_free(a[i]);
    free(a);
}

/* A pool of dups duplicates of team with GPU state whose blocks carry extra bytes. */
static symm_status_t engine_pool(symm_team_t team, size_t dups, uint32_t extra,
                                 symm_pool_t *out, symm_pool_obj_t **obj)
{
    CHECK(symm_pool_create(team, dups, out));
    *obj = symm_handle_resolve(*out);
    return attach_sized(*obj, extra);
}

/* Makes the engine of team (collective over its members). A failure to make it is the
 * same on every member (pool creation and GPU state agree through their exchanges): the
 * engine is then kept with ok == 0, and the calls use the team's own duplicate. */
static symm_cuda_engine_t *engine_make(const char *fn, symm_team_t team)
{
    symm_cuda_engine_t *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    symm_pool_obj_t *bw = NULL, *ll = NULL;
    symm_status_t st = engine_pool(team, SYMM_CUDA_ENGINE_DUPS, 0, &e->bw_pool, &bw);
    if (!st) st = engine_pool(team, 1, 2 * SYMM_CUDA_LL_BYTES, &e->ll_pool, &ll);
    if (st) {
        SYMM_WARN("%s: no room for the multi-block engine of this team (%s); its stream "
                  "collectives run on one block",
                  fn, symm_last_error());
        engine_drop(e);
        return e;
    }
    const symm_cuda_pool_t *g = bw->gpu;
    e->bw = g->dev;
    e->bw_fast = g->fast;
    symm_cuda_dev_team(ll, 0, &e->ll);
    e->ok = 1;
    return e;
}

symm_status_t symm_cuda_team_engine(const char *fn, symm_pool_obj_t *p, symm_team_t team,
                                    cudaStream_t stream, symm_cuda_engine_t *out)
{
    symm_cuda_pool_t *g = p->gpu;
    const size_t i = (size_t)(team & SYMM_H_DUP_MASK);
    symm_cuda_engine_t *e = engine_get(g, i);
    if (!e) {
        if (capturing(stream))
            return symm_error_set(SYMM_ERR_UNSUPPORTED,
                                  "%s: this is the team's first collective on a stream, which "
                                  "makes its GPU state through a collective exchange on the "
                                  "host that a CUDA graph capture cannot hold; make one call "
                                  "on the team (symm_barrier_on_stream) before the capture",
                                  fn);
        if (!(e = engine_make(fn, team)))
            return symm_error_set(SYMM_ERR_NO_MEMORY, "%s: stream collective engine", fn);
        symm_status_t st = engine_put(g, i, e);
        if (st) {
            engine_free(e);
            return st;
        }
    }
    *out = *e;
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- public */
symm_status_t symm_cuda_pool_create(symm_team_t team, size_t n, symm_pool_t *out)
{
    CHECK(symm_cuda_require(__func__));
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    symm_pool_t pool;
    CHECK(symm_pool_create(team, n, &pool));
    symm_pool_obj_t *p = symm_handle_resolve(pool);
    symm_status_t st = symm_cuda_pool_attach(p);
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s", symm_last_error());
        symm_pool_destroy(pool);
        return symm_error_set(st, "%s", why);
    }
    *out = pool;
    return SYMM_SUCCESS;
}

symm_status_t symm_cuda_pool_device_fast(const char *fn, symm_pool_t pool, symm_dev_pool_t *out,
                                         symm_cuda_fast_t *fast, cudaStream_t stream)
{
    CHECK(symm_cuda_require(fn));
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", fn);
    symm_pool_obj_t *p = (pool & SYMM_H_POOL_BIT) ? symm_handle_resolve(pool) : NULL;
    if (!p)
        return symm_error_set(SYMM_ERR_TEAM_INVALID,
                              "%s: pool handle 0x%llx is invalid or "
                              "was destroyed",
                              fn, (unsigned long long)pool);
    CHECK(symm_cuda_pool_attach_on(p, fn, stream));
    *out = ((symm_cuda_pool_t *)p->gpu)->dev;
    if (fast) *fast = ((symm_cuda_pool_t *)p->gpu)->fast;
    return SYMM_SUCCESS;
}

symm_status_t symm_cuda_pool_device(symm_pool_t pool, symm_dev_pool_t *out)
{
    return symm_cuda_pool_device_fast(__func__, pool, out, NULL, 0);
}

symm_status_t symm_cuda_team_device(symm_team_t team, symm_dev_team_t *out)
{
    CHECK(symm_cuda_require(__func__));
    if (!out) return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: out is NULL", __func__);
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK(symm_team_lookup(__func__, team, &p, &d));
    CHECK(symm_cuda_pool_attach(p));
    symm_cuda_dev_team(p, (size_t)(team & SYMM_H_DUP_MASK), out);
    return SYMM_SUCCESS;
}
