/* sb_weak.h — the calls that symm-bench measures but that may not be in the library yet
 * (collectives, tile reduce and MoE are written in parallel with the benchmarks). They are
 * declared weak: symm-bench links either way and reports "not in this build" for a call
 * the library lacks, instead of breaking the whole build. */
#ifndef SYMM_BENCH_WEAK_H
#define SYMM_BENCH_WEAK_H

#include "symm.h"

#pragma weak symm_broadcast
#pragma weak symm_reduce
#pragma weak symm_allreduce
#pragma weak symm_reduce_scatter
#pragma weak symm_fcollect
#pragma weak symm_alltoall
#pragma weak symm_alltoallv
#pragma weak symm_tile_reduce
#pragma weak symm_tile_allreduce
#pragma weak symm_tile_reduce_multi
#pragma weak symm_all_to_all_v
#pragma weak symm_moe_dispatch
#pragma weak symm_moe_combine
#pragma weak symm_tile_reduce_parallel
#pragma weak symm_tile_allreduce_parallel
#pragma weak symm_moe_dispatch_parallel
#pragma weak symm_moe_combine_parallel
#pragma weak symm_pool_auto_workers

/* 1 if the library provides fn. */
#define SB_HAVE(fn) ((void (*)(void))(fn) != (void (*)(void))0)

#endif
