/* cuda_transport.h — internal state of the GPU transport: this PE's GPU allocation
 * (user heap, then the team region that holds pool sync blocks, device tables and the
 * error buffer), the peers' allocations as mapped through CUDA IPC, and the GPU state
 * that a pool object carries (symm_pool_obj_t.gpu). */
#ifndef SYMM_TRANSPORT_CUDA_H
#define SYMM_TRANSPORT_CUDA_H

#include <pthread.h>
#include <cuda_runtime_api.h>

#include "core/arena.h"
#include "symm_cuda.h"
#include "transport/cuda/cuda_coll.h"
#include "team/team.h"

/* GPU team region per PE: sync blocks (32 + 8 n bytes per duplicate per member) and
 * device tables; 64 MiB holds about a million duplicates of a 4-PE team. */
#define SYMM_CUDA_TEAM_REGION ((size_t)64 << 20)

typedef struct symm_cuda_state {
    int initialized;
    int device;
    int sharers;          /* PEs of the node on my GPU */
    int sm_count;
    uint8_t *base;        /* my allocation: [0, heap_size) heap, then the team region */
    size_t heap_size, team_size;
    uint8_t **peer_base;  /* [npes] every PE's allocation as mapped here (mine = base) */
    int64_t *delta;       /* [npes] peer_base[j] - base */
    uint8_t *same_gpu;    /* [npes] 1: PE j's heap is on my GPU (same PCI bus id) */
    symm_arena_t heap_arena, team_arena;
    pthread_mutex_t lock; /* both arenas */
    symm_dev_err_buf_t *err;
    cudaStream_t stream;  /* internal: zeroing and table uploads */
    uint64_t timeout_ns;
} symm_cuda_state_t;

extern symm_cuda_state_t symm_cuda;

/* A chunk of duplicates on the GPU (one creation or growth). */
typedef struct symm_cuda_chunk {
    uint64_t my_off;    /* my blocks in my team region */
    uint64_t bases_off; /* device array [n] of member bases */
    size_t first, count;
} symm_cuda_chunk_t;

/* GPU state of one pool object. */
typedef struct symm_cuda_pool {
    size_t size;             /* duplicates with GPU state */
    uint32_t block_size;
    symm_cuda_chunk_t *chunks;
    size_t nchunks;
    uint64_t delta_off;      /* device array [n] of heap deltas */
    uint64_t tables_off;     /* current dup_chunk + chunks tables */
    uint64_t *retired;       /* earlier tables: kernels launched before a growth use them */
    size_t nretired;
    symm_dev_pool_t dev;
    symm_cuda_fast_t fast;   /* the first chunk, for kernel parameters (cuda_coll.h) */
} symm_cuda_pool_t;

static inline uint8_t *symm_cuda_team_ptr(uint64_t off)
{
    return symm_cuda.base + symm_cuda.heap_size + off;
}

symm_status_t symm_cuda_error(const char *fn, cudaError_t e);
symm_status_t symm_cuda_require(const char *fn);
/* Ensures p's GPU state covers all of its duplicates (collective over the members
 * when it does not). */
symm_status_t symm_cuda_pool_attach(symm_pool_obj_t *p);
void symm_cuda_pool_release(symm_pool_obj_t *p);
void symm_cuda_pool_quiesce(symm_pool_obj_t *p);
/* The device value of duplicate i of p (state attached). */
void symm_cuda_dev_team(const symm_pool_obj_t *p, size_t i, symm_dev_team_t *out);
/* 1 if [p, p+n) lies in my GPU heap. */
int symm_cuda_in_heap(const void *p, size_t n);

#endif
