/* mpi_anchor.c — symm-bench-mpi: the MPI anchor of symm-bench. The same suites (teams,
 * coll, tile, moe), the same sizes, iteration counts, buffer rotation, timing and data
 * checks (tools/bench/bench_util.h, coll_spec.h), measured with MPI calls instead of
 * symm's; and rma, the cost of MPI's one-sided operations under symm's transport.
 * scripts/bench-cpu.sh runs it under mpirun right before symm-bench and hands its rows to
 * symm-bench (--anchor) for the ratio columns. */
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "coll_spec.h"
#include "tile_moe_spec.h"

static bench_opts_t mo;
static int me, npes;

#define PRINT(...)                                                                             \
    do {                                                                                       \
        if (me == 0) {                                                                         \
            printf(__VA_ARGS__);                                                               \
            fflush(stdout);                                                                    \
        }                                                                                      \
    } while (0)

#define MCHECK(call)                                                                           \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != MPI_SUCCESS) {                                                              \
            char s_[MPI_MAX_ERROR_STRING];                                                     \
            int l_ = 0;                                                                        \
            MPI_Error_string(rc_, s_, &l_);                                                    \
            fprintf(stderr, "rank %d: %s failed at %s:%d: %s\n", me, #call, __FILE__,          \
                    __LINE__, s_);                                                             \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
        }                                                                                      \
    } while (0)

static double avg_all(double v)
{
    double s;
    MCHECK(MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return s / npes;
}

static double max_all(double v)
{
    double s;
    MCHECK(MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return s;
}

static void *region(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes)) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", me, bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0, bytes);
    return p;
}

static void row(const char *suite, const char *op, int64_t size, bench_stat_t s, double extra)
{
    if (me == 0) bench_tsv_row(&mo, suite, op, size, s, extra, bench_nan(), bench_nan());
}

/* ---------------------------------------------------------------- teams */
static void teams_dups(size_t limit)
{
    PRINT("# symm-bench-mpi teams: n x MPI_Comm_dup(MPI_COMM_WORLD), %d ranks; median of "
          "the average over ranks\n%8s %5s %14s %14s %10s %14s\n",
          npes, "# dups", "reps", "create(us)", "per-team(us)", "spread(%)", "free(us)");
    size_t cap = mo.max_pool < limit ? mo.max_pool : limit;
    double last_total = 0;
    for (size_t n = 1; n <= cap; n *= 4) {
        /* stay within about a minute: predict from the previous size */
        int reps = mo.reps;
        if (n >= 4096 && reps > 3) reps = 3;
        if (last_total * 4 * reps > 60e6 && !mo.quick) {
            PRINT("# stopping before %zu dups: the previous size took %.1f s per repetition\n",
                  n, last_total / 1e6);
            break;
        }
        MPI_Comm *c = malloc(n * sizeof *c);
        double *cr = calloc((size_t)reps, sizeof *cr), *fr = calloc((size_t)reps, sizeof *fr);
        for (int r = 0; r < reps; r++) {
            MCHECK(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = bench_now();
            for (size_t i = 0; i < n; i++)
                MCHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c[i]));
            double t1 = bench_now();
            MCHECK(MPI_Barrier(MPI_COMM_WORLD));
            double t2 = bench_now();
            for (size_t i = 0; i < n; i++)
                MCHECK(MPI_Comm_free(&c[i]));
            double t3 = bench_now();
            cr[r] = avg_all(1e6 * (t1 - t0));
            fr[r] = avg_all(1e6 * (t3 - t2));
        }
        bench_stat_t s = bench_stats(cr, reps), f = bench_stats(fr, reps);
        last_total = s.median;
        PRINT("%8zu %5d %14.2f %14.3f %10.1f %14.2f\n", n, reps, s.median, s.median / n,
              bench_spread_pct(s), f.median);
        row("teams", "pool_create", (int64_t)n, s, 0);
        row("teams", "pool_destroy", (int64_t)n, f, 0);
        free(c);
        free(cr);
        free(fr);
        if (n > cap / 4) break;
    }
}

