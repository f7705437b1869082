/* moe.c — the all-to-all-v family used by mixture-of-experts layers: 1-D
 * all_to_all_v, 2-D dispatch (rank-major to expert-major, aligned) and combine (the
 * inverse, from padded offsets), on a team or split over the workers of a pool.
 *
 * One engine serves all three. Every member publishes, for each receiver j and index e
 * (j's expert for dispatch, my expert for combine), the count and source offset of the
 * rows it holds for (j, e), with its out_capacity and where its input lies in its
 * segment, in a per-call scratch of its team region whose offset it announces with one
 * exchange. Readers find a source's rows through that published place, never through
 * their own in: members may pass different objects as in, or NULL when they send
 * nothing. Each member then reads its column
 * of every peer's table (a copy, through the transport, of the tables of members not
 * mapped here) and lays out its output. Before any row moves, all members must
 * agree that every output fits: for small teams each member computes every member's
 * need from the tables itself (no extra episode), for large ones (n*n*ne reads too many)
 * a second exchange carries the needs. Rows move by reads of the sources' symmetric input
 * (pull: loads where mapped, gets elsewhere); a final sync keeps inputs and tables alive
 * until every member has finished reading. Two episodes in all (three for large teams).
 *
 * The worker runner of the _parallel forms is in workers.c. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/tile_moe.h"
#include "symm/impl/tile_moe__common.h"
#include "team/team.h"

/* The kinds, numbered as the device code numbers them (one fingerprint). */
typedef enum {
    A2A_1D = SYMM_TM_A2A_1D,
    A2A_DISPATCH = SYMM_TM_A2A_DISPATCH,
    A2A_COMBINE = SYMM_TM_A2A_COMBINE
} a2a_kind_t;

typedef struct a2a_args {
    a2a_kind_t kind;
    void *out;
    size_t out_capacity;
    const void *in;
    const size_t *in_splits;
    const size_t *in_offsets; /* combine only */
    int ne;
    size_t row_bytes;
    size_t major_align; /* dispatch only */
    size_t *out_splits, *out_offsets, *out_rows;
} a2a_args_t;

/* The exchanged word of a member that succeeded: its table's offset in its team region
 * (below 2^47: SYMM_TEAM_HEAP_SIZE is at most 64 TiB), and in the bits above it, up to
 * A2A_TOO_BIG, the serial number of the call on its PE: with the sender's word and the
 * episode they name the call in the messages that carry tables (symm_coll_far_recv). */
#define A2A_SERIAL_SHIFT 47
#define A2A_SERIAL_MASK  ((UINT64_C(1) << 15) - 1)
static atomic_uint_fast64_t a2a_serial;

static inline uint64_t a2a_off(uint64_t word)
{
    return word & ((UINT64_C(1) << A2A_SERIAL_SHIFT) - 1);
}

/* The exchanged word for a member that failed: its status in the low bits. */
#define A2A_FAIL ((uint64_t)1 << 63)
/* With A2A_FAIL: the member's output does not fit; the low bits say how many rows it
 * needs (0: the size overflows). */
#define A2A_TOO_BIG ((uint64_t)1 << 62)

static const char *kind_fn(a2a_kind_t k, int worker_form)
{
    static const char *names[3][2] = {
        {"symm_all_to_all_v", "symm_all_to_all_v_worker"},
        {"symm_moe_dispatch", "symm_moe_dispatch_worker"},
        {"symm_moe_combine", "symm_moe_combine_worker"},
    };
    return names[k][worker_form];
}

