/* tile_far.c — the streams of a tile reduction between members that share no memory
 * (tile_far.h): packed rows pushed into the folding member's scratch, a chunk at a
 * time, with counter words for arrival and for free slots. */
#include "coll/tile_far.h"

#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "core/wait.h"

/* Slots of a ring: chunks of one stream in flight. */
#define FAR_RING 4
/* A chunk is about a quarter of a job, within these bounds: small enough that the
 * sender's packing and put overlap the owner's fold, large enough that a put and its
 * counter word (a system call and a message) are a small part of its cost. */
#define FAR_CHUNK_MIN ((size_t)64 << 10)

typedef struct {
    int phase, job;
    size_t row;
} far_cur_t;

typedef struct symm_tile_far_stream {
    int far;      /* the peer is reached through the transport only */
    int ring;     /* in_from: the peer's ring in my scratch; out_to: my ring in the peer's */
    size_t done;  /* chunks sent (out_to) or folded or copied (in_from) */
    size_t total; /* chunks of the stream */
    far_cur_t cur;
} far_stream_t;

/* Is the chunk at (phase, job) part of the stream from src to dst? Phase 1: src's rows
 * of a job that dst folds; phase 2: a spread job's result, from its owner src. */
static int in_stream(const symm_tile_far_t *t, int phase, int j, int src, int dst)
{
    const symm_tile_job_t *b = &t->jobs[j];
    if (b->r0 >= b->r1 || src == dst) return 0;
    return phase == 1 ? b->owner == dst : b->owner == src && b->spread;
}

/* Moves cur to the first chunk of the stream at or after it (job == njobs in phase 2:
 * the end). */
static void cur_settle(const symm_tile_far_t *t, far_cur_t *cur, int src, int dst)
{
    for (;;) {
        if (cur->job < t->njobs) {
            if (in_stream(t, cur->phase, cur->job, src, dst) && cur->row < t->jobs[cur->job].r1)
                return;
            if (++cur->job < t->njobs) cur->row = t->jobs[cur->job].r0;
            continue;
        }
        if (cur->phase == 2) return;
        cur->phase = 2;
        cur->job = 0;
        cur->row = t->njobs ? t->jobs[0].r0 : 0;
    }
}

static far_cur_t cur_start(const symm_tile_far_t *t, int src, int dst)
{
    far_cur_t cur = {1, 0, t->njobs ? t->jobs[0].r0 : 0};
    cur_settle(t, &cur, src, dst);
    return cur;
}

static void cur_next(const symm_tile_far_t *t, far_cur_t *cur, int src, int dst)
{
    cur->row += t->jobs[cur->job].per;
    cur_settle(t, cur, src, dst);
}

static size_t chunk_rows(const symm_tile_job_t *b, size_t row)
{
    return b->r1 - row < b->per ? b->r1 - row : b->per;
}

/* My folds: the chunks of the jobs I own, in order (job == njobs: done). */
static void red_settle(const symm_tile_far_t *t, far_cur_t *r)
{
    while (r->job < t->njobs) {
        const symm_tile_job_t *b = &t->jobs[r->job];
        if (b->owner == t->c->me && r->row < b->r1) return;
        if (++r->job < t->njobs) r->row = t->jobs[r->job].r0;
    }
}

/* Chunk i of the stream from member s, in my scratch. */
static uint8_t *slot_in(const symm_tile_far_t *t, int s, size_t i)
{
    return t->base + t->hdr + ((size_t)t->in_from[s].ring * FAR_RING + i % FAR_RING) * t->slot;
}

/* My counter word k of member pe's header (0..n-1: chunks I delivered to pe; n..2n-1:
 * chunks of pe's stream that I took), named by the same offset in my own segment. */
static void counter_send(symm_tile_far_t *t, int pe, int k, uint64_t value)
{
    symm_coll_t *c = t->c;
    uint64_t *dest = (uint64_t *)symm_team_region_ptr(symm_g.me, t->peer_off[pe]) + k;
    if (symm_transport_remote()->store64(&dest, &value, 1, c->world[pe]))
        SYMM_WARN("%s: signalling member %d (PE %d): %s", c->what, pe, c->world[pe],
                  symm_last_error());
}

