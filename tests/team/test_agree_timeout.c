/* test_agree_timeout.c — a late member breaks a team for every member (SYMM_TIMEOUT=1):
 * on a split T of WORLD, member 1 comes 2.5 timeouts late to a pool creation, then to a
 * barrier. The on-time members get SYMM_ERR_TIMEOUT naming it, the late one
 * SYMM_ERR_TIMEOUT too (naming a member that gave up), every later call on T by anyone
 * SYMM_ERR_TEAM_BROKEN, and symm_team_destroy(T) succeeds; WORLD and new teams keep
 * working. Then a rank-list creation with a late member: every member fails, and later
 * creations with the same or another list succeed and work. Every check is reported and
 * counted, so one run lists them all. */
#include "common/test_util.h"

static int me, npes, failures;
static uint64_t *src, *dst, *words;

#define SOFT(cond, ...)                                                                        \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            fprintf(stderr, "FAIL %s:%d [PE %d]: %s: ", __FILE__, __LINE__, me, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, " (last error: %s)\n", symm_last_error());                         \
        }                                                                                      \
    } while (0)

/* 1 if msg names world PE w or team PE t: "PE <t>" or "world <w>", no digit after. */
static int names(const char *msg, int t, int w)
{
    char pat[2][32];
    snprintf(pat[0], sizeof pat[0], "PE %d", t);
    snprintf(pat[1], sizeof pat[1], "world %d", w);
    for (int i = 0; i < 2; i++)
        for (const char *p = msg; (p = strstr(p, pat[i])) != NULL; p++) {
            char c = p[strlen(pat[i])];
            if (c < '0' || c > '9') return 1;
        }
    return 0;
}

/* A uint64 sum allreduce of 29 random words on team t, checked. */
static void checked_allreduce(symm_team_t t, const char *what)
{
    static uint32_t round;
    round++;
    int n = symm_team_n_pes(t), my = symm_team_my_pe(t);
    test_rng_t r;
    test_rng_seed(&r, test_seed() + round * 1000u + (uint32_t)my);
    for (int i = 0; i < 29; i++)
        src[i] = test_rng_next(&r);
    symm_status_t st = symm_allreduce(t, dst, src, 29, SYMM_UINT64, SYMM_OP_SUM);
    SOFT(st == SYMM_SUCCESS, "%s: allreduce returned %d", what, (int)st);
    if (st) return;
    uint64_t want[29] = {0};
    for (int j = 0; j < n; j++) {
        test_rng_seed(&r, test_seed() + round * 1000u + (uint32_t)j);
        for (int i = 0; i < 29; i++)
            want[i] += test_rng_next(&r);
    }
    SOFT(memcmp(want, dst, sizeof want) == 0, "%s: wrong allreduce result", what);
}

/* Waits until every PE has reached this point, without a team: a member still held up
 * by a late call must not time out (and break) WORLD. Atomic sets and local waits. */
static void resync(void)
{
    static uint64_t round;
    round++;
    for (int p = 0; p < npes; p++)
        CHECK_OK(symm_atomic64(SYMM_AMO_SET, words + me, round, 0, p, NULL));
    for (int p = 0; p < npes; p++) {
        symm_status_t st;
        int tries = 0;
        while ((st = symm_wait_until_uint64(words + p, SYMM_CMP_GE, round)) ==
                   SYMM_ERR_TIMEOUT &&
               ++tries < 30) {
        }
        CHECK_OK(st);
    }
}

static void late(double timeout)
{
    usleep((useconds_t)(2.5 * timeout * 1e6));
}

