/* test_mpi_user.c — a program that uses MPI itself, under mpirun: it calls MPI_Init_thread
 * before symm_init, and symm must take its ranks from MPI (symm PE = MPI_COMM_WORLD rank),
 * leave MPI to the program throughout (MPI and symm collectives interleaved give the same
 * sums), and leave it up after symm_finalize, so that a second symm_init and symm_finalize
 * work and MPI still runs after them. The program finalizes MPI itself. */

#include "common/test_mpi.h"

/* The sum over all PEs of a few values per PE, by symm and by MPI on the program's own
 * communicator: both must match the serial sum. */
static void sums_agree(MPI_Comm comm, int round)
{
    enum { N = 1000 };
    int me = symm_my_pe(), npes = symm_n_pes();
    int64_t *src = symm_malloc(N * sizeof *src), *dst = symm_malloc(N * sizeof *dst);
    CHECK_TRUE(src && dst, "symm_malloc");
    int64_t *by_mpi = malloc(N * sizeof *by_mpi);
    CHECK_TRUE(by_mpi != NULL, "malloc");
    test_rng_t rng;
    for (int i = 0; i < N; i++) {
        test_rng_seed(&rng, (uint64_t)(round * 7919 + i));
        src[i] = (int64_t)(test_rng_next(&rng) % 1000003) * (me + 1);
    }
    CHECK_OK(symm_allreduce(SYMM_TEAM_WORLD, dst, src, N, SYMM_INT64, SYMM_OP_SUM));
    CHECK_TRUE(MPI_Allreduce(src, by_mpi, N, MPI_INT64_T, MPI_SUM, comm) == MPI_SUCCESS,
               "MPI_Allreduce");
    for (int i = 0; i < N; i++) {
        test_rng_seed(&rng, (uint64_t)(round * 7919 + i));
        int64_t v = (int64_t)(test_rng_next(&rng) % 1000003);
        int64_t want = v * npes * (npes + 1) / 2;
        CHECK_TRUE(dst[i] == want && by_mpi[i] == want,
                   "round %d, element %d: symm %" PRId64 ", MPI %" PRId64 ", expected %" PRId64,
                   round, i, dst[i], by_mpi[i], want);
    }
    free(by_mpi);
    CHECK_OK(symm_free(dst));
    CHECK_OK(symm_free(src));
}

int main(int argc, char **argv)
{
    int rank = -1, size = 0, provided = test_mpi_init(&argc, &argv, &rank, &size);
    MPI_Comm mine;
    CHECK_TRUE(MPI_Comm_dup(MPI_COMM_WORLD, &mine) == MPI_SUCCESS, "MPI_Comm_dup");

    for (int round = 0; round < 2; round++) {
        CHECK_OK(symm_init());
        CHECK_TRUE(symm_my_pe() == rank && symm_n_pes() == size,
                   "round %d: symm says PE %d of %d, MPI says rank %d of %d", round,
                   symm_my_pe(), symm_n_pes(), rank, size);
        sums_agree(mine, round);
        /* MPI traffic of the program between symm calls, on MPI_COMM_WORLD itself */
        int token = rank, total = 0;
        CHECK_TRUE(MPI_Allreduce(&token, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) ==
                       MPI_SUCCESS,
                   "MPI_Allreduce on MPI_COMM_WORLD");
        CHECK_TRUE(total == size * (size - 1) / 2, "rank sum %d", total);
        CHECK_OK(symm_barrier_all());
        CHECK_OK(symm_finalize());
        int up = 0, down = 1;
        MPI_Initialized(&up);
        MPI_Finalized(&down);
        CHECK_TRUE(up && !down, "round %d: symm_finalize ended the program's MPI", round);
        CHECK_TRUE(MPI_Barrier(mine) == MPI_SUCCESS, "MPI_Barrier after symm_finalize");
    }
    if (rank == 0) printf("test_mpi_user: %d PEs, MPI thread level %d: OK\n", size, provided);
    MPI_Comm_free(&mine);
    MPI_Finalize();
    return 0;
}