static int mul_overflows(size_t a, size_t b, size_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
static int add_overflows(size_t a, size_t b, size_t *r)
{
    return __builtin_add_overflow(a, b, r);
}

/* Words before the table in a member's scratch: its out_capacity, and the segment
 * offset of its in (0 when it sends no rows: nobody reads it then). */
#define A2A_HDR     2
#define A2A_HDR_CAP 0
#define A2A_HDR_IN  1

/* Validates what this PE passed and fills its scratch: the header, then the table
 * pub[A2A_HDR + (j*ne + e)*2 + 0/1] = (count, source offset) of the rows for (receiver
 * j, index e). */
static symm_status_t a2a_prepare(const char *fn, const symm_coll_t *c, const a2a_args_t *a,
                                 uint64_t *pub)
{
    int n = c->n, ne = a->ne;
    symm_coll_tname_t tname = {.team = c->team};
    symm_coll_tname_t *tn = &tname;
    symm_check_where_t w;
    if (!a->in_splits)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: in_splits is NULL", fn,
                              symm_coll_tname(tn));
    if (a->kind == A2A_COMBINE && !a->in_offsets)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s on %s: in_offsets is NULL", fn,
                              symm_coll_tname(tn));
    size_t end = 0; /* rows of in that are read: max over segments of offset + count */
    size_t run = 0; /* running offset of the packed (rank-major) input */
    for (int j = 0; j < n; j++) {
        for (int e = 0; e < ne; e++) {
            size_t k, cnt, off, seg_end;
            if (a->kind == A2A_COMBINE) {
                k = (size_t)e * n + j;
                cnt = a->in_splits[k];
                off = a->in_offsets[k];
            } else {
                k = (size_t)j * ne + e;
                cnt = a->in_splits[k];
                off = run;
                if (add_overflows(run, cnt, &run))
                    return symm_error_set(SYMM_ERR_OVERFLOW,
                                          "%s on %s: the sum of in_splits overflows", fn,
                                          symm_coll_tname(tn));
            }
            if (add_overflows(off, cnt, &seg_end))
                return symm_error_set(SYMM_ERR_OVERFLOW,
                                      "%s on %s: in_offsets[%zu] + in_splits[%zu] overflows",
                                      fn, symm_coll_tname(tn), k, k);
            if (cnt && seg_end > end) end = seg_end;
            pub[A2A_HDR + ((size_t)j * ne + e) * 2] = cnt;
            pub[A2A_HDR + ((size_t)j * ne + e) * 2 + 1] = off;
        }
    }
    size_t in_bytes;
    if (mul_overflows(end, a->row_bytes, &in_bytes))
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: %zu input rows of %zu bytes overflow", fn,
                              symm_coll_tname(tn), end, a->row_bytes);
    if (in_bytes && !a->in)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s on %s: in is NULL but this PE sends rows (its splits read "
                              "%zu rows of %zu bytes)",
                              fn, symm_coll_tname(tn), end, a->row_bytes);
    if (in_bytes && !symm_addr_accessible(a->in, in_bytes))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s on %s: in %p + %zu bytes (%zu rows of %zu bytes) is not "
                              "inside one symmetric object",
                              fn, symm_coll_tname(tn), a->in, in_bytes, end, a->row_bytes);
    size_t out_bytes;
    CHECK(symm_check_a2a_out(symm_coll_where(&w, fn, tn), a->out, a->out_capacity, a->row_bytes,
                             a->in, in_bytes, &out_bytes));
    pub[A2A_HDR_CAP] = a->out_capacity;
    pub[A2A_HDR_IN] = in_bytes ? (uint64_t)((const uint8_t *)a->in - symm_g.seg[symm_g.me]) : 0;
    return SYMM_SUCCESS;
}

/* Lays out my output from cnt[s*ne + e] (rows source s holds for my index e): fills
 * off[] in the caller's numbering (dispatch: e*n + s, else s*ne + e) and returns the
 * total rows, or SIZE_MAX on overflow. */
