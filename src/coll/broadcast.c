/* broadcast.c — root's buffer into every member's dest. Up to 8 bytes the payload rides
 * in the exchange's data word (one episode); above, every member copies straight from
 * the root's src between two syncs: the first says the root's src is ready (and every
 * dest too), the second keeps it alive until every member has copied. */
#include "coll/coll.h"
#include "coll/two_level.h"

/* Two members that reach each other only through the transport: the root stores the
 * second half into the other's dest while the other fetches the first (two transfers at
 * once, each half crossing once). From BCAST_PAIR_MIN bytes, a constant so that both
 * members choose alike: below it the second transfer's fixed cost eats the gain. Measured
 * with every PE its own group on 2 cores (Open MPI 4.1, vader; three runs): 64 KiB
 * 7.7-8.9 -> 6.6-7.9 us, 128 KiB 11.6-15.7 -> 10.1-15.7, 16 MiB 3.2-3.7 -> 2.0-2.7 ms;
 * slower at 16 and 32 KiB in two runs of three. */
#define BCAST_PAIR_MIN (64 * 1024)

static void bcast_pair(symm_coll_t *c, void *dest, const void *src, size_t nbytes, int root,
                       int nt)
{
    size_t half = nbytes / 2;
    if (c->me == root)
        symm_coll_put(c, (uint8_t *)dest + half, (const uint8_t *)src + half, nbytes - half,
                      1 - root, nt);
    symm_coll_get(c, dest, src, c->me == root ? nbytes : half, root, nt);
}

symm_status_t symm_broadcast(symm_team_t team, void *dest, const void *src, size_t nbytes,
                             int root)
{
    const char *fn = __func__;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n, me = c.me;
    symm_status_t local = symm_coll_check_root(fn, root, n);
    /* src is read on the root only, but through the address every member passes */
    if (!local)
        local =
            symm_coll_check_io(fn, dest, nbytes, src, nbytes,
                               dest != src ? "dest and src overlap without being equal" : NULL);

    uint64_t stackbuf[64];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local = symm_coll_word_scratch(fn, &s, stackbuf, sizeof stackbuf, nbytes, (size_t)n);
    symm_coll_set_args(
        &c, symm_coll_args(nbytes, (uint64_t)root, symm_coll_off(src), symm_coll_off(dest)));
    symm_status_t st;
    if (symm_coll_settled(&c, local, dest, src, nbytes, &st)) goto out_leave;
    if (nbytes <= SYMM_COLL_WORD) {
        uint64_t *recv = s.p, word = 0;
        if (me == root) memcpy(&word, src, nbytes);
        CHECK_GOTO(symm_coll_exchange(&c, NULL, word, recv), st, out_leave);
        memcpy(dest, &recv[root], nbytes);
    } else {
        CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
        int nt = nbytes >= SYMM_COLL_NT_MIN;
        if (symm_coll_two_level(&c))
            symm_coll_tl_broadcast(&c, dest, src, nbytes, root, nt);
        else if (symm_coll_far_pair(&c) && nbytes >= BCAST_PAIR_MIN)
            bcast_pair(&c, dest, src, nbytes, root, nt);
        else
            symm_coll_get(&c, dest, src, nbytes, root, nt);
        st = symm_coll_sync(&c);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}
