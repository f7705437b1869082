/* symm_bench.c — symm-bench: the benchmark driver (run under symmrun) and its teams suite:
 * pool creation cost, team heap per duplicate, split and rank-list teams, and barriers on
 * many duplicates at once. The anchor numbers come from symm-bench-mpi (bench/). */
#include "symm_bench.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

bench_opts_t sb_opts;
bench_anchor_t sb_anchor;
int sb_me, sb_npes;

static double *sb_scratch; /* symmetric: [npes] doubles gathered on every PE */

void sb_fail(const char *what, const char *file, int line, symm_status_t st)
{
    char msg[768];
    snprintf(msg, sizeof msg, "symm-bench: %s failed at %s:%d: %s (%s)", what, file, line,
             symm_strerror(st), symm_last_error());
    fprintf(stderr, "PE %d: %s\n", sb_me, msg);
    symm_abort(1, msg);
    exit(1);
}

/* All-gather of one double through puts and the world barrier. */
static void sb_allgather_double(double v)
{
    for (int p = 0; p < sb_npes; p++)
        SB_CHECK(symm_put(&sb_scratch[sb_me], &v, sizeof v, p));
    SB_CHECK(symm_barrier_all());
}

double sb_avg_all(double v)
{
    sb_allgather_double(v);
    double s = 0;
    for (int p = 0; p < sb_npes; p++)
        s += sb_scratch[p];
    SB_CHECK(symm_barrier_all()); /* nobody overwrites sb_scratch before all have read */
    return s / sb_npes;
}

bench_stat_t sb_time_slots(sb_run_fn run, const void *ctx, int op, size_t nrot, int iters,
                           int warmup)
{
    int reps = sb_opts.reps;
    if (nrot < 1) nrot = 1;
    double *v = calloc((size_t)reps, sizeof *v);
    if (!v) sb_fail("calloc", __FILE__, __LINE__, SYMM_ERR_NO_MEMORY);
    for (int w = 0; w < warmup; w++)
        SB_CHECK(run(ctx, op, (size_t)w % nrot));
    size_t k = 0;
    for (int r = 0; r < reps; r++) {
        double acc = 0;
        SB_CHECK(symm_barrier_all());
        for (int i = 0; i < iters; i++) {
            double t0 = bench_now();
            SB_CHECK(run(ctx, op, k));
            acc += bench_now() - t0;
            k = (k + 1) % nrot;
            SB_CHECK(symm_barrier_all());
        }
        v[r] = sb_avg_all(1e6 * acc / iters);
    }
    bench_stat_t s = bench_stats(v, reps);
    free(v);
    return s;
}

double sb_max_all(double v)
{
    sb_allgather_double(v);
    double m = sb_scratch[0];
    for (int p = 1; p < sb_npes; p++)
        m = sb_scratch[p] > m ? sb_scratch[p] : m;
    SB_CHECK(symm_barrier_all());
    return m;
}

const bench_row_t *sb_anchor_row(const char *suite, const char *op, int64_t size)
{
    return bench_anchor_find(&sb_anchor, suite, op, size);
}

double sb_anchor_us(const char *suite, const char *op, int64_t size)
{
    const bench_row_t *r = sb_anchor_row(suite, op, size);
    return r ? r->median_us : bench_nan();
}

void *sb_symm_region(size_t bytes)
{
    void *p = symm_align(4096, bytes);
    if (!p) sb_fail("symm_align", __FILE__, __LINE__, symm_last_status());
    memset(p, 0, bytes);
    return p;
}

/* "128 MiB", "512 KiB", "100 B": a size for the reader. */
static void size_str(size_t bytes, char *buf, size_t len)
{
    if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
        snprintf(buf, len, "%zu MiB", bytes >> 20);
    else if (bytes >= (1 << 10) && bytes % (1 << 10) == 0)
        snprintf(buf, len, "%zu KiB", bytes >> 10);
    else
        snprintf(buf, len, "%zu B", bytes);
}

/* "1280M", "2G": a size as SYMM_HEAP_SIZE takes it. */
static void heap_size_str(size_t bytes, char *buf, size_t len)
{
    if (bytes % ((size_t)1 << 30) == 0)
        snprintf(buf, len, "%zuG", bytes >> 30);
    else
        snprintf(buf, len, "%zuM", bytes >> 20);
}

