/* bench_coll.c — symm-bench coll: OSU-style latency and nccl-tests-style bandwidth of the
 * collectives on SYMM_TEAM_WORLD, with a plain memcpy measured in the same run as the
 * ceiling. Each (collective, size) is first checked once on patterned data (#wrong). */
#include "symm_bench.h"

#include <math.h>
#include <string.h>

#include "coll_spec.h"

static char *src_region, *dst_region;
static size_t region_bytes;
static size_t *cnt_a, *cnt_b; /* alltoallv send counts; received counts and displs */

static size_t stride_of(size_t bytes)
{
    return (bytes + 4095) & ~(size_t)4095;
}

/* Each of the two regions (source, destination): the largest buffer, or the rotation. */
static size_t coll_region_for(size_t max, size_t rotate)
{
    size_t r = stride_of(max);
    return r > rotate ? r : rotate;
}

static size_t coll_footprint(size_t max, size_t rotate)
{
    return 2 * coll_region_for(max, rotate);
}

static int nrot_for(size_t bytes)
{
    if (bytes < sb_opts.rotate_min) return 1;
    size_t n = region_bytes / stride_of(bytes);
    return n ? (int)n : 1;
}

/* Runs one collective on rotation slot k. */
static symm_status_t run_op(int op, const coll_size_t *z, int k)
{
    if (op == OP_BARRIER) return symm_barrier(SYMM_TEAM_WORLD);
    size_t off = (size_t)k * stride_of(z->bytes);
    void *src = src_region + off, *dst = dst_region + off;
    int n = sb_npes;
    switch (op) {
    case OP_BROADCAST:
        return symm_broadcast(SYMM_TEAM_WORLD, dst, src, z->bytes, 0);
    case OP_REDUCE:
        return symm_reduce(SYMM_TEAM_WORLD, dst, src, z->count, SYMM_FLOAT, SYMM_OP_SUM, 0);
    case OP_ALLREDUCE:
        return symm_allreduce(SYMM_TEAM_WORLD, dst, src, z->count, SYMM_FLOAT, SYMM_OP_SUM);
    case OP_REDUCE_SCATTER:
        return symm_reduce_scatter(SYMM_TEAM_WORLD, dst, src, z->block, SYMM_FLOAT,
                                   SYMM_OP_SUM);
    case OP_FCOLLECT:
        return symm_fcollect(SYMM_TEAM_WORLD, dst, src, z->block * 4);
    case OP_ALLTOALL:
        return symm_alltoall(SYMM_TEAM_WORLD, dst, src, z->block * 4);
    case OP_ALLTOALLV:
        for (int j = 0; j < n; j++)
            cnt_a[j] = z->block;
        return symm_alltoallv(SYMM_TEAM_WORLD, dst, z->block * (size_t)n, src, cnt_a, NULL, 4,
                              cnt_b, cnt_b + n);
    }
    return SYMM_ERR_INVALID_ARG;
}

/* Fills slot 0 with the pattern, runs once, counts wrong elements on this PE. */
static long check_op(int op, const coll_size_t *z)
{
    float *src = (float *)src_region, *dst = (float *)dst_region;
    size_t nsrc = coll_src_elems(op, z), ndst = coll_dst_elems(op, z);
    for (size_t i = 0; i < nsrc; i++)
        src[i] = coll_pattern(op, sb_me, i);
    for (size_t i = 0; i < ndst; i++)
        dst[i] = -1.0f;
    SB_CHECK(symm_barrier_all());
    SB_CHECK(run_op(op, z, 0));
    SB_CHECK(symm_barrier_all());
    long wrong = 0;
    if (op == OP_REDUCE && sb_me != 0) return 0;
    for (size_t i = 0; i < ndst; i++)
        if (dst[i] != coll_expected(op, z, sb_me, sb_npes, i)) wrong++;
    if (op == OP_ALLTOALLV)
        for (int j = 0; j < sb_npes; j++)
            if (cnt_b[j] != z->block || cnt_b[sb_npes + j] != (size_t)j * z->block) wrong++;
    return wrong;
}

static symm_status_t run_op_ctx(const void *z, int op, size_t k)
{
    return run_op(op, (const coll_size_t *)z, (int)k);
}

