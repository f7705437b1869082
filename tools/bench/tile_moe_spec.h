/* tile_moe_spec.h — the shapes that symm-bench tile/moe and the MPI anchor share: a tile
 * of float rows of TILE_COLS inside a matrix TILE_LD wide (so the tile is strided), and
 * MoE traffic of MOE_ROW_BYTES rows over MOE_NE experts per PE with uneven, deterministic
 * splits (every PE can compute every other PE's splits, so receive sizes are known). */
#ifndef SYMM_BENCH_TILE_MOE_SPEC_H
#define SYMM_BENCH_TILE_MOE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#define TILE_COLS 1024 /* floats per tile row: 4 KiB */
#define TILE_LD   2048 /* floats between row starts: the tile is half the matrix width */

/* Rows of a tile of bytes bytes (at least 1). */
static inline size_t tile_rows_for(size_t bytes)
{
    size_t r = bytes / (TILE_COLS * 4);
    return r ? r : 1;
}

static inline float tile_pattern(int p, size_t r, size_t c)
{
    return (float)((p + 1) * (int)((r * TILE_COLS + c) % 13 + 1));
}

#define MOE_NE        4    /* experts per PE */
#define MOE_ROW_BYTES 4096 /* one token: hidden 2048 in bf16 */
#define MOE_ALIGN     8    /* major_align of the dispatch output */

/* Rows PE src sends to global expert g (of n*MOE_NE), total rows per PE = rows: uneven
 * weights 1..5, the remainder to the last expert. */
static inline size_t moe_split(int src, int n, size_t rows, int g)
{
    int ng = n * MOE_NE;
    size_t wsum = 0, given = 0;
    for (int k = 0; k < ng; k++)
        wsum += 1 + (size_t)((src * 7 + k * 3) % 5);
    for (int k = 0; k < ng; k++) {
        size_t s = rows * (1 + (size_t)((src * 7 + k * 3) % 5)) / wsum;
        if (k == ng - 1) s = rows - given;
        if (k == g) return s;
        given += s;
    }
    return 0;
}

/* A row's first word names its source, expert and index: checked after a round trip. */
static inline uint64_t moe_row_tag(int src, int g, size_t i)
{
    return ((uint64_t)src << 48) | ((uint64_t)g << 32) | (uint64_t)i;
}

#endif
