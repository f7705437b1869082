/* bench_tile.c — symm-bench tile: bandwidth of symm_tile_reduce (root 0) and
 * symm_tile_allreduce on a strided float tile (TILE_COLS of every TILE_LD floats), plain
 * and worker-parallel (the _par rows: the automatic worker count, or --workers N, one
 * pool duplicate each). Anchor: MPI_Reduce / MPI_Allreduce on an MPI_Type_vector of the
 * same tile. */
#include "symm_bench.h"

#include <stdint.h>
#include <string.h>

#include "tile_moe_spec.h"

enum { T_REDUCE, T_ALLREDUCE, T_REDUCE_PAR, T_ALLREDUCE_PAR, T_COUNT };
static const char *const t_name[T_COUNT] = {"tile_reduce", "tile_allreduce", "tile_reduce_par",
                                            "tile_allreduce_par"};
static const char *const t_anchor[T_COUNT] = {"tile_reduce", "tile_allreduce", "tile_reduce",
                                              "tile_allreduce"};

static char *in_region, *out_region;
static size_t region_bytes;
static symm_pool_t t_pool;
static int t_workers; /* nworkers passed to the _parallel forms: --workers, or 0 */

static size_t slot_bytes(size_t rows)
{
    return (rows * TILE_LD * 4 + 4095) & ~(size_t)4095;
}

/* Each of the two regions (in, out): the largest tile's matrix, or twice the rotation
 * (the matrix is twice the tile). */
static size_t t_region_for(size_t max, size_t rotate)
{
    size_t r = slot_bytes(tile_rows_for(max));
    return r > 2 * rotate ? r : 2 * rotate;
}

static size_t t_footprint(size_t max, size_t rotate)
{
    return 2 * t_region_for(max, rotate);
}

static symm_status_t t_run(int op, size_t rows, size_t k)
{
    size_t off = k * slot_bytes(rows);
    symm_tile_t in = {in_region + off, rows, TILE_COLS, TILE_LD};
    symm_tile_t out = {out_region + off, rows, TILE_COLS, TILE_LD};
    switch (op) {
    case T_REDUCE:
        return symm_tile_reduce(SYMM_TEAM_WORLD, out, in, SYMM_FLOAT, SYMM_OP_SUM, 0);
    case T_ALLREDUCE:
        return symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_FLOAT, SYMM_OP_SUM);
    case T_REDUCE_PAR:
        return symm_tile_reduce_parallel(t_pool, t_workers, out, in, SYMM_FLOAT, SYMM_OP_SUM,
                                         0);
    case T_ALLREDUCE_PAR:
        return symm_tile_allreduce_parallel(t_pool, t_workers, out, in, SYMM_FLOAT,
                                            SYMM_OP_SUM);
    }
    return SYMM_ERR_INVALID_ARG;
}

/* Patterned tile in slot 0; the gap columns of out hold a sentinel that must survive. */
static long t_check(int op, size_t rows)
{
    float *in = (float *)in_region, *out = (float *)out_region;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < TILE_LD; c++) {
            in[r * TILE_LD + c] = c < TILE_COLS ? tile_pattern(sb_me, r, c) : -7.0f;
            out[r * TILE_LD + c] = -1.0f;
        }
    SB_CHECK(symm_barrier_all());
    SB_CHECK(t_run(op, rows, 0));
    SB_CHECK(symm_barrier_all());
    if ((op == T_REDUCE || op == T_REDUCE_PAR) && sb_me != 0) return 0;
    long wrong = 0;
    float tri = (float)(sb_npes * (sb_npes + 1) / 2);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < TILE_LD; c++) {
            float want = c < TILE_COLS ? tile_pattern(0, r, c) * tri : -1.0f;
            if (out[r * TILE_LD + c] != want) wrong++;
        }
    return wrong;
}

static symm_status_t t_run_ctx(const void *rows, int op, size_t k)
{
    return t_run(op, *(const size_t *)rows, k);
}

static bench_stat_t t_time(int op, size_t rows, int iters)
{
    return sb_time_slots(t_run_ctx, &rows, op, region_bytes / slot_bytes(rows), iters, 2);
}

int sb_suite_tile(void)
{
    size_t lo = sb_opts.quick ? 16 << 10 : 64 << 10;
    if (sb_opts.min_size > lo) lo = sb_opts.min_size;
    if (sb_fit_heap("tile", t_footprint, lo)) return 1;
    size_t hi = sb_opts.max_size;
    region_bytes = t_region_for(hi, sb_opts.rotate);
    in_region = sb_symm_region(region_bytes);
    out_region = sb_symm_region(region_bytes);
    t_workers = sb_opts.workers;
    SB_CHECK(symm_pool_create(SYMM_TEAM_WORLD, t_workers ? (size_t)t_workers : SB_POOL_AUTO,
                              &t_pool));
    char wdesc[160];
    sb_workers_desc(t_pool, t_workers, tile_rows_for(hi) * TILE_COLS * 4, wdesc, sizeof wdesc);
    SB_PRINT("# symm-bench tile: %d PEs, float sum, tile of rows x %d floats with a row "
             "stride of %d floats (strided, half of each row); root 0\n"
             "# size = tile bytes per PE; busbw = algbw (reduce), 2(n-1)/n algbw (allreduce)\n"
             "# _par: the _parallel form on a pool, %s\n"
             "# anchor: MPI_Reduce / MPI_Allreduce of one MPI_Type_vector(rows, %d, %d, "
             "MPI_FLOAT); ratio(symm/MPI) = MPI time / symm time\n"
             "# tiles rotate through %zu MiB; median of %d repetitions of the average over "
             "PEs\n",
             sb_npes, TILE_COLS, TILE_LD, wdesc, TILE_COLS, TILE_LD, region_bytes >> 20,
             sb_opts.reps);
    long total_wrong = 0;
    for (int op = 0; op < T_COUNT; op++) {
        if (!bench_op_selected(&sb_opts, t_name[op])) continue;
        int par = op == T_REDUCE_PAR || op == T_ALLREDUCE_PAR;
        SB_PRINT("\n# %s\n%12s %8s %12s %10s %12s %12s %7s %12s %16s%s\n", t_name[op],
                 "# size(B)", "rows", "time(us)", "spread(%)", "algbw(GB/s)", "busbw(GB/s)",
                 "#wrong", "MPI busbw", "ratio(symm/MPI)", par ? "  workers" : "");
        double f =
            (op == T_ALLREDUCE || op == T_ALLREDUCE_PAR) ? 2.0 * (sb_npes - 1) / sb_npes : 1.0;
        for (size_t sz = lo; sz <= hi; sz *= 4) {
            size_t rows = tile_rows_for(sz), bytes = rows * TILE_COLS * 4;
            long wrong = (long)sb_max_all((double)t_check(op, rows));
            total_wrong += wrong;
            bench_stat_t s = t_time(op, rows, bench_iters_for(bytes, sb_opts.quick));
            int nw = par ? sb_workers_used(t_pool, t_workers, bytes) : 0;
            sb_tm_row("tile", t_name[op], t_anchor[op], bytes, rows, s, f, wrong, nw,
                      t_workers);
        }
    }
    SB_PRINT("\n# total wrong elements: %ld\n", total_wrong);
    SB_CHECK(symm_pool_destroy(t_pool));
    symm_free(out_region);
    symm_free(in_region);
    return total_wrong ? 1 : 0;
}
