/* test_transport.c — the transport ops tables against the public calls: every operation
 * present; the peer pointer of the load/store table equal to symm_ptr where the PE is
 * mapped here (NULL from symm_ptr elsewhere); through the table that reaches every PE
 * (symm_transport_remote: the shm table on one host, MPI's across SYMM_HOSTS groups)
 * put/get/put_signal, strided rows and slot stores of random bytes read back through the
 * public calls, messages on channels where it has them (MPI's), and random sequences of 64- and
 * 32-bit atomics against a serial model; and collectives on a team whose reach bits are
 * cleared, which then move every byte through that table, checked against the load/store
 * results; tiles of about 1 MB that way against a serial reference. */
#include <sched.h>

#include "common/test_util.h"
#include "team/team.h"
#include "transport/transport.h"

static int me, npes;

/* ---------------------------------------------------------------- tiles of ~1 MB */
/* Tiles of about 1 MB with odd strides on a team of every PE: through load/store, or
 * with the team's reach bits cleared (far), which makes its tile calls stream packed rows
 * between members through the transport table (coll/tile_far.c): an allreduce of doubles
 * (MAX) out of place, a rooted reduction of floats (SUM) and an allreduce of floats in
 * place, against a serial reference in team order. */
#define BIG_BYTES ((size_t)1200 << 10)
#define BIG_GAP   0xa5

static double big_double(uint64_t tag, int pe, size_t i)
{
    uint64_t h = test_mix(tag, ((uint64_t)pe << 40) | i);
    return (double)((int64_t)(h >> 11) - ((int64_t)1 << 52)) * 0x1p-30;
}

/* small integers: a float sum of any order is exact */
static float big_float(uint64_t tag, int pe, size_t i)
{
    return (float)((int)(test_mix(tag, ((uint64_t)pe << 40) | i) % 8191) - 4095);
}

static void big_tiles(symm_team_t team, int far, uint64_t tag, uint8_t *bin, uint8_t *bout,
                      uint8_t *bref)
{
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK_OK(symm_team_lookup("test", team, &p, &d));
    int n = p->n, remote = p->remote;
    uint8_t *reach = malloc((size_t)n);
    CHECK_TRUE(reach != NULL, "malloc");
    memcpy(reach, p->reach, (size_t)n);
    if (far) {
        memset(p->reach, 0, (size_t)n);
        p->reach[p->me] = 1;
        p->remote = n - 1;
    }
    const char *how = far ? "through the transport table" : "as the team reaches";
    /* allreduce of doubles, MAX: in rows 137 elements apart, out rows 133 apart */
    {
        size_t rows = 1021, cols = 131, ild = 137, old = 133;
        double *in = (double *)bin, *out = (double *)bout, *want = (double *)bref;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t i = r * cols + c;
                in[r * ild + c] = big_double(tag, me, i);
                double m = big_double(tag, symm_team_world_pe(team, 0), i);
                for (int j = 1; j < n; j++) {
                    double v = big_double(tag, symm_team_world_pe(team, j), i);
                    m = v > m ? v : m;
                }
                want[i] = m;
            }
        memset(out, BIG_GAP, ((rows - 1) * old + cols) * sizeof *out);
        CHECK_OK(symm_tile_allreduce(team, (symm_tile_t){out, rows, cols, old},
                                     (symm_tile_t){in, rows, cols, ild}, SYMM_DOUBLE,
                                     SYMM_OP_MAX));
        for (size_t r = 0; r < rows; r++) {
            CHECK_BYTES(out + r * old, want + r * cols, cols * sizeof *out,
                        "tile_allreduce of doubles %s (tag %llx): row %zu", how,
                        (unsigned long long)tag, r);
            if (r + 1 < rows)
                CHECK_ALL_BYTES(out + r * old + cols, BIG_GAP, (old - cols) * sizeof *out,
                                "tile_allreduce of doubles %s: gap after row %zu", how, r);
        }
    }
    /* rooted reduction of floats, SUM: in rows 129 apart, out rows 131 apart */
    {
        size_t rows = 2003, cols = 127, ild = 129, old = 131;
        int root = (int)(tag % (uint64_t)n);
        float *in = (float *)bin, *out = (float *)bout, *want = (float *)bref;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t i = r * cols + c;
                in[r * ild + c] = big_float(tag, me, i);
                float sum = big_float(tag, symm_team_world_pe(team, 0), i);
                for (int j = 1; j < n; j++)
                    sum += big_float(tag, symm_team_world_pe(team, j), i);
                want[i] = sum;
            }
        memset(out, BIG_GAP, ((rows - 1) * old + cols) * sizeof *out);
        CHECK_OK(symm_tile_reduce(team, (symm_tile_t){out, rows, cols, old},
                                  (symm_tile_t){in, rows, cols, ild}, SYMM_FLOAT, SYMM_OP_SUM,
                                  root));
        for (size_t r = 0; r < rows && p->me == root; r++) {
            CHECK_BYTES(out + r * old, want + r * cols, cols * sizeof *out,
                        "tile_reduce of floats to %d %s: row %zu", root, how, r);
            if (r + 1 < rows)
                CHECK_ALL_BYTES(out + r * old + cols, BIG_GAP, (old - cols) * sizeof *out,
                                "tile_reduce of floats %s: gap after row %zu", how, r);
        }
    }
    /* allreduce of floats in place, SUM: rows 175 apart */
    {
        size_t rows = 1499, cols = 171, ld = 175;
        float *io = (float *)bin, *want = (float *)bref;
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++) {
                size_t i = r * cols + c;
                io[r * ld + c] = big_float(tag + 1, me, i);
                float sum = big_float(tag + 1, symm_team_world_pe(team, 0), i);
                for (int j = 1; j < n; j++)
                    sum += big_float(tag + 1, symm_team_world_pe(team, j), i);
                want[i] = sum;
            }
        symm_tile_t t = {io, rows, cols, ld};
        CHECK_OK(symm_tile_allreduce(team, t, t, SYMM_FLOAT, SYMM_OP_SUM));
        for (size_t r = 0; r < rows; r++)
            CHECK_BYTES(io + r * ld, want + r * cols, cols * sizeof *io,
                        "tile_allreduce of floats in place %s: row %zu", how, r);
    }
    memcpy(p->reach, reach, (size_t)n);
    p->remote = remote;
    free(reach);
    CHECK_OK(symm_barrier(team));
}