/* The next chunk of my stream to member o: packed, put into its ring, announced. A put
 * that fails is my failure (far_put skips the rest); the counter still goes, so that o
 * does not wait for what will never come. */
static void send_chunk(symm_tile_far_t *t, int o)
{
    symm_coll_t *c = t->c;
    far_stream_t *st = &t->out_to[o];
    const symm_tile_job_t *b = &t->jobs[st->cur.job];
    size_t row = st->cur.row, k = chunk_rows(b, row);
    size_t ld = st->cur.phase == 1 ? b->ild : b->old;
    const uint8_t *src = (st->cur.phase == 1 ? b->in : b->out) + row * ld, *from = src;
    if (ld != b->rb && k > 1) {
        for (size_t i = 0; i < k; i++)
            memcpy(t->pack + i * b->rb, src + i * ld, b->rb);
        from = t->pack;
    }
    uint8_t *peer = symm_team_region_ptr(symm_g.me, t->peer_off[o]);
    uint8_t *slot =
        peer + t->hdr + ((size_t)st->ring * FAR_RING + st->done % FAR_RING) * t->slot;
    symm_coll_far_put(c, slot, from, k * b->rb, o);
    counter_send(t, o, c->me, ++st->done);
    cur_next(t, &st->cur, c->me, o);
}

/* Member s's chunk at the head of its stream is used: its slot is free. The sender
 * waits for that word only while chunks remain beyond the ring, so no word comes after
 * the sender's last look (its scratch may be gone then). */
static void take_chunk(symm_tile_far_t *t, int s)
{
    far_stream_t *st = &t->in_from[s];
    size_t i = st->done++;
    cur_next(t, &st->cur, s, t->c->me);
    if (i + FAR_RING < st->total) counter_send(t, s, t->c->n + t->c->me, i + 1);
}

/* Member m's rows [row, row + k) of job b, readable here. */
static const uint8_t *view(const symm_tile_far_t *t, const symm_tile_job_t *b, size_t row,
                           int m, size_t *ld)
{
    symm_coll_t *c = t->c;
    const uint8_t *at = b->in + row * b->ild;
    *ld = b->ild;
    if (m == c->me) return at;
    if (symm_coll_near(c, m)) return symm_coll_ptr(c, at, m);
    *ld = b->rb;
    return slot_in(t, m, t->in_from[m].done);
}

/* Folds my next chunk: every member in team order, as tile.c folds (the same bits). */
static void fold_chunk(symm_tile_far_t *t, const far_cur_t *r)
{
    symm_coll_t *c = t->c;
    const symm_tile_job_t *b = &t->jobs[r->job];
    size_t row = r->row, k = chunk_rows(b, row), cols = b->rb / t->esize, vld, wld;
    uint8_t *orow = b->out + row * b->old;
    uint8_t *dst = b->in_place ? t->acc : orow;
    size_t dld = b->in_place ? b->rb : b->old;
    if (t->f8acc) {
        for (int m = 0; m < c->n; m++) {
            const uint8_t *v = view(t, b, row, m, &vld);
            for (size_t i = 0; i < k; i++)
                symm_reduce_fp8_fold(t->type, t->op, t->f8acc + i * cols, v + i * vld, cols,
                                     m == 0);
        }
        for (size_t i = 0; i < k; i++)
            symm_reduce_fp8_store(t->type, dst + i * dld, t->f8acc + i * cols, cols);
    } else {
        const uint8_t *v = view(t, b, row, 0, &vld), *w = view(t, b, row, 1, &wld);
        for (size_t i = 0; i < k; i++)
            t->kern(t->op, dst + i * dld, v + i * vld, w + i * wld, cols);
        for (int m = 2; m < c->n; m++) {
            v = view(t, b, row, m, &vld);
            for (size_t i = 0; i < k; i++)
                t->kern(t->op, dst + i * dld, dst + i * dld, v + i * vld, cols);
        }
    }
    if (b->in_place)
        for (size_t i = 0; i < k; i++)
            memcpy(orow + i * b->old, t->acc + i * b->rb, b->rb);
}