static size_t a2a_layout(const a2a_args_t *a, int n, const size_t *cnt, size_t *off)
{
    int ne = a->ne;
    size_t pos = 0;
    if (a->kind == A2A_DISPATCH) {
        size_t A = a->major_align;
        for (int e = 0; e < ne; e++) {
            size_t start = pos;
            for (int s = 0; s < n; s++) {
                off[(size_t)e * n + s] = pos;
                if (add_overflows(pos, cnt[(size_t)s * ne + e], &pos)) return SIZE_MAX;
            }
            if (A) {
                uint64_t alen;
                if (symm_tm_aligned_len(pos - start, A, &alen) ||
                    add_overflows(start, (size_t)alen, &pos))
                    return SIZE_MAX;
            }
        }
    } else {
        for (int s = 0; s < n; s++)
            for (int e = 0; e < ne; e++) {
                off[(size_t)s * ne + e] = pos;
                if (add_overflows(pos, cnt[(size_t)s * ne + e], &pos)) return SIZE_MAX;
            }
    }
    if (pos == SIZE_MAX) return SIZE_MAX; /* reserved as the overflow mark */
    return pos;
}

/* Members' tables are read by everyone: with at most this many reads in all (n*n*ne),
 * every member computes every member's need itself and the capacity agreement costs no
 * episode; beyond it a second exchange carries the needs. */
#define A2A_LOCAL_AGREE_MAX ((size_t)1 << 16)
/* Rows of member m's output layout, read from every member's scratch (tab[s]: its
 * header, then its table); SIZE_MAX on overflow. The same total as a2a_layout's, without
 * the offsets: the capacity agreement needs no more. */
static size_t a2a_need(const a2a_args_t *a, int n, const uint64_t *const *tab, int m)
{
    int ne = a->ne;
    size_t pos = 0, A = a->kind == A2A_DISPATCH ? a->major_align : 0;
    for (int e = 0; e < ne; e++) {
        size_t len = 0;
        uint64_t alen;
        for (int s = 0; s < n; s++)
            if (add_overflows(len, tab[s][A2A_HDR + ((size_t)m * ne + e) * 2], &len))
                return SIZE_MAX;
        if (symm_tm_aligned_len(len, A, &alen) || add_overflows(pos, (size_t)alen, &pos) ||
            pos == SIZE_MAX)
            return SIZE_MAX;
    }
    return pos;
}

static symm_status_t overflow_error(const char *fn, symm_coll_tname_t *tn, const symm_coll_t *c,
                                    int s, size_t need, const size_t *cap)
{
    if (need == SIZE_MAX)
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: the output size of PE %d (world "
                              "%d) overflows; nothing was written",
                              fn, symm_coll_tname(tn), s, c->world[s]);
    if (cap)
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s on %s: the output of PE %d (world %d) "
                              "needs %zu rows, more than its out_capacity %zu; nothing was "
                              "written",
                              fn, symm_coll_tname(tn), s, c->world[s], need, *cap);
    return symm_error_set(SYMM_ERR_OVERFLOW,
                          "%s on %s: the output of PE %d (world %d) needs "
                          "%zu rows, more than its out_capacity; nothing was written",
                          fn, symm_coll_tname(tn), s, c->world[s], need);
}

static symm_status_t peer_failed(const char *fn, symm_coll_tname_t *tn, const symm_coll_t *c,
                                 int s, uint64_t word)
{
    symm_status_t theirs = (symm_status_t)(-(int)(uint32_t)word);
    return symm_error_set(theirs,
                          "%s on %s: PE %d (world %d) passed bad arguments (%s); "
                          "nothing was written",
                          fn, symm_coll_tname(tn), s, c->world[s], symm_strerror(theirs));
}

/* A member that far source s reaches only through the transport reads s's segments for
 * it in one get of their span (into a local buffer, then copied to their places) where
 * there are several, the span is at most twice the rows they hold and at most this many
 * bytes: a get is a system call and a round trip (about 2 us over Open MPI's shared-memory
 * BTL without xpmem), a copy of a few KiB far less. */
#define A2A_SPAN_MAX ((size_t)64 << 10)

/* The span of source s's segments for me (index e: cnt[s*ne + e] rows at srcoff[...] of
 * its in), in rows from *lo_out, or 0 where it is not worth one get. */
