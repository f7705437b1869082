/* moe_demo.c — one mixture-of-experts layer step and a tiled reduction on symm, with
 * several worker threads per PE, each on its own duplicate of a team pool.
 *
 *   build/bin/symmrun -n 4 build/bin/moe_demo [tokens_per_pe] [workers]
 *
 * MoE step, repeated a few times: every PE routes its tokens (rows of `hidden` floats) to
 * random experts (ne per PE), dispatches them expert-major with symm_moe_dispatch_parallel,
 * lets each expert "work" (multiply its rows by its global id + 1), and combines them back
 * with symm_moe_combine_parallel; every token must come back transformed by its expert.
 * Tiled reduction: every PE holds a matrix tile (ld > cols); symm_tile_allreduce_parallel
 * sums them, checked against a serial reference that every PE can compute.
 * Exits non-zero on any PE if a check failed on any PE. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "symm.h"

#define NE      4   /* experts per PE */
#define HIDDEN  128 /* floats per token */
#define ALIGN   8   /* rows: every expert's segment starts at a multiple of this */
#define ITERS   10  /* MoE steps timed */
#define TILE_R  384 /* tile rows */
#define TILE_C  250 /* tile cols */
#define TILE_LD 256 /* tile row stride (elements) */

#define DIE_IF(st, what)                                                                       \
    do {                                                                                       \
        if ((st) != SYMM_SUCCESS) {                                                            \
            fprintf(stderr, "moe_demo PE %d: %s failed: %s\n", symm_my_pe(), what,             \
                    symm_last_error());                                                        \
            symm_abort(2, what);                                                               \
        }                                                                                      \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 32);
}

/* Value of element i of PE pe's data `what`: in [-1, 1), never a whole zero buffer. */
static float value(uint64_t what, int pe, size_t i)
{
    uint64_t h = mix(what * 0x9e3779b97f4a7c15ull + ((uint64_t)pe << 40) + i + 1);
    return (float)((double)(h >> 40) / (double)(1u << 23)) - 1.0f;
}

/* Reduce one number over the world with a 1x1 tile (the demo's own "allreduce"). */
static double world_reduce(double v, symm_op_t op, double *scratch_in, double *scratch_out)
{
    *scratch_in = v;
    symm_tile_t in = {scratch_in, 1, 1, 1}, out = {scratch_out, 1, 1, 1};
    DIE_IF(symm_tile_allreduce(SYMM_TEAM_WORLD, out, in, SYMM_DOUBLE, op), "world_reduce");
    return *scratch_out;
}

