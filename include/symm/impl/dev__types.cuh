/* dev__types.cuh — the plain-data types that symm's device API passes to kernels by
 * value: a pool (symm_dev_pool_t), one duplicate of it (symm_dev_team_t), and the
 * per-PE device error buffer. Included by symm_device.cuh and, for the layout only, by
 * the host side of the CUDA transport (these types are valid C as well as CUDA C++). */
#ifndef SYMM_IMPL_DEV__TYPES_CUH
#define SYMM_IMPL_DEV__TYPES_CUH

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A duplicate's sync block, on every member, in that member's GPU team region:
 *   [0]  claim word (64 bits): (episode counter of this member << 1) | held
 *   [8]  the tag of the block (warp, thread) holding the duplicate here, 0 when free
 *   [16] mailbox (2 words): what the holder tells its peers in a call, written before the
 *        call's first round and read by the peers after it (a rooted tile reduce's root
 *        publishes where its out is, so that every member reduces a share straight into it)
 *   [32] flag[n]: flag[k] = last episode member k signalled to this member
 * rounded up to SYMM_DEV_BLOCK_ALIGN bytes: 32 + 8 n bytes per member per duplicate. */
#define SYMM_DEV_BLOCK_MAILBOX 16
#define SYMM_DEV_BLOCK_HDR     32
#define SYMM_DEV_BLOCK_ALIGN   64

/* What a device call was doing when it failed (for the host's message). */
#define SYMM_DEV_FOREACH_WHAT(X)                                                               \
    X(SYMM_DEV_WHAT_CLAIM, "claim")                                                            \
    X(SYMM_DEV_WHAT_BARRIER, "barrier")                                                        \
    X(SYMM_DEV_WHAT_SYNC, "sync")                                                              \
    X(SYMM_DEV_WHAT_BROADCAST, "broadcast")                                                    \
    X(SYMM_DEV_WHAT_REDUCE, "reduce")                                                          \
    X(SYMM_DEV_WHAT_ALLREDUCE, "allreduce")                                                    \
    X(SYMM_DEV_WHAT_FCOLLECT, "fcollect")                                                      \
    X(SYMM_DEV_WHAT_ALLTOALL, "alltoall")                                                      \
    X(SYMM_DEV_WHAT_SIGNAL_WAIT, "signal_wait")                                                \
    X(SYMM_DEV_WHAT_TILE, "tile_reduce")                                                       \
    X(SYMM_DEV_WHAT_MOE, "moe all-to-all-v")

typedef enum {
#define SYMM_DEV_WHAT_ENUM_(e, s) e,
    SYMM_DEV_FOREACH_WHAT(SYMM_DEV_WHAT_ENUM_)
#undef SYMM_DEV_WHAT_ENUM_
        SYMM_DEV_WHAT_COUNT
} symm_dev_what_t;

/* One device-side error, written by the block that met it. */
typedef struct symm_dev_err_rec {
    int32_t status;   /* symm_status_t: SYMM_ERR_TEAM_BUSY, SYMM_ERR_TIMEOUT, ... */
    uint32_t what;    /* symm_dev_what_t */
    uint32_t pool_id; /* host pool slot (names the pool in the message) */
    uint32_t dup;     /* duplicate number */
    uint32_t block;   /* linear block index of the reporting block */
    uint32_t other;   /* BUSY: block index of the holder; TIMEOUT: team PE not arrived */
    uint64_t holder;  /* BUSY: the holder's tag (grid id << 24 | block + 1) */
} symm_dev_err_rec_t;

#define SYMM_DEV_ERR_MAX 16
typedef struct symm_dev_err_buf {
    uint32_t count; /* errors met (records kept: the first SYMM_DEV_ERR_MAX) */
    uint32_t pad;
    symm_dev_err_rec_t rec[SYMM_DEV_ERR_MAX];
} symm_dev_err_buf_t;

/* symm_dev_pool_t.flags: every member's heap is on this PE's GPU (PEs sharing one GPU
 * under MPS), so the rounds' flags are stored and read at GPU scope (st.release.gpu /
 * ld.acquire.gpu: ordered at the GPU's L2, without the system-scope fences a peer on
 * another GPU needs). SYMM_GPU_SYNC_SYS=1 keeps system scope. */
#define SYMM_DEV_ONE_GPU 1u

/* Duplicates made by one creation or growth: their blocks are contiguous on every
 * member, at member_base[j] (member j's chunk, as mapped in this process). */
typedef struct symm_dev_chunk {
    uint8_t *const *member_base; /* device array [n] */
    uint32_t first;              /* first duplicate of the chunk */
    uint32_t count;
} symm_dev_chunk_t;

/* A pool on the device, passed to kernels by value. Block b uses duplicate b:
 * symm_dev_pool_team(pool, blockIdx.x) is two dependent loads. */
typedef struct symm_dev_pool {
    const uint32_t *dup_chunk;      /* [size]: chunk index of each duplicate */
    const symm_dev_chunk_t *chunks; /* [nchunks] */
    const int64_t *heap_delta;      /* [n]: member j's GPU heap address - mine */
    symm_dev_err_buf_t *err;        /* this PE's device error buffer */
    uint64_t timeout_ns;            /* bound on every device wait (SYMM_TIMEOUT) */
    uint32_t size;                  /* duplicates */
    uint32_t block_size;            /* bytes per duplicate per member */
    int32_t n, me;                  /* members; my team number */
    uint32_t pool_id;
    uint32_t flags; /* SYMM_DEV_ONE_GPU */
} symm_dev_pool_t;

/* One duplicate (a team) on the device: what a collective needs, resolved. */
typedef struct symm_dev_team {
    uint8_t *const *member_base; /* [n] chunk base on each member (mapped here) */
    uint64_t off;                /* this duplicate's block offset inside the chunk */
    const int64_t *heap_delta;   /* [n] */
    symm_dev_err_buf_t *err;
    uint64_t timeout_ns;
    int32_t n, me; /* n == 0: invalid team (index out of range) */
    uint32_t dup, pool_id;
    uint32_t flags, pad; /* the pool's flags */
} symm_dev_team_t;

#ifdef __cplusplus
}
#endif
#endif