static size_t a2a_span(const a2a_args_t *a, int s, const size_t *cnt, const size_t *srcoff,
                       size_t *lo_out)
{
    size_t lo = SIZE_MAX, hi = 0, rows = 0, bytes;
    int segs = 0;
    for (int e = 0; e < a->ne; e++) {
        size_t k = (size_t)s * a->ne + e;
        if (!cnt[k]) continue;
        segs++;
        rows += cnt[k];
        lo = srcoff[k] < lo ? srcoff[k] : lo;
        hi = srcoff[k] + cnt[k] > hi ? srcoff[k] + cnt[k] : hi; /* checked: no overflow */
    }
    if (segs < 2 || hi - lo > 2 * rows || mul_overflows(hi - lo, a->row_bytes, &bytes) ||
        bytes > A2A_SPAN_MAX)
        return 0;
    *lo_out = lo;
    return hi - lo;
}

static symm_status_t a2a_run(const char *fn, symm_team_t team, int worker, int nworkers,
                             const a2a_args_t *a, symm_status_t pre)
{
    SYMM_REQUIRE_INIT();
    uint64_t h = symm_tm_a2a_args_fp((uint64_t)a->kind, (uint64_t)(int64_t)a->ne, a->row_bytes,
                                     a->major_align);
    h = symm_tm_mix(h, ((uint64_t)(uint32_t)worker << 32) | (uint32_t)nworkers);
    symm_coll_t c;
    CHECK(symm_coll_enter(team, fn, h, &c));
    if (worker == 0) symm_coll_set_gate(&c, symm_coll_take_gate());
    int n = c.n, me = c.me, ne = a->ne;
    symm_coll_tname_t tname = {.team = team};
    symm_coll_tname_t *tn = &tname;
    symm_check_where_t w;

    /* ---- local checks, memory and the publication table; failures are agreed below */
    symm_status_t st = SYMM_SUCCESS, mine = SYMM_SUCCESS;
    uint64_t pub_off = 0, *pub = NULL, *far_tab = NULL;
    size_t nsplit = 0, *cnt = NULL;
    uint64_t *words = malloc(sizeof(uint64_t) * (size_t)n);
    const uint64_t **tab = malloc(sizeof(uint64_t *) * (size_t)n);
    /* each source's in, named by its offset in my own segment */
    const uint8_t **src_in = malloc(sizeof(uint8_t *) * (size_t)n);
    if (!words || !tab || !src_in) {
        free(words);
        free(tab);
        free(src_in);
        symm_coll_leave(&c);
        return symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for %d members", fn,
                              symm_coll_tname(tn), n);
    }
    if (pre)
        mine = pre;
    else if ((mine = symm_check_a2a_shape(symm_coll_where(&w, fn, tn), n, ne, a->row_bytes,
                                          &nsplit)))
        ;
    else if (!(cnt = malloc(sizeof(size_t) * nsplit * 3)) ||
             (c.pool->remote &&
              !(far_tab =
                    malloc(sizeof(uint64_t) * (2 + A2A_HDR + nsplit * 2) * ((size_t)n + 1)))))
        mine = symm_error_set(SYMM_ERR_NO_MEMORY, "%s on %s: no memory for the layout", fn,
                              symm_coll_tname(tn));
    else if ((mine = symm_team_region_alloc((A2A_HDR + nsplit * 2) * sizeof(uint64_t),
                                            &pub_off)) == SYMM_SUCCESS) {
        pub = symm_team_region_ptr(symm_g.me, pub_off);
        mine = a2a_prepare(fn, &c, a, pub);
    }

    /* Exchange 1: the table's offset with this PE's call serial, or my failure. It also
     * orders every member's table and input before anyone reads them (the notify is a
     * release). */
    uint64_t serial = atomic_fetch_add(&a2a_serial, 1) & A2A_SERIAL_MASK;
    CHECK_GOTO(symm_coll_exchange(&c, NULL,
                                  mine ? A2A_FAIL | (uint32_t)-mine
                                       : pub_off | serial << A2A_SERIAL_SHIFT,
                                  words),
               st, out_free);
    for (int s = 0; s < n; s++) {
        if (!(words[s] & A2A_FAIL)) continue;
        /* Nobody reads a table now: the scratch can go at once. */
        st = mine ? mine : peer_failed(fn, tn, &c, s, words[s]);
        goto out_free;
    }
    /* Tables of far members: sent by message where the transport has them (two words
     * first name the call: the receiver's exchanged word, and the episode mixed with the
     * sender's word), else
     * fetched; a far table takes stride words of far_tab (allocated before exchange 1,
     * so that no member fails alone after it: its peers would wait for its table). */
    size_t tab_words = A2A_HDR + nsplit * 2, stride = 2 + tab_words;
    uint64_t ep = c.dup->episode;
    if (far_tab) {
        uint64_t *msg = far_tab + stride * (size_t)n;
        msg[1] = symm_mix64(ep) ^ words[me];
        memcpy(msg + 2, pub, sizeof(uint64_t) * tab_words);
        for (int j = 0; j < n; j++)
            if (!symm_coll_near(&c, j) && symm_coll_far_msgs(&c, j)) {
                msg[0] = words[j];
                symm_coll_far_send(&c, j, msg, sizeof(uint64_t) * stride);
            }
    }
    for (int s = 0; s < n && !c.local; s++) {
        uint64_t *far = far_tab ? far_tab + stride * (size_t)s : NULL;
        if (s != me && far && !symm_coll_near(&c, s) && symm_coll_far_msgs(&c, s)) {
            const uint64_t want[2] = {words[me], symm_mix64(ep) ^ words[s]};
            if ((st = symm_coll_far_recv(&c, s, want, far, sizeof(uint64_t) * stride))) {
                if (c.dup->broken) goto out_free;
                break; /* c.local: told to everyone by the sync below */
            }
            tab[s] = far + 2;
            continue;
        }
        tab[s] = s == me
                     ? pub
                     : symm_coll_view(&c, symm_team_region_ptr(symm_g.me, a2a_off(words[s])),
                                      sizeof(uint64_t) * tab_words, s, far ? far + 2 : NULL);
    }
    if (c.local) {
        /* Peers may still be reading my table: sync before it goes. */
        st = symm_coll_sync(&c);
        goto out_free;
    }

    /* ---- my column of every table, where every source's in lies, and my layout */
    size_t *srcoff = cnt + nsplit, *dstoff = cnt + 2 * nsplit;
    for (int s = 0; s < n; s++) {
        src_in[s] = symm_g.seg[symm_g.me] + tab[s][A2A_HDR_IN];
        const uint64_t *t = tab[s] + A2A_HDR + (size_t)me * ne * 2;
        for (int e = 0; e < ne; e++) {
            cnt[(size_t)s * ne + e] = t[2 * e];
            srcoff[(size_t)s * ne + e] = t[2 * e + 1];
        }
    }
    size_t total = a2a_layout(a, n, cnt, dstoff);

    /* ---- does every output fit? Every member must reach the same answer. */
    int local_agree = nsplit <= A2A_LOCAL_AGREE_MAX / (size_t)n;
    if (local_agree) {
        /* Every member evaluates every member's need from the same tables: the same
         * verdict everywhere, and no episode. The tables stay until the closing sync. */
        for (int m = 0; m < n && !st; m++) {
            size_t need = a2a_need(a, n, tab, m), cap = (size_t)tab[m][A2A_HDR_CAP];
            if (need == SIZE_MAX || need > cap) st = overflow_error(fn, tn, &c, m, need, &cap);
        }
        if (st) {
            /* Peers may still be reading my table: sync before it goes. */
            symm_status_t st2 = symm_coll_sync(&c);
            (void)st2; /* the overflow is the error to report */
            goto out_free;
        }
    } else {
        /* Exchange 2: every member's need. After it every member has read my table. */
        uint64_t need = 0;
        if (total == SIZE_MAX || total > a->out_capacity)
            need = A2A_FAIL | A2A_TOO_BIG | (total == SIZE_MAX ? 0 : total);
        CHECK_GOTO(symm_coll_exchange(&c, NULL, need, words), st, out_free);
        symm_team_region_free(pub_off);
        pub = NULL;
        for (int s = 0; s < n && !st; s++)
            if (words[s] & A2A_FAIL) {
                uint64_t rows = words[s] & (A2A_TOO_BIG - 1);
                st = overflow_error(fn, tn, &c, s, rows ? (size_t)rows : SIZE_MAX,
                                    s == me ? &a->out_capacity : NULL);
            }
        if (st) goto out_free;
    }

    /* ---- rows: my share of the moved rows, in output order */
    size_t moved = 0;
    for (size_t k = 0; k < nsplit; k++)
        moved += cnt[k]; /* <= total: no overflow */
    size_t lo, hi, pos = 0;
    symm_coll_band(moved, (size_t)nworkers, (size_t)worker, &lo, &hi);
    int outer = a->kind == A2A_DISPATCH ? ne : n, inner = a->kind == A2A_DISPATCH ? n : ne;
    /* Moves from 128 KiB up bypass the cache (see SYMM_COLL_NT_MIN): the rows are not
     * read again by this call. Measured at 2 PEs on 2 cores: 256 KiB dispatch 1.38x ->
     * 1.78x MPI's bandwidth with streaming stores, 1-64 MiB about 1.3x -> 1.5x. */
    int nt = (hi - lo) * a->row_bytes >= SYMM_COLL_NT_MIN / 4;
    /* Spans of far sources (A2A_SPAN_MAX), for the plain forms: a worker of a pool
     * moves a band of the rows, which may cut a span. */
    uint8_t *span = NULL, *spanned = NULL;
    if (c.pool->remote && nworkers == 1 && a->row_bytes) {
        span = aligned_alloc(4096, A2A_SPAN_MAX);
        spanned = calloc((size_t)n, 1);
    }
    for (int s = 0; span && spanned && s < n; s++) {
        size_t slo, srows;
        if (symm_coll_near(&c, s) || !(srows = a2a_span(a, s, cnt, srcoff, &slo))) continue;
        symm_coll_far_get(&c, span, src_in[s] + slo * a->row_bytes, srows * a->row_bytes, s);
        for (int e = 0; e < ne; e++) {
            size_t k = (size_t)s * ne + e;
            size_t o = a->kind == A2A_DISPATCH ? (size_t)e * n + s : k;
            symm_coll_copy((uint8_t *)a->out + dstoff[o] * a->row_bytes,
                           span + (srcoff[k] - slo) * a->row_bytes, cnt[k] * a->row_bytes, 0);
        }
        spanned[s] = 1;
    }
    for (int i = 0; i < outer && pos < hi; i++) {
        for (int j = 0; j < inner && pos < hi; j++) {
            int s = a->kind == A2A_DISPATCH ? j : i, e = a->kind == A2A_DISPATCH ? i : j;
            size_t k = (size_t)s * ne + e, o = (size_t)i * inner + j;
            size_t seg_lo = pos, seg_hi = pos + cnt[k];
            pos = seg_hi;
            size_t a0 = seg_lo > lo ? seg_lo : lo, a1 = seg_hi < hi ? seg_hi : hi;
            if (a0 >= a1 || (spanned && spanned[s])) continue;
            symm_coll_get(&c, (uint8_t *)a->out + (dstoff[o] + (a0 - seg_lo)) * a->row_bytes,
                          src_in[s] + (srcoff[k] + (a0 - seg_lo)) * a->row_bytes,
                          (a1 - a0) * a->row_bytes, s, nt);
        }
    }
    free(spanned);
    free(span);
    if (worker == 0) {
        for (int i = 0; i < outer; i++)
            for (int j = 0; j < inner; j++) {
                int s = a->kind == A2A_DISPATCH ? j : i, e = a->kind == A2A_DISPATCH ? i : j;
                size_t k = (size_t)s * ne + e, o = (size_t)i * inner + j;
                if (a->out_splits) a->out_splits[o] = cnt[k];
                if (a->out_offsets) a->out_offsets[o] = dstoff[o];
            }
        if (a->out_rows) *a->out_rows = total;
    }
    /* Peers may still be reading my input (and my table): nobody leaves, and no table
     * goes, before everyone has read. */
    st = symm_coll_sync(&c);