/* Median over repetitions of the average over PEs of the per-operation time (us): OSU
 * style, one operation between world barriers, so rooted calls cannot pipeline. */
static bench_stat_t time_op(int op, const coll_size_t *z, int iters)
{
    int warmup = iters < 10 ? 2 : 10;
    if (op != OP_BARRIER)
        return sb_time_slots(run_op_ctx, z, op, (size_t)nrot_for(z->bytes), iters, warmup);
    /* barriers back to back: the barrier is what is measured */
    int reps = sb_opts.reps;
    double *v = calloc((size_t)reps, sizeof *v);
    for (int w = 0; w < warmup; w++)
        SB_CHECK(run_op(op, z, 0));
    for (int r = 0; r < reps; r++) {
        SB_CHECK(symm_barrier_all());
        double t0 = bench_now();
        for (int i = 0; i < iters; i++)
            SB_CHECK(run_op(op, z, 0));
        v[r] = sb_avg_all(1e6 * (bench_now() - t0) / iters);
    }
    bench_stat_t s = bench_stats(v, reps);
    free(v);
    return s;
}

/* memcpy between rotating slots on PE 0 while the others wait: the ceiling. */
static bench_stat_t time_memcpy(size_t bytes, int iters)
{
    int reps = sb_opts.reps, nrot = nrot_for(bytes);
    double *v = calloc((size_t)reps, sizeof *v);
    if (sb_me == 0) {
        int k = 0;
        for (int r = -1; r < reps; r++) { /* r = -1 warms up */
            double t0 = bench_now();
            for (int i = 0; i < iters; i++) {
                size_t off = (size_t)k * stride_of(bytes);
                memcpy(dst_region + off, src_region + off, bytes);
                k = (k + 1) % nrot;
            }
            double us = 1e6 * (bench_now() - t0) / iters;
            if (r >= 0) v[r] = us;
        }
    }
    SB_CHECK(symm_barrier_all());
    bench_stat_t s = bench_stats(v, reps);
    free(v);
    return s;
}

#define MAX_SIZES 64
typedef struct {
    size_t bytes;
    double us, mpi_us;
} lat_row_t;

