/* check.h — the argument checks that the CPU tile/MoE calls (tile.c, moe.c) and their
 * stream forms on the GPU (coll/cuda/tile_moe.cu) share: one validation, one set of
 * messages. Valid C and C++ (no C11-only headers); the stream forms call it from CUDA C++.
 *
 * Messages read "<fn> on <team>: ..." where a team name is given, else "<fn>: ...". */
#ifndef SYMM_COLL_CHECK_H
#define SYMM_COLL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Who checks, and against which heap. */
typedef struct symm_check_where {
    const char *fn;
    /* The team for messages, asked for on an error only (NULL: messages name none). */
    const char *(*team_name)(void *ctx);
    void *ctx;
    /* 1 if [p, p + n) lies inside the heap the call's symmetric buffers must be in, and
     * how a message names that heap ("inside one symmetric object", ...). */
    int (*in_heap)(const void *p, size_t n);
    const char *heap_what;
    /* Tile bases must be aligned to their elements (GPU vector loads). */
    int align;
} symm_check_where_t;

/* What symm_check_tiles found of valid arguments. */
typedef struct symm_tiles_checked {
    int mine;           /* multi-root: the tile this PE is root of (-1: none) */
    int local;          /* on failure: 1 if only this root could see it (its out), so the
                           others cannot have failed alike */
    uintptr_t olo, ohi; /* the bytes of out, where out was checked (empty: none) */
    size_t bytes;       /* the largest in tile, bytes */
} symm_tiles_checked_t;

/* Tile reduce arguments. all: an allreduce of in[0] into out (nroots, roots unused);
 * else multi-root: in[k] reduces into root roots[k]'s out (a single-root reduce is
 * nroots 1). n, me: the team's size and this PE's rank. Returns the first problem. */
symm_status_t symm_check_tiles(const symm_check_where_t *w, int all, const symm_tile_t *out,
                               const symm_tile_t *in, const int *roots, int nroots,
                               symm_type_t type, symm_op_t op, int n, int me,
                               symm_tiles_checked_t *res);

/* MoE/all-to-all-v shape: ne experts per member (>= 1), row_bytes (> 0), n x ne split
 * entries not too many; *nsplit = n x ne. */
symm_status_t symm_check_a2a_shape(const symm_check_where_t *w, int n, int ne, size_t row_bytes,
                                   size_t *nsplit);
/* MoE/all-to-all-v out against in (in_bytes: the bytes of in that are read): out NULL
 * with a capacity, out_capacity x row_bytes overflowing, out overlapping in.
 * *out_bytes = out_capacity x row_bytes. */
symm_status_t symm_check_a2a_out(const symm_check_where_t *w, const void *out,
                                 size_t out_capacity, size_t row_bytes, const void *in,
                                 size_t in_bytes, size_t *out_bytes);

static inline int symm_check_overlap(uintptr_t alo, uintptr_t ahi, uintptr_t blo, uintptr_t bhi)
{
    return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

#ifdef __cplusplus
}
#endif
#endif