static uint64_t model(symm_amo_t op, uint64_t *cur, uint64_t v)
{
    uint64_t old = *cur;
    switch (op) {
    case SYMM_AMO_FETCH:
        break;
    case SYMM_AMO_SET:
    case SYMM_AMO_SWAP:
        *cur = v;
        break;
    case SYMM_AMO_ADD:
    case SYMM_AMO_FETCH_ADD:
        *cur = old + v;
        break;
    case SYMM_AMO_AND:
    case SYMM_AMO_FETCH_AND:
        *cur = old & v;
        break;
    case SYMM_AMO_OR:
    case SYMM_AMO_FETCH_OR:
        *cur = old | v;
        break;
    case SYMM_AMO_XOR:
    case SYMM_AMO_FETCH_XOR:
        *cur = old ^ v;
        break;
    default:
        TEST_FAIL("bad op %d", (int)op);
    }
    return old;
}

/* ---------------------------------------------------------------- messages */
/* The next message of pe on chan, waited for (a minute at most); its size in *n. */
static void msg_take(const symm_transport_ops_t *t, int pe, uint64_t chan, uint8_t *buf,
                     size_t cap, size_t *n)
{
    time_t t0 = time(NULL);
    for (;;) {
        symm_status_t st = SYMM_SUCCESS;
        int got = t->msg_recv(buf, cap, n, pe, chan, &st);
        CHECK_OK(st);
        if (got) return;
        CHECK_TRUE(time(NULL) - t0 < 60, "no message from PE %d on channel %llu", pe,
                   (unsigned long long)chan);
        sched_yield();
    }
}

#define MSG_MAX   ((size_t)48 << 10)
#define MSG_COUNT 5

/* Message j of src to dst on channel slot c: its size and its bytes' pattern tag. */
static size_t msg_size(int src, int dst, int c, int j)
{
    uint64_t h =
        test_mix(test_seed() ^ 0x6d7367, ((uint64_t)src << 32) | ((uint64_t)dst << 16) |
                                             ((uint64_t)c << 8) | (uint64_t)j);
    return j == 0 ? 0 : (size_t)(h % MSG_MAX) + 1; /* the first is empty */
}

static uint64_t msg_tag(int src, int dst, int c, int j)
{
    return test_mix(test_seed() ^ 0x746167, ((uint64_t)src << 32) | ((uint64_t)dst << 16) |
                                                ((uint64_t)c << 8) | (uint64_t)j);
}

