/* check.c — argument checks shared by the CPU tile/MoE calls and their stream forms
 * (check.h). Only error paths format anything. */
#include <stdarg.h>
#include <stdio.h>

#include "coll/check.h"
#include "coll/reduce_ops.h"
#include "core/log.h"
#include "symm/impl/plan__tile.h"

static symm_status_t fail(const symm_check_where_t *w, symm_status_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static symm_status_t fail(const symm_check_where_t *w, symm_status_t code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *team = w->team_name ? w->team_name(w->ctx) : NULL;
    return symm_error_set(code, "%s%s%s: %s", w->fn, team ? " on " : "", team ? team : "", msg);
}

/* One tile, and the byte range it spans ([*lo, *hi), empty for an empty tile).
 * need_symm: inside the heap of w. */
static symm_status_t one_tile(const symm_check_where_t *w, const char *what,
                              const symm_tile_t *t, size_t es, int need_symm, uintptr_t *lo,
                              uintptr_t *hi)
{
    *lo = *hi = 0;
    size_t bytes;
    switch (symm_plan_tile_span(t, es, w->align, &bytes)) {
    case SYMM_PLAN_TILE_OK:
        break;
    case SYMM_PLAN_TILE_NULL:
        return fail(w, SYMM_ERR_INVALID_ARG, "%s tile (%zu x %zu) has a NULL base", what,
                    t->rows, t->cols);
    case SYMM_PLAN_TILE_LD:
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "%s tile has ld = %zu < cols = %zu (ld is the row stride in elements)",
                    what, t->ld, t->cols);
    case SYMM_PLAN_TILE_OVERFLOW:
        return fail(w, SYMM_ERR_OVERFLOW,
                    "%s tile of %zu rows, ld %zu overflows the address space", what, t->rows,
                    t->ld);
    default:
        return fail(w, SYMM_ERR_ALIGNMENT,
                    "%s tile base %p is not aligned to its %zu-byte "
                    "elements",
                    what, t->base, es);
    }
    if (symm_plan_tile_empty(t)) return SYMM_SUCCESS;
    if (need_symm && !w->in_heap(t->base, bytes))
        return fail(w, SYMM_ERR_NOT_SYMMETRIC,
                    "%s tile [%p, +%zu bytes) (%zu x %zu, ld %zu) is not %s", what, t->base,
                    bytes, t->rows, t->cols, t->ld, w->heap_what);
    *lo = (uintptr_t)t->base;
    *hi = *lo + bytes;
    return SYMM_SUCCESS;
}

static symm_status_t type_op(const symm_check_where_t *w, symm_type_t type, symm_op_t op)
{
    if (!symm_type_size(type))
        return fail(w, SYMM_ERR_INVALID_ARG, "invalid type %d", (int)type);
    if ((int)op < 0 || op >= SYMM_OP_COUNT)
        return fail(w, SYMM_ERR_INVALID_ARG, "invalid op %d", (int)op);
    if (symm_reduce_is_fp8(type)) { /* float accumulation: the ops of a float */
        if (op > SYMM_OP_MAX)
            return fail(w, SYMM_ERR_INVALID_ARG,
                        "op %s is not defined on type %s (and, or and xor take integer types "
                        "only)",
                        symm_op_name(op), symm_type_name(type));
        return SYMM_SUCCESS;
    }
    if (!symm_reduce_kernel(type, op))
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "op %s is not defined on type %s (and, or and xor take integer types "
                    "only)",
                    symm_op_name(op), symm_type_name(type));
    return SYMM_SUCCESS;
}

static symm_status_t allreduce_tiles(const symm_check_where_t *w, const symm_tile_t *out,
                                     const symm_tile_t *in, size_t es,
                                     symm_tiles_checked_t *res)
{
    uintptr_t ilo, ihi;
    CHECK(one_tile(w, "in", in, es, 1, &ilo, &ihi));
    CHECK(one_tile(w, "out", out, es, 1, &res->olo, &res->ohi));
    if (out->rows != in->rows || out->cols != in->cols)
        return fail(w, SYMM_ERR_INVALID_ARG, "out tile is %zu x %zu but in is %zu x %zu",
                    out->rows, out->cols, in->rows, in->cols);
    if (symm_check_overlap(res->olo, res->ohi, ilo, ihi) && !symm_plan_tile_same(out, in))
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "out tile overlaps in without being the same "
                    "tile (in place needs the same base and ld)");
    res->bytes = in->rows * in->cols * es;
    return SYMM_SUCCESS;
}

