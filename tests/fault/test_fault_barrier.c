/* test_fault_barrier.c — PE 2 calls abort() (or, with the argument "symm_abort",
 * symm_abort(7, ...)) in the middle of a sequence of barriers (after a put to its right
 * neighbour, so the job is in full swing). The other PEs must not hang: their barrier
 * returns SYMM_ERR_PE_FAILED (or symmrun stops them), and symmrun exits non-zero naming
 * PE 2. Driven by run_fault_barrier.sh. */
#include <signal.h>
#include <unistd.h>

#include "common/test_util.h"

int main(int argc, char **argv)
{
    int use_symm_abort = argc > 1 && strcmp(argv[1], "symm_abort") == 0;
    CHECK_OK(symm_init());
    int me = symm_my_pe(), npes = symm_n_pes();
    uint64_t *x = symm_calloc(1, sizeof *x);
    CHECK_TRUE(x != NULL, "calloc");
    for (int i = 0; i < 1000; i++) {
        uint64_t v = (uint64_t)i;
        CHECK_OK(symm_put(x, &v, sizeof v, (me + 1) % npes));
        if (me == 2 && i == 50) {
            fprintf(stderr, "test_fault_barrier: PE 2 aborts at barrier %d\n", i);
            if (use_symm_abort) symm_abort(7, "deliberate abort of the fault test");
            abort();
        }
        symm_status_t st = symm_barrier_all();
        if (st != SYMM_SUCCESS) {
            fprintf(stderr, "test_fault_barrier: PE %d: barrier %d failed: %s (%s)\n", me, i,
                    symm_strerror(st), symm_last_error());
            /* An MPI launcher may drop what a process wrote just before it exited (MPICH's
             * Hydra, once the job is ending): stay until the launcher has read it or
             * PE 2's abort ends the job. */
            fflush(stderr);
            usleep(300000);
            return st == SYMM_ERR_PE_FAILED ? 3 : 4;
        }
    }
    /* reaching here means PE 2 never aborted: wrong */
    fprintf(stderr, "test_fault_barrier: PE %d finished every barrier\n", me);
    symm_finalize();
    return 5;
}