out_free:
    if (pub) symm_team_region_free(pub_off);
    free(far_tab);
    free(cnt);
    free(src_in);
    free(tab);
    free(words);
    symm_coll_leave(&c);
    return st;
}

/* ---------------------------------------------------------------- workers */
symm_status_t symm_coll_worker_team(const char *fn_name, symm_pool_t pool, int worker,
                                    int nworkers, symm_team_t *team_out)
{
    SYMM_REQUIRE_INIT();
    size_t size = symm_pool_size(pool);
    *team_out = SYMM_TEAM_INVALID;
    if (!size)
        return symm_error_set(SYMM_ERR_TEAM_INVALID, "%s: pool %lld is invalid or destroyed",
                              fn_name, (long long)pool);
    /* Where the duplicate exists the call still takes part on it, failing: its peers
     * learn of the bad count there instead of waiting for SYMM_TIMEOUT. */
    if (worker >= 0 && (size_t)worker < size) *team_out = symm_pool_team(pool, (size_t)worker);
    if (nworkers < 1 || (size_t)nworkers > size)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: nworkers = %d but the pool has %zu duplicates (one per "
                              "worker; grow it with symm_pool_grow)",
                              fn_name, nworkers, size);
    if (worker < 0 || worker >= nworkers)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: worker %d is not in 0..%d", fn_name,
                              worker, nworkers - 1);
    symm_team_t t = symm_pool_team(pool, (size_t)worker);
    if (t == SYMM_TEAM_INVALID)
        return symm_error_set(SYMM_ERR_TEAM_INVALID, "%s: pool %lld has no duplicate %d",
                              fn_name, (long long)pool, worker);
    *team_out = t;
    return SYMM_SUCCESS;
}

