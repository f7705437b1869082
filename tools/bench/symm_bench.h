/* symm_bench.h — what the suites of symm-bench share: options, the anchor rows, and
 * small helpers built only on RMA and the world barrier (so that a suite can report its
 * numbers even while a collective under test misbehaves). */
#ifndef SYMM_BENCH_H
#define SYMM_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "symm.h"

extern bench_opts_t sb_opts;
extern bench_anchor_t sb_anchor;
extern int sb_me, sb_npes;

/* Aborts the job naming the call that failed. */
#define SB_CHECK(call)                                                                         \
    do {                                                                                       \
        symm_status_t sb_st_ = (call);                                                         \
        if (sb_st_ != SYMM_SUCCESS) sb_fail(#call, __FILE__, __LINE__, sb_st_);                \
    } while (0)
void sb_fail(const char *what, const char *file, int line, symm_status_t st);

/* Average (and max) of one value over all PEs; every PE gets it. */
double sb_avg_all(double v);
/* The timing loop of the suites (OSU style): `warmup` calls, then sb_opts.reps
 * repetitions of iters calls of run(ctx, op, slot), each timed alone between world
 * barriers (rooted calls cannot pipeline), slot rotating through nrot buffer slots (cold
 * caches for large sizes); a repetition's value is the per-call time in us averaged over
 * the PEs. */
typedef symm_status_t (*sb_run_fn)(const void *ctx, int op, size_t slot);
bench_stat_t sb_time_slots(sb_run_fn run, const void *ctx, int op, size_t nrot, int iters,
                           int warmup);
double sb_max_all(double v);
/* PE 0 prints; the others stay quiet. */
#define SB_PRINT(...)                                                                          \
    do {                                                                                       \
        if (sb_me == 0) {                                                                      \
            printf(__VA_ARGS__);                                                               \
            fflush(stdout);                                                                    \
        }                                                                                      \
    } while (0)

/* Anchor median (us) for a row, NaN if absent. */
double sb_anchor_us(const char *suite, const char *op, int64_t size);
const bench_row_t *sb_anchor_row(const char *suite, const char *op, int64_t size);

/* Symmetric memory region of bytes, touched so that page faults stay out of the timing. */
void *sb_symm_region(size_t bytes);

/* Bytes of symmetric heap a suite allocates for its largest message max and rotation
 * footprint rotate (the --max and --rotate values). */
typedef size_t (*sb_footprint_fn)(size_t max, size_t rotate);
/* Fits a suite's buffers into the symmetric heap it has (symm_get_info): while they do
 * not fit, halves sb_opts.rotate (not below the largest message, which needs a slot of
 * its own anyway), then sb_opts.max_size, and says on one comment line (and in the TSV)
 * what it skipped and which SYMM_HEAP_SIZE runs it all. Returns 0, or -1 (PE 0 says why
 * on stderr) where the smallest size, lo, does not fit either; every PE decides alike. */
int sb_fit_heap(const char *suite, sb_footprint_fn footprint, size_t lo);

/* The _par rows of tile and moe: a pool of SB_POOL_AUTO duplicates when the worker count
 * is automatic (so that the pool's size does not cap it), of --workers N otherwise. */
#define SB_POOL_AUTO 64
/* The worker count a _par row runs with: forced (--workers), else what nworkers == 0
 * picks for work_bytes (SIZE_MAX: MoE). */
int sb_workers_used(symm_pool_t pool, int forced, size_t work_bytes);
/* One line for a table header: how the _par rows choose their worker count. */
void sb_workers_desc(symm_pool_t pool, int forced, size_t max_bytes, char *buf, size_t len);
/* A "# workers" comment line in the TSV for a _par row (read by bench-report/plot). */
void sb_tsv_workers(const char *suite, const char *op, size_t bytes, int nw, int forced);
/* One row of the tile / moe tables, and its TSV lines: bytes and rows per PE, the timing,
 * the busbw factor f, the wrong count, the anchor row's name; nw >= 1 (with forced, the
 * --workers value) for a _par row, 0 otherwise. */
void sb_tm_row(const char *suite, const char *op, const char *anchor_op, size_t bytes,
               size_t rows, bench_stat_t s, double f, long wrong, int nw, int forced);

int sb_suite_teams(void);
int sb_suite_coll(void);
int sb_suite_tile(void);
int sb_suite_moe(void);
int sb_suite_topk(void);

#endif
