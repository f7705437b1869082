/* coll.c — argument checks shared by the collectives. */
#include "coll/coll.h"

symm_status_t symm_coll_check_buf(const char *fn, const char *arg, const void *p, size_t n)
{
    if (n == 0) return SYMM_SUCCESS;
    if (!p)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s is NULL with %zu bytes", fn, arg,
                              n);
    if (!symm_in_heap(p, n))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s [%p, +%zu bytes) on PE %d is not inside the symmetric "
                              "heap (allocate it with symm_malloc)",
                              fn, arg, p, n, symm_g.me);
    return SYMM_SUCCESS;
}

symm_status_t symm_coll_mul(const char *fn, const char *what, size_t a, size_t b, size_t c,
                            size_t *out)
{
    size_t ab;
    if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, out))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %s (%zu x %zu x %zu) overflows size_t",
                              fn, what, a, b, c);
    return SYMM_SUCCESS;
}

void symm_coll_shape(symm_team_t team, int *n, int *me)
{
    int tn = symm_team_n_pes(team), tme = symm_team_my_pe(team);
    *n = tn > 0 ? tn : 1;
    *me = tme >= 0 ? tme : 0;
}