int sb_fit_heap(const char *suite, sb_footprint_fn footprint, size_t lo)
{
    /* the regions start on pages: up to a page lost in front of each, and a margin */
    const size_t slack = (size_t)1 << 20, step = (size_t)64 << 20;
    symm_info_t info;
    SB_CHECK(symm_get_info(&info));
    size_t free_bytes = info.heap_size - info.heap_used;
    size_t avail = free_bytes > slack ? free_bytes - slack : 0;
    size_t max = sb_opts.max_size, rot = sb_opts.rotate;
    size_t want = footprint(max, rot);
    if (want <= avail) return 0;
    char need[32];
    heap_size_str((info.heap_used + want + slack + step - 1) / step * step, need, sizeof need);
    while (footprint(max, rot) > avail) {
        if (rot > max) {
            rot = rot / 2 > max ? rot / 2 : max;
        } else if (max / 2 >= lo) {
            max /= 2;
        } else {
            if (sb_me == 0)
                fprintf(stderr,
                        "symm-bench %s: the buffers of the smallest size need %zu "
                        "bytes of symmetric heap per PE, %zu of %zu are free; "
                        "SYMM_HEAP_SIZE=%s runs it all\n",
                        suite, footprint(lo, rot) + slack, free_bytes, info.heap_size, need);
            return -1;
        }
    }
    char what[160] = "";
    if (max < sb_opts.max_size)
        snprintf(what, sizeof what, "skipped sizes above %zu bytes", max);
    if (rot < sb_opts.rotate) {
        char from[32], to[32];
        size_str(sb_opts.rotate, from, sizeof from);
        size_str(rot, to, sizeof to);
        snprintf(what + strlen(what), sizeof what - strlen(what), "%s--rotate %s instead of %s",
                 *what ? "; " : "", to, from);
    }
    SB_PRINT("# note: %s: the symmetric heap has %zu of %zu bytes free per PE, %zu needed; "
             "SYMM_HEAP_SIZE=%s runs it all\n",
             what, free_bytes, info.heap_size, want, need);
    if (sb_me == 0)
        bench_tsv_note(&sb_opts, "heap\t%s\t%s\tSYMM_HEAP_SIZE=%s", suite, what, need);
    sb_opts.max_size = max;
    sb_opts.rotate = rot;
    return 0;
}

int sb_workers_used(symm_pool_t pool, int forced, size_t work_bytes)
{
    if (forced) return forced;
    return symm_pool_auto_workers(pool, work_bytes);
}

void sb_workers_desc(symm_pool_t pool, int forced, size_t max_bytes, char *buf, size_t len)
{
    if (forced) {
        snprintf(buf, len, "%d workers per PE (--workers %d)", forced, forced);
        return;
    }
    int nw = sb_workers_used(pool, 0, max_bytes);
    char at[32] = "";
    if (max_bytes != SIZE_MAX)
        snprintf(at, sizeof at, " at %zu %s", max_bytes >> (max_bytes >> 20 ? 20 : 10),
                 max_bytes >> 20 ? "MiB" : "KiB");
    snprintf(buf, len,
             "automatic worker count (nworkers = 0): %d per PE%s with %ld CPUs and "
             "%d PEs (workers column)",
             nw, at, sysconf(_SC_NPROCESSORS_ONLN), sb_npes);
}

void sb_tsv_workers(const char *suite, const char *op, size_t bytes, int nw, int forced)
{
    bench_tsv_note(&sb_opts, "workers\t%s\t%s\t%zu\t%d\t%s", suite, op, bytes, nw,
                   forced ? "forced" : "automatic");
}

void sb_tm_row(const char *suite, const char *op, const char *anchor_op, size_t bytes,
               size_t rows, bench_stat_t s, double f, long wrong, int nw, int forced)
{
    double alg = bytes / (s.median * 1e3), bus = alg * f;
    double m = sb_anchor_us(suite, anchor_op, (int64_t)bytes);
    char wcol[16] = "";
    if (nw) snprintf(wcol, sizeof wcol, "  %7d", nw);
    SB_PRINT("%12zu %8zu %12.3f %10.1f %12.3f %12.3f %7ld %12.3f %16.2f%s\n", bytes, rows,
             s.median, bench_spread_pct(s), alg, bus, wrong, bytes / (m * 1e3) * f,
             m / s.median, wcol);
    if (sb_me == 0) {
        if (nw) sb_tsv_workers(suite, op, bytes, nw, forced);
        bench_tsv_row(&sb_opts, suite, op, (int64_t)bytes, s, bus, m, m / s.median);
    }
}

/* ---------------------------------------------------------------- teams suite */
static size_t team_heap_used(void)
{
    symm_info_t i;
    SB_CHECK(symm_get_info(&i));
    return i.team_heap_used;
}