static void teams_plain(void)
{
    int reps = mo.quick ? 5 : 101;
    int *ranks = malloc((size_t)npes * sizeof *ranks);
    for (int i = 0; i < npes; i++)
        ranks[i] = i;
    MPI_Group world_group, g;
    MCHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    MCHECK(MPI_Group_incl(world_group, npes, ranks, &g));
    PRINT("\n# MPI_Comm_split / MPI_Comm_create_group + MPI_Comm_free, median of %d\n"
          "%-14s %12s %10s %12s\n",
          reps, "# how", "create(us)", "spread(%)", "free(us)");
    const char *names[2] = {"split", "list"};
    for (int how = 0; how < 2; how++) {
        double *cr = calloc((size_t)reps, sizeof *cr), *fr = calloc((size_t)reps, sizeof *fr);
        for (int r = 0; r < reps; r++) {
            MPI_Comm c;
            MCHECK(MPI_Barrier(MPI_COMM_WORLD));
            double t0 = bench_now();
            if (how == 0)
                MCHECK(MPI_Comm_split(MPI_COMM_WORLD, 0, me, &c));
            else
                MCHECK(MPI_Comm_create_group(MPI_COMM_WORLD, g, 7, &c));
            double t1 = bench_now();
            MCHECK(MPI_Barrier(MPI_COMM_WORLD));
            double t2 = bench_now();
            MCHECK(MPI_Comm_free(&c));
            double t3 = bench_now();
            cr[r] = avg_all(1e6 * (t1 - t0));
            fr[r] = avg_all(1e6 * (t3 - t2));
        }
        bench_stat_t s = bench_stats(cr, reps), f = bench_stats(fr, reps);
        PRINT("%-14s %12.2f %10.1f %12.2f\n", names[how], s.median, bench_spread_pct(s),
              f.median);
        char op[32];
        snprintf(op, sizeof op, "%s_create", names[how]);
        row("teams", op, npes, s, 0);
        snprintf(op, sizeof op, "%s_destroy", names[how]);
        row("teams", op, npes, f, 0);
        free(cr);
        free(fr);
    }
    MPI_Group_free(&g);
    MPI_Group_free(&world_group);
    free(ranks);
}

typedef struct {
    MPI_Comm comm;
    const volatile int *iters; /* 0 = quit */
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
            MCHECK(MPI_Barrier(a->comm));
        pthread_barrier_wait(a->end);
    }
    return NULL;
}

static double conc_round(volatile int *iters_var, int iters, pthread_barrier_t *start,
                         pthread_barrier_t *end)
{
    *iters_var = iters;
    MCHECK(MPI_Barrier(MPI_COMM_WORLD));
    pthread_barrier_wait(start);
    double t0 = bench_now();
    pthread_barrier_wait(end);
    return max_all(1e6 * (bench_now() - t0));
}

static void teams_concurrent(int provided)
{
    if (provided < MPI_THREAD_MULTIPLE) {
        PRINT(
            "\n# concurrent barriers: skipped, the MPI library gives no MPI_THREAD_MULTIPLE\n");
        return;
    }
    int reps = mo.reps;
    PRINT("\n# MPI_Barrier on d MPI_Comm_dups at once, one thread each; iterations "
          "calibrated to ~0.3 s per repetition; median of %d\n"
          "%6s %8s %14s %10s %16s\n",
          reps, "# dups", "iters", "latency(us)", "spread(%)", "aggregate(1/s)");
    for (int d = 1; d <= mo.max_conc; d *= 2) {
        volatile int iters_var = 0;
        pthread_barrier_t start, end;
        pthread_barrier_init(&start, NULL, (unsigned)d + 1);
        pthread_barrier_init(&end, NULL, (unsigned)d + 1);
        pthread_t *th = malloc((size_t)d * sizeof *th);
        conc_arg_t *args = malloc((size_t)d * sizeof *args);
        for (int i = 0; i < d; i++) {
            MPI_Comm c;
            MCHECK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
            args[i] = (conc_arg_t){c, &iters_var, &start, &end};
        }
        for (int i = 0; i < d; i++)
            pthread_create(&th[i], NULL, conc_worker, &args[i]);
        /* Calibrated on at least 20 ms of barriers: threads that share few cores make
         * a short trial luckily fast, and the rounds then took minutes (4.3 ms a barrier
         * at 4 duplicates on 2 cores, where 10 barriers had taken 10 us). Every rank
         * sees the same times (max_all), so all take the same decisions. */
        int trial = 10;
        double t;
        while ((t = conc_round(&iters_var, trial, &start, &end)) < 2e4 && trial < 20000)
            trial *= 4;
        int iters = bench_conc_iters(mo.quick, t / trial);
        double *lat = calloc((size_t)reps, sizeof *lat);
        for (int r = 0; r < reps; r++) {
            lat[r] = conc_round(&iters_var, iters, &start, &end) / iters;
            /* a round far over its 0.3 s: the next ones at the latency just seen */
            if (lat[r] * iters > 1e6) iters = bench_conc_iters(mo.quick, lat[r]);
        }
        iters_var = 0;
        pthread_barrier_wait(&start);
        for (int i = 0; i < d; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < d; i++)
            MCHECK(MPI_Comm_free(&args[i].comm));
        pthread_barrier_destroy(&start);
        pthread_barrier_destroy(&end);
        bench_stat_t s = bench_stats(lat, reps);
        double aggr = d * 1e6 / s.median;
        PRINT("%6d %8d %14.3f %10.1f %16.0f\n", d, iters, s.median, bench_spread_pct(s), aggr);
        row("teams", "barrier_conc", d, s, aggr);
        free(lat);
        free(th);
        free(args);
    }
}

