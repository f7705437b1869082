/* team_rma.c — the team-relative forms of put, get, atomics and peer pointers: a team's
 * PE number translated to the world's, then the world call of the transport. */
#include "core/runtime.h"
#include "team/team.h"

static symm_status_t team_pe(const char *fn, symm_team_t team, int pe, int *world_out)
{
    SYMM_REQUIRE_INIT();
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK(symm_team_lookup(fn, team, &p, &d));
    if (pe < 0 || pe >= p->n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE, "%s: PE %d outside team of %d", fn, pe,
                              p->n);
    *world_out = p->world[pe];
    return SYMM_SUCCESS;
}

void *symm_team_ptr(symm_team_t team, const void *addr, int pe)
{
    int w;
    if (team_pe(__func__, team, pe, &w)) return NULL;
    return symm_ptr(addr, w);
}

symm_status_t symm_team_put(symm_team_t team, void *dest, const void *src, size_t nbytes,
                            int pe)
{
    int w;
    CHECK(team_pe(__func__, team, pe, &w));
    return symm_put(dest, src, nbytes, w);
}

symm_status_t symm_team_get(symm_team_t team, void *dest, const void *src, size_t nbytes,
                            int pe)
{
    int w;
    CHECK(team_pe(__func__, team, pe, &w));
    return symm_get(dest, src, nbytes, w);
}

symm_status_t symm_team_put_signal(symm_team_t team, void *dest, const void *src, size_t nbytes,
                                   uint64_t *sig_addr, uint64_t signal, symm_sigop_t sigop,
                                   int pe)
{
    int w;
    CHECK(team_pe(__func__, team, pe, &w));
    return symm_put_signal(dest, src, nbytes, sig_addr, signal, sigop, w);
}

symm_status_t symm_team_atomic32(symm_team_t team, symm_amo_t op, uint32_t *dest,
                                 uint32_t value, uint32_t cond, int pe, uint32_t *fetched)
{
    int w;
    CHECK(team_pe(__func__, team, pe, &w));
    return symm_atomic32(op, dest, value, cond, w, fetched);
}

symm_status_t symm_team_atomic64(symm_team_t team, symm_amo_t op, uint64_t *dest,
                                 uint64_t value, uint64_t cond, int pe, uint64_t *fetched)
{
    int w;
    CHECK(team_pe(__func__, team, pe, &w));
    return symm_atomic64(op, dest, value, cond, w, fetched);
}
