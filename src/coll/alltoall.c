/* alltoall.c — alltoall (equal blocks) and alltoallv (counts known only to the sender).
 * Members pull: after an episode that says every source is ready, member r copies block
 * r of every member's src straight into its dest; a final sync keeps the sources alive
 * until everyone has copied. Blocks of up to 8 bytes ride in the exchange's per-pair
 * words instead (one episode). */
#include "coll/coll.h"
#include "coll/two_level.h"

symm_status_t symm_alltoall(symm_team_t team, void *dest, const void *src, size_t nbytes)
{
    const char *fn = __func__;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n, me = c.me;
    size_t total = 0;
    symm_status_t local = symm_coll_mul(fn, "team size x nbytes", (size_t)n, nbytes, 1, &total);
    if (!local) local = symm_coll_check_io(fn, dest, total, src, total, "dest overlaps src");

    uint64_t stackbuf[128];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local =
            symm_coll_word_scratch(fn, &s, stackbuf, sizeof stackbuf, nbytes, 2 * (size_t)n);
    symm_coll_set_args(&c, symm_coll_args(nbytes, symm_coll_off(src), symm_coll_off(dest), 0));
    symm_status_t st;
    if (symm_coll_settled(&c, local, dest, src, nbytes, &st)) goto out_leave;
    if (nbytes <= SYMM_COLL_WORD) {
        uint64_t *send = s.p, *recv = send + n;
        for (int j = 0; j < n; j++) {
            send[j] = 0;
            memcpy(&send[j], (const uint8_t *)src + (size_t)j * nbytes, nbytes);
        }
        CHECK_GOTO(symm_coll_exchange(&c, send, 0, recv), st, out_leave);
        for (int j = 0; j < n; j++)
            memcpy((uint8_t *)dest + (size_t)j * nbytes, &recv[j], nbytes);
    } else {
        CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
        int nt = total >= SYMM_COLL_NT_MIN;
        if (symm_coll_two_level(&c)) {
            symm_coll_tl_alltoall(&c, dest, src, nbytes, nt);
        } else {
            for (int t = 1; t <= n; t++) {
                int j = (me + t) % n;
                symm_coll_get(&c, (uint8_t *)dest + (size_t)j * nbytes,
                              (const uint8_t *)src + (size_t)me * nbytes, nbytes, j, nt);
            }
        }
        st = symm_coll_sync(&c);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}

/* Checks my send side and fills sbytes[j] / soff[j] (bytes sent to j, and where they
 * start: an offset in my symmetric heap, so that a receiver reaches them without an src
 * of its own); *lo_out, *hi_out span every byte sent, relative to src. */
static symm_status_t a2av_send_side(const char *fn, int n, const void *src,
                                    const size_t *counts, const size_t *displs, size_t es,
                                    uint64_t *sbytes, uint64_t *soff, size_t *lo_out,
                                    size_t *hi_out)
{
    size_t packed = 0, lo = SIZE_MAX, hi = 0;
    for (int j = 0; j < n; j++) {
        size_t e = displs ? displs[j] : packed, nb, off, end;
        if (__builtin_mul_overflow(counts[j], es, &nb) || __builtin_mul_overflow(e, es, &off) ||
            __builtin_add_overflow(off, nb, &end) ||
            (!displs && __builtin_add_overflow(packed, counts[j], &packed)))
            return symm_error_set(SYMM_ERR_OVERFLOW,
                                  "%s: send_counts[%d] = %zu at element %zu overflows", fn, j,
                                  counts[j], e);
        if (nb) {
            symm_status_t st = symm_coll_check_buf(fn, "src (the block of send_counts[j])",
                                                   (const uint8_t *)src + off, nb);
            if (st) return st;
            lo = off < lo ? off : lo;
            hi = end > hi ? end : hi;
        }
        sbytes[j] = nb;
        soff[j] = nb ? (uint64_t)((const uint8_t *)src + off - symm_heap_base(symm_g.me)) : 0;
    }
    *lo_out = lo;
    *hi_out = hi;
    return SYMM_SUCCESS;
}

/* The word member i sends member j in the first exchange: bytes | offset << 32 when both
 * fit (the usual case), else bytes with A2AV_WIDE set, and the offset follows in a second
 * exchange. Every member sends to every member, so all of them see whether any sender
 * went wide, and all agree on whether that second exchange takes place. */
#define A2AV_WIDE (1ull << 63)

/* Largest offset (bits) that packs; tests lower it to exercise the wide path. */
int symm_coll_a2av_off_bits = 31;

static uint64_t a2av_word(uint64_t bytes, uint64_t off, int wide)
{
    return wide ? (bytes | A2AV_WIDE) : (bytes | off << 32);
}

/* Two episodes (three with offsets past 2 GiB): the sizes and offsets are exchanged
 * (which also says every source is ready), the receivers pull, and a final sync protects
 * the sources. A member whose dest_capacity is too small writes nothing and tells the
 * others in the final sync: every member returns SYMM_ERR_OVERFLOW. Senders publish heap
 * offsets, so src may be a different object on every member, or NULL on one that sends
 * nothing. */
symm_status_t symm_alltoallv(symm_team_t team, void *dest, size_t dest_capacity,
                             const void *src, const size_t *send_counts,
                             const size_t *send_displs, size_t elem_size, size_t *recv_counts,
                             size_t *recv_displs)
{
    const char *fn = __func__;
    symm_coll_t c;
    CHECK(symm_coll_begin(team, fn, &c));
    int n = c.n, me = c.me;
    symm_status_t local = SYMM_SUCCESS;
    if (elem_size == 0)
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: elem_size is 0", fn);
    else if (!send_counts)
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: send_counts is NULL", fn);

    uint64_t stackbuf[5 * 64];
    symm_coll_scratch_t s = {NULL, 0};
    if (!local)
        local = symm_coll_scratch(fn, &s, stackbuf, sizeof stackbuf,
                                  5 * (size_t)n * sizeof(uint64_t));
    uint64_t *sbytes = s.p, *soff = sbytes + n, *rbytes = soff + n, *roff = rbytes + n,
             *rdisp = roff + n;
    size_t lo = 0, hi = 0;
    if (!local)
        local = a2av_send_side(fn, n, src, send_counts, send_displs, elem_size, sbytes, soff,
                               &lo, &hi);
    symm_coll_set_args(&c, symm_coll_args(elem_size, 0, 0, 0));
    symm_status_t st = SYMM_SUCCESS;
    if (local) {
        st = symm_coll_fail(&c, local);
        goto out_leave;
    }
    /* sbytes[j] becomes the first exchange's word; rbytes[j] what j sent me */
    int wide = 0, any_wide = 0;
    for (int j = 0; j < n; j++)
        wide |= sbytes[j] >> 32 || soff[j] >> symm_coll_a2av_off_bits;
    for (int j = 0; j < n; j++)
        sbytes[j] = a2av_word(sbytes[j], soff[j], wide);
    CHECK_GOTO(symm_coll_exchange(&c, sbytes, 0, rbytes), st, out_leave);
    for (int j = 0; j < n; j++) {
        any_wide |= (rbytes[j] & A2AV_WIDE) != 0;
        if (rbytes[j] & A2AV_WIDE) {
            rbytes[j] &= ~A2AV_WIDE;
            roff[j] = UINT64_MAX; /* comes in the second exchange */
        } else {
            roff[j] = rbytes[j] >> 32;
            rbytes[j] &= 0xffffffffu;
        }
    }
    uint64_t total = 0; /* bytes; each term is count x elem_size of a valid src range */
    for (int j = 0; j < n; j++) {
        rdisp[j] = total;
        if (__builtin_add_overflow(total, rbytes[j], &total))
            local = symm_error_set(SYMM_ERR_OVERFLOW, "%s: the incoming sizes overflow", fn);
    }
    if (!local && total / elem_size > dest_capacity)
        local = symm_error_set(SYMM_ERR_OVERFLOW,
                               "%s: %llu elements arrive on PE %d (team %d) but dest_capacity "
                               "is %zu; nothing was written",
                               fn, (unsigned long long)(total / elem_size), symm_g.me, me,
                               dest_capacity);
    if (!local)
        local = symm_coll_check_buf(fn, "dest (of the incoming size)", dest, (size_t)total);
    if (!local && lo < hi &&
        symm_coll_overlap(dest, (size_t)total, (const uint8_t *)src + lo, hi - lo))
        local = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: dest overlaps what src sends", fn);

    if (any_wide) {
        /* offsets of the wide senders (the others' words are ignored: roff is set) */
        uint64_t *wide_off = sbytes; /* the words are no longer needed */
        CHECK_GOTO(symm_coll_exchange(&c, soff, 0, wide_off), st, out_leave);
        for (int j = 0; j < n; j++)
            if (roff[j] == UINT64_MAX) roff[j] = wide_off[j];
    }
    if (!local) {
        int nt = total >= SYMM_COLL_NT_MIN;
        for (int t = 1; t <= n; t++) {
            int j = (me + t) % n;
            /* j's block, named by the same heap offset in my own heap */
            symm_coll_get(&c, (uint8_t *)dest + rdisp[j], symm_heap_base(symm_g.me) + roff[j],
                          (size_t)rbytes[j], j, nt);
        }
    }
    if (!c.local) c.local = local; /* a failed transfer may have set it */
    CHECK_GOTO(symm_coll_sync(&c), st, out_leave);
    for (int j = 0; j < n; j++) {
        if (recv_counts) recv_counts[j] = (size_t)(rbytes[j] / elem_size);
        if (recv_displs) recv_displs[j] = (size_t)(rdisp[j] / elem_size);
    }
out_leave:
    symm_coll_leave(&c);
    symm_coll_scratch_free(&s);
    return st;
}