/* How many communicators MPI_Comm_dup can make: until an error, the time limit or the
 * cap. Every dup is followed by an agreement on its outcome, so that a rank whose dup
 * failed does not leave the others waiting in the next one. Returns the largest pool
 * size the sweep may ask for (SIZE_MAX when no limit was found). */
static size_t teams_dup_limit(void)
{
    if (!mo.dup_limit_max) return SIZE_MAX;
    MCHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    size_t cap = mo.dup_limit_max, n = 0;
    MPI_Comm *c = malloc(cap * sizeof *c);
    double t0 = bench_now();
    int failed = 0, timed_out = 0;
    while (n < cap) {
        MPI_Comm nc = MPI_COMM_NULL;
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &nc);
        int st[2] = {rc != MPI_SUCCESS, bench_now() - t0 > mo.dup_limit_s}, any[2];
        MPI_Allreduce(st, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (!st[0]) c[n++] = nc;
        if (any[0]) {
            failed = 1;
            if (!st[0]) MPI_Comm_free(&c[--n]); /* made here, failed elsewhere */
            break;
        }
        if (any[1]) {
            timed_out = 1;
            break;
        }
    }
    double el = bench_now() - t0;
    PRINT("# MPI_Comm_dup count limit: %zu communicators alive at once, in %.1f s (%s)\n\n", n,
          el,
          failed      ? "the next MPI_Comm_dup failed"
          : timed_out ? "stopped by the time limit"
                      : "stopped at the cap");
    bench_stat_t s = {1e6 * el, 0, failed ? 1 : 0};
    row("teams", "dup_limit", (int64_t)n, s, el);
    for (size_t i = 0; i < n; i++)
        MPI_Comm_free(&c[i]);
    free(c);
    MCHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    return failed ? n : SIZE_MAX;
}

/* ---------------------------------------------------------------- coll */
static char *src_region, *dst_region;
static size_t region_bytes;
static int *cnt; /* [4n]: send counts, send displs, recv counts, recv displs */

static size_t stride_of(size_t bytes)
{
    return (bytes + 4095) & ~(size_t)4095;
}

static int nrot_for(size_t bytes)
{
    if (bytes < mo.rotate_min) return 1;
    size_t n = region_bytes / stride_of(bytes);
    return n ? (int)n : 1;
}