static void teams_pools(void)
{
    SB_PRINT("# symm-bench teams: pools of n duplicates of SYMM_TEAM_WORLD (%d PEs)\n"
             "# create and destroy times: median over repetitions of the average over PEs;"
             " spread = (max-min)/median\n"
             "# anchor: MPI_Comm_dup of MPI_COMM_WORLD n times (symm-bench-mpi teams), "
             "ratio = per-team time MPI / symm\n",
             sb_npes);
    SB_PRINT("%8s %5s %14s %14s %10s %14s %12s %16s %16s\n", "# dups", "reps", "create(us)",
             "per-team(us)", "spread(%)", "destroy(us)", "heap/dup(B)", "MPI per-team(us)",
             "ratio(MPI/symm)");
    for (size_t n = 1; n <= sb_opts.max_pool; n *= 4) {
        int reps = sb_opts.reps;
        if (n >= 16384 && reps > 5) reps = 5;
        double *cr = calloc((size_t)reps, sizeof *cr), *de = calloc((size_t)reps, sizeof *de);
        size_t bytes = 0;
        for (int r = 0; r < reps; r++) {
            SB_CHECK(symm_barrier_all());
            size_t before = team_heap_used();
            symm_pool_t pool;
            double t0 = bench_now();
            SB_CHECK(symm_pool_create(SYMM_TEAM_WORLD, n, &pool));
            double t1 = bench_now();
            bytes = team_heap_used() - before;
            SB_CHECK(symm_barrier_all());
            double t2 = bench_now();
            SB_CHECK(symm_pool_destroy(pool));
            double t3 = bench_now();
            cr[r] = sb_avg_all(1e6 * (t1 - t0));
            de[r] = sb_avg_all(1e6 * (t3 - t2));
            if (team_heap_used() != before && sb_me == 0)
                fprintf(stderr,
                        "# warning: team heap not returned after destroying a pool"
                        " of %zu (%zu -> %zu bytes)\n",
                        n, before, team_heap_used());
        }
        bench_stat_t c = bench_stats(cr, reps), d = bench_stats(de, reps);
        double mpi = sb_anchor_us("teams", "pool_create", (int64_t)n);
        double ratio = mpi / c.median; /* same n on both sides */
        SB_PRINT("%8zu %5d %14.2f %14.4f %10.1f %14.2f %12.1f %16.3f %16.1f\n", n, reps,
                 c.median, c.median / n, bench_spread_pct(c), d.median, (double)bytes / n,
                 mpi / n, ratio);
        if (sb_me == 0) {
            bench_tsv_row(&sb_opts, "teams", "pool_create", (int64_t)n, c, (double)bytes / n,
                          mpi, ratio);
            double mpid = sb_anchor_us("teams", "pool_destroy", (int64_t)n);
            bench_tsv_row(&sb_opts, "teams", "pool_destroy", (int64_t)n, d, 0, mpid,
                          mpid / d.median);
        }
        free(cr);
        free(de);
        if (n > sb_opts.max_pool / 4) break; /* also keeps n*4 from overflowing */
    }
}

static void teams_plain(void)
{
    int reps = sb_opts.quick ? 5 : 101;
    int *ranks = malloc((size_t)sb_npes * sizeof *ranks);
    for (int i = 0; i < sb_npes; i++)
        ranks[i] = i;
    SB_PRINT("\n# plain teams over all %d PEs: create, then destroy; median of %d\n"
             "# anchor: MPI_Comm_split (split) and MPI_Comm_create_group (rank list), "
             "then MPI_Comm_free\n",
             sb_npes, reps);
    SB_PRINT("%-8s %12s %10s %12s %14s %14s %16s\n", "# how", "create(us)", "spread(%)",
             "destroy(us)", "MPI create(us)", "MPI free(us)", "ratio(MPI/symm)");
    const char *names[2] = {"split", "list"};
    for (int how = 0; how < 2; how++) {
        double *cr = calloc((size_t)reps, sizeof *cr), *de = calloc((size_t)reps, sizeof *de);
        for (int r = 0; r < reps; r++) {
            symm_team_t t;
            SB_CHECK(symm_barrier_all());
            double t0 = bench_now();
            if (how == 0)
                SB_CHECK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, sb_npes, &t));
            else
                SB_CHECK(symm_team_create(ranks, sb_npes, &t));
            double t1 = bench_now();
            SB_CHECK(symm_barrier_all());
            double t2 = bench_now();
            SB_CHECK(symm_team_destroy(t));
            double t3 = bench_now();
            cr[r] = sb_avg_all(1e6 * (t1 - t0));
            de[r] = sb_avg_all(1e6 * (t3 - t2));
        }
        bench_stat_t c = bench_stats(cr, reps), d = bench_stats(de, reps);
        char op[32], opd[32];
        snprintf(op, sizeof op, "%s_create", names[how]);
        snprintf(opd, sizeof opd, "%s_destroy", names[how]);
        double mc = sb_anchor_us("teams", op, sb_npes),
               md = sb_anchor_us("teams", opd, sb_npes);
        SB_PRINT("%-8s %12.2f %10.1f %12.2f %14.2f %14.2f %16.1f\n", names[how], c.median,
                 bench_spread_pct(c), d.median, mc, md, mc / c.median);
        if (sb_me == 0) {
            bench_tsv_row(&sb_opts, "teams", op, sb_npes, c, 0, mc, mc / c.median);
            bench_tsv_row(&sb_opts, "teams", opd, sb_npes, d, 0, md, md / d.median);
        }
        free(cr);
        free(de);
    }
    free(ranks);
}

