/* test_mpi_hosts.c — PEs in groups that share no memory (SYMM_HOSTS, or several hosts):
 * SYMM_TEAM_NODE is exactly my group (the host's PEs cut into SYMM_HOSTS blocks of
 * consecutive ranks, worked out here from MPI independently of symm); inside it teams,
 * pools and collectives work; across groups barriers, pools, the heap, put/get, atomics
 * and signals, collectives and rank-list teams work through the MPI transport (checked
 * against serial references on random data). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/test_mpi.h"

/* World ranks of my group, as symm must form it: MPI's host, then SYMM_HOSTS blocks. */
static int expected_group(int *ranks)
{
    MPI_Comm host, group;
    int n = 0, r = 0, rank = 0, hosts = (int)test_env_long("SYMM_HOSTS", 1), size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &host);
    MPI_Comm_size(host, &n);
    MPI_Comm_rank(host, &r);
    MPI_Comm_split(host, (int)((int64_t)r * hosts / n), r, &group);
    MPI_Comm_size(group, &size);
    MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, group);
    MPI_Comm_free(&group);
    MPI_Comm_free(&host);
    return size;
}

/* A sum over the group by symm_allreduce on team, checked against the serial sum. */
static void group_sum(symm_team_t team, int64_t *buf, int64_t *out, int n, uint64_t seed)
{
    test_rng_t rng;
    int me = symm_team_my_pe(team), size = symm_team_n_pes(team);
    for (int i = 0; i < n; i++) {
        test_rng_seed(&rng, seed * 1000003u + (uint64_t)i);
        buf[i] = (int64_t)(test_rng_next(&rng) % 100003) * (me + 1);
    }
    CHECK_OK(symm_allreduce(team, out, buf, (size_t)n, SYMM_INT64, SYMM_OP_SUM));
    for (int i = 0; i < n; i++) {
        test_rng_seed(&rng, seed * 1000003u + (uint64_t)i);
        int64_t v = (int64_t)(test_rng_next(&rng) % 100003);
        CHECK_TRUE(out[i] == v * size * (size + 1) / 2, "element %d: %lld, expected %lld", i,
                   (long long)out[i], (long long)(v * size * (size + 1) / 2));
    }
}

/* Every PE puts a random block into every PE's copy (its own slot), then gets another
 * PE's source; both checked against the blocks regenerated from their seeds. */
static void rma_all(int me, int npes)
{
    enum { B = 1000 };
    uint8_t *src = symm_malloc(B), *dst = symm_malloc((size_t)npes * B), *got = malloc(B);
    uint8_t *want = malloc(B);
    CHECK_TRUE(src && dst && got && want, "allocations");
    test_rng_t rng;
    test_rng_seed(&rng, 77u + (uint64_t)me);
    test_fill_random(&rng, src, B);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    for (int k = 0; k < npes; k++)
        CHECK_OK(symm_put(dst + (size_t)me * B, src, B, (me + k) % npes));
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    for (int p = 0; p < npes; p++) {
        test_rng_seed(&rng, 77u + (uint64_t)p);
        test_fill_random(&rng, want, B);
        CHECK_BYTES(dst + (size_t)p * B, want, B, "block from PE %d", p);
    }
    int from = (me + 1) % npes;
    CHECK_OK(symm_get(got, src, B, from));
    test_rng_seed(&rng, 77u + (uint64_t)from);
    test_fill_random(&rng, want, B);
    CHECK_BYTES(got, want, B, "get from PE %d", from);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    free(want);
    free(got);
    CHECK_OK(symm_free(dst));
    CHECK_OK(symm_free(src));
}

/* Every PE adds random amounts to a counter on every PE and swaps into a word of its own
 * per target; the totals are known to all from the seeds. */