/* ---------------------------------------------------------------- entry points */
static symm_status_t a2a_worker_fn(symm_pool_t pool, int worker, int nworkers, void *arg)
{
    const a2a_args_t *a = arg;
    symm_team_t team;
    const char *fn = kind_fn(a->kind, 1);
    symm_status_t pre = symm_coll_worker_team(fn, pool, worker, nworkers, &team);
    if (pre && team == SYMM_TEAM_INVALID) return pre;
    return a2a_run(fn, team, worker, nworkers, a, pre);
}

static symm_status_t a2a_worker(symm_pool_t pool, int worker, int nworkers, const a2a_args_t *a)
{
    return a2a_worker_fn(pool, worker, nworkers, (void *)a);
}

static symm_status_t a2a_parallel(const char *fn, symm_pool_t pool, int nworkers,
                                  const a2a_args_t *a)
{
    /* SIZE_MAX: the automatic count cannot depend on the bytes moved, which each member
     * knows only for itself (its splits) */
    return symm_coll_run_workers(fn, pool, nworkers, SIZE_MAX, a2a_worker_fn, (void *)a);
}

#define A2A_1D_ARGS                                                                            \
    (a2a_args_t)                                                                               \
    {                                                                                          \
        .kind = A2A_1D, .out = out, .out_capacity = out_capacity, .in = in,                    \
        .in_splits = in_splits, .ne = 1, .row_bytes = row_bytes, .out_splits = out_splits,     \
        .out_offsets = out_offsets, .out_rows = out_rows                                       \
    }
