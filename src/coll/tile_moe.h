/* tile_moe.h — what tile.c and moe.c share: running one operation over several worker
 * threads of a PE (one pool duplicate each), band splitting and the pre-entry checks
 * of the worker forms. */
#ifndef SYMM_COLL_TILE_MOE_H
#define SYMM_COLL_TILE_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"
#include "symm/impl/plan__tile.h"
#include "team/team.h"

/* One worker's share of an operation: called with duplicate `worker` of the pool. */
typedef symm_status_t (*symm_worker_fn_t)(symm_pool_t pool, int worker, int nworkers,
                                          void *arg);

/* The automatic worker count (nworkers == 0 in the _parallel forms), the same on every
 * PE of the node:
 *   min(SYMM_WORKERS_AUTO_MAX, pool size, max(1, node CPUs / PEs of the node),
 *       max(1, work_bytes / SYMM_WORKER_MIN_BYTES))
 * where the node's CPUs are agreed by all PEs at symm_init (symm_g.node_cpus: the union
 * of their affinity masks, or SYMM_NODE_CPUS) and work_bytes is the operation's size
 * where every PE knows it alike (the tiles), SIZE_MAX where it does not (MoE: each PE
 * knows only its own splits). */
#define SYMM_WORKERS_AUTO_MAX 64
/* The least work per worker in the automatic count: below it, handing a share to one
 * more thread (a futex wake, another duplicate's episodes) costs more than it saves.
 * Measured with symm_tile_allreduce_parallel at 1 PE on 2 idle cores, 2 workers against
 * 1: tiles in cache break even at 32 KiB per worker (1.11x the time) and win from 64
 * KiB (0.86x), cold tiles win from 16 KiB (0.76x at 32 KiB total). */
#define SYMM_WORKER_MIN_BYTES ((size_t)64 << 10)
int symm_coll_auto_workers(symm_pool_t pool, size_t work_bytes);

/* Runs fn for workers 0..nworkers-1 (nworkers == 0: symm_coll_auto_workers with
 * work_bytes): worker 0 on the calling thread, the others on persistent worker threads
 * (workers.c; a worker for which no thread can be had runs on the caller after worker
 * 0). Returns the first failing worker's status, with its message recorded on the
 * calling thread. */
symm_status_t symm_coll_run_workers(const char *fn_name, symm_pool_t pool, int nworkers,
                                    size_t work_bytes, symm_worker_fn_t fn, void *arg);

/* The gate of the _parallel call that this thread runs as worker 0, taken once (NULL
 * where there is none): its first verdict lets the other workers start. */
symm_coll_gate_t *symm_coll_take_gate(void);

/* Joins the persistent worker threads (symm_finalize). */
void symm_coll_workers_shutdown(void);

/* Checks pool, worker and nworkers and returns duplicate `worker` as a team. Where
 * only nworkers is bad, *team_out is still that duplicate (SYMM_TEAM_INVALID where
 * there is none): the caller takes part on it with the failure (symm_coll_fail). */
symm_status_t symm_coll_worker_team(const char *fn_name, symm_pool_t pool, int worker,
                                    int nworkers, symm_team_t *team_out);

/* Rows [*lo, *hi) of part `part` when total rows are split into `parts` near-equal
 * contiguous ranges: symm_plan_band, the split the GPU blocks use too. */
static inline void symm_coll_band(size_t total, size_t parts, size_t part, size_t *lo,
                                  size_t *hi)
{
    uint64_t l, h;
    symm_plan_band(total, parts, part, &l, &h);
    *lo = (size_t)l;
    *hi = (size_t)h;
}

#endif