/* Member s's chunk of a spread job's result, into my out. */
static void copy_chunk(symm_tile_far_t *t, int s)
{
    const far_stream_t *st = &t->in_from[s];
    const symm_tile_job_t *b = &t->jobs[st->cur.job];
    size_t row = st->cur.row, k = chunk_rows(b, row);
    const uint8_t *slot = slot_in(t, s, st->done);
    for (size_t i = 0; i < k; i++)
        memcpy(b->out + (row + i) * b->old, slot + i * b->rb, b->rb);
}

/* Has my fold reached past rows [row, ...) of job j? */
static int folded(const far_cur_t *r, int j, size_t row)
{
    return r->job > j || (r->job == j && r->row > row);
}

static size_t stream_len(const symm_tile_far_t *t, int src, int dst)
{
    size_t len = 0;
    for (far_cur_t cur = cur_start(t, src, dst); cur.job < t->njobs;
         cur_next(t, &cur, src, dst))
        len++;
    return len;
}

uint64_t symm_tile_far_prepare(symm_tile_far_t *t, symm_coll_t *c, symm_tile_job_t *jobs,
                               int njobs, symm_type_t type, symm_op_t op)
{
    memset(t, 0, sizeof *t);
    int n = c->n, me = c->me, near = 0;
    t->c = c;
    t->jobs = jobs;
    t->njobs = njobs;
    t->type = type;
    t->op = op;
    t->esize = symm_type_size(type);
    t->kern = symm_reduce_kernel(type, op);
    size_t slot = 0;
    for (int j = 0; j < njobs; j++) {
        symm_tile_job_t *b = &jobs[j];
        if (b->r0 >= b->r1 || !b->rb) {
            b->r1 = b->r0; /* nothing moves */
            b->per = 1;
            continue;
        }
        size_t ch = (b->r1 - b->r0) * b->rb / 4;
        ch = ch < FAR_CHUNK_MIN         ? FAR_CHUNK_MIN
             : ch > SYMM_COLL_FAR_CHUNK ? SYMM_COLL_FAR_CHUNK
                                        : ch;
        b->per = ch / b->rb ? ch / b->rb : 1;
        if (b->per * b->rb > slot) slot = b->per * b->rb;
    }
    t->slot = (slot + 63) & ~(size_t)63;
    t->hdr = (2 * (size_t)n * sizeof(uint64_t) + 63) & ~(size_t)63;
    t->mem = calloc(1, (size_t)n * (sizeof(uint64_t) + 2 * sizeof(far_stream_t)));
    if (!t->mem) return 0;
    t->out_to = t->mem;
    t->in_from = t->out_to + n;
    t->peer_off = (uint64_t *)(t->in_from + n);
    /* Which peers stream is read from the reach bits, as view() reads them: a peer that
     * is not mapped here streams, whatever its group (a team's bits may be cleared to
     * send everything through the transport). Reach is mutual, so the sender and the
     * receiver of a stream agree that it exists; each ring is named by its sender's
     * member number, which both know, not by a rank among the far members, which only
     * the receiver knows. */
    int nrings = n - 1;
    for (int s = 0; s < n; s++) {
        far_stream_t *in = &t->in_from[s], *out = &t->out_to[s];
        if (s == me) continue;
        in->far = out->far = !symm_coll_near(c, s);
        near |= !in->far;
        if (!in->far) continue;
        in->ring = s - (s > me);
        out->ring = me - (me > s);
        in->total = stream_len(t, s, me);
        in->cur = cur_start(t, s, me);
        out->total = stream_len(t, me, s);
        out->cur = cur_start(t, me, s);
    }
    size_t f8 = symm_reduce_is_fp8(type) ? t->slot / t->esize * sizeof(float) : 0;
    size_t size = t->hdr + ((size_t)nrings * FAR_RING + 2) * t->slot + f8;
    if (symm_team_region_scratch(size, &t->off)) return 0;
    t->base = symm_team_region_ptr(symm_g.me, t->off);
    memset(t->base, 0, t->hdr);
    t->pack = t->base + t->hdr + (size_t)nrings * FAR_RING * t->slot;
    t->acc = t->pack + t->slot;
    t->f8acc = f8 ? (float *)(t->acc + t->slot) : NULL;
    return SYMM_TILE_FAR_WORD | (near ? SYMM_TILE_FAR_NEAR : 0) | t->off;
}

int symm_tile_far_agreed(const symm_coll_t *c, const uint64_t *words)
{
    for (int s = 0; s < c->n; s++)
        if (!(words[s] & SYMM_TILE_FAR_WORD)) return 0;
    return 1;
}

