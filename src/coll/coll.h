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
#include "transport/transport.h"

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

/* ---- reaching members. Every collective is written once over these: load/store through
 * the peer pointer where the team's reach bit is set (no indirect call), the transport's
 * get/put (symm_transport_remote) for the others. A transfer that fails records its
 * status as this member's failure (c->local), which the call's next episode tells every
 * member; what it should have brought is then garbage that nobody returns. */
void symm_coll_far_get(symm_coll_t *c, void *dst, const void *addr, size_t n, int j);
void symm_coll_far_put(symm_coll_t *c, void *addr, const void *src, size_t n, int j);
void symm_coll_far_get_rows(symm_coll_t *c, void *dst, size_t dst_ld, const void *addr,
                            size_t src_ld, size_t rb, size_t rows, int j);
void symm_coll_far_put_rows(symm_coll_t *c, void *addr, size_t dst_ld, const void *src,
                            size_t src_ld, size_t rb, size_t rows, int j);

/* A peer gave up on the team: its poison is in my block. */
int symm_coll_met_poison(const symm_coll_t *c);

/* Messages to members not mapped here, on this duplicate's channel (its block's offset in
 * the receiver's team region, which no other live duplicate shares): for the few bytes a
 * far member would otherwise fetch with a round trip of its own. symm_coll_far_msgs: 1
 * if the transport carries messages from and to member j on this duplicate (the same
 * answer on both sides). A send that fails records its status as this member's failure
 * (c->local). symm_coll_far_recv waits for the message of n bytes from member j that
 * starts with the words want[0], want[1] (the call's own: a message of an earlier call
 * that failed before its receiver took it is dropped); it fails as the team's waits do
 * (timeout, a member that gave up), recording the failure in c->local. */
int symm_coll_far_msgs(const symm_coll_t *c, int j);
void symm_coll_far_send(symm_coll_t *c, int j, const void *buf, size_t n);
symm_status_t symm_coll_far_recv(symm_coll_t *c, int j, const uint64_t want[2], void *buf,
                                 size_t n);

/* Bytes a member stages at a time from a member it reaches through the transport: each
 * transfer costs a round trip, so they are larger than SYMM_COLL_CHUNK. */
#define SYMM_COLL_FAR_CHUNK (256 * 1024)

/* 1 if member j's memory is mapped here. */
static inline int symm_coll_near(const symm_coll_t *c, int j)
{
    return SYMM_LIKELY(c->pool->reach[j]);
}

/* 1 if the team is two members that reach each other only through the transport: the
 * broadcast and rooted reduce then split their bytes between the two. */
static inline int symm_coll_far_pair(const symm_coll_t *c)
{
    return c->n == 2 && !symm_coll_near(c, 1 - c->me);
}

/* dst (mine, not symmetric) = n bytes of member j's copy of my symmetric address addr. */
static inline void symm_coll_get(symm_coll_t *c, void *dst, const void *addr, size_t n, int j,
                                 int nt)
{
    if (!n) return;
    if (symm_coll_near(c, j)) {
        const void *from = symm_coll_ptr(c, addr, j);
        if (dst != from) symm_coll_copy(dst, from, n, nt);
        return;
    }
    symm_coll_far_get(c, dst, addr, n, j);
}

/* Member j's copy of my symmetric address addr = n bytes of src (mine). */
static inline void symm_coll_put(symm_coll_t *c, void *addr, const void *src, size_t n, int j,
                                 int nt)
{
    if (!n) return;
    if (symm_coll_near(c, j)) {
        void *to = symm_coll_ptr(c, addr, j);
        if (to != src) symm_coll_copy(to, src, n, nt);
        return;
    }
    symm_coll_far_put(c, addr, src, n, j);
}

/* n bytes of member j's copy of addr, readable here: in j's memory where it is mapped,
 * else copied into stage (n bytes) first. */
static inline const void *symm_coll_view(symm_coll_t *c, const void *addr, size_t n, int j,
                                         void *stage)
{
    if (symm_coll_near(c, j)) return symm_coll_ptr(c, addr, j);
    symm_coll_far_get(c, stage, addr, n, j);
    return stage;
}

/* Rows of a strided block: rows rows of rb bytes, the first at p, ld bytes apart. */
typedef struct {
    const uint8_t *p;
    size_t ld;
} symm_coll_rows_t;

/* rows rows of member j's copy of the block at my symmetric address addr (ld bytes
 * apart), readable here: in j's memory, or staged in stage (stage_size bytes, at least
 * rows x rb). Rows at most twice their length apart come in one contiguous get of their
 * whole span where it fits (one transfer, where a strided one costs one per row with
 * Open MPI's shared-memory BTL), others packed by one strided get. */
static inline symm_coll_rows_t symm_coll_view_rows(symm_coll_t *c, const void *addr, size_t ld,
                                                   size_t rb, size_t rows, int j, void *stage,
                                                   size_t stage_size)
{
    if (symm_coll_near(c, j)) return (symm_coll_rows_t){symm_coll_ptr(c, addr, j), ld};
    if (rows && ld <= 2 * rb && (rows - 1) * ld + rb <= stage_size) {
        symm_coll_far_get(c, stage, addr, (rows - 1) * ld + rb, j);
        return (symm_coll_rows_t){stage, ld};
    }
    symm_coll_far_get_rows(c, stage, rb, addr, ld, rb, rows, j);
    return (symm_coll_rows_t){stage, rb};
}

/* Local rows (dst, dst_ld apart) = member j's rows at my symmetric address addr (src_ld
 * apart). */
static inline void symm_coll_get_rows(symm_coll_t *c, void *dst, size_t dst_ld,
                                      const void *addr, size_t src_ld, size_t rb, size_t rows,
                                      int j)
{
    if (!symm_coll_near(c, j)) {
        symm_coll_far_get_rows(c, dst, dst_ld, addr, src_ld, rb, rows, j);
        return;
    }
    const uint8_t *s = symm_coll_ptr(c, addr, j);
    for (size_t r = 0; r < rows; r++)
        memcpy((uint8_t *)dst + r * dst_ld, s + r * src_ld, rb);
}

/* Member j's rows at my symmetric address addr (dst_ld apart) = local rows (src_ld). */
static inline void symm_coll_put_rows(symm_coll_t *c, void *addr, size_t dst_ld,
                                      const void *src, size_t src_ld, size_t rb, size_t rows,
                                      int j)
{
    if (!symm_coll_near(c, j)) {
        symm_coll_far_put_rows(c, addr, dst_ld, src, src_ld, rb, rows, j);
        return;
    }
    uint8_t *d = symm_coll_ptr(c, addr, j);
    for (size_t r = 0; r < rows; r++)
        memcpy(d + r * dst_ld, (const uint8_t *)src + r * src_ld, rb);
}

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
