/* coll.h — helpers shared by the collectives of src/coll: argument checks (run before a
 * collective is entered, so a bad call changes nothing), the split of a payload into
 * per-member slices, and scratch space that lives on the stack when it is small. */
#ifndef SYMM_COLL_COLL_H
#define SYMM_COLL_COLL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/check.h"
#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/team.h"

/* Bytes one step of a large reduction works on: the partial result stays in L1 while
 * the members' sources stream through it. */
#define SYMM_COLL_CHUNK (16 * 1024)

/* Payloads up to this size travel inside the episode's data word (one episode). */
#define SYMM_COLL_WORD 8

/* A member that writes at least this many bytes in one collective uses streaming
 * (non-temporal) stores: the result would not stay in cache anyway, and skipping the
 * read-for-ownership of every destination line copies ~25% faster (measured on an H200
 * host's Xeon: 6.2 against 4.9 GB/s for glibc memcpy, 256 KiB to 64 MiB). */
#define SYMM_COLL_NT_MIN (512 * 1024)

/* memcpy, with streaming stores when nt is set; ends with a store fence in that case, so
 * that a later release store (an episode's signal) orders after the data. */
void symm_coll_copy(void *dst, const void *src, size_t n, int nt);

/* alltoallv packs a (size, offset) pair into one word when the offset fits in this many
 * bits (31); tests lower it, on every PE alike, to exercise the two-exchange path. */
extern int symm_coll_a2av_off_bits;

/* [p, p+n) must be a symmetric buffer (NULL allowed when n is 0). */
symm_status_t symm_coll_check_buf(const char *fn, const char *arg, const void *p, size_t n);
/* *out = a * b * c, or SYMM_ERR_OVERFLOW naming fn and what. */
symm_status_t symm_coll_mul(const char *fn, const char *what, size_t a, size_t b, size_t c,
                            size_t *out);
/* 1 if [a, a+na) and [b, b+nb) share a byte. */
static inline int symm_coll_overlap(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}
/* root names a member of a team of n. */
static inline symm_status_t symm_coll_check_root(const char *fn, int root, int n)
{
    if (root < 0 || root >= n)
        return symm_error_set(SYMM_ERR_PE_OUT_OF_RANGE,
                              "%s: root %d is not a member of a team of %d", fn, root, n);
    return SYMM_SUCCESS;
}

/* The buffer checks of a collective that reads src and writes dest, in this order: dest
 * [dest, +dn) is symmetric, src [src, +sn) is symmetric, and, unless overlap is NULL
 * (the caller allows the overlap it has), they share no byte: else the error
 * "fn: overlap". */
static inline symm_status_t symm_coll_check_io(const char *fn, const void *dest, size_t dn,
                                               const void *src, size_t sn, const char *overlap)
{
    symm_status_t st = symm_coll_check_buf(fn, "dest", dest, dn);
    if (!st) st = symm_coll_check_buf(fn, "src", src, sn);
    if (!st && overlap && symm_coll_overlap(dest, dn, src, sn))
        st = symm_error_set(SYMM_ERR_INVALID_ARG, "%s: %s", fn, overlap);
    return st;
}
/* Member r's slice [lo, hi) of count elements split n ways; slice edges fall on 64-byte
 * multiples so that no two members write one cache line. */
static inline void symm_coll_slice(size_t count, size_t size, int n, int r, size_t *lo,
                                   size_t *hi)
{
    size_t unit = size >= 64 ? 1 : 64 / size;
    size_t q = count / (size_t)n + (count % (size_t)n != 0); /* ceil(count / n) */
    size_t per = (q + unit - 1) / unit * unit;
    size_t a = per * (size_t)r, b = a + per;
    *lo = a < count ? a : count;
    *hi = b < count ? b : count;
}

/* Scratch memory: on the stack up to the size of buf, else malloc'd. */
typedef struct {
    void *p;
    int heap;
} symm_coll_scratch_t;

static inline symm_status_t symm_coll_scratch(const char *fn, symm_coll_scratch_t *s,
                                              void *stackbuf, size_t stacksize, size_t n)
{
    s->heap = n > stacksize;
    s->p = s->heap ? malloc(n) : stackbuf;
    if (!s->p)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "%s: no memory for %zu bytes of scratch", fn,
                              n);
    return SYMM_SUCCESS;
}

static inline void symm_coll_scratch_free(symm_coll_scratch_t *s)
{
    if (s->heap) free(s->p);
}

/* The scratch of a collective whose payload of nbytes rides in the exchange's words
 * (0 < nbytes <= SYMM_COLL_WORD): words words; nothing (s->p NULL) for other payloads. */
static inline symm_status_t symm_coll_word_scratch(const char *fn, symm_coll_scratch_t *s,
                                                   void *stackbuf, size_t stacksize,
                                                   size_t nbytes, size_t words)
{
    s->p = NULL;
    s->heap = 0;
    if (!nbytes || nbytes > SYMM_COLL_WORD) return SYMM_SUCCESS;
    return symm_coll_scratch(fn, s, stackbuf, stacksize, words * sizeof(uint64_t));
}

/* The cases every data collective settles alike, once its fingerprint is set: a member
 * whose own checks failed (local) tells the others; a team of one copies src to dest;
 * no bytes at all still make one sync, so that the members agree on the call. Returns 1
 * if the call is settled, with its status in *st. */
static inline int symm_coll_settled(symm_coll_t *c, symm_status_t local, void *dest,
                                    const void *src, size_t nbytes, symm_status_t *st)
{
    *st = SYMM_SUCCESS;
    if (local) {
        *st = symm_coll_fail(c, local);
    } else if (c->n == 1) {
        if (dest != src && nbytes) memcpy(dest, src, nbytes);
    } else if (nbytes == 0) {
        *st = symm_coll_sync(c);
    } else {
        return 0;
    }
    return 1;
}

/* A team's description for error messages, formatted on first use only: it takes several
 * snprintf calls, about a quarter of a 1 us MoE call that reports no error. */
typedef struct {
    symm_team_t team;
    int made;
    char buf[96];
} symm_coll_tname_t;

static inline const char *symm_coll_tname(symm_coll_tname_t *t)
{
    if (!t->made) {
        symm_team_describe(t->team, t->buf, sizeof t->buf);
        t->made = 1;
    }
    return t->buf;
}

static inline const char *symm_coll_tname_of(void *t)
{
    return symm_coll_tname(t);
}
static inline int symm_coll_in_heap(const void *p, size_t n)
{
    return symm_addr_accessible(p, n);
}

/* The shared argument checks' view of a CPU call on a team (check.h). */
static inline const symm_check_where_t *symm_coll_where(symm_check_where_t *w, const char *fn,
                                                        symm_coll_tname_t *tn)
{
    w->fn = fn;
    w->team_name = symm_coll_tname_of;
    w->ctx = tn;
    w->in_heap = symm_coll_in_heap;
    w->heap_what = "inside one symmetric object";
    w->align = 0;
    return w;
}

#endif
