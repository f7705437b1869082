/* collect.c — fcollect (equal blocks) and collect (blocks of any size) into every
 * member's dest in team order. Members pull: after a first episode says every source is
 * ready, each copies the others' blocks straight from their src; a final sync keeps the
 * sources alive until everyone has copied. fcollect blocks of up to 8 bytes ride in the
 * exchange's data word instead (one episode, nothing left to protect). */
#include "coll/coll.h"
#include "coll/two_level.h"

/* Copies member j's src (len[j] bytes) to dest + off[j] for every j, starting with the
 * next member so that the members do not all read member 0 first. */
static void coll_pull(symm_coll_t *c, uint8_t *dest, const void *src,
                      size_t (*where)(const void *ctx, int j, size_t *len), const void *ctx,
                      int nt)
{
    for (int t = 1; t <= c->n; t++) {
        int j = (c->me + t) % c->n;
        size_t len, off = where(ctx, j, &len);
        symm_coll_get(c, dest + off, src, len, j, nt);
    }
}

static size_t fixed_where(const void *ctx, int j, size_t *len)
{
    *len = *(const size_t *)ctx;
    return (size_t)j * *len;
}

symm_status_t symm_fcollect(symm_team_t team, void *dest, const void *src, size_t nbytes)
{
    const char *fn = __func__;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n, me = c.me;
    size_t total = 0;
    symm_status_t local = symm_coll_mul(fn, "team size x nbytes", (size_t)n, nbytes, 1, &total);
    /* In place (src is my own block of dest) is fine: nobody writes that block. Then
     * every member must be in place (it is part of the fingerprint), and member j's
     * block is read from j's dest, src being a different address on every member. */
    int inplace = nbytes && src == (const uint8_t *)dest + (size_t)me * nbytes;
    if (!local)
        local =
            symm_coll_check_io(fn, dest, total, src, nbytes,
                               inplace ? NULL : "src overlaps dest other than as my own block");

    uint64_t stackbuf[64];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local = symm_coll_word_scratch(fn, &s, stackbuf, sizeof stackbuf, nbytes, (size_t)n);
    /* in place, src is a different address on every member */
    symm_coll_set_args(&c,
                       symm_coll_args(nbytes, (uint64_t)inplace,
                                      inplace ? 0 : symm_coll_off(src), symm_coll_off(dest)));
    symm_status_t st;
    if (symm_coll_settled(&c, local, dest, src, nbytes, &st)) goto out_leave;
    if (nbytes <= SYMM_COLL_WORD) {
        uint64_t *recv = s.p, word = 0;
        memcpy(&word, src, nbytes);
        CHECK_GOTO(symm_coll_exchange(&c, NULL, word, recv), st, out_leave);
        for (int j = 0; j < n; j++)
            memcpy((uint8_t *)dest + (size_t)j * nbytes, &recv[j], nbytes);
    } else {
        CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
        if (symm_coll_two_level(&c)) {
            symm_coll_tl_pull(&c, dest, src, fixed_where, &nbytes, inplace,
                              total >= SYMM_COLL_NT_MIN);
        } else if (inplace) {
            for (int t = 1; t < n; t++) {
                uint8_t *at = (uint8_t *)dest + (size_t)((me + t) % n) * nbytes;
                symm_coll_get(&c, at, at, nbytes, (me + t) % n, total >= SYMM_COLL_NT_MIN);
            }
        } else {
            coll_pull(&c, dest, src, fixed_where, &nbytes, total >= SYMM_COLL_NT_MIN);
        }
        st = symm_coll_sync(&c);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}

typedef struct {
    const uint64_t *len, *off;
} var_ctx_t;

static size_t var_where(const void *ctx, int j, size_t *len)
{
    const var_ctx_t *v = ctx;
    *len = (size_t)v->len[j];
    return (size_t)v->off[j];
}

/* The sizes are exchanged first (that episode also says every source is ready); a
 * member whose dest cannot hold the total copies nothing and tells the others in the
 * final sync, so that every member returns its status. */
symm_status_t symm_collect(symm_team_t team, void *dest, const void *src, size_t nbytes,
                           size_t *total_out)
{
    const char *fn = __func__;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n;
    symm_status_t local = symm_coll_check_buf(fn, "src", src, nbytes);

    uint64_t stackbuf[128];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local = symm_coll_scratch(fn, &s, stackbuf, sizeof stackbuf,
                                  2 * (size_t)n * sizeof(uint64_t));
    uint64_t *len = s.p, *off = len ? len + n : NULL;
    symm_coll_set_args(&c, symm_coll_args(symm_coll_off(src), 0, 0, 0));
    symm_status_t st = SYMM_SUCCESS;
    if (local) {
        st = symm_coll_fail(&c, local);
        goto out_leave;
    }
    CHECK_GOTO(symm_coll_exchange(&c, NULL, nbytes, len), st, out_leave);
    uint64_t total = 0;
    for (int j = 0; j < n; j++) {
        off[j] = total;
        if (__builtin_add_overflow(total, len[j], &total)) {
            local = symm_error_set(SYMM_ERR_OVERFLOW, "%s: the members' sizes overflow", fn);
            break;
        }
    }
    if (!local)
        local = symm_coll_check_buf(fn, "dest (of the total size)", dest, (size_t)total);
    if (!local && symm_coll_overlap(dest, (size_t)total, src, nbytes))
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: src overlaps dest", fn);
    if (!local && total == 0) {
        /* every member saw the same sizes: nothing moves, nothing to protect */
        if (total_out) *total_out = 0;
        goto out_leave;
    }
    if (!local && symm_coll_two_level(&c)) {
        /* the two-level pull stores other groups' blocks into the dest of the other
         * members of my group, whose dest was checked after the sizes were known: every
         * member's verdict first, so that a member that failed gets nothing written */
        c.local = local;
        CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
        var_ctx_t v = {len, off};
        symm_coll_tl_pull(&c, dest, src, var_where, &v, 0, total >= SYMM_COLL_NT_MIN);
    } else if (!local) {
        var_ctx_t v = {len, off};
        coll_pull(&c, dest, src, var_where, &v, total >= SYMM_COLL_NT_MIN);
    }
    if (!c.local) c.local = local; /* a failed transfer may have set it */
    st = symm_coll_sync(&c);
    if (!st && total_out) *total_out = (size_t)total;
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}
