/* bench_moe.c — symm-bench moe: bandwidth of symm_moe_dispatch (rank-major tokens to
 * expert-major, aligned segments) and symm_moe_combine (its inverse), plain and
 * worker-parallel (the _par rows: the automatic worker count, or --workers N), with
 * uneven deterministic splits over MOE_NE experts per PE. Anchor: MPI_Alltoall of the
 * counts, then MPI_Alltoallv of the rows. */
#include "symm_bench.h"

#include <stdint.h>
#include <string.h>

#include "tile_moe_spec.h"

enum { M_DISPATCH, M_COMBINE, M_DISPATCH_PAR, M_COMBINE_PAR, M_COUNT };
static const char *const m_name[M_COUNT] = {"dispatch", "combine", "dispatch_par",
                                            "combine_par"};
static const char *const m_anchor[M_COUNT] = {"dispatch", "combine", "dispatch", "combine"};

static char *in_region, *mid_region, *back_region; /* input, dispatched, combined */
static size_t in_stride, mid_stride, nslots;
static size_t *splits, *mid_splits, *mid_offs, *back_splits, *back_offs;
static symm_pool_t m_pool;
static int m_workers; /* nworkers passed to the _parallel forms: --workers, or 0 */

static size_t round_page(size_t b)
{
    return (b + 4095) & ~(size_t)4095;
}

/* The regions for a largest message of max bytes: in and back of foot bytes each (the
 * rotation, at least the largest input), mid of as many dispatch outputs (each n times
 * an input, plus the alignment) as foot holds inputs. */
static void m_regions_for(size_t max, size_t rotate, size_t *foot, size_t *mid_foot)
{
    size_t max_rows = max / MOE_ROW_BYTES ? max / MOE_ROW_BYTES : 1;
    size_t in_bytes = round_page(max_rows * MOE_ROW_BYTES);
    size_t mid_bytes =
        round_page(((size_t)sb_npes * max_rows + MOE_NE * MOE_ALIGN) * MOE_ROW_BYTES);
    *foot = rotate > in_bytes ? rotate : in_bytes;
    *mid_foot = *foot / in_bytes * mid_bytes;
}

static size_t m_footprint(size_t max, size_t rotate)
{
    size_t foot, mid_foot;
    m_regions_for(max, rotate, &foot, &mid_foot);
    return 2 * foot + mid_foot;
}

/* Runs op on slot k for rows per PE; mid_cap and back_cap in rows. */
static symm_status_t m_run(int op, size_t rows, size_t k)
{
    size_t mid_cap = mid_stride / MOE_ROW_BYTES, back_cap = rows, out_rows;
    char *in = in_region + k * in_stride, *mid = mid_region + k * mid_stride;
    char *back = back_region + k * in_stride;
    switch (op) {
    case M_DISPATCH:
        return symm_moe_dispatch(SYMM_TEAM_WORLD, mid, mid_cap, in, splits, MOE_NE,
                                 MOE_ROW_BYTES, MOE_ALIGN, mid_splits, mid_offs, &out_rows);
    case M_DISPATCH_PAR:
        return symm_moe_dispatch_parallel(m_pool, m_workers, mid, mid_cap, in, splits, MOE_NE,
                                          MOE_ROW_BYTES, MOE_ALIGN, mid_splits, mid_offs,
                                          &out_rows);
    case M_COMBINE:
        return symm_moe_combine(SYMM_TEAM_WORLD, back, back_cap, mid, mid_splits, mid_offs,
                                MOE_NE, MOE_ROW_BYTES, back_splits, back_offs, &out_rows);
    case M_COMBINE_PAR:
        return symm_moe_combine_parallel(m_pool, m_workers, back, back_cap, mid, mid_splits,
                                         mid_offs, MOE_NE, MOE_ROW_BYTES, back_splits,
                                         back_offs, &out_rows);
    }
    return SYMM_ERR_INVALID_ARG;
}

static void fill_input(char *in, size_t rows)
{
    int ng = sb_npes * MOE_NE;
    size_t r = 0;
    for (int g = 0; g < ng; g++)
        for (size_t i = 0; i < splits[g]; i++, r++) {
            uint64_t tag = moe_row_tag(sb_me, g, i);
            memset(in + r * MOE_ROW_BYTES, (int)(r & 0xff), MOE_ROW_BYTES);
            memcpy(in + r * MOE_ROW_BYTES, &tag, 8);
            memcpy(in + (r + 1) * MOE_ROW_BYTES - 8, &tag, 8);
        }
    (void)rows;
}

static int row_has(const char *row, uint64_t tag)
{
    uint64_t a, b;
    memcpy(&a, row, 8);
    memcpy(&b, row + MOE_ROW_BYTES - 8, 8);
    return a == tag && b == tag;
}

/* Dispatch (and combine) on slot 0, checking the expert-major layout and the round trip. */
static long m_check(int op, size_t rows)
{
    int n = sb_npes;
    fill_input(in_region, rows);
    memset(back_region, 0, rows * MOE_ROW_BYTES);
    SB_CHECK(symm_barrier_all());
    int dispatch_op = op == M_DISPATCH_PAR || op == M_COMBINE_PAR ? M_DISPATCH_PAR : M_DISPATCH;
    SB_CHECK(m_run(dispatch_op, rows, 0));
    long wrong = 0;
    for (int e = 0; e < MOE_NE; e++) {
        int g = sb_me * MOE_NE + e;
        for (int s = 0; s < n; s++) {
            size_t want = moe_split(s, n, rows, g);
            if (mid_splits[e * n + s] != want) {
                wrong++;
                continue;
            }
            if (s == 0 && mid_offs[e * n] % MOE_ALIGN) wrong++;
            for (size_t i = 0; i < want; i++)
                if (!row_has(mid_region + (mid_offs[e * n + s] + i) * MOE_ROW_BYTES,
                             moe_row_tag(s, g, i)))
                    wrong++;
        }
    }
    if (op == M_COMBINE || op == M_COMBINE_PAR) {
        SB_CHECK(symm_barrier_all());
        SB_CHECK(m_run(op, rows, 0));
        for (size_t r = 0; r < rows; r++)
            if (memcmp(back_region + r * MOE_ROW_BYTES, in_region + r * MOE_ROW_BYTES,
                       MOE_ROW_BYTES))
                wrong++;
        for (int g = 0; g < n * MOE_NE; g++)
            if (back_splits[g] != splits[g]) wrong++;
    }
    SB_CHECK(symm_barrier_all());
    return wrong;
}