#define A2A_DISPATCH_ARGS                                                                      \
    (a2a_args_t)                                                                               \
    {                                                                                          \
        .kind = A2A_DISPATCH, .out = out, .out_capacity = out_capacity, .in = in,              \
        .in_splits = in_splits, .ne = ne, .row_bytes = row_bytes, .major_align = major_align,  \
        .out_splits = out_splits, .out_offsets = out_offsets, .out_rows = out_rows             \
    }
#define A2A_COMBINE_ARGS                                                                       \
    (a2a_args_t)                                                                               \
    {                                                                                          \
        .kind = A2A_COMBINE, .out = out, .out_capacity = out_capacity, .in = in,               \
        .in_splits = in_splits, .in_offsets = in_offsets, .ne = ne, .row_bytes = row_bytes,    \
        .out_splits = out_splits, .out_offsets = out_offsets, .out_rows = out_rows             \
    }

symm_status_t symm_all_to_all_v(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, size_t row_bytes,
                                size_t *out_splits, size_t *out_offsets, size_t *out_rows)
{
    a2a_args_t a = A2A_1D_ARGS;
    return a2a_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_moe_dispatch(symm_team_t team, void *out, size_t out_capacity,
                                const void *in, const size_t *in_splits, int ne,
                                size_t row_bytes, size_t major_align, size_t *out_splits,
                                size_t *out_offsets, size_t *out_rows)
{
    a2a_args_t a = A2A_DISPATCH_ARGS;
    return a2a_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_moe_combine(symm_team_t team, void *out, size_t out_capacity, const void *in,
                               const size_t *in_splits, const size_t *in_offsets, int ne,
                               size_t row_bytes, size_t *out_splits, size_t *out_offsets,
                               size_t *out_rows)
{
    a2a_args_t a = A2A_COMBINE_ARGS;
    return a2a_run(__func__, team, 0, 1, &a, SYMM_SUCCESS);
}

symm_status_t symm_all_to_all_v_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                       size_t out_capacity, const void *in,
                                       const size_t *in_splits, size_t row_bytes,
                                       size_t *out_splits, size_t *out_offsets,
                                       size_t *out_rows)
{
    a2a_args_t a = A2A_1D_ARGS;
    return a2a_worker(pool, worker, nworkers, &a);
}

symm_status_t symm_moe_dispatch_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                       size_t out_capacity, const void *in,
                                       const size_t *in_splits, int ne, size_t row_bytes,
                                       size_t major_align, size_t *out_splits,
                                       size_t *out_offsets, size_t *out_rows)
{
    a2a_args_t a = A2A_DISPATCH_ARGS;
    return a2a_worker(pool, worker, nworkers, &a);
}