int sb_suite_coll(void)
{
    int n = sb_npes;
    if (sb_fit_heap("coll", coll_footprint, sb_opts.min_size)) return 1;
    region_bytes = coll_region_for(sb_opts.max_size, sb_opts.rotate);
    src_region = sb_symm_region(region_bytes);
    dst_region = sb_symm_region(region_bytes);
    cnt_a = calloc(3 * (size_t)n, sizeof(size_t));
    cnt_b = cnt_a + n;
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    for (size_t s = sb_opts.min_size; s <= sb_opts.max_size && nsizes < MAX_SIZES; s *= 2)
        sizes[nsizes++] = s;

    SB_PRINT("# symm-bench coll: %d PEs, SYMM_TEAM_WORLD, float sum for reductions, "
             "root 0; %d repetitions, median of the average over PEs\n"
             "# buffers of %zu B and more rotate through %zu MiB per direction; each row was "
             "first checked on patterned data (#wrong)\n"
             "# size = the larger buffer per PE (nccl-tests); busbw factors: allreduce "
             "2(n-1)/n, reduce_scatter/fcollect/alltoall(v) (n-1)/n, others 1\n"
             "# ratio(symm/MPI) = symm busbw / MPI busbw (higher is better)\n",
             n, sb_opts.reps, sb_opts.rotate_min, region_bytes >> 20);

    /* memcpy first: the ceiling of this run */
    double memcpy_gbs[MAX_SIZES];
    SB_PRINT("\n# memcpy (PE 0 alone, same rotation)\n%12s %12s %10s %12s\n", "# size(B)",
             "time(us)", "spread(%)", "bw(GB/s)");
    for (int i = 0; i < nsizes; i++) {
        bench_stat_t s = time_memcpy(sizes[i], bench_iters_for(sizes[i], sb_opts.quick));
        memcpy_gbs[i] = sb_max_all(sb_me == 0 ? sizes[i] / (s.median * 1e3) : 0);
        SB_PRINT("%12zu %12.3f %10.1f %12.2f\n", sizes[i], s.median, bench_spread_pct(s),
                 memcpy_gbs[i]);
        if (sb_me == 0)
            bench_tsv_row(&sb_opts, "coll", "memcpy", (int64_t)sizes[i], s, memcpy_gbs[i],
                          bench_nan(), bench_nan());
    }

    static lat_row_t lat[OP_COUNT][MAX_SIZES];
    int nlat[OP_COUNT] = {0};
    long total_wrong = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        if (!bench_op_selected(&sb_opts, coll_op_name[op])) continue;
        if (op == OP_BARRIER) {
            bench_stat_t s = time_op(op, NULL, sb_opts.quick ? 50 : 10000);
            double m = sb_anchor_us("coll", "barrier", 0);
            lat[op][0] = (lat_row_t){0, s.median, m};
            nlat[op] = 1;
            if (sb_me == 0)
                bench_tsv_row(&sb_opts, "coll", "barrier", 0, s, 0, m, s.median / m);
            continue;
        }
        SB_PRINT("\n# %s%s\n%12s %12s %6s %6s %12s %10s %12s %12s %7s %12s %16s %13s\n",
                 coll_op_name[op], coll_is_reduction(op) ? " (float, sum)" : "", "# size(B)",
                 "count", "type", "redop", "time(us)", "spread(%)", "algbw(GB/s)",
                 "busbw(GB/s)", "#wrong", "MPI busbw", "ratio(symm/MPI)", "busbw/memcpy");
        for (int i = 0; i < nsizes; i++) {
            coll_size_t z = coll_size_for(op, sizes[i], n);
            long wrong = (long)sb_max_all((double)check_op(op, &z));
            total_wrong += wrong;
            bench_stat_t s = time_op(op, &z, bench_iters_for(z.bytes, sb_opts.quick));
            double alg = z.bytes / (s.median * 1e3), bus = alg * coll_bus_factor(op, n);
            double m = sb_anchor_us("coll", coll_op_name[op], (int64_t)z.bytes);
            double mbus = z.bytes / (m * 1e3) * coll_bus_factor(op, n);
            SB_PRINT("%12zu %12zu %6s %6s %12.3f %10.1f %12.3f %12.3f %7ld %12.3f %16.2f "
                     "%13.2f\n",
                     z.bytes, z.count, "float", coll_is_reduction(op) ? "sum" : "none",
                     s.median, bench_spread_pct(s), alg, bus, wrong, mbus, m / s.median,
                     bus / memcpy_gbs[i]);
            if (sb_me == 0)
                bench_tsv_row(&sb_opts, "coll", coll_op_name[op], (int64_t)z.bytes, s, bus, m,
                              m / s.median);
            if (z.bytes <= 4096 && nlat[op] < MAX_SIZES)
                lat[op][nlat[op]++] = (lat_row_t){z.bytes, s.median, m};
        }
    }

    /* OSU-style latency tables from the same measurements */
    SB_PRINT("\n# OSU-style latency (small messages); ratio = symm latency / MPI latency "
             "(lower is better)\n");
    for (int op = 0; op < OP_COUNT; op++) {
        if (!nlat[op]) continue;
        SB_PRINT("\n# symm %s\n", coll_op_name[op]);
        if (op == OP_BARRIER) {
            SB_PRINT("# Avg Latency(us)   MPI(us)   ratio(symm/MPI)\n%17.3f %9.3f %17.3f\n",
                     lat[op][0].us, lat[op][0].mpi_us, lat[op][0].us / lat[op][0].mpi_us);
            continue;
        }
        SB_PRINT("%-10s %16s %10s %16s\n", "# Size", "Avg Latency(us)", "MPI(us)",
                 "ratio(symm/MPI)");
        for (int i = 0; i < nlat[op]; i++)
            SB_PRINT("%-10zu %16.3f %10.3f %16.3f\n", lat[op][i].bytes, lat[op][i].us,
                     lat[op][i].mpi_us, lat[op][i].us / lat[op][i].mpi_us);
    }
    SB_PRINT("\n# total wrong elements: %ld\n", total_wrong);
    free(cnt_a);
    symm_free(dst_region);
    symm_free(src_region);
    return total_wrong ? 1 : 0;
}
