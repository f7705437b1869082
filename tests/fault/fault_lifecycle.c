/* fault_lifecycle.c — a symm program that misuses init and finalize, for
 * run_fault_lifecycle.sh:
 *   exit0 R    PE R returns from main without symm_finalize in the middle of a sequence
 *              of barriers; the others' barrier must fail with SYMM_ERR_PE_FAILED naming
 *              PE R (exit 3 when it does, 4 for any other failure, 5 if none)
 *   finalize   every PE runs the same barriers, finalizes and exits 0
 *   reinit     every PE initializes, finalizes and initializes again: the second init
 *              must fail saying re-initialising is not supported (exit 0 when it does)
 *   init       symm_init and symm_finalize only (for a bad environment: init must fail)
 *   fanin      the last PE sets another SYMM_BARRIER_FANIN: every PE's symm_init must
 *              fail naming the variable (exit 0 when it does)
 *   refused    symm_init must fail with SYMM_ERR_UNSUPPORTED, as for a launch it cannot
 *              serve (exit 0 when it does, printing why) */
#include "common/test_util.h"

static void barriers(int quitter)
{
    int me = symm_my_pe(), npes = symm_n_pes();
    uint64_t *x = symm_calloc(1, sizeof *x);
    CHECK_TRUE(x != NULL, "calloc");
    int left = (me + npes - 1) % npes;
    for (int i = 0; i < 200; i++) {
        uint64_t v = 0x5eed0000u + (uint64_t)i * 7919u + (uint64_t)me;
        CHECK_OK(symm_put(x, &v, sizeof v, (me + 1) % npes));
        if (me == quitter && i == 20) {
            fprintf(stderr, "fault_lifecycle: PE %d returns from main at barrier %d\n", me, i);
            exit(0); /* no symm_finalize */
        }
        symm_status_t st = symm_barrier_all();
        if (st == SYMM_SUCCESS) {
            /* the left neighbour's put of this round has landed */
            uint64_t want = 0x5eed0000u + (uint64_t)i * 7919u + (uint64_t)left;
            CHECK_TRUE(*x == want, "barrier %d: %" PRIx64 ", expected %" PRIx64, i, *x, want);
            CHECK_OK(symm_barrier_all()); /* nobody overwrites x before it is read */
            continue;
        }
        char named[96];
        snprintf(named, sizeof named,
                 "PE %d exited with status 0 without calling symm_finalize", quitter);
        int as_expected = st == SYMM_ERR_PE_FAILED && strstr(symm_last_error(), named);
        fprintf(stderr, "fault_lifecycle: PE %d: barrier %d failed%s: %s: %s\n", me, i,
                as_expected ? " as expected" : "", symm_strerror(st), symm_last_error());
        exit(as_expected ? 3 : 4);
    }
    if (quitter >= 0) {
        fprintf(stderr, "fault_lifecycle: PE %d finished every barrier\n", me);
        exit(5);
    }
    CHECK_OK(symm_free(x));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "exit0") == 0) {
        int quitter = argc > 2 ? atoi(argv[2]) : 1;
        CHECK_OK(symm_init());
        CHECK_TRUE(quitter >= 0 && quitter < symm_n_pes(), "PE %d of %d", quitter,
                   symm_n_pes());
        barriers(quitter);
        return 1; /* not reached */
    }
    if (strcmp(mode, "finalize") == 0) {
        CHECK_OK(symm_init());
        barriers(-1);
        CHECK_OK(symm_finalize());
        return 0;
    }
    if (strcmp(mode, "reinit") == 0) {
        CHECK_OK(symm_init());
        int me = symm_my_pe();
        barriers(-1);
        CHECK_OK(symm_finalize());
        symm_status_t st = symm_init();
        if (st == SYMM_SUCCESS) {
            symm_finalize();
            TEST_FAIL("PE %d: a second symm_init succeeded", me);
        }
        CHECK_TRUE(st == SYMM_ERR_UNSUPPORTED, "second symm_init returned %s: %s",
                   symm_strerror(st), symm_last_error());
        const char *msg = symm_last_error();
        CHECK_TRUE(strstr(msg, "symm_init after symm_finalize is not supported") &&
                       strstr(msg, "once"),
                   "second symm_init: %s", symm_last_error());
        CHECK_TRUE(!symm_initialized() && symm_my_pe() == -1, "initialized after the refusal");
        /* asking again gives the same answer, not a bootstrap error */
        CHECK_STATUS(symm_init(), SYMM_ERR_UNSUPPORTED);
        fprintf(stderr, "fault_lifecycle: PE %d: second symm_init: %s\n", me,
                symm_last_error());
        return 0;
    }
    if (strcmp(mode, "init") == 0) {
        CHECK_OK(symm_init());
        CHECK_OK(symm_finalize());
        return 0;
    }
    if (strcmp(mode, "fanin") == 0) {
        int rank, npes;
        test_launch_rank(&rank, &npes);
        if (rank == npes - 1) setenv("SYMM_BARRIER_FANIN", "3", 1);
        symm_status_t st = symm_init();
        CHECK_TRUE(st == SYMM_ERR_INVALID_ARG, "symm_init returned %s", symm_strerror(st));
        CHECK_TRUE(strstr(symm_last_error(), "SYMM_BARRIER_FANIN") != NULL, "message: %s",
                   symm_last_error());
        fprintf(stderr, "fault_lifecycle: init refused: %s\n", symm_last_error());
        return 0;
    }
    if (strcmp(mode, "refused") == 0) {
        symm_status_t st = symm_init();
        CHECK_TRUE(st == SYMM_ERR_UNSUPPORTED, "symm_init returned %s: %s", symm_strerror(st),
                   symm_last_error());
        CHECK_TRUE(!symm_initialized(), "initialized after the refusal");
        fprintf(stderr, "fault_lifecycle: init refused: %s\n", symm_last_error());
        return 0;
    }
    fprintf(stderr, "usage: fault_lifecycle exit0 R|finalize|reinit|init|fanin|refused\n");
    return 10;
}