/* ---- barriers on concurrent duplicates: one thread per duplicate on every PE */
typedef struct {
    symm_team_t team;
    const volatile int *iters; /* set by the main thread before each start; 0 = quit */
    pthread_barrier_t *start, *end;
} conc_arg_t;

static void *conc_worker(void *p)
{
    conc_arg_t *a = p;
    for (;;) {
        pthread_barrier_wait(a->start);
        int iters = *a->iters;
        if (!iters) break;
        for (int i = 0; i < iters; i++)
            SB_CHECK(symm_barrier(a->team));
        pthread_barrier_wait(a->end);
    }
    return NULL;
}

/* One timed round of d threads doing iters barriers each: wall time (us) of the slowest
 * PE. */
static double conc_round(volatile int *iters_var, int iters, pthread_barrier_t *start,
                         pthread_barrier_t *end)
{
    *iters_var = iters;
    SB_CHECK(symm_barrier_all());
    pthread_barrier_wait(start);
    double t0 = bench_now();
    pthread_barrier_wait(end);
    return sb_max_all(1e6 * (bench_now() - t0));
}

static void teams_concurrent(void)
{
    int maxc = sb_opts.max_conc, reps = sb_opts.reps;
    symm_pool_t pool;
    SB_CHECK(symm_pool_create(SYMM_TEAM_WORLD, (size_t)maxc, &pool));
    SB_PRINT("\n# barriers on d duplicates at once: d threads per PE, thread i loops "
             "symm_barrier on duplicate i\n# (%d PEs on %ld cores: threads beyond the core "
             "count take turns); latency = wall time / barriers per thread, slowest PE;\n"
             "# iterations calibrated to ~0.3 s per repetition; median of %d\n"
             "# anchor: d threads per rank, each looping MPI_Barrier on its own MPI_Comm_dup "
             "(MPI_THREAD_MULTIPLE)\n",
             sb_npes, sysconf(_SC_NPROCESSORS_ONLN), reps);
    SB_PRINT("%6s %8s %14s %10s %16s %14s %16s %16s\n", "# dups", "iters", "latency(us)",
             "spread(%)", "aggregate(1/s)", "MPI lat(us)", "MPI aggr(1/s)", "ratio(MPI/symm)");
    for (int d = 1; d <= maxc; d *= 2) {
        volatile int iters_var = 0;
        pthread_barrier_t start, end;
        pthread_barrier_init(&start, NULL, (unsigned)d + 1);
        pthread_barrier_init(&end, NULL, (unsigned)d + 1);
        pthread_t *th = malloc((size_t)d * sizeof *th);
        conc_arg_t *args = malloc((size_t)d * sizeof *args);
        for (int i = 0; i < d; i++) {
            args[i] = (conc_arg_t){symm_pool_team(pool, (size_t)i), &iters_var, &start, &end};
            pthread_create(&th[i], NULL, conc_worker, &args[i]);
        }
        int iters =
            bench_conc_iters(sb_opts.quick, conc_round(&iters_var, 10, &start, &end) / 10);
        double *lat = calloc((size_t)reps, sizeof *lat);
        for (int r = 0; r < reps; r++)
            lat[r] = conc_round(&iters_var, iters, &start, &end) / iters;
        iters_var = 0;
        pthread_barrier_wait(&start);
        for (int i = 0; i < d; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&start);
        pthread_barrier_destroy(&end);
        bench_stat_t s = bench_stats(lat, reps);
        double aggr = d * 1e6 / s.median;
        const bench_row_t *m = sb_anchor_row("teams", "barrier_conc", d);
        double mlat = m ? m->median_us : bench_nan(), maggr = m ? m->extra : bench_nan();
        SB_PRINT("%6d %8d %14.3f %10.1f %16.0f %14.3f %16.0f %16.2f\n", d, iters, s.median,
                 bench_spread_pct(s), aggr, mlat, maggr, mlat / s.median);
        if (sb_me == 0)
            bench_tsv_row(&sb_opts, "teams", "barrier_conc", d, s, aggr, mlat, mlat / s.median);
        free(lat);
        free(th);
        free(args);
    }
    SB_CHECK(symm_pool_destroy(pool));
}

