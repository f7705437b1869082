/* test_team_timeout.c — bounded waiting (SYMM_TIMEOUT=1): a barrier whose other
 * members do not come fails with SYMM_ERR_TIMEOUT after about a second, naming the
 * team and every member that never arrived; a wait_until / signal_wait_until on a value
 * nobody sets fails the same way. Members that come late fail too (SYMM_ERR_TIMEOUT,
 * naming the member that gave up), every later call on the team fails with
 * SYMM_ERR_TEAM_BROKEN on every member, and destroying it works. */
#include "common/test_util.h"

int main(void)
{
    setenv("SYMM_TIMEOUT", "1", 1);
    CHECK_OK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    uint64_t *flag = symm_calloc(2, sizeof(uint64_t));
    CHECK_TRUE(flag != NULL, "calloc");

    /* a local wait nobody satisfies */
    double t0 = test_now();
    CHECK_STATUS(symm_wait_until_uint64(flag + 1, SYMM_CMP_EQ, 99), SYMM_ERR_TIMEOUT);
    double dt = test_now() - t0;
    CHECK_TRUE(dt >= 0.9 && dt < 5, "wait_until timed out after %.2f s (SYMM_TIMEOUT=1)", dt);
    CHECK_TRUE(strstr(symm_last_error(), "SYMM_TIMEOUT") != NULL, "message: %s",
               symm_last_error());
    CHECK_STATUS(symm_signal_wait_until(flag + 1, SYMM_CMP_GT, 5, NULL), SYMM_ERR_TIMEOUT);
    CHECK_OK(symm_barrier_all());

    if (npes >= 2) {
        /* Both barriers (flat up to SYMM_BARRIER_FANIN, dissemination beyond) name every
         * member that never arrived. */
        symm_team_t t;
        CHECK_OK(symm_team_split_strided(SYMM_TEAM_WORLD, 0, 1, npes, &t));
        if (me == 0) {
            t0 = test_now();
            CHECK_STATUS(symm_barrier(t), SYMM_ERR_TIMEOUT);
            dt = test_now() - t0;
            const char *m = symm_last_error();
            CHECK_TRUE(dt >= 0.9 && dt < 5, "barrier timed out after %.2f s", dt);
            CHECK_TRUE(strstr(m, "team") != NULL && strstr(m, "barrier") != NULL,
                       "the message does not name the team and the call: %s", m);
            CHECK_TRUE(strstr(m, "(world ") != NULL, "the message names no PE: %s", m);
            for (int p = 1; p < npes && p < 8; p++) {
                char who[32];
                snprintf(who, sizeof who, "(world %d)", p);
                CHECK_TRUE(strstr(m, who) != NULL, "the message does not name PE %d: %s", p, m);
            }
            /* now let the others come */
            for (int p = 1; p < npes; p++)
                CHECK_OK(symm_atomic64(SYMM_AMO_SET, flag, 1, 0, p, NULL));
        } else {
            /* PE 0 raises the flag after its own 1-s timeout: retry ours meanwhile */
            symm_status_t st;
            int k = 0;
            while ((st = symm_wait_until_uint64(flag, SYMM_CMP_EQ, 1)) == SYMM_ERR_TIMEOUT &&
                   k < 10)
                k++;
            CHECK_OK(st);
            /* PE 0 gave up on this barrier: it fails here too, naming PE 0 */
            CHECK_STATUS(symm_barrier(t), SYMM_ERR_TIMEOUT);
            CHECK_TRUE(strstr(symm_last_error(), "PE 0 (world 0)") != NULL,
                       "the late member's message does not name PE 0: %s", symm_last_error());
        }
        /* the team is unusable on every member until destroyed */
        for (int i = 0; i < 3; i++)
            CHECK_STATUS(symm_barrier(t), SYMM_ERR_TEAM_BROKEN);
        CHECK_OK(symm_team_destroy(t)); /* through its control duplicate: always works */
        CHECK_OK(symm_barrier_all());
    }
    CHECK_OK(symm_free(flag));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_team_timeout: OK (%d PEs)\n", npes);
    return 0;
}
