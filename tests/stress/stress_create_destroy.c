/* stress_create_destroy.c — CYCLES create/destroy cycles of split teams, rank-list
 * teams and small pools (with a barrier on each), with flat memory: the team region in
 * use (symm_get_info) returns to its starting value after every cycle, and the resident
 * set (/proc/self/statm) does not grow by more than a small bound after a warm-up.
 * CYCLES: SYMM_STRESS_ITERS, else 10000 (1/50 under valgrind). */
#include "common/test_util.h"

/* Bytes of RSS growth allowed after the warm-up. AddressSanitizer keeps freed memory
 * in quarantine (up to 256 MB), so there RSS says nothing and its leak checker covers. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_BOUND ((size_t)512 << 20)
#else
#define RSS_BOUND ((size_t)2 << 20)
#endif

static size_t team_used(void)
{
    symm_info_t i;
    CHECK_OK(symm_get_info(&i));
    return i.team_heap_used;
}

int main(void)
{
    CHECK_OK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    long cycles = test_stress_iters(10000);
    if (me == 0 && cycles != 10000)
        printf("stress_create_destroy: %ld cycles instead of 10000\n", cycles);
    test_rng_t r;
    test_rng_seed(&r, test_seed()); /* the same choices on every PE */
    size_t used0 = team_used();
    long warm = cycles / 20 > 10 ? cycles / 20 : 10;
    size_t rss_warm = 0;
    symm_team_t last = SYMM_TEAM_INVALID;
    double t0 = test_now();
    for (long c = 0; c < cycles; c++) {
        if (c == warm) rss_warm = test_rss_bytes();
        int kind = (int)(c % 3);
        if (kind == 0) {
            int size = 1 + (int)test_rng_below(&r, (uint64_t)npes);
            int stride =
                size > 1 ? 1 + (int)test_rng_below(&r, (uint64_t)((npes - 1) / (size - 1))) : 1;
            int span = (size - 1) * stride;
            int start = (int)test_rng_below(&r, (uint64_t)(npes - span));
            int neg = (int)test_rng_below(&r, 2);
            symm_team_t t;
            if (neg)
                CHECK_OK(
                    symm_team_split_strided(SYMM_TEAM_WORLD, start + span, -stride, size, &t));
            else
                CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, start, stride, size, &t));
            if (t != SYMM_TEAM_INVALID) {
                CHECK_OK(symm_barrier(t));
                CHECK_OK(symm_team_destroy(t));
                last = t;
            }
        } else if (kind == 1) {
            symm_pool_t p;
            size_t n = 1 + (size_t)test_rng_below(&r, 16);
            CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, n, &p));
            CHECK_OK(symm_barrier(symm_pool_team(p, (size_t)c % n)));
            if (c % 30 == 1) CHECK_OK(symm_pool_grow(p, n + 3));
            CHECK_OK(symm_pool_destroy(p));
        } else {
            int list[64];
            for (int i = 0; i < npes; i++)
                list[i] = i;
            for (int i = npes - 1; i > 0; i--) {
                int j = (int)test_rng_below(&r, (uint64_t)i + 1), x = list[i];
                list[i] = list[j];
                list[j] = x;
            }
            int n = 1 + (int)test_rng_below(&r, (uint64_t)npes);
            int member = 0;
            for (int i = 0; i < n; i++)
                member |= list[i] == me;
            if (member) {
                symm_team_t t;
                CHECK_OK(symm_team_create(list, n, &t));
                CHECK_OK(symm_sync(t));
                CHECK_OK(symm_team_destroy(t));
            }
            /* non-members go on at once: the world barrier below is every 100 cycles only */
        }
        CHECK_TRUE(team_used() == used0,
                   "cycle %ld (kind %d): team region in use %zu, %zu at "
                   "start",
                   c, kind, team_used(), used0);
        if (c % 100 == 99) CHECK_OK(symm_barrier_all());
    }
    CHECK_OK(symm_barrier_all());
    /* a handle from long ago is still refused */
    if (last != SYMM_TEAM_INVALID) CHECK_STATUS(symm_barrier(last), SYMM_ERR_TEAM_INVALID);
    size_t rss_end = test_rss_bytes();
    double dt = test_now() - t0;
    CHECK_TRUE(rss_end <= rss_warm + RSS_BOUND,
               "RSS grew from %zu to %zu bytes over %ld cycles", rss_warm, rss_end,
               cycles - warm);
    CHECK_OK(symm_finalize());
    if (me == 0)
        printf("stress_create_destroy: OK (%d PEs, %ld cycles, %.1f s, RSS %zu -> %zu KiB)\n",
               npes, cycles, dt, rss_warm >> 10, rss_end >> 10);
    return 0;
}
