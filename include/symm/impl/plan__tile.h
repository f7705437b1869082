/* plan__tile.h — what the CPU and the GPU decide alike about a tile (symm_tile_t of
 * symm.h): when it is empty, when its shape is valid and the bytes it spans, and how rows
 * are split into bands. The CPU entry points (src/coll/tile.c), the stream entry points
 * (src/coll/cuda/tile_moe.cu) and the device code (tile__funcs.cuh) all call
 * these, so the rules cannot drift. Valid C11 and CUDA C++, host and device. */
#ifndef SYMM_IMPL_PLAN__TILE_H
#define SYMM_IMPL_PLAN__TILE_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"

#include "symm/impl/plan__hd.h"

/* A tile with no element: it is still collective, and its base and ld are not read. */
SYMM_HD int symm_plan_tile_empty(const symm_tile_t *t)
{
    return t->rows == 0 || t->cols == 0;
}

/* What is wrong with a tile, first fault first (SYMM_PLAN_TILE_OK: nothing). */
enum {
    SYMM_PLAN_TILE_OK = 0,
    SYMM_PLAN_TILE_NULL,     /* a non-empty tile with a NULL base */
    SYMM_PLAN_TILE_LD,       /* ld < cols */
    SYMM_PLAN_TILE_OVERFLOW, /* the span overflows the address space */
    SYMM_PLAN_TILE_ALIGN,    /* base not aligned to the element size (where required) */
};

/* The checks that need only compares (the device repeats these on its own arguments;
 * the host entry points have run symm_plan_tile_span). */
SYMM_HD int symm_plan_tile_shape(const symm_tile_t *t)
{
    if (symm_plan_tile_empty(t)) return SYMM_PLAN_TILE_OK;
    if (!t->base) return SYMM_PLAN_TILE_NULL;
    if (t->ld < t->cols) return SYMM_PLAN_TILE_LD;
    return SYMM_PLAN_TILE_OK;
}

/* symm_plan_tile_shape, then the bytes the tile spans from its base into *bytes (0 for
 * an empty tile): ((rows - 1) * ld + cols) * es, checked for overflow; then, if
 * need_align, the base's alignment to es (GPU loads need it; the CPU does not). */
SYMM_HD int symm_plan_tile_span(const symm_tile_t *t, size_t es, int need_align, size_t *bytes)
{
    *bytes = 0;
    int f = symm_plan_tile_shape(t);
    if (f || symm_plan_tile_empty(t)) return f;
    size_t r = t->rows - 1;
    if (r && t->ld > SIZE_MAX / r) return SYMM_PLAN_TILE_OVERFLOW;
    size_t elems = r * t->ld;
    if (elems > SIZE_MAX - t->cols) return SYMM_PLAN_TILE_OVERFLOW;
    elems += t->cols;
    if (elems > SIZE_MAX / es) return SYMM_PLAN_TILE_OVERFLOW;
    size_t b = elems * es;
    if ((uintptr_t)t->base + b < (uintptr_t)t->base) return SYMM_PLAN_TILE_OVERFLOW;
    if (need_align && (uintptr_t)t->base % es) return SYMM_PLAN_TILE_ALIGN;
    *bytes = b;
    return SYMM_PLAN_TILE_OK;
}

/* Whether two tiles are one (same base and ld: in place). */
SYMM_HD int symm_plan_tile_same(const symm_tile_t *a, const symm_tile_t *b)
{
    return a->base == b->base && a->ld == b->ld;
}

/* [*lo, *hi): part `part` of `total` rows split into `parts` near-equal contiguous
 * ranges, the first total % parts one longer. The CPU workers' bands, the members' bands
 * inside them and the GPU blocks' bands all come from here. */
SYMM_HD void symm_plan_band(uint64_t total, uint64_t parts, uint64_t part, uint64_t *lo,
                            uint64_t *hi)
{
    uint64_t q = total / parts, r = total % parts;
    *lo = part * q + (part < r ? part : r);
    *hi = *lo + q + (part < r ? 1 : 0);
}

#endif