static void teams_limit_note(void)
{
    const bench_row_t *r = NULL;
    for (size_t i = 0; i < sb_anchor.n; i++)
        if (!strcmp(sb_anchor.rows[i].op, "dup_limit")) r = &sb_anchor.rows[i];
    if (r)
        SB_PRINT("\n# MPI_Comm_dup count: %lld communicators in %.1f s (%s); symm made pools "
                 "of up to %zu duplicates above, limited only by SYMM_TEAM_HEAP_SIZE\n",
                 (long long)r->size, r->extra,
                 r->max_us > 0 ? "stopped by an MPI error" : "stopped by the time or count cap",
                 sb_opts.max_pool);
}

int sb_suite_teams(void)
{
    teams_pools();
    teams_plain();
    teams_concurrent();
    teams_limit_note();
    return 0;
}

/* ---------------------------------------------------------------- driver */
/* The GPU suites are programs of their own (CUDA, linked with libsymm_cuda, built where
 * nvcc is found): run the one next to this program with the arguments after the suite
 * (it initialises symm itself, under the same symmrun). Returns only on failure, with the
 * exit status; -1 if suite is not a GPU suite. */
static int run_gpu_suite(char **argv)
{
    static const char *const suites[][2] = {{"gpu-coll", "symm-gpu-bench"},
                                            {"gpu-tile-moe", "symm-gpu-tile-moe-bench"},
                                            {"gpu-topk", "symm-gpu-topk-bench"}};
    const char *prog = NULL;
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (!strcmp(argv[1], suites[i][0])) prog = suites[i][1];
    if (!prog) return -1;
    char path[4096];
    ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
    if (k <= 0) {
        fprintf(stderr, "symm-bench: cannot find this program's directory (/proc/self/exe)\n");
        return 2;
    }
    path[k] = 0;
    char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    if (dir + strlen(prog) + 1 > sizeof path) {
        fprintf(stderr, "symm-bench: path of %s too long\n", prog);
        return 2;
    }
    strcpy(path + dir, prog);
    const char *suite = argv[1];
    argv[1] = path; /* argv[1..] becomes the GPU program's argv */
    execv(path, argv + 1);
    fprintf(stderr,
            "symm-bench: suite %s runs %s, which could not be started (%s: %s); it is built "
            "with the CUDA part (nvcc found at configure time)\n",
            suite, prog, path, strerror(errno));
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2) {
        int g = run_gpu_suite(argv);
        if (g >= 0) return g;
    }
    int parsed = bench_parse_opts(argc, argv, &sb_opts, "symm-bench");
    if (parsed) return parsed > 0 ? 0 : 2;
    if (symm_init() != SYMM_SUCCESS) {
        fprintf(stderr, "symm-bench: symm_init: %s\n(run it under symmrun -n N)\n",
                symm_last_error());
        return 1;
    }
    sb_me = symm_my_pe();
    sb_npes = symm_n_pes();
    sb_scratch = symm_calloc((size_t)sb_npes, sizeof(double));
    if (!sb_scratch) sb_fail("symm_calloc", __FILE__, __LINE__, symm_last_status());
    bench_anchor_load(sb_opts.anchor, &sb_anchor);
    if (sb_opts.anchor && !sb_anchor.n)
        SB_PRINT("# note: no anchor rows in %s: ratio columns are nan\n", sb_opts.anchor);
    int rc;
    if (!strcmp(sb_opts.suite, "teams"))
        rc = sb_suite_teams();
    else if (!strcmp(sb_opts.suite, "coll"))
        rc = sb_suite_coll();
    else if (!strcmp(sb_opts.suite, "tile"))
        rc = sb_suite_tile();
    else if (!strcmp(sb_opts.suite, "moe"))
        rc = sb_suite_moe();
    else if (!strcmp(sb_opts.suite, "topk"))
        rc = sb_suite_topk();
    else {
        fprintf(stderr,
                "symm-bench: unknown suite %s (teams, coll, tile, moe, topk, gpu-coll, "
                "gpu-tile-moe, gpu-topk)\n",
                sb_opts.suite);
        rc = 2;
    }
    bench_anchor_free(&sb_anchor);
    symm_free(sb_scratch);
    symm_finalize();
    return rc;
}
