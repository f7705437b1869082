/* broadcast.c — root's buffer into every member's dest. Up to 8 bytes the payload rides
 * in the exchange's data word (one episode); above, every member copies straight from
 * the root's src between two syncs: the first says the root's src is ready, the second
 * keeps it alive until every member has copied. */
#include "coll/coll.h"

symm_status_t symm_broadcast(symm_team_t team, void *dest, const void *src, size_t nbytes,
                             int root)
{
    const char *fn = __func__;
    SYMM_REQUIRE_INIT();
    int n, me;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    n = c.n, me = c.me;
    symm_status_t local = SYMM_SUCCESS;
    if (root < 0 || root >= n)
        local = symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE,
                               "%s: root %d is not a member of a team of %d", fn, root, n);
    if (!local) local = symm_coll_check_buf(fn, "dest", dest, nbytes);
    /* src is read on the root only, but through the address every member passes */
    if (!local) local = symm_coll_check_buf(fn, "src", src, nbytes);
    if (!local && dest != src && symm_coll_overlap(dest, nbytes, src, nbytes))
        local = symm_error_set(SYMM_ERR_INVALID_ARG,
                               "%s: dest and src overlap without being equal", fn);

    uint64_t stackbuf[64];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local && nbytes && nbytes <= SYMM_COLL_WORD)
        local =
            symm_coll_scratch(fn, &s, stackbuf, sizeof stackbuf, (size_t)n * sizeof(uint64_t));
    symm_coll_set_args(
        &c, symm_coll_args(nbytes, (uint64_t)root, symm_coll_off(src), symm_coll_off(dest)));
    symm_status_t st = SYMM_SUCCESS;
    if (local) {
        st = symm_coll_fail(&c, local);
    } else if (n == 1) {
        if (dest != src && nbytes) memcpy(dest, src, nbytes);
    } else if (nbytes == 0) {
        st = symm_coll_sync(&c);
    } else if (nbytes <= SYMM_COLL_WORD) {
        uint64_t *recv = s.p, word = 0;
        if (me == root) memcpy(&word, src, nbytes);
        CHECK_GOTO(symm_coll_exchange(&c, NULL, word, recv), st, out_leave);
        memcpy(dest, &recv[root], nbytes);
    } else {
        CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
        const void *from = symm_coll_ptr(&c, src, root);
        if (dest != from) symm_coll_copy(dest, from, nbytes, nbytes >= SYMM_COLL_NT_MIN);
        st = symm_coll_sync(&c);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}