symm_status_t symm_tile_far_run(symm_tile_far_t *t, const uint64_t *words)
{
    symm_coll_t *c = t->c;
    int n = c->n, me = c->me;
    int near = 0;
    for (int s = 0; s < n; s++) {
        t->peer_off[s] = words[s] & ~(SYMM_TILE_FAR_WORD | SYMM_TILE_FAR_NEAR);
        near |= (words[s] & SYMM_TILE_FAR_NEAR) != 0;
    }
    const uint64_t *arrived = (const uint64_t *)t->base, *freed = arrived + n;
    far_cur_t red = {1, 0, t->njobs ? t->jobs[0].r0 : 0};
    red_settle(t, &red);
    symm_wait_t w = SYMM_WAIT_INIT;
    for (;;) {
        int moved = 0, pending = 0, who = -1;
        for (int d = 1; d < n; d++) {
            int o = (me + d) % n;
            far_stream_t *st = &t->out_to[o];
            if (!st->far || st->done == st->total) continue;
            pending = 1;
            if (st->cur.phase == 2 && !folded(&red, st->cur.job, st->cur.row)) continue;
            if (st->done >= FAR_RING &&
                __atomic_load_n(&freed[o], __ATOMIC_ACQUIRE) < st->done - FAR_RING + 1) {
                who = o;
                continue;
            }
            send_chunk(t, o);
            moved = 1;
        }
        if (red.job < t->njobs) {
            pending = 1;
            int ready = 1;
            for (int s = 0; s < n && ready; s++)
                if (t->in_from[s].far &&
                    __atomic_load_n(&arrived[s], __ATOMIC_ACQUIRE) <= t->in_from[s].done) {
                    ready = 0;
                    who = s;
                }
            if (ready) {
                fold_chunk(t, &red);
                for (int s = 0; s < n; s++)
                    if (t->in_from[s].far) take_chunk(t, s);
                red.row += t->jobs[red.job].per;
                red_settle(t, &red);
                moved = 1;
            }
        }
        for (int s = 0; s < n; s++) {
            far_stream_t *st = &t->in_from[s];
            if (!st->far || st->done == st->total) continue;
            pending = 1;
            while (st->done < st->total && st->cur.phase == 2 &&
                   __atomic_load_n(&arrived[s], __ATOMIC_ACQUIRE) > st->done) {
                copy_chunk(t, s);
                take_chunk(t, s);
                moved = 1;
            }
            if (st->done < st->total && st->cur.phase == 2) who = s;
        }
        if (!pending) break;
        if (moved) {
            w = (symm_wait_t)SYMM_WAIT_INIT;
            continue;
        }
        if (SYMM_UNLIKELY(symm_coll_met_poison(c))) return symm_coll_sync(c);
        symm_status_t st = symm_wait_pause(&w);
        if (SYMM_UNLIKELY(st))
            return symm_coll_wait_fail(c, who < 0 ? (me + 1) % n : who, st,
                                       symm_wait_elapsed(&w));
    }
    /* Spread jobs of the owners I reach: read in place once every owner has folded. The
     * sync that says so is taken where any member reaches another (its word's NEAR
     * bit): the same choice on every member, whatever its own reach. */
    int spread = 0;
    for (int j = 0; j < t->njobs; j++)
        spread |= t->jobs[j].spread;
    if (!near || !spread) return SYMM_SUCCESS;
    CHECK(symm_coll_sync(c));
    for (int j = 0; j < t->njobs; j++) {
        const symm_tile_job_t *b = &t->jobs[j];
        if (!b->spread || b->owner == me || !symm_coll_near(c, b->owner)) continue;
        for (size_t r = b->r0; r < b->r1; r++) {
            uint8_t *o = b->out + r * b->old;
            memcpy(o, symm_coll_ptr(c, o, b->owner), b->rb);
        }
    }
    return SYMM_SUCCESS;
}

void symm_tile_far_release(symm_tile_far_t *t)
{
    /* After a wait gave up, peers may still write into the scratch: it stays taken. */
    if (t->base && !t->c->dup->broken) symm_team_region_free(t->off);
    t->base = NULL;
    free(t->mem);
    t->mem = NULL;
}