/* Member 1 of T = split(WORLD) comes late to call (0: pool_create, 1: barrier). */
static void late_member(int call, double timeout)
{
    const char *name = call ? "barrier" : "pool_create";
    symm_team_t t;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &t));
    CHECK_OK(symm_barrier_all());
    if (me == 1) late(timeout);
    symm_pool_t pool = SYMM_POOL_INVALID;
    double t0 = test_now();
    symm_status_t st = call ? symm_barrier(t) : symm_pool_create(t, 3, &pool);
    double dt = test_now() - t0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", symm_last_error());
    SOFT(st == SYMM_ERR_TIMEOUT, "%s with member 1 late: returned %d (%s)", name, (int)st,
         symm_strerror(st));
    if (me != 1) {
        SOFT(dt < 2 * timeout + 1, "%s: on-time member waited %.2f s", name, dt);
        SOFT(st != SYMM_ERR_TIMEOUT || names(msg, 1, 1), "%s: message does not name PE 1: %s",
             name, msg);
    } else if (st == SYMM_ERR_TIMEOUT) {
        int any = 0;
        for (int j = 0; j < npes; j++)
            any |= j != 1 && names(msg, j, j);
        SOFT(any, "%s: the late member's message names no member that gave up: %s", name, msg);
    }
    if (st == SYMM_SUCCESS && pool != SYMM_POOL_INVALID) symm_pool_destroy(pool);
    /* the late member's call may return only now: meet before going on */
    resync();

    /* from now on T is broken for everyone until destroyed */
    symm_team_t x = SYMM_TEAM_INVALID;
    symm_status_t b;
    b = symm_barrier(t);
    SOFT(b == SYMM_ERR_TEAM_BROKEN, "barrier on T after the %s timeout: %d", name, (int)b);
    b = symm_allreduce(t, dst, src, 4, SYMM_UINT64, SYMM_OP_SUM);
    SOFT(b == SYMM_ERR_TEAM_BROKEN, "allreduce on T after the %s timeout: %d", name, (int)b);
    b = symm_pool_create(t, 2, &pool);
    SOFT(b == SYMM_ERR_TEAM_BROKEN, "pool_create on T after the %s timeout: %d", name, (int)b);
    b = symm_team_split_strided(t, 0, 1, npes, &x);
    SOFT(b == SYMM_ERR_TEAM_BROKEN, "split of T after the %s timeout: %d", name, (int)b);
    SOFT(symm_barrier(t) == SYMM_ERR_TEAM_BROKEN, "a second barrier on T after the %s timeout",
         name);
    resync();
    b = symm_team_destroy(t);
    SOFT(b == SYMM_SUCCESS, "destroy of T broken by the %s timeout: %d", name, (int)b);
    resync();
    CHECK_OK(symm_barrier_all());
    checked_allreduce(SYMM_TEAM_WORLD, "WORLD after a broken team");
    symm_team_t t2;
    CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &t2));
    checked_allreduce(t2, "a new split after a broken team");
    CHECK_OK(symm_team_destroy(t2));
    CHECK_OK(symm_barrier_all());
}

/* symm_team_create(list) with member 1 late: every member fails; then the same list and
 * a reversed one work, with nothing stale pairing with them. */
static void late_create(double timeout)
{
    int list[64], rev[64];
    for (int i = 0; i < npes; i++)
        list[i] = i, rev[i] = npes - 1 - i;
    CHECK_OK(symm_barrier_all());
    if (me == 1) late(timeout);
    symm_team_t t = SYMM_TEAM_INVALID;
    symm_status_t st = symm_team_create(list, npes, &t);
    SOFT(st == SYMM_ERR_TIMEOUT, "team_create with member 1 late: returned %d (%s)", (int)st,
         symm_strerror(st));
    if (me != 1)
        SOFT(st != SYMM_ERR_TIMEOUT || names(symm_last_error(), 1, 1),
             "team_create: message does not name PE 1");
    if (st == SYMM_SUCCESS) symm_team_destroy(t);
    resync();
    for (int v = 0; v < 2; v++) {
        st = symm_team_create(v ? rev : list, npes, &t);
        SOFT(st == SYMM_SUCCESS, "team_create (%s list) after a late member's: %d",
             v ? "reversed" : "same", (int)st);
        if (st) continue;
        SOFT(symm_team_my_pe(t) == (v ? npes - 1 - me : me), "numbering of the new team");
        checked_allreduce(t, v ? "reversed-list team" : "same-list team");
        SOFT(symm_team_destroy(t) == SYMM_SUCCESS, "destroy of the new team");
    }
    resync();
    CHECK_OK(symm_barrier_all());
}

int main(void)
{
    setenv("SYMM_TIMEOUT", "1", 0);
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    double timeout = strtod(getenv("SYMM_TIMEOUT"), NULL);
    src = symm_calloc(32, sizeof(uint64_t));
    dst = symm_calloc(32, sizeof(uint64_t));
    words = symm_calloc((size_t)npes, sizeof(uint64_t));
    CHECK_TRUE(src && dst && words, "calloc");
    if (npes >= 2) {
        late_member(0, timeout);
        late_member(1, timeout);
        late_create(timeout);
    }
    CHECK_OK(symm_free(words));
    CHECK_OK(symm_free(dst));
    CHECK_OK(symm_free(src));
    if (failures) TEST_FAIL("%d checks failed (see above)", failures);
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_agree_timeout: OK (%d PEs)\n", npes);
    return 0;
}