static void atomics_all(int me, int npes)
{
    enum { K = 50 };
    uint64_t *ctr = symm_calloc(1 + (size_t)npes, sizeof *ctr);
    CHECK_TRUE(ctr != NULL, "symm_calloc");
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    test_rng_t rng;
    test_rng_seed(&rng, 99u + (uint64_t)me);
    for (int i = 0; i < K; i++)
        for (int k = 0; k < npes; k++) {
            uint64_t v = test_rng_below(&rng, 1000), old = 0;
            CHECK_OK(symm_atomic64(SYMM_AMO_FETCH_ADD, &ctr[0], v, 0, (me + k) % npes, &old));
            CHECK_OK(symm_atomic64(SYMM_AMO_SWAP, &ctr[1 + me], (uint64_t)i, 0, (me + k) % npes,
                                   &old));
            CHECK_TRUE(i == 0 || old == (uint64_t)i - 1, "swap on PE %d: %llu before %d",
                       (me + k) % npes, (unsigned long long)old, i);
        }
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    uint64_t total = 0, seen = 0;
    for (int p = 0; p < npes; p++) {
        test_rng_seed(&rng, 99u + (uint64_t)p);
        for (int i = 0; i < K; i++)
            for (int k = 0; k < npes; k++) {
                uint64_t v = test_rng_below(&rng, 1000);
                if ((p + k) % npes == me) total += v;
            }
    }
    CHECK_OK(symm_atomic64(SYMM_AMO_FETCH, &ctr[0], 0, 0, me, &seen));
    CHECK_EQ_U64(seen, total);
    uint64_t old = 0, far = (uint64_t)(me + 1) % (uint64_t)npes;
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_atomic64(SYMM_AMO_CSWAP, &ctr[1 + me], 1000, K - 1, (int)far, &old));
    CHECK_EQ_U64(old, K - 1);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_atomic64(SYMM_AMO_FETCH, &ctr[1 + (me + npes - 1) % npes], 0, 0, me, &old));
    CHECK_EQ_U64(old, 1000);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_free(ctr));
}

/* A put with signal round the ring: each PE waits for its predecessor's data. */
static void signals_ring(int me, int npes)
{
    enum { B = 4096 };
    uint8_t *data = symm_malloc(2 * B), *want = malloc(B);
    uint64_t *sig = symm_calloc(1, sizeof *sig);
    CHECK_TRUE(data && sig && want, "allocations");
    test_rng_t rng;
    test_rng_seed(&rng, 5u + (uint64_t)me);
    test_fill_random(&rng, data, B);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_put_signal(data + B, data, B, sig, 1, SYMM_SIGNAL_ADD, (me + 1) % npes));
    uint64_t v = 0;
    CHECK_OK(symm_signal_wait_until(sig, SYMM_CMP_GE, 1, &v));
    CHECK_EQ_U64(v, 1);
    int from = (me + npes - 1) % npes;
    test_rng_seed(&rng, 5u + (uint64_t)from);
    test_fill_random(&rng, want, B);
    CHECK_BYTES(data + B, want, B, "data signalled by PE %d", from);
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    free(want);
    CHECK_OK(symm_free(sig));
    CHECK_OK(symm_free(data));
}

/* "timeout": the last PE stays away from a barrier on a duplicate of the world until every
 * other PE's wait has outlasted SYMM_TIMEOUT (3 s); every other PE's wait ends naming it, and
 * the PE that comes late finds the team broken. The pool is then destroyed and symm finalizes
 * as usual. */
static void remote_timeout(int me, int npes)
{
    uint64_t *gone = symm_malloc(sizeof *gone);
    CHECK_TRUE(gone != NULL, "symm_malloc");
    CHECK_OK(symm_atomic64(SYMM_AMO_SET, gone, 0, 0, me, NULL));
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 1, &pool));
    symm_team_t t = symm_pool_team(pool, 0);
    char name[32];
    snprintf(name, sizeof name, "(world %d)", npes - 1);
    if (me == npes - 1) {
        /* late until every other PE has given up (each says so once its wait has ended,
         * however long the loaded cores kept it from noticing), then within their
         * destroy's timeout */
        struct timespec late = {2, 0};
        nanosleep(&late, NULL);
        uint64_t v = 0;
        for (int i = 0; i < 20 && v < (uint64_t)(npes - 1); i++)
            if (symm_signal_wait_until(gone, SYMM_CMP_GE, (uint64_t)(npes - 1), &v)) v = 0;
        CHECK_TRUE(v >= (uint64_t)(npes - 1), "the other PEs gave up (%llu of %d)",
                   (unsigned long long)v, npes - 1);
        CHECK_STATUS(symm_barrier(t), SYMM_ERR_TIMEOUT);
    } else {
        CHECK_STATUS(symm_barrier(t), SYMM_ERR_TIMEOUT);
        CHECK_TRUE(strstr(symm_last_error(), name) != NULL, "the message names %s: %s", name,
                   symm_last_error());
        CHECK_OK(symm_atomic64(SYMM_AMO_ADD, gone, 1, 0, npes - 1, NULL));
    }
    CHECK_OK(symm_pool_destroy(pool));
    CHECK_OK(symm_free(gone));
}