int main(int argc, char **argv)
{
    size_t tokens = argc > 1 ? strtoul(argv[1], NULL, 0) : 2048;
    int nworkers = argc > 2 ? atoi(argv[2]) : 4;
    if (nworkers < 1 || nworkers > 64 || tokens == 0 || tokens > (1u << 22)) {
        fprintf(stderr, "usage: moe_demo [tokens_per_pe 1..4M] [workers 1..64]\n");
        return 2;
    }
    if (symm_init() != SYMM_SUCCESS) {
        fprintf(stderr, "moe_demo: symm_init failed: %s\n", symm_last_error());
        return 2;
    }
    int me = symm_my_pe(), n = symm_n_pes();
    symm_pool_t pool;
    DIE_IF(symm_pool_create(SYMM_TEAM_WORLD, (size_t)nworkers, &pool), "symm_pool_create");

    /* ---- MoE buffers: input rank-major, dispatch output expert-major (with alignment
     * padding: at most ALIGN rows per expert more than the tokens it gets), combine out. */
    const size_t row_bytes = HIDDEN * sizeof(float);
    const size_t in_cap = tokens, disp_cap = tokens * (size_t)n + (size_t)NE * ALIGN;
    float *in = symm_malloc(in_cap * row_bytes);
    /* Every PE may receive up to n*tokens rows; all PEs allocate the same size. */
    float *disp = symm_malloc(disp_cap * row_bytes);
    float *comb = symm_malloc(in_cap * row_bytes);
    double *red_in = symm_malloc(sizeof(double)), *red_out = symm_malloc(sizeof(double));
    size_t nsplit = (size_t)n * NE;
    size_t *in_splits = calloc(nsplit, sizeof(size_t));
    size_t *d_splits = malloc(nsplit * sizeof(size_t)),
           *d_offs = malloc(nsplit * sizeof(size_t));
    size_t *c_splits = malloc(nsplit * sizeof(size_t)),
           *c_offs = malloc(nsplit * sizeof(size_t));
    int *expert_of = malloc(tokens * sizeof(int)); /* global expert of input row i */
    if (!in || !disp || !comb || !red_in || !red_out || !in_splits || !d_splits || !d_offs ||
        !c_splits || !c_offs || !expert_of) {
        fprintf(stderr, "moe_demo PE %d: out of memory (%s)\n", me, symm_last_error());
        symm_abort(2, "out of memory");
    }

    /* Route: token t goes to global expert g = hash % (n*NE); the input is laid out
     * rank-major (by destination PE, then its local expert), as dispatch expects. */
    for (size_t t = 0; t < tokens; t++)
        in_splits[mix((uint64_t)me << 32 | t) % nsplit]++;
    size_t *fill = calloc(nsplit, sizeof(size_t)), run = 0;
    for (size_t g = 0; g < nsplit; g++) {
        fill[g] = run;
        run += in_splits[g];
    }
    for (size_t t = 0; t < tokens; t++) {
        size_t g = mix((uint64_t)me << 32 | t) % nsplit, row = fill[g]++;
        expert_of[row] = (int)g;
        for (int h = 0; h < HIDDEN; h++)
            in[row * HIDDEN + (size_t)h] = value(1, me, t * HIDDEN + (size_t)h);
    }
    free(fill);

    long bad = 0;
    double t_disp = 0, t_comb = 0;
    size_t disp_rows = 0;
    for (int it = 0; it < ITERS; it++) {
        DIE_IF(symm_barrier_all(), "barrier");
        double t0 = now();
        DIE_IF(symm_moe_dispatch_parallel(pool, nworkers, disp, disp_cap, in, in_splits, NE,
                                          row_bytes, ALIGN, d_splits, d_offs, &disp_rows),
               "symm_moe_dispatch_parallel");
        double t1 = now();
        /* Expert work: my expert e (global id me*NE + e) scales its rows by id + 1. */
        for (int e = 0; e < NE; e++) {
            float scale = (float)(me * NE + e + 1);
            for (int s = 0; s < n; s++) {
                size_t k = (size_t)e * (size_t)n + (size_t)s;
                float *rows = disp + d_offs[k] * HIDDEN;
                for (size_t i = 0; i < d_splits[k] * HIDDEN; i++)
                    rows[i] *= scale;
            }
        }
        memset(comb, 0, in_cap * row_bytes);
        double t2 = now();
        DIE_IF(symm_moe_combine_parallel(pool, nworkers, comb, in_cap, disp, d_splits, d_offs,
                                         NE, row_bytes, c_splits, c_offs, NULL),
               "symm_moe_combine_parallel");
        double t3 = now();
        t_disp += t1 - t0;
        t_comb += t3 - t2;
        /* Every token is back where it left, multiplied by its expert's id + 1. */
        for (size_t k = 0; k < nsplit; k++)
            if (c_splits[k] != in_splits[k]) bad++;
        for (size_t r = 0; r < tokens; r++) {
            float scale = (float)(expert_of[r] + 1);
            for (int h = 0; h < HIDDEN; h++)
                if (comb[r * HIDDEN + (size_t)h] != in[r * HIDDEN + (size_t)h] * scale) {
                    if (bad < 3)
                        fprintf(stderr,
                                "moe_demo PE %d: token row %zu elem %d: got %g, want %g\n", me,
                                r, h, (double)comb[r * HIDDEN + (size_t)h],
                                (double)(in[r * HIDDEN + (size_t)h] * scale));
                    bad++;
                }
        }
        /* Aligned expert segments. */
        for (int e = 0; e < NE; e++)
            if (d_offs[(size_t)e * (size_t)n] % ALIGN) bad++;
    }

    /* ---- tiled reduction: a TILE_R x TILE_C tile (row stride TILE_LD) summed over PEs */
    size_t tile_elems = (size_t)(TILE_R - 1) * TILE_LD + TILE_C;
    float *tin = symm_malloc(tile_elems * sizeof(float));
    float *tout = symm_malloc(tile_elems * sizeof(float));
    if (!tin || !tout) symm_abort(2, "out of memory (tile)");
    for (size_t r = 0; r < TILE_R; r++)
        for (size_t c = 0; c < TILE_C; c++)
            tin[r * TILE_LD + c] = value(2, me, r * TILE_C + c);
    symm_tile_t ti = {tin, TILE_R, TILE_C, TILE_LD}, to = {tout, TILE_R, TILE_C, TILE_LD};
    DIE_IF(symm_barrier_all(), "barrier");
    double t4 = now();
    const int tile_iters = 5;
    for (int i = 0; i < tile_iters; i++)
        DIE_IF(symm_tile_allreduce_parallel(pool, nworkers, to, ti, SYMM_FLOAT, SYMM_OP_SUM),
               "symm_tile_allreduce_parallel");
    double t_tile = now() - t4;
    long tile_bad = 0;
    for (size_t r = 0; r < TILE_R; r++)
        for (size_t c = 0; c < TILE_C; c++) {
            float want = value(2, 0, r * TILE_C + c); /* same order as symm: PE 0 first */
            for (int p = 1; p < n; p++)
                want += value(2, p, r * TILE_C + c);
            if (tout[r * TILE_LD + c] != want) tile_bad++;
        }

    /* ---- agree on the outcome and report (PE 0 prints) */
    double all_bad = world_reduce((double)(bad + tile_bad), SYMM_OP_SUM, red_in, red_out);
    double max_disp = world_reduce(t_disp, SYMM_OP_MAX, red_in, red_out);
    double max_comb = world_reduce(t_comb, SYMM_OP_MAX, red_in, red_out);
    double max_tile = world_reduce(t_tile, SYMM_OP_MAX, red_in, red_out);
    double all_tokens = world_reduce((double)tokens, SYMM_OP_SUM, red_in, red_out);
    if (me == 0) {
        double moved = all_tokens * (double)row_bytes * ITERS; /* bytes of one direction */
        printf("moe_demo: %d PEs x %d workers (pool of %d duplicates), %d experts per PE, "
               "%d floats per token, major_align %d\n",
               n, nworkers, nworkers, NE, HIDDEN, ALIGN);
        printf("  MoE step x%d: %.0f tokens dispatched to %d experts, scaled by expert id + 1, "
               "combined back: %s\n",
               ITERS, all_tokens, n * NE, bad ? "MISMATCH" : "every token verified");
        printf("    dispatch %.3f ms/step  %.2f GB/s  %.3g tokens/s (all PEs together)\n",
               1e3 * max_disp / ITERS, moved / max_disp * 1e-9, all_tokens * ITERS / max_disp);
        printf("    combine  %.3f ms/step  %.2f GB/s  %.3g tokens/s (all PEs together)\n",
               1e3 * max_comb / ITERS, moved / max_comb * 1e-9, all_tokens * ITERS / max_comb);
        printf("  tile allreduce x%d: %dx%d floats (ld %d) summed over %d PEs: %s\n",
               tile_iters, TILE_R, TILE_C, TILE_LD, n,
               tile_bad ? "MISMATCH" : "verified against the serial reference");
        double tile_bytes = (double)TILE_R * TILE_C * sizeof(float);
        printf("    %.3f ms each  %.2f GB/s (tile bytes per PE / time)\n",
               1e3 * max_tile / tile_iters, tile_bytes * tile_iters / max_tile * 1e-9);
        printf("moe_demo: %s\n", all_bad ? "FAILED" : "OK");
    }
    symm_free(tout);
    symm_free(tin);
    symm_free(red_out);
    symm_free(red_in);
    symm_free(comb);
    symm_free(disp);
    symm_free(in);
    free(in_splits);
    free(d_splits);
    free(d_offs);
    free(c_splits);
    free(c_offs);
    free(expert_of);
    symm_pool_destroy(pool);
    symm_finalize();
    return all_bad ? 1 : 0;
}
