/* test_exchange.c — symm_init_exchange with an allgather the program supplies: files in a
 * directory that run_exchange.sh makes (SYMM_TEST_XDIR), one per PE and round. Each PE
 * is started alone with RANK and WORLD_SIZE, as torchrun starts its workers.
 * Modes (argv[1]): ok (the world works: PE numbers, heap, peers' copies, NODE, a
 * reduction on random data, finalize), badnpes (PE 1 claims one PE more: every PE fails
 * alike), failing (PE 1's allgather reports a failure after it wrote its bytes: it fails
 * with the caller's status, the others name it), abort (PE 1 calls symm_abort in a
 * barrier loop: the others' waits fail naming it), badarg (bad exchanges refused). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/test_util.h"

typedef struct {
    const char *dir;
    int rank, npes; /* the job's, whatever the exchange struct claims */
    int round;
    int fail_after_write;
} file_xchg_t;

static int read_all(const char *path, void *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = read(fd, buf, n);
    close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

/* Round k: this PE writes k.rank atomically (a rename), then waits for every k.p. */
static int file_allgather(void *ctx, const void *mine, void *all, size_t n)
{
    file_xchg_t *x = ctx;
    char tmp[512], path[512];
    int k = x->round++;
    snprintf(tmp, sizeof tmp, "%s/.%d.%d", x->dir, k, x->rank);
    snprintf(path, sizeof path, "%s/%d.%d", x->dir, k, x->rank);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, mine, n) != (ssize_t)n || close(fd) != 0 || rename(tmp, path) != 0)
        return 2;
    if (x->fail_after_write) return 5;
    time_t deadline = time(NULL) + 60;
    for (int p = 0; p < x->npes; p++) {
        snprintf(path, sizeof path, "%s/%d.%d", x->dir, k, p);
        while (read_all(path, (char *)all + (size_t)p * n, n) != 0) {
            if (time(NULL) > deadline) return 3;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
    return 0;
}

/* Random data any PE can recompute for any PE: an integer below 2^20, so that sums are
 * exact whatever the order. */
static double value(int pe, size_t i)
{
    return (double)(test_mix(test_seed() + (uint64_t)pe, i) >> 44);
}

static void run_ok(void)
{
    int me = symm_my_pe(), n = symm_n_pes();
    CHECK_EQ_I64(symm_team_n_pes(SYMM_TEAM_NODE), n);
    size_t count = 1000 + 37 * (size_t)n;
    double *src = symm_malloc(count * sizeof *src), *dst = symm_malloc(count * sizeof *dst);
    if (!src || !dst) TEST_FAIL("symm_malloc: %s", symm_last_error());
    for (size_t i = 0; i < count; i++)
        src[i] = value(me, i);
    CHECK_OK(symm_barrier_all());
    for (int p = 0; p < n; p++) {
        const double *peer = symm_ptr(src, p);
        if (!peer) TEST_FAIL("symm_ptr(src, %d) is NULL", p);
        for (size_t i = 0; i < count; i += 97)
            if (peer[i] != value(p, i))
                TEST_FAIL("PE %d's src[%zu] reads wrong through symm_ptr", p, i);
    }
    CHECK_OK(symm_allreduce(SYMM_TEAM_WORLD, dst, src, count, SYMM_DOUBLE, SYMM_OP_SUM));
    for (size_t i = 0; i < count; i++) {
        double want = 0;
        for (int p = 0; p < n; p++)
            want += value(p, i);
        if (dst[i] != want) TEST_FAIL("allreduce[%zu] = %g, want %g", i, dst[i], want);
    }
    CHECK_OK(symm_free(dst));
    CHECK_OK(symm_free(src));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ok";
    const char *dir = getenv("SYMM_TEST_XDIR"), *r = getenv("RANK"), *w = getenv("WORLD_SIZE");
    if (!dir || !r || !w) TEST_FAIL("SYMM_TEST_XDIR, RANK and WORLD_SIZE must be set");
    file_xchg_t x = {.dir = dir, .rank = atoi(r), .npes = atoi(w)};
    symm_exchange_t ex = {.size = sizeof ex,
                          .rank = x.rank,
                          .npes = x.npes,
                          .allgather = file_allgather,
                          .ctx = &x};

    if (strcmp(mode, "badarg") == 0) {
        symm_exchange_t bad = ex;
        CHECK_STATUS(symm_init_exchange(NULL), SYMM_ERR_INVALID_ARG);
        bad.size = sizeof bad - 1;
        CHECK_STATUS(symm_init_exchange(&bad), SYMM_ERR_INVALID_ARG);
        bad = ex, bad.rank = bad.npes;
        CHECK_STATUS(symm_init_exchange(&bad), SYMM_ERR_INVALID_ARG);
        bad = ex, bad.allgather = NULL;
        CHECK_STATUS(symm_init_exchange(&bad), SYMM_ERR_INVALID_ARG);
        if (symm_initialized()) TEST_FAIL("initialized after refused exchanges");
        if (x.round != 0) TEST_FAIL("a refused exchange called the allgather");
        /* Nothing was left behind: the good exchange still works. */
    }
    if (strcmp(mode, "badnpes") == 0 && x.rank == 1) ex.npes++;
    if (strcmp(mode, "failing") == 0 && x.rank == 1) x.fail_after_write = 1;

    symm_status_t st = symm_init_exchange(&ex);
    if (strcmp(mode, "badnpes") == 0 || strcmp(mode, "failing") == 0) {
        if (st == SYMM_SUCCESS) TEST_FAIL("symm_init_exchange succeeded in mode %s", mode);
        printf("PE %d refused: %s\n", x.rank, symm_last_error());
        if (symm_initialized()) TEST_FAIL("initialized after a failed start");
        return 0;
    }
    CHECK_OK(st);
    CHECK_EQ_I64(symm_my_pe(), x.rank);
    CHECK_EQ_I64(symm_n_pes(), x.npes);
    CHECK_STATUS(symm_init_exchange(&ex), SYMM_ERR_ALREADY_INITIALIZED);
    if (strcmp(mode, "abort") == 0) {
        for (int i = 0;; i++) {
            if (symm_my_pe() == 1 && i == 50) symm_abort(7, "deliberate abort");
            st = symm_barrier_all();
            if (st != SYMM_SUCCESS) {
                printf("PE %d: barrier %d: %s\n", symm_my_pe(), i, symm_last_error());
                return 3;
            }
        }
    }
    run_ok();
    CHECK_OK(symm_finalize());
    printf("PE %d of %d: ok\n", x.rank, x.npes);
    return 0;
}