int main(int argc, char **argv)
{
    int rank = -1, size = 0;
    test_mpi_init(&argc, &argv, &rank, &size);
    int *group = malloc((size_t)size * sizeof *group);
    CHECK_TRUE(group != NULL, "malloc");
    int gsize = expected_group(group);

    CHECK_OK(symm_init());
    if (argc > 1 && strcmp(argv[1], "timeout") == 0) {
        remote_timeout(rank, size);
        CHECK_OK(symm_finalize());
        printf("test_mpi_hosts: PE %d of %d: timeout named the late PE\n", rank, size);
        MPI_Finalize();
        return 0;
    }
    CHECK_TRUE(symm_my_pe() == rank && symm_n_pes() == size, "symm: PE %d of %d, MPI: %d of %d",
               symm_my_pe(), symm_n_pes(), rank, size);
    CHECK_EQ_I64(symm_team_n_pes(SYMM_TEAM_NODE), gsize);
    for (int i = 0; i < gsize; i++)
        CHECK_EQ_I64(symm_team_translate_pe(SYMM_TEAM_NODE, i, SYMM_TEAM_WORLD), group[i]);
    int others = gsize < size;

    /* Inside the group, by load/store: barriers, a pool, a rank-list team. */
    CHECK_OK(symm_barrier(SYMM_TEAM_NODE));
    symm_pool_t pool;
    CHECK_OK(symm_pool_create(SYMM_TEAM_NODE, 3, &pool));
    for (int i = 0; i < 3; i++)
        CHECK_OK(symm_barrier(symm_pool_team(pool, (size_t)i)));
    CHECK_OK(symm_pool_destroy(pool));
    symm_team_t t;
    CHECK_OK(symm_team_create(group, gsize, &t));
    CHECK_OK(symm_barrier(t));
    CHECK_OK(symm_team_destroy(t));

    /* Across groups: barriers and pools of the world, the heap, RMA, atomics, signals. */
    CHECK_OK(symm_barrier(SYMM_TEAM_WORLD));
    CHECK_OK(symm_pool_create(SYMM_TEAM_WORLD, 3, &pool));
    for (int i = 0; i < 3; i++)
        CHECK_OK(symm_barrier(symm_pool_team(pool, (size_t)i)));
    CHECK_OK(symm_pool_destroy(pool));
    rma_all(rank, size);
    atomics_all(rank, size);
    signals_ring(rank, size);

    enum { N = 257 };
    int64_t *buf = symm_malloc(2 * N * sizeof *buf);
    CHECK_TRUE(buf != NULL, "symm_malloc");
    group_sum(SYMM_TEAM_NODE, buf, buf + N, N, 1);
    group_sum(SYMM_TEAM_WORLD, buf, buf + N, N, 2);
    if (others) {
        /* A rank-list team of PEs of different groups, in reverse order: its members alone
         * create it (through the mailboxes), then sum over it. */
        int *rev = malloc((size_t)size * sizeof *rev);
        CHECK_TRUE(rev != NULL, "malloc");
        for (int i = 0; i < size; i++)
            rev[i] = size - 1 - i;
        CHECK_OK(symm_team_create(rev, size, &t));
        CHECK_EQ_I64(symm_team_my_pe(t), size - 1 - rank);
        group_sum(t, buf, buf + N, N, 3);
        CHECK_OK(symm_team_destroy(t));
        free(rev);
    }
    CHECK_OK(symm_free(buf));
    CHECK_OK(symm_finalize());
    free(group);
    printf("test_mpi_hosts: PE %d of %d, group of %d: ok\n", rank, size, gsize);
    MPI_Finalize();
    return 0;
}