static symm_status_t m_run_ctx(const void *rows, int op, size_t k)
{
    return m_run(op, *(const size_t *)rows, k);
}

static bench_stat_t m_time(int op, size_t rows, int iters)
{
    size_t nrot = nslots;
    int combine = op == M_COMBINE || op == M_COMBINE_PAR;
    /* combine reads what dispatch left in every slot it rotates through */
    for (size_t k = 0; k < nrot; k++) {
        if (combine) fill_input(in_region + k * in_stride, rows);
        SB_CHECK(symm_barrier_all());
        if (combine) SB_CHECK(m_run(M_DISPATCH, rows, k));
    }
    return sb_time_slots(m_run_ctx, &rows, op, nrot, iters, 2);
}

int sb_suite_moe(void)
{
    int n = sb_npes, ng = n * MOE_NE;
    size_t lo = sb_opts.quick ? 16 << 10 : 64 << 10;
    if (sb_opts.min_size > lo) lo = sb_opts.min_size;
    if (sb_fit_heap("moe", m_footprint, lo)) return 1;
    size_t hi = sb_opts.max_size;
    /* slots sized for the largest message; smaller ones rotate through the same bytes */
    size_t foot, mid_foot;
    m_regions_for(hi, sb_opts.rotate, &foot, &mid_foot);
    in_region = sb_symm_region(foot);
    back_region = sb_symm_region(foot);
    mid_region = sb_symm_region(mid_foot);
    splits = calloc(5 * (size_t)ng, sizeof *splits);
    mid_splits = splits + ng;
    mid_offs = splits + 2 * ng;
    back_splits = splits + 3 * ng;
    back_offs = splits + 4 * ng;
    m_workers = sb_opts.workers;
    SB_CHECK(symm_pool_create(SYMM_TEAM_WORLD, m_workers ? (size_t)m_workers : SB_POOL_AUTO,
                              &m_pool));
    char wdesc[160];
    sb_workers_desc(m_pool, m_workers, SIZE_MAX, wdesc, sizeof wdesc);
    SB_PRINT("# symm-bench moe: %d PEs x %d experts, rows of %d B, major_align %d, uneven "
             "splits (weights 1..5 per expert)\n"
             "# size = bytes each PE sends (rows x row bytes); busbw = algbw (n-1)/n\n"
             "# _par: the _parallel form on a pool, %s\n"
             "# anchor: MPI_Alltoall of the per-expert counts, then MPI_Alltoallv of the rows "
             "(rank-major; MPI does not build the expert-major aligned layout)\n"
             "# ratio(symm/MPI) = MPI time / symm time; median of %d repetitions of the "
             "average over PEs\n",
             n, MOE_NE, MOE_ROW_BYTES, MOE_ALIGN, wdesc, sb_opts.reps);
    long total_wrong = 0;
    for (int op = 0; op < M_COUNT; op++) {
        if (!bench_op_selected(&sb_opts, m_name[op])) continue;
        int par = op == M_DISPATCH_PAR || op == M_COMBINE_PAR;
        SB_PRINT("\n# %s\n%12s %8s %12s %10s %12s %12s %7s %12s %16s%s\n", m_name[op],
                 "# size(B)", "rows", "time(us)", "spread(%)", "algbw(GB/s)", "busbw(GB/s)",
                 "#wrong", "MPI busbw", "ratio(symm/MPI)", par ? "  workers" : "");
        for (size_t sz = lo; sz <= hi; sz *= 4) {
            size_t rows = sz / MOE_ROW_BYTES ? sz / MOE_ROW_BYTES : 1,
                   bytes = rows * MOE_ROW_BYTES;
            for (int g = 0; g < ng; g++)
                splits[g] = moe_split(sb_me, n, rows, g);
            in_stride = round_page(bytes);
            mid_stride = round_page(((size_t)n * rows + MOE_NE * MOE_ALIGN) * MOE_ROW_BYTES);
            nslots = bytes >= sb_opts.rotate_min ? foot / in_stride : 1;
            if (nslots > mid_foot / mid_stride) nslots = mid_foot / mid_stride;
            if (nslots < 1) nslots = 1;
            long wrong = (long)sb_max_all((double)m_check(op, rows));
            total_wrong += wrong;
            bench_stat_t s = m_time(op, rows, bench_iters_for(bytes, sb_opts.quick));
            int nw = par ? sb_workers_used(m_pool, m_workers, SIZE_MAX) : 0;
            sb_tm_row("moe", m_name[op], m_anchor[op], bytes, rows, s, (double)(n - 1) / n,
                      wrong, nw, m_workers);
        }
    }
    SB_PRINT("\n# total wrong rows: %ld\n", total_wrong);
    SB_CHECK(symm_pool_destroy(m_pool));
    free(splits);
    symm_free(mid_region);
    symm_free(back_region);
    symm_free(in_region);
    return total_wrong ? 1 : 0;
}