static void run_op(int op, const coll_size_t *z, int k)
{
    if (op == OP_BARRIER) {
        MCHECK(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    size_t off = (size_t)k * stride_of(z->bytes);
    void *src = src_region + off, *dst = dst_region + off;
    int n = npes, cntc = (int)z->count, blk = (int)z->block;
    switch (op) {
    case OP_BROADCAST:
        MCHECK(MPI_Bcast(me == 0 ? src : dst, (int)z->bytes, MPI_BYTE, 0, MPI_COMM_WORLD));
        break;
    case OP_REDUCE:
        MCHECK(MPI_Reduce(src, dst, cntc, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD));
        break;
    case OP_ALLREDUCE:
        MCHECK(MPI_Allreduce(src, dst, cntc, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        break;
    case OP_REDUCE_SCATTER:
        MCHECK(MPI_Reduce_scatter_block(src, dst, blk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        break;
    case OP_FCOLLECT:
        MCHECK(MPI_Allgather(src, blk, MPI_FLOAT, dst, blk, MPI_FLOAT, MPI_COMM_WORLD));
        break;
    case OP_ALLTOALL:
        MCHECK(MPI_Alltoall(src, blk, MPI_FLOAT, dst, blk, MPI_FLOAT, MPI_COMM_WORLD));
        break;
    case OP_ALLTOALLV:
        /* symm_alltoallv learns the counts itself: MPI exchanges them first */
        for (int j = 0; j < n; j++) {
            cnt[j] = blk;
            cnt[n + j] = j * blk;
        }
        MCHECK(MPI_Alltoall(cnt, 1, MPI_INT, cnt + 2 * n, 1, MPI_INT, MPI_COMM_WORLD));
        for (int j = 0, d = 0; j < n; j++) {
            cnt[3 * n + j] = d;
            d += cnt[2 * n + j];
        }
        MCHECK(MPI_Alltoallv(src, cnt, cnt + n, MPI_FLOAT, dst, cnt + 2 * n, cnt + 3 * n,
                             MPI_FLOAT, MPI_COMM_WORLD));
        break;
    }
}

static long check_op(int op, const coll_size_t *z)
{
    float *src = (float *)src_region, *dst = (float *)dst_region;
    size_t nsrc = coll_src_elems(op, z), ndst = coll_dst_elems(op, z);
    for (size_t i = 0; i < nsrc; i++)
        src[i] = coll_pattern(op, me, i);
    for (size_t i = 0; i < ndst; i++)
        dst[i] = -1.0f;
    if (op == OP_BROADCAST && me == 0) memcpy(dst, src, z->bytes); /* root's copy */
    run_op(op, z, 0);
    long wrong = 0;
    if (op == OP_REDUCE && me != 0) return 0;
    for (size_t i = 0; i < ndst; i++)
        if (dst[i] != coll_expected(op, z, me, npes, i)) wrong++;
    return wrong;
}

static bench_stat_t time_op(int op, const coll_size_t *z, int iters)
{
    int reps = mo.reps, nrot = op == OP_BARRIER ? 1 : nrot_for(z->bytes);
    double *v = calloc((size_t)reps, sizeof *v);
    for (int w = 0; w < (iters < 10 ? 2 : 10); w++)
        run_op(op, z, w % nrot);
    int k = 0;
    for (int r = 0; r < reps; r++) {
        double acc = 0;
        MCHECK(MPI_Barrier(MPI_COMM_WORLD));
        if (op == OP_BARRIER) {
            double t0 = bench_now();
            for (int i = 0; i < iters; i++)
                run_op(op, z, 0);
            acc = bench_now() - t0;
        } else {
            for (int i = 0; i < iters; i++) {
                double t0 = bench_now();
                run_op(op, z, k);
                acc += bench_now() - t0;
                k = (k + 1) % nrot;
                MCHECK(MPI_Barrier(MPI_COMM_WORLD));
            }
        }
        v[r] = avg_all(1e6 * acc / iters);
    }
    bench_stat_t s = bench_stats(v, reps);
    free(v);
    return s;
}

static int suite_coll(void)
{
    int n = npes;
    region_bytes = stride_of(mo.max_size);
    if (region_bytes < mo.rotate) region_bytes = mo.rotate;
    src_region = region(region_bytes);
    dst_region = region(region_bytes);
    cnt = calloc(4 * (size_t)n, sizeof *cnt);
    PRINT("# symm-bench-mpi coll: %d ranks, MPI_COMM_WORLD, float sum, root 0; median of %d "
          "repetitions of the average over ranks\n",
          n, mo.reps);
    long total_wrong = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        if (!bench_op_selected(&mo, coll_op_name[op])) continue;
        if (op == OP_BARRIER) {
            bench_stat_t s = time_op(op, NULL, mo.quick ? 50 : 10000);
            PRINT("\n# MPI_Barrier\n# Avg Latency(us)\n%17.3f\n", s.median);
            row("coll", "barrier", 0, s, 0);
            continue;
        }
        PRINT("\n# MPI %s\n%12s %12s %12s %10s %12s %12s %7s\n", coll_op_name[op], "# size(B)",
              "count", "time(us)", "spread(%)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        for (size_t s0 = mo.min_size; s0 <= mo.max_size; s0 *= 2) {
            coll_size_t z = coll_size_for(op, s0, n);
            long wrong = (long)max_all((double)check_op(op, &z));
            total_wrong += wrong;
            bench_stat_t s = time_op(op, &z, bench_iters_for(z.bytes, mo.quick));
            double alg = z.bytes / (s.median * 1e3), bus = alg * coll_bus_factor(op, n);
            PRINT("%12zu %12zu %12.3f %10.1f %12.3f %12.3f %7ld\n", z.bytes, z.count, s.median,
                  bench_spread_pct(s), alg, bus, wrong);
            row("coll", coll_op_name[op], (int64_t)z.bytes, s, bus);
        }
    }
    free(cnt);
    free(src_region);
    free(dst_region);
    return total_wrong ? 1 : 0;
}

/* ---------------------------------------------------------------- tile */
/* MPI_Reduce / MPI_Allreduce of one strided tile described by MPI_Type_vector. MPI's
 * predefined MPI_SUM is not defined on derived datatypes (Open MPI rejects it), so the
 * sum is a user operation (MPI_Op_create, commutative) that walks the vector's rows. */
static size_t tile_op_rows;
static MPI_Op tile_sum_op;

static void tile_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    size_t extent = (tile_op_rows - 1) * TILE_LD + TILE_COLS; /* floats */
    for (int k = 0; k < *len; k++) {
        const float *a = (const float *)in + (size_t)k * extent;
        float *b = (float *)inout + (size_t)k * extent;
        for (size_t r = 0; r < tile_op_rows; r++)
            for (size_t c = 0; c < TILE_COLS; c++)
                b[r * TILE_LD + c] += a[r * TILE_LD + c];
    }
}

static int tile_run(int allreduce, MPI_Datatype vec, char *in, char *out)
{
    if (allreduce) return MPI_Allreduce(in, out, 1, vec, tile_sum_op, MPI_COMM_WORLD);
    return MPI_Reduce(in, out, 1, vec, tile_sum_op, 0, MPI_COMM_WORLD);
}

static int mpi_suite_tile(void)
{
    size_t lo = mo.quick ? 16 << 10 : 64 << 10, hi = mo.max_size;
    if (mo.min_size > lo) lo = mo.min_size;
    size_t slot_max = ((tile_rows_for(hi) * TILE_LD * 4) + 4095) & ~(size_t)4095;
    size_t foot = slot_max > 2 * mo.rotate ? slot_max : 2 * mo.rotate;
    char *in_r = region(foot), *out_r = region(foot);
    MCHECK(MPI_Op_create(tile_sum, 1, &tile_sum_op));
    PRINT("# symm-bench-mpi tile: %d ranks, MPI_Reduce (root 0) / MPI_Allreduce of "
          "MPI_Type_vector(rows, %d, %d, MPI_FLOAT) with a user sum (MPI_SUM is not defined "
          "on derived types)\n",
          npes, TILE_COLS, TILE_LD);
    long total_wrong = 0;
    const char *names[2] = {"tile_reduce", "tile_allreduce"};
    for (int all = 0; all < 2; all++) {
        PRINT("\n# MPI %s\n%12s %8s %12s %10s %12s %12s %7s\n", names[all], "# size(B)", "rows",
              "time(us)", "spread(%)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        double f = all ? 2.0 * (npes - 1) / npes : 1.0;
        for (size_t sz = lo; sz <= hi; sz *= 4) {
            size_t rows = tile_rows_for(sz), bytes = rows * TILE_COLS * 4;
            size_t slot = (rows * TILE_LD * 4 + 4095) & ~(size_t)4095;
            int nrot = (int)(foot / slot);
            MPI_Datatype vec;
            MCHECK(MPI_Type_vector((int)rows, TILE_COLS, TILE_LD, MPI_FLOAT, &vec));
            MCHECK(MPI_Type_commit(&vec));
            tile_op_rows = rows;
            /* check on slot 0 */
            float *in = (float *)in_r, *out = (float *)out_r;
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < TILE_LD; c++) {
                    in[r * TILE_LD + c] = c < TILE_COLS ? tile_pattern(me, r, c) : -7.0f;
                    out[r * TILE_LD + c] = -1.0f;
                }
            MCHECK(tile_run(all, vec, in_r, out_r));
            long wrong = 0;
            float tri = (float)(npes * (npes + 1) / 2);
            if (all || me == 0)
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = 0; c < TILE_LD; c++)
                        if (out[r * TILE_LD + c] !=
                            (c < TILE_COLS ? tile_pattern(0, r, c) * tri : -1.0f))
                            wrong++;
            wrong = (long)max_all((double)wrong);
            total_wrong += wrong;
            int iters = bench_iters_for(bytes, mo.quick), reps = mo.reps, k = 0;
            double *v = calloc((size_t)reps, sizeof *v);
            for (int w = 0; w < 2; w++)
                MCHECK(tile_run(all, vec, in_r, out_r));
            for (int r = 0; r < reps; r++) {
                double acc = 0;
                MCHECK(MPI_Barrier(MPI_COMM_WORLD));
                for (int i = 0; i < iters; i++) {
                    double t0 = bench_now();
                    MCHECK(
                        tile_run(all, vec, in_r + (size_t)k * slot, out_r + (size_t)k * slot));
                    acc += bench_now() - t0;
                    k = (k + 1) % nrot;
                    MCHECK(MPI_Barrier(MPI_COMM_WORLD));
                }
                v[r] = avg_all(1e6 * acc / iters);
            }
            bench_stat_t s = bench_stats(v, reps);
            free(v);
            MPI_Type_free(&vec);
            double alg = bytes / (s.median * 1e3);
            PRINT("%12zu %8zu %12.3f %10.1f %12.3f %12.3f %7ld\n", bytes, rows, s.median,
                  bench_spread_pct(s), alg, alg * f, wrong);
            row("tile", names[all], (int64_t)bytes, s, alg * f);
        }
    }
    MPI_Op_free(&tile_sum_op);
    free(in_r);
    free(out_r);
    return total_wrong ? 1 : 0;
}

/* ---------------------------------------------------------------- moe */
/* Dispatch: MPI_Alltoall of the per-expert counts, then MPI_Alltoallv of the rows (the
 * rows arrive rank-major; no expert-major permutation or alignment is done). Combine:
 * the same in reverse, counts first too. */
typedef struct {
    int *scnt, *sdsp, *rcnt, *rdsp; /* in rows, per rank */
    int *ecnt_r;                    /* received counts per (rank, expert) */
} moe_plan_t;

static void moe_exchange(moe_plan_t *p, const int *ecnt_send, MPI_Datatype rowt, const char *in,
                         char *out)
{
    MCHECK(
        MPI_Alltoall(ecnt_send, MOE_NE, MPI_INT, p->ecnt_r, MOE_NE, MPI_INT, MPI_COMM_WORLD));
    for (int j = 0, sd = 0, rd = 0; j < npes; j++) {
        p->scnt[j] = p->rcnt[j] = 0;
        for (int e = 0; e < MOE_NE; e++) {
            p->scnt[j] += ecnt_send[j * MOE_NE + e];
            p->rcnt[j] += p->ecnt_r[j * MOE_NE + e];
        }
        p->sdsp[j] = sd;
        p->rdsp[j] = rd;
        sd += p->scnt[j];
        rd += p->rcnt[j];
    }
    MCHECK(
        MPI_Alltoallv(in, p->scnt, p->sdsp, rowt, out, p->rcnt, p->rdsp, rowt, MPI_COMM_WORLD));
}

static int mpi_suite_moe(void)
{
    int n = npes, ng = n * MOE_NE;
    size_t lo = mo.quick ? 16 << 10 : 64 << 10, hi = mo.max_size;
    if (mo.min_size > lo) lo = mo.min_size;
    size_t max_rows = hi / MOE_ROW_BYTES ? hi / MOE_ROW_BYTES : 1;
    size_t in_bytes = (max_rows * MOE_ROW_BYTES + 4095) & ~(size_t)4095;
    size_t mid_bytes = ((size_t)n * max_rows * MOE_ROW_BYTES + 4095) & ~(size_t)4095;
    size_t foot = mo.rotate > in_bytes ? mo.rotate : in_bytes;
    size_t mid_foot = foot / in_bytes * mid_bytes;
    char *in_r = region(foot), *back_r = region(foot), *mid_r = region(mid_foot);
    MPI_Datatype rowt;
    MCHECK(MPI_Type_contiguous(MOE_ROW_BYTES, MPI_BYTE, &rowt));
    MCHECK(MPI_Type_commit(&rowt));
    moe_plan_t p;
    int *ints = calloc(4 * (size_t)n + 3 * (size_t)ng, sizeof *ints);
    p.scnt = ints;
    p.sdsp = ints + n;
    p.rcnt = ints + 2 * n;
    p.rdsp = ints + 3 * n;
    p.ecnt_r = ints + 4 * n;
    int *ecnt_mine = p.ecnt_r + ng, *ecnt_back = ecnt_mine + ng;
    PRINT("# symm-bench-mpi moe: %d ranks x %d experts, rows of %d B: MPI_Alltoall of the "
          "counts + MPI_Alltoallv of the rows (dispatch and combine)\n",
          n, MOE_NE, MOE_ROW_BYTES);
    long total_wrong = 0;
    const char *names[2] = {"dispatch", "combine"};
    for (int comb = 0; comb < 2; comb++) {
        PRINT("\n# MPI %s\n%12s %8s %12s %10s %12s %12s %7s\n", names[comb], "# size(B)",
              "rows", "time(us)", "spread(%)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        for (size_t sz = lo; sz <= hi; sz *= 4) {
            size_t rows = sz / MOE_ROW_BYTES ? sz / MOE_ROW_BYTES : 1,
                   bytes = rows * MOE_ROW_BYTES;
            size_t in_stride = (bytes + 4095) & ~(size_t)4095;
            size_t mid_stride = ((size_t)n * bytes + 4095) & ~(size_t)4095;
            size_t nrot = bytes >= mo.rotate_min ? foot / in_stride : 1;
            if (nrot > mid_foot / mid_stride) nrot = mid_foot / mid_stride;
            if (nrot < 1) nrot = 1;
            for (int g = 0; g < ng; g++)
                ecnt_mine[g] = (int)moe_split(me, n, rows, g);
            /* fill every slot: rows tagged (source, expert, index) */
            for (size_t k = 0; k < nrot; k++) {
                char *in = in_r + k * in_stride;
                size_t r = 0;
                for (int g = 0; g < ng; g++)
                    for (int i = 0; i < ecnt_mine[g]; i++, r++) {
                        uint64_t tag = moe_row_tag(me, g, (size_t)i);
                        memset(in + r * MOE_ROW_BYTES, (int)(r & 0xff), MOE_ROW_BYTES);
                        memcpy(in + r * MOE_ROW_BYTES, &tag, 8);
                    }
            }
            /* check: dispatch then combine gives the input back */
            moe_exchange(&p, ecnt_mine, rowt, in_r, mid_r);
            long wrong = 0;
            size_t r = 0;
            for (int s = 0; s < n; s++)
                for (int e = 0; e < MOE_NE; e++)
                    for (int i = 0; i < p.ecnt_r[s * MOE_NE + e]; i++, r++) {
                        uint64_t tag;
                        memcpy(&tag, mid_r + r * MOE_ROW_BYTES, 8);
                        if (tag != moe_row_tag(s, me * MOE_NE + e, (size_t)i)) wrong++;
                    }
            memcpy(ecnt_back, p.ecnt_r, (size_t)ng * sizeof *ecnt_back);
            moe_exchange(&p, ecnt_back, rowt, mid_r, back_r);
            if (memcmp(back_r, in_r, bytes)) wrong++;
            wrong = (long)max_all((double)wrong);
            total_wrong += wrong;
            /* combine reads what a dispatch left in each slot */
            if (comb)
                for (size_t k = 0; k < nrot; k++)
                    moe_exchange(&p, ecnt_mine, rowt, in_r + k * in_stride,
                                 mid_r + k * mid_stride);
            int iters = bench_iters_for(bytes, mo.quick), reps = mo.reps;
            size_t k = 0;
            double *v = calloc((size_t)reps, sizeof *v);
            for (int r2 = 0; r2 < reps; r2++) {
                double acc = 0;
                MCHECK(MPI_Barrier(MPI_COMM_WORLD));
                for (int i = 0; i < iters; i++) {
                    double t0 = bench_now();
                    if (comb)
                        moe_exchange(&p, ecnt_back, rowt, mid_r + k * mid_stride,
                                     back_r + k * in_stride);
                    else
                        moe_exchange(&p, ecnt_mine, rowt, in_r + k * in_stride,
                                     mid_r + k * mid_stride);
                    acc += bench_now() - t0;
                    k = (k + 1) % nrot;
                    MCHECK(MPI_Barrier(MPI_COMM_WORLD));
                }
                v[r2] = avg_all(1e6 * acc / iters);
            }
            bench_stat_t s = bench_stats(v, reps);
            free(v);
            double alg = bytes / (s.median * 1e3), f = (double)(n - 1) / n;
            PRINT("%12zu %8zu %12.3f %10.1f %12.3f %12.3f %7ld\n", bytes, rows, s.median,
                  bench_spread_pct(s), alg, alg * f, wrong);
            row("moe", names[comb], (int64_t)bytes, s, alg * f);
        }
    }
    MPI_Type_free(&rowt);
    free(ints);
    free(in_r);
    free(back_r);
    free(mid_r);
    return total_wrong ? 1 : 0;
}

/* ---------------------------------------------------------------- rma */
/* The floor under symm's transport between hosts: one-sided operations on a window made
 * as symm makes its own (MPI_Win_create over the process's memory, one MPI_Win_lock_all
 * epoch), each rank to the next; a put that its target then reads (a stream's chunk);
 * beside them MPI_Alltoallv of the same bytes per rank and a local memcpy. What an operation of
 * symm between groups can cost at least. */
typedef enum { RMA_PUT, RMA_GET, RMA_PUT_READ, RMA_A2AV, RMA_COPY, RMA_COUNT } rma_op_t;
static const char *rma_name[RMA_COUNT] = {"put_flush", "get_flush", "put_read", "alltoallv",
                                          "memcpy"};
static uint64_t rma_seq; /* put_read's signals, rising across calls */

static char *rma_base; /* the window's memory */

static bench_stat_t rma_time(rma_op_t op, MPI_Win win, char *mine, char *other, size_t bytes,
                             int *cnts, int *displs, int iters)
{
    int reps = mo.reps, peer = (me + 1) % npes;
    double *v = calloc((size_t)reps, sizeof *v);
    for (int r = 0; r < reps; r++) {
        MCHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = bench_now();
        for (int i = 0; i < iters; i++) {
            if (op == RMA_PUT) {
                MCHECK(MPI_Put(mine, (int)bytes, MPI_BYTE, peer, 0, (int)bytes, MPI_BYTE, win));
                MCHECK(MPI_Win_flush(peer, win));
            } else if (op == RMA_GET) {
                MCHECK(
                    MPI_Get(other, (int)bytes, MPI_BYTE, peer, 0, (int)bytes, MPI_BYTE, win));
                MCHECK(MPI_Win_flush(peer, win));
            } else if (op == RMA_PUT_READ) {
                /* as a stream does: the bytes, then a signal word after them; the target
                 * waits for its word and reads what came (the next put then takes the
                 * lines back from the target's cache) */
                uint64_t seq = ++rma_seq;
                volatile uint64_t *word = (volatile uint64_t *)(rma_base + mo.max_size);
                MCHECK(MPI_Put(mine, (int)bytes, MPI_BYTE, peer, 0, (int)bytes, MPI_BYTE, win));
                MCHECK(MPI_Win_flush(peer, win));
                MCHECK(MPI_Put(&seq, 1, MPI_UINT64_T, peer, (MPI_Aint)mo.max_size, 1,
                               MPI_UINT64_T, win));
                MCHECK(MPI_Win_flush(peer, win));
                while (*word < seq)
                    MCHECK(MPI_Win_sync(win));
                memcpy(other, rma_base, bytes);
            } else if (op == RMA_A2AV) {
                MCHECK(MPI_Alltoallv(mine, cnts, displs, MPI_BYTE, other, cnts, displs,
                                     MPI_BYTE, MPI_COMM_WORLD));
            } else {
                memcpy(other, mine, bytes);
            }
        }
        v[r] = avg_all(1e6 * (bench_now() - t0) / iters);
    }
    bench_stat_t s = bench_stats(v, reps);
    free(v);
    return s;
}

static int suite_rma(void)
{
    size_t max = mo.max_size;
    char *base = region(max + 64), *mine = region(max), *other = region(max);
    rma_base = base;
    for (size_t i = 0; i < max; i++)
        mine[i] = (char)(i * 7 + (size_t)me);
    MPI_Win win;
    MCHECK(MPI_Win_create(base, (MPI_Aint)max + 64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MCHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    int *cnts = calloc(2 * (size_t)npes, sizeof *cnts), *displs = cnts + npes;
    PRINT("# symm-bench-mpi rma: %d ranks, a window from MPI_Win_create in one lock_all "
          "epoch, each rank to the next; put_read: put, a signal word, the target waits "
          "for it and reads the bytes; alltoallv: size bytes per rank, size/n to each; "
          "median of %d repetitions of the average over ranks\n%12s",
          npes, mo.reps, "# size(B)");
    for (int op = 0; op < RMA_COUNT; op++)
        PRINT(" %14s", rma_name[op]);
    PRINT("   (us)\n");
    for (size_t z = mo.min_size; z <= max; z *= 2) {
        for (int i = 0; i < npes; i++) {
            cnts[i] = (int)(z / (size_t)npes);
            displs[i] = i * cnts[i];
        }
        PRINT("%12zu", z);
        for (int op = 0; op < RMA_COUNT; op++) {
            bench_stat_t s = rma_time((rma_op_t)op, win, mine, other, z, cnts, displs,
                                      bench_iters_for(z, mo.quick));
            PRINT(" %14.3f", s.median);
            row("rma", rma_name[op], (int64_t)z, s, 0);
        }
        PRINT("\n");
    }
    MCHECK(MPI_Win_unlock_all(win));
    MCHECK(MPI_Win_free(&win));
    free(cnts);
    free(base);
    free(mine);
    free(other);
    return 0;
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &npes);
    int parsed = bench_parse_opts(argc, argv, &mo, "symm-bench-mpi");
    if (parsed) {
        MPI_Finalize();
        return parsed > 0 ? 0 : 2;
    }
    int rc = 0;
    if (!strcmp(mo.suite, "teams")) {
        teams_dups(teams_dup_limit());
        teams_plain();
        teams_concurrent(provided);
    } else if (!strcmp(mo.suite, "coll")) {
        rc = suite_coll();
    } else if (!strcmp(mo.suite, "tile")) {
        rc = mpi_suite_tile();
    } else if (!strcmp(mo.suite, "moe")) {
        rc = mpi_suite_moe();
    } else if (!strcmp(mo.suite, "rma")) {
        rc = suite_rma();
    } else {
        PRINT("symm-bench-mpi: unknown suite %s\n", mo.suite);
        rc = 2;
    }
    MPI_Finalize();
    return rc;
}
