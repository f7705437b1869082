/* cuda_pool_dev.h — a pool's GPU state as the stream collectives (CUDA C++) see it; kept
 * apart from cuda_pool.h, which pulls in C11-only headers (stdatomic). */
#ifndef SYMM_TEAM_CUDA_POOL_DEV_H
#define SYMM_TEAM_CUDA_POOL_DEV_H

#include "symm_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pool's first chunk of duplicates as kernel parameters: symm's stream kernels resolve
 * duplicate b < count from these (no loads of the pool's tables) when n <= the maximum. */
#define SYMM_CUDA_FAST_MAX 8
typedef struct symm_cuda_fast {
    uint32_t count;      /* duplicates [0, count) are in the first chunk; 0: none */
    uint32_t block_size; /* bytes per duplicate per member */
    uint8_t *base[SYMM_CUDA_FAST_MAX]; /* member j's chunk base, as mapped here */
    int64_t delta[SYMM_CUDA_FAST_MAX]; /* member j's GPU heap address - mine */
} symm_cuda_fast_t;
/* symm_cuda_pool_device for fn, a call that enqueues on stream (refused while stream is
 * captured if the pool's GPU state must be made), and (fast != NULL) the pool's first
 * chunk in *fast (count 0 when the pool has more than SYMM_CUDA_FAST_MAX members): one
 * lookup of the handle. */
symm_status_t symm_cuda_pool_device_fast(const char *fn, symm_pool_t pool, symm_dev_pool_t *out,
                                         symm_cuda_fast_t *fast, cudaStream_t stream);

/* The engine of a team's stream collectives (coll/cuda/coll.cu), made on every member at
 * the team's first stream call (a collective exchange through the host, so refused while
 * the stream is captured) and destroyed with the team:
 * - bw: a pool of SYMM_CUDA_ENGINE_DUPS duplicates of the team, one per block of the
 *   multi-block kernels (the tile and copy kernels of tile_moe.cu);
 * - ll: duplicate 0 of a one-duplicate pool whose block carries, after its flags, two
 *   staging areas of SYMM_CUDA_LL_BYTES (by episode parity) for the latency path: 8-byte
 *   words of 4 data bytes and an episode, so about 4 KiB of data each.
 * ok == 0 when it could not be made (the GPU team region is full): the calls then run on
 * one block of the team's own duplicate. */
#define SYMM_CUDA_ENGINE_DUPS 128
#define SYMM_CUDA_LL_BYTES    8192
typedef struct symm_cuda_engine {
    int ok;
    symm_pool_t bw_pool, ll_pool;
    symm_dev_pool_t bw;
    symm_cuda_fast_t bw_fast;
    symm_dev_team_t ll;
} symm_cuda_engine_t;

#ifdef __cplusplus
}
#endif
#endif
