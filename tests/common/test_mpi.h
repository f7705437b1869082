/* test_mpi.h — for test programs that use MPI themselves (tests/mpi): MPI started by the
 * program before symm_init, as a user's program would. */
#ifndef SYMM_TEST_MPI_H
#define SYMM_TEST_MPI_H

#include <mpi.h>

#include "common/test_util.h"

/* MPI_Init_thread at MPI_THREAD_FUNNELED; this process's rank and the job's size. Returns
 * the thread level MPI gives. */
static inline int test_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    int provided = 0;
    CHECK_TRUE(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS,
               "MPI_Init_thread");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return provided;
}

#endif
