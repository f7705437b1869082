/* bench_util.h — timing, statistics, options, tables and the anchor/summary files shared
 * by symm-bench and its MPI anchor (bench/mpi_anchor.c). Nothing here knows about symm or
 * MPI: the two programs print the same tables from the same helpers, so that their numbers
 * differ only in the library measured. */
#ifndef SYMM_BENCH_UTIL_H
#define SYMM_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- time */
double bench_now(void); /* seconds, CLOCK_MONOTONIC */

/* ---- statistics over repetitions */
typedef struct {
    double median, min, max;
} bench_stat_t;
bench_stat_t bench_stats(const double *v, int n);
static inline double bench_spread_pct(bench_stat_t s)
{
    return s.median > 0 ? 100.0 * (s.max - s.min) / s.median : 0.0;
}

/* ---- options common to both programs */
typedef struct {
    const char *suite; /* teams | coll | tile | moe */
    int quick;         /* tiny sizes and counts: smoke test */
    int reps;          /* repetitions per point (median and spread over them) */
    size_t min_size, max_size;
    size_t rotate; /* footprint of rotating buffers for sizes >= rotate_min */
    size_t rotate_min;
    size_t max_pool;    /* largest pool (teams) */
    int max_conc;       /* most concurrent duplicates (teams) */
    double dup_limit_s; /* MPI_Comm_dup count limit: stop after this many seconds */
    size_t dup_limit_max;
    int workers;        /* workers per PE of the _par rows (tile, moe); 0: automatic */
    const char *ops;    /* comma list of operations to run; NULL = all */
    const char *tsv;    /* append machine-readable rows here */
    const char *anchor; /* anchor rows (from the other program) for the ratio column */
} bench_opts_t;

/* Parses argv (argv[1] is the suite); returns 0, 1 after printing the usage for -h or
 * --help, or -1 after printing it for a bad command line. */
int bench_parse_opts(int argc, char **argv, bench_opts_t *o, const char *prog);
int bench_op_selected(const bench_opts_t *o, const char *op);
/* "8", "64K", "1M" */
int bench_parse_size(const char *s, size_t *out);

/* Iterations per repetition for a message of size bytes (deterministic, so that all PEs
 * and both programs agree without talking). */
int bench_iters_for(size_t size, int quick);

/* Barriers per thread per repetition of the concurrent-barrier test, from a trial's
 * per-barrier time (us, the same on every PE): about 0.3 s per repetition. */
int bench_conc_iters(int quick, double trial_us);

/* ---- anchor rows: suite op size median_us min_us max_us extra [anchor_us ratio] */
typedef struct {
    char suite[16], op[32];
    int64_t size;
    double median_us, min_us, max_us, extra;
} bench_row_t;
typedef struct {
    bench_row_t *rows;
    size_t n;
} bench_anchor_t;
int bench_anchor_load(const char *path, bench_anchor_t *a); /* missing file: 0 rows */
const bench_row_t *bench_anchor_find(const bench_anchor_t *a, const char *suite, const char *op,
                                     int64_t size);
void bench_anchor_free(bench_anchor_t *a);

/* Appends a comment line ("# " and the formatted text) to the TSV: readers skip it. */
void bench_tsv_note(const bench_opts_t *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Appends one row (with the anchor's median and the ratio, NaN where none) to the TSV. */
void bench_tsv_row(const bench_opts_t *o, const char *suite, const char *op, int64_t size,
                   bench_stat_t us, double extra, double anchor_us, double ratio);

double bench_nan(void);

#endif
