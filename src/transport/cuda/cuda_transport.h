/* cuda_transport.h — internal state of the GPU transport: this PE's GPU allocation
 * (user heap, then the team region that holds pool sync blocks, device tables and the
 * error buffer) and the peers' allocations as mapped through CUDA IPC. The GPU state of
 * a pool (team/cuda/cuda_pool.h) is allocated in the team region. */
#ifndef SYMM_TRANSPORT_CUDA_H
#define SYMM_TRANSPORT_CUDA_H

#include <cuda_runtime_api.h>
#include <pthread.h>

#include "core/arena.h"
#include "symm_cuda.h"
#include "transport/cuda/cuda_launch.h"

/* GPU team region per PE: sync blocks (32 + 8 n bytes per duplicate per member) and
 * device tables; 64 MiB holds about a million duplicates of a 4-PE team. */
#define SYMM_CUDA_TEAM_REGION ((size_t)64 << 20)

typedef struct symm_cuda_state {
    int initialized;
    int device;
    int sharers;   /* PEs of the node on my GPU */
    int sm_count;  /* SMs the device reports to this process */
    int sm_share;  /* of them, the ones this PE counts on (symm_cuda_sm_share) */
    uint8_t *base; /* my allocation: [0, heap_size) heap, then the team region */
    size_t heap_size, team_size;
    uint8_t **peer_base; /* [npes] every PE's allocation as mapped here (mine = base) */
    int64_t *delta;      /* [npes] peer_base[j] - base */
    uint8_t *same_gpu;   /* [npes] 1: PE j's heap is on my GPU (same PCI bus id) */
    symm_arena_t heap_arena, team_arena;
    pthread_mutex_t lock; /* both arenas */
    symm_dev_err_buf_t *err;
    cudaStream_t stream; /* internal: zeroing and table uploads */
    uint64_t timeout_ns;
} symm_cuda_state_t;

extern symm_cuda_state_t symm_cuda;

static inline uint8_t *symm_cuda_team_ptr(uint64_t off)
{
    return symm_cuda.base + symm_cuda.heap_size + off;
}

symm_status_t symm_cuda_require(const char *fn);
/* Bytes of the team region at *off (256-aligned): 0 on success. */
int symm_cuda_region_alloc(size_t size, uint64_t *off);
void symm_cuda_region_free(uint64_t off);
/* Brings the GPU transport up (collective over all PEs): device, heap, IPC mapping of
 * every peer, error buffer; registers it in the transport table. fn names the caller. */
symm_status_t symm_cuda_transport_init(const char *fn);
/* 1 if [p, p+n) lies in my GPU heap. */
int symm_cuda_in_heap(const void *p, size_t n);

#endif