symm_status_t symm_moe_combine_worker(symm_pool_t pool, int worker, int nworkers, void *out,
                                      size_t out_capacity, const void *in,
                                      const size_t *in_splits, const size_t *in_offsets, int ne,
                                      size_t row_bytes, size_t *out_splits, size_t *out_offsets,
                                      size_t *out_rows)
{
    a2a_args_t a = A2A_COMBINE_ARGS;
    return a2a_worker(pool, worker, nworkers, &a);
}

symm_status_t symm_all_to_all_v_parallel(symm_pool_t pool, int nworkers, void *out,
                                         size_t out_capacity, const void *in,
                                         const size_t *in_splits, size_t row_bytes,
                                         size_t *out_splits, size_t *out_offsets,
                                         size_t *out_rows)
{
    a2a_args_t a = A2A_1D_ARGS;
    return a2a_parallel(__func__, pool, nworkers, &a);
}

symm_status_t symm_moe_dispatch_parallel(symm_pool_t pool, int nworkers, void *out,
                                         size_t out_capacity, const void *in,
                                         const size_t *in_splits, int ne, size_t row_bytes,
                                         size_t major_align, size_t *out_splits,
                                         size_t *out_offsets, size_t *out_rows)
{
    a2a_args_t a = A2A_DISPATCH_ARGS;
    return a2a_parallel(__func__, pool, nworkers, &a);
}

symm_status_t symm_moe_combine_parallel(symm_pool_t pool, int nworkers, void *out,
                                        size_t out_capacity, const void *in,
                                        const size_t *in_splits, const size_t *in_offsets,
                                        int ne, size_t row_bytes, size_t *out_splits,
                                        size_t *out_offsets, size_t *out_rows)
{
    a2a_args_t a = A2A_COMBINE_ARGS;
    return a2a_parallel(__func__, pool, nworkers, &a);
}
