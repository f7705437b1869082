/* test_transport.c — the transport's ops table against the public calls: every operation
 * present, the peer pointer equal to symm_ptr, put/get/put_signal of random bytes read
 * back through the public calls, a random sequence of 64-bit atomics against a serial
 * model, and a team whose reach bits say a member is remote failing its collectives
 * with SYMM_ERR_UNSUPPORTED on every member. */
#include "common/test_util.h"
#include "team/team.h"
#include "transport/transport.h"

static int me, npes;

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

int main(void)
{
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_rng_t r;
    test_rng_seed(&r, test_seed() + (uint64_t)me * 1000003);
    const symm_transport_ops_t *t = symm_transport();
    CHECK_TRUE(t && t->size == sizeof *t, "transport table missing or of the wrong size");
    CHECK_TRUE(t->init && t->finalize && t->map && t->unmap && t->ptr && t->put && t->get &&
                   t->fetch_op64 && t->cswap64 && t->swap64 && t->put_signal && t->signal &&
                   t->fence && t->quiet && t->flush,
               "transport %s lacks an operation", t->name);

    enum { N = 4096 };
    uint8_t *buf = symm_malloc(2 * N);
    uint64_t *words = symm_malloc(64 * sizeof(uint64_t));
    CHECK_TRUE(buf && words, "symm_malloc");
    uint8_t *src = malloc(N), *back = malloc(N);
    int right = (me + 1) % npes, left = (me + npes - 1) % npes;
    for (int pe = 0; pe < npes; pe++)
        CHECK_TRUE(t->ptr(buf, pe) == symm_ptr(buf, pe), "ptr(%d) differs from symm_ptr", pe);

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

    /* reach bits: all set on one host; a team with a remote member refuses collectives */
    symm_team_t team;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &team));
    symm_pool_obj_t *p;
    symm_dup_t *d;
    CHECK_OK(symm_team_lookup("test", team, &p, &d));
    CHECK_TRUE(p->remote == 0, "%d remote members on one host", p->remote);
    for (int i = 0; i < p->n; i++)
        CHECK_TRUE(p->reach[i] == 1, "member %d unreachable", i);
    p->reach[npes - 1] = 0;
    p->remote = 1;
    symm_status_t st = symm_barrier(team);
    CHECK_TRUE(st == SYMM_ERR_UNSUPPORTED, "barrier with a remote member gave %d (%s)", (int)st,
               symm_strerror(st));
    p->reach[npes - 1] = 1;
    p->remote = 0;
    CHECK_OK(symm_barrier(team));
    CHECK_OK(symm_team_destroy(team));

    free(src);
    free(back);
    free(want);
    CHECK_OK(symm_free(words));
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_transport: OK (%d PEs)\n", npes);
    return 0;
}
