/* cuda_pool.h — the GPU state of a pool object (symm_pool_obj_t.gpu): sync blocks of
 * every duplicate in each member's GPU team region, and the device tables that let a
 * kernel find duplicate i in O(1). Looked after through the team layer's pool hooks. */
#ifndef SYMM_TEAM_CUDA_POOL_H
#define SYMM_TEAM_CUDA_POOL_H

#include "team/cuda/cuda_pool_dev.h"
#include "team/team.h"
#include "transport/cuda/cuda_transport.h"

/* A chunk of duplicates on the GPU (one creation or growth). */
typedef struct symm_cuda_chunk {
    uint64_t my_off;    /* my blocks in my team region */
    uint64_t bases_off; /* device array [n] of member bases */
    size_t first, count;
} symm_cuda_chunk_t;

/* GPU state of one pool object. */
typedef struct symm_cuda_pool {
    size_t size; /* duplicates with GPU state */
    uint32_t block_size;
    symm_cuda_chunk_t *chunks;
    size_t nchunks;
    uint64_t delta_off;  /* device array [n] of heap deltas */
    uint64_t tables_off; /* current dup_chunk + chunks tables */
    uint64_t *retired;   /* earlier tables: kernels launched before a growth use them */
    size_t nretired;
    symm_dev_pool_t dev;
    symm_cuda_fast_t fast; /* the first chunk, for kernel parameters (cuda_pool_dev.h) */
    /* [nengines] the engines of the duplicates (cuda_pool_dev.h), NULL where none yet */
    symm_cuda_engine_t **engines;
    size_t nengines;
} symm_cuda_pool_t;

/* Ensures p's GPU state covers all of its duplicates (collective over the members
 * when it does not). */
symm_status_t symm_cuda_pool_attach(symm_pool_obj_t *p);
/* The same for a call that enqueues on stream: SYMM_ERR_UNSUPPORTED, naming fn, when the
 * state must be made while stream is being captured into a CUDA graph. */
symm_status_t symm_cuda_pool_attach_on(symm_pool_obj_t *p, const char *fn, cudaStream_t stream);
/* The engine (cuda_pool_dev.h) of team, duplicate team & SYMM_H_DUP_MASK of p, whose GPU
 * state is attached: made if needed (collective; SYMM_ERR_UNSUPPORTED, naming fn, while
 * stream is captured), copied into *out. */
symm_status_t symm_cuda_team_engine(const char *fn, symm_pool_obj_t *p, symm_team_t team,
                                    cudaStream_t stream, symm_cuda_engine_t *out);
/* The device value of duplicate i of p (state attached). */
void symm_cuda_dev_team(const symm_pool_obj_t *p, size_t i, symm_dev_team_t *out);
/* Quiesce and release of a pool's GPU state, for symm_team_pool_hooks_register. */
extern const symm_team_pool_hooks_t symm_cuda_pool_hooks;

#endif