/* Where the table carries messages (MPI's, with PEs in other groups): every PE sends each
 * PE of another group MSG_COUNT messages of random sizes (empty, a few bytes, past the
 * eager sizes) on each of three channels (0, the last, one drawn from the seed); each
 * receiver takes them channel by channel in another order than they
 * were sent, and checks every byte and the order within a channel. A message longer than
 * the receive's room is dropped with an error, the next one on its channel intact; a
 * channel with nothing on it gives nothing; a channel past msg_chans is refused. */
static void messages(const symm_transport_ops_t *t)
{
    if (!t->msg_send) {
        CHECK_TRUE(!t->msg_recv, "transport %s: msg_recv without msg_send", t->name);
        return;
    }
    CHECK_TRUE(t->msg_recv && t->msg_chans, "transport %s lacks a message operation", t->name);
    const uint64_t chans = t->msg_chans();
    CHECK_TRUE(chans >= 32766, "transport %s: channels up to %llu", t->name,
               (unsigned long long)chans);
    const uint64_t chan[3] = {0, chans, 3 + test_seed() % (chans - 6)};
    const uint64_t chan_long = chan[2] - 1, chan_none = chan[2] + 1;
    uint8_t *buf = malloc(MSG_MAX);
    CHECK_TRUE(buf != NULL, "malloc");
    CHECK_OK(symm_barrier_all());
    for (int d = 1; d < npes; d++) {
        int pe = (me + d) % npes;
        if (symm_transport_reachable(pe)) continue;
        for (int j = 0; j < MSG_COUNT; j++)
            for (int c = 0; c < 3; c++) {
                size_t n = msg_size(me, pe, c, j);
                test_fill_pattern(buf, n, msg_tag(me, pe, c, j));
                CHECK_OK(t->msg_send(buf, n, pe, chan[c]));
                memset(buf, 0, n); /* the buffer may be reused at once */
            }
        /* one past the receive's room, then one that fits, on the seed's channel */
        test_fill_pattern(buf, 64, 1);
        CHECK_OK(t->msg_send(buf, 64, pe, chan_long));
        CHECK_OK(t->msg_send(buf, 64, pe, chan_long));
        CHECK_TRUE(t->msg_send(buf, 64, pe, chans + 1) == SYMM_ERR_INVALID_ARG,
                   "a channel past msg_chans is accepted");
    }
    for (int d = 1; d < npes; d++) {
        int pe = (me + npes - d) % npes;
        if (symm_transport_reachable(pe)) continue;
        for (int c = 2; c >= 0; c--)
            for (int j = 0; j < MSG_COUNT; j++) {
                size_t n = 0, want_n = msg_size(pe, me, c, j);
                msg_take(t, pe, chan[c], buf, MSG_MAX, &n);
                CHECK_TRUE(n == want_n,
                           "message %d from PE %d on channel %llu: %zu bytes, not %zu", j, pe,
                           (unsigned long long)chan[c], n, want_n);
                size_t bad = test_find_pattern_mismatch(buf, n, msg_tag(pe, me, c, j));
                CHECK_TRUE(bad == (size_t)-1, "message %d from PE %d on channel %llu: byte %zu",
                           j, pe, (unsigned long long)chan[c], bad);
            }
        symm_status_t st = SYMM_SUCCESS;
        size_t n = 0;
        time_t t0 = time(NULL);
        while (!t->msg_recv(buf, 63, &n, pe, chan_long, &st)) {
            CHECK_OK(st);
            CHECK_TRUE(time(NULL) - t0 < 60, "no long message from PE %d", pe);
            sched_yield();
        }
        CHECK_TRUE(st == SYMM_ERR_SYSTEM, "a message past the room: status %d", (int)st);
        msg_take(t, pe, chan_long, buf, 64, &n);
        CHECK_TRUE(n == 64 && test_find_pattern_mismatch(buf, 64, 1) == (size_t)-1,
                   "the message after a dropped one from PE %d", pe);
        st = SYMM_SUCCESS;
        CHECK_TRUE(!t->msg_recv(buf, MSG_MAX, &n, pe, chan_none, &st) && !st,
                   "a message from PE %d on a channel nobody sent on", pe);
    }
    CHECK_OK(symm_barrier_all());
    free(buf);
}

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_rng_t r;
    test_rng_seed(&r, test_seed() + (uint64_t)me * 1000003);
    const symm_transport_ops_t *near = symm_transport(), *t = symm_transport_remote();
    for (int k = 0; k < 2; k++) {
        const symm_transport_ops_t *x = k ? t : near;
        CHECK_TRUE(x && x->size == sizeof *x, "transport table missing or of the wrong size");
        CHECK_TRUE(x->init && x->finalize && x->ptr && x->put && x->get && x->fetch_op64 &&
                       x->cswap64 && x->swap64 && x->store64 && x->put_signal && x->signal &&
                       x->fence && x->quiet && x->flush && x->fetch_op32 && x->cswap32 &&
                       x->get_rows && x->put_rows,
                   "transport %s lacks an operation", x->name);
    }

    enum { N = 4096 };
    uint8_t *buf = symm_malloc(2 * N);
    uint64_t *words = symm_malloc(64 * sizeof(uint64_t));
    CHECK_TRUE(buf && words, "symm_malloc");
    uint8_t *src = malloc(N), *back = malloc(N);
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    int node_n = symm_team_n_pes(SYMM_TEAM_NODE);
    for (int pe = 0; pe < npes; pe++) {
        int mapped = symm_team_translate_pe(SYMM_TEAM_WORLD, pe, SYMM_TEAM_NODE) >= 0;
        CHECK_TRUE(mapped == symm_transport_reachable(pe), "PE %d: reachable says %d", pe,
                   symm_transport_reachable(pe));
        if (mapped)
            CHECK_TRUE(near->ptr(buf, pe) == symm_ptr(buf, pe), "ptr(%d) differs", pe);
        else
            CHECK_TRUE(symm_ptr(buf, pe) == NULL, "symm_ptr(%d) of another group", pe);
    }
    CHECK_TRUE(node_n >= 1 && node_n <= npes, "node team of %d", node_n);

    /* put to the right neighbour, read back with symm_get */
    test_fill_random(&r, src, N);
    size_t n = 1 + (size_t)test_rng_below(&r, N);
    CHECK_OK(symm_barrier_all());
    CHECK_OK(t->put(buf, src, n, right));
    CHECK_OK(t->quiet());
    CHECK_OK(symm_get(back, buf, n, right));
    CHECK_BYTES(back, src, n, "put of %zu bytes to PE %d", n, right);
    /* get of the neighbour's bytes equals symm_get */
    memset(back, 0, N);
    uint8_t *want = malloc(N);
    CHECK_OK(t->get(back, buf + N / 2, N / 2, right));
    CHECK_OK(symm_get(want, buf + N / 2, N / 2, right));
    CHECK_BYTES(back, want, N / 2, "get from PE %d", right);
    CHECK_OK(symm_barrier_all());

    /* rows: a strided block of the right neighbour's buf into a packed local one, and
     * back into its second half with another stride, read back with symm_get */
    {
        size_t rb = 1 + (size_t)test_rng_below(&r, 40), ld = rb + (size_t)test_rng_below(&r, 9);
        size_t rows = (N / 2) / ld, ld2 = rb + 3;
        rows = rows < (N / 2) / ld2 ? rows : (N / 2) / ld2;
        uint8_t *packed = malloc(rows * rb), *full = malloc(N);
        CHECK_OK(symm_barrier_all());
        CHECK_OK(symm_get(full, buf, N, right));
        CHECK_OK(t->get_rows(packed, rb, buf, ld, rb, rows, right));
        for (size_t i = 0; i < rows; i++)
            CHECK_BYTES(packed + i * rb, full + i * ld, rb, "get_rows row %zu from PE %d", i,
                        right);
        CHECK_OK(symm_barrier_all());
        CHECK_OK(t->put_rows(buf + N / 2, ld2, packed, rb, rb, rows, right));
        CHECK_OK(symm_get(full, buf + N / 2, N / 2, right));
        for (size_t i = 0; i < rows; i++)
            CHECK_BYTES(full + i * ld2, packed + i * rb, rb, "put_rows row %zu to PE %d", i,
                        right);
        CHECK_OK(symm_barrier_all());
        free(packed);
        free(full);
    }

    /* store64: words land in the right neighbour's copy. Across groups (and through the
     * MPI table even within one) a store is a message that the neighbour applies when it
     * waits, not ordered with a barrier among the members of one group: each PE waits for
     * the words its left neighbour sends, whose values both sides derive from the seed. */
    {
        uint64_t v[3], want_in[3], got[3];
        for (int i = 0; i < 3; i++) {
            v[i] = (test_seed() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(me * 3 + i)) | 1;
            want_in[i] = (test_seed() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(left * 3 + i)) | 1;
        }
        uint64_t *at[3] = {&words[40 + me % 8], &words[50 + me % 8], &words[60 + me % 4]};
        uint64_t *in[3] = {&words[40 + left % 8], &words[50 + left % 8], &words[60 + left % 4]};
        for (int i = 0; i < 3; i++)
            *in[i] = 0;
        CHECK_OK(symm_barrier_all());
        CHECK_OK(t->store64(at, v, 3, right));
        for (int i = 0; i < 3; i++)
            CHECK_OK(symm_wait_until_uint64(in[i], SYMM_CMP_EQ, want_in[i]));
        CHECK_OK(symm_barrier_all());
        for (int i = 0; i < 3; i++)
            CHECK_OK(symm_get(&got[i], at[i], 8, right));
        CHECK_TRUE(got[0] == v[0] && got[1] == v[1] && got[2] == v[2], "store64 to PE %d",
                   right);
        CHECK_OK(symm_barrier_all());
    }

    messages(t);

    /* put_signal: the left neighbour's data arrives with its signal */
    uint64_t *sig = &words[0];
    *sig = 0;
    CHECK_OK(symm_barrier_all());
    uint64_t tag = test_seed() ^ (uint64_t)me;
    test_fill_pattern(src, N, tag);
    CHECK_OK(t->put_signal(buf + N, src, N, sig, 7, SYMM_SIGNAL_ADD, right));
    CHECK_OK(t->signal(sig, 5, SYMM_SIGNAL_ADD, right));
    CHECK_OK(symm_signal_wait_until(sig, SYMM_CMP_EQ, 12, NULL));
    size_t bad = test_find_pattern_mismatch(buf + N, N, test_seed() ^ (uint64_t)left);
    CHECK_TRUE(bad == (size_t)-1, "put_signal data from PE %d: byte %zu differs", left, bad);
    CHECK_OK(symm_barrier_all());

    /* atomics: one PE at a time, a random sequence against a model of each target word */
    for (int pe = 0; pe < npes; pe++)
        words[1 + pe] = 0;
    CHECK_OK(symm_barrier_all());
    for (int actor = 0; actor < npes; actor++) {
        CHECK_OK(symm_barrier_all());
        if (actor != me) continue;
        for (int k = 0; k < npes; k++) {
            int tpe = (me + k) % npes;
            uint64_t *w = &words[1 + me], cur;
            CHECK_OK(symm_get(&cur, w, 8, tpe));
            for (int i = 0; i < 300; i++) {
                int kind = (int)test_rng_below(&r, 3);
                uint64_t v = test_rng_next(&r), got = 0xdeadbeef, exp;
                if (kind == 0) {
                    symm_amo_t op;
                    do
                        op = (symm_amo_t)test_rng_below(&r, SYMM_AMO_COUNT);
                    while (op == SYMM_AMO_CSWAP);
                    exp = model(op, &cur, v);
                    CHECK_OK(t->fetch_op64(op, w, v, tpe, &got));
                    if (op != SYMM_AMO_SET && op != SYMM_AMO_ADD && op != SYMM_AMO_AND &&
                        op != SYMM_AMO_OR && op != SYMM_AMO_XOR)
                        CHECK_TRUE(got == exp, "fetch_op64 %d on PE %d", (int)op, tpe);
                } else if (kind == 1) {
                    uint64_t c = test_rng_below(&r, 2) ? cur : ~cur;
                    exp = cur;
                    if (cur == c) cur = v;
                    CHECK_OK(t->cswap64(w, c, v, tpe, &got));
                    CHECK_TRUE(got == exp, "cswap64 on PE %d fetched %llx, model %llx", tpe,
                               (unsigned long long)got, (unsigned long long)exp);
                } else {
                    exp = cur;
                    cur = v;
                    CHECK_OK(t->swap64(w, v, tpe, &got));
                    CHECK_TRUE(got == exp, "swap64 on PE %d", tpe);
                }
            }
            uint64_t fin;
            CHECK_OK(symm_get(&fin, w, 8, tpe));
            CHECK_TRUE(fin == cur, "final word on PE %d: %llx, model %llx", tpe,
                       (unsigned long long)fin, (unsigned long long)cur);
        }
        CHECK_OK(t->fence());
        CHECK_OK(t->flush());
    }
    CHECK_OK(symm_barrier_all());

    /* 32-bit atomics: one PE at a time on a word per actor, against the model */
    uint32_t *w32 = (uint32_t *)&words[24];
    CHECK_OK(symm_barrier_all());
    for (int actor = 0; actor < npes; actor++) {
        CHECK_OK(symm_barrier_all());
        if (actor != me) continue;
        for (int k = 0; k < npes; k++) {
            int tpe = (me + k) % npes;
            uint32_t *w = &w32[me % 16], cur;
            CHECK_OK(symm_get(&cur, w, 4, tpe));
            for (int i = 0; i < 100; i++) {
                uint32_t v = (uint32_t)test_rng_next(&r), got = 0xdeadbeef, exp = cur;
                if (test_rng_below(&r, 2)) {
                    uint32_t c = test_rng_below(&r, 2) ? cur : ~cur;
                    if (cur == c) cur = v;
                    CHECK_OK(t->cswap32(w, c, v, tpe, &got));
                } else {
                    cur += v;
                    CHECK_OK(t->fetch_op32(SYMM_AMO_FETCH_ADD, w, v, tpe, &got));
                }
                CHECK_TRUE(got == exp, "32-bit atomic on PE %d fetched %x, model %x", tpe, got,
                           exp);
            }
            uint32_t fin;
            CHECK_OK(symm_get(&fin, w, 4, tpe));
            CHECK_TRUE(fin == cur, "final 32-bit word on PE %d", tpe);
        }
    }
    CHECK_OK(symm_barrier_all());

    /* reach bits: set exactly for the PEs of my group. Cleared on a team of every PE, they
     * send every byte of its collectives through the transport table (the shm one on one
     * host): the same results as through load/store. */
    symm_team_t team;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &team));
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK_OK(symm_team_lookup("test", team, &p, &d));
    CHECK_TRUE(p->remote == npes - node_n, "%d remote members, %d outside my group", p->remote,
               npes - node_n);
    for (int i = 0; i < p->n; i++)
        CHECK_TRUE(p->reach[i] == symm_transport_reachable(i), "member %d's reach bit", i);
    enum { C = 3000 };
    double *x = symm_malloc(3 * C * sizeof *x);
    CHECK_TRUE(x != NULL, "symm_malloc");
    for (int i = 0; i < C; i++)
        x[i] = (double)(test_rng_below(&r, 1u << 20)) * 0.25 + me;
    uint8_t *reach = malloc((size_t)npes);
    memcpy(reach, p->reach, (size_t)npes);
    int remote = p->remote;
    for (int far = 0; far < 2; far++) {
        if (far) {
            memset(p->reach, 0, (size_t)npes);
            p->reach[me] = 1;
            p->remote = npes - 1;
        }
        double *out = x + C * (1 + far);
        CHECK_OK(symm_allreduce(team, out, x, C, SYMM_DOUBLE, SYMM_OP_SUM));
        CHECK_OK(symm_broadcast(team, out, out, 100 * sizeof *out, npes - 1));
        symm_tile_t ti = {x, 40, 60, 70}, to = {out + 100, 40, 60, 64};
        CHECK_OK(symm_tile_allreduce(team, to, ti, SYMM_DOUBLE, SYMM_OP_MAX));
    }
    memcpy(p->reach, reach, (size_t)npes);
    p->remote = remote;
    CHECK_BYTES(x + 2 * C, x + C, C * sizeof *x, "collectives through the transport table");
    free(reach);
    CHECK_OK(symm_barrier(team));
    CHECK_OK(symm_free(x));

    /* ~1 MB tiles as the team reaches and with its reach bits cleared; then twice on a
     * team made afresh in the region the first one left, where the scratch of a tile
     * call is not cleared. */
    uint8_t *bin = symm_malloc(BIG_BYTES), *bout = symm_malloc(BIG_BYTES);
    uint8_t *bref = malloc(BIG_BYTES);
    int *all = malloc(sizeof(int) * (size_t)npes);
    CHECK_TRUE(bin && bout && bref && all, "tile buffers");
    uint64_t btag = test_mix(test_seed(), 77);
    for (int far = 0; far < 2; far++, btag += 2)
        big_tiles(team, far, btag, bin, bout, bref);
    CHECK_OK(symm_team_destroy(team));
    for (int i = 0; i < npes; i++)
        all[i] = i;
    CHECK_OK(symm_team_create(all, npes, &team));
    for (int k = 0; k < 2; k++, btag += 2)
        big_tiles(team, 1, btag, bin, bout, bref);
    CHECK_OK(symm_team_destroy(team));
    free(all);
    free(bref);
    CHECK_OK(symm_free(bout));
    CHECK_OK(symm_free(bin));

    free(src);
    free(back);
    free(want);
    CHECK_OK(symm_free(words));
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_transport: OK (%d PEs)\n", npes);
    return 0;
}