/* The root's own out: only it sees these. */
static symm_status_t root_out(const symm_check_where_t *w, const symm_tile_t *out,
                              const symm_tile_t *in, int nroots, size_t es, int me, int mine,
                              symm_tiles_checked_t *res)
{
    const symm_tile_t *t = &in[mine];
    if (out->rows != t->rows || out->cols != t->cols)
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "out tile of root %d is %zu x %zu but its tile is %zu x %zu", me, out->rows,
                    out->cols, t->rows, t->cols);
    CHECK(one_tile(w, "out", out, es, 0, &res->olo, &res->ohi));
    for (int k = 0; k < nroots; k++) {
        uintptr_t ilo, ihi;
        one_tile(w, "in", &in[k], es, 1, &ilo, &ihi); /* checked before: cannot fail */
        if (!symm_check_overlap(res->olo, res->ohi, ilo, ihi)) continue;
        if (k == mine && symm_plan_tile_same(out, &in[k])) continue;
        return fail(w, SYMM_ERR_INVALID_ARG, "out tile of root %d overlaps in[%d]%s", me, k,
                    k == mine ? " without being the same tile (in place needs the same "
                                "base and ld)"
                              : ", which another root reads");
    }
    return SYMM_SUCCESS;
}

symm_status_t symm_check_tiles(const symm_check_where_t *w, int all, const symm_tile_t *out,
                               const symm_tile_t *in, const int *roots, int nroots,
                               symm_type_t type, symm_op_t op, int n, int me,
                               symm_tiles_checked_t *res)
{
    res->mine = -1;
    res->local = 0;
    res->olo = res->ohi = 0;
    res->bytes = 0;
    CHECK(type_op(w, type, op));
    size_t es = symm_type_size(type);
    if (all) return allreduce_tiles(w, out, in, es, res);
    if (nroots < 0 || nroots > n)
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "nroots = %d (must be 0..%d: a PE is root of at most one tile)", nroots, n);
    if (nroots && (!in || !roots))
        return fail(w, SYMM_ERR_INVALID_ARG, "%s is NULL", in ? "roots" : "in");
    for (int k = 0; k < nroots; k++) {
        int r = roots[k];
        if (r < 0 || r >= n)
            return fail(w, SYMM_ERR_PE_OUT_OF_RANGE, "root %d is not a member (team of %d)", r,
                        n);
        for (int j = 0; j < k; j++)
            if (roots[j] == r)
                return fail(w, SYMM_ERR_INVALID_ARG,
                            "PE %d is root of tiles %d and %d (a PE "
                            "may be root of one tile only)",
                            r, j, k);
        char what[32];
        snprintf(what, sizeof what, "in[%d]", k);
        uintptr_t ilo, ihi;
        CHECK(one_tile(w, what, &in[k], es, 1, &ilo, &ihi));
        if (r == me) res->mine = k;
        size_t b = in[k].rows * in[k].cols * es;
        if (b > res->bytes) res->bytes = b;
    }
    if (res->mine < 0) return SYMM_SUCCESS; /* out is not used here */
    symm_status_t st = root_out(w, out, in, nroots, es, me, res->mine, res);
    res->local = st != SYMM_SUCCESS;
    return st;
}

symm_status_t symm_check_a2a_shape(const symm_check_where_t *w, int n, int ne, size_t row_bytes,
                                   size_t *nsplit)
{
    if (ne < 1)
        return fail(w, SYMM_ERR_INVALID_ARG, "ne = %d experts per member (must be >= 1)", ne);
    if (row_bytes == 0) return fail(w, SYMM_ERR_INVALID_ARG, "row_bytes is 0");
    if (__builtin_mul_overflow((size_t)n, (size_t)ne, nsplit) || *nsplit > SIZE_MAX / 32)
        return fail(w, SYMM_ERR_OVERFLOW, "%d members x %d experts is too many", n, ne);
    return SYMM_SUCCESS;
}

symm_status_t symm_check_a2a_out(const symm_check_where_t *w, const void *out,
                                 size_t out_capacity, size_t row_bytes, const void *in,
                                 size_t in_bytes, size_t *out_bytes)
{
    if (!out && out_capacity)
        return fail(w, SYMM_ERR_INVALID_ARG, "out is NULL but out_capacity is %zu",
                    out_capacity);
    if (__builtin_mul_overflow(out_capacity, row_bytes, out_bytes))
        return fail(w, SYMM_ERR_OVERFLOW, "out_capacity %zu rows of %zu bytes overflows",
                    out_capacity, row_bytes);
    uintptr_t ilo = (uintptr_t)in, olo = (uintptr_t)out;
    if (symm_check_overlap(ilo, ilo + in_bytes, olo, olo + *out_bytes))
        return fail(w, SYMM_ERR_INVALID_ARG,
                    "out [%p, +%zu) overlaps in [%p, +%zu): peers read in while out is "
                    "written",
                    out, *out_bytes, in, in_bytes);
    return SYMM_SUCCESS;
}
