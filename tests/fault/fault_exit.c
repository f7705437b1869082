/* fault_exit.c — a PE program for testing symmrun without the symm library. It does the
 * rendezvous with src/bootstrap (configured from SYMM_* as the library would be), checks
 * what it received, maps the control page and then ends
 * as its mode says, so that test_symmrun_faults.sh can check how symmrun reports a
 * failure and how fast it stops the job.
 *
 *   fault_exit MODE [R] [marker...]      (extra arguments are ignored: tests use them
 *                                         to find their processes with pgrep -f)
 *   ok        every PE checks the segments and fds it got, finalizes and exits 0
 *   bye       every PE finalizes and exits 0, checking nothing (for large jobs)
 *   nobye     every PE exits 0 without saying bye: a failure, as it joined the job
 *   quit R    PE R exits 0 without saying bye after a short delay; the others wait for
 *             the abort flag as in fail
 *   fail R    PE R exits 3 after a short delay; the others wait for the abort flag,
 *             print "PE x saw abort: <message>" and exit 1
 *   crash R   as fail, but PE R calls abort()
 *   abort R   as fail, but PE R asks symmrun to abort the job (code 5), then exits 5
 *   hang      every PE sleeps forever (for --timeout)
 *   sleep     every PE sleeps 30 s, then exits 0 (for signals to symmrun)
 *   mismatch  PE 1 uses a segment twice as large: the rendezvous must fail */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/protocol.h"
#include "core/config.h"

#define SEG_SIZE      4096
#define SEG_MARK      0x5eed000000000000ull /* | rank, at the start of each segment */
#define FAIL_DELAY_MS 200                   /* the others are surely waiting by then */
#define WAIT_ABORT_MS 20000                 /* far longer than symmrun's grace */

static int my_rank = -1; /* for messages; -1 until the environment is read */

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static _Noreturn void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static _Noreturn void die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fault_exit PE %d: ", my_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) die(10, "opendir /proc/self/fd: %s", strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

/* symmrun must hand a PE nothing but its own socket: a socket, memfd or signalfd of
 * symmrun's in a PE would be a leak (another PE's socket, a segment, ...). */
static void check_inherited_fds(int boot_fd)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) die(10, "opendir /proc/self/fd: %s", strerror(errno));
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == boot_fd || fd == dirfd(d)) continue;
        char path[64], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n < 0) continue;
        link[n] = '\0';
        if (strncmp(link, "socket:", 7) == 0 || strncmp(link, "/memfd:", 7) == 0 ||
            strncmp(link, "anon_inode:", 11) == 0)
            die(10, "inherited fd %d (%s) from symmrun", fd, link);
    }
    closedir(d);
}

static symm_ctrl_t *ctrl_map(const symm_boot_t *boot)
{
    if (boot->ctrl_fd < 0) return NULL; /* run without symmrun */
    size_t size = symm_ctrl_size((uint32_t)boot->npes);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, boot->ctrl_fd, 0);
    if (p == MAP_FAILED) die(10, "mmap control page: %s", strerror(errno));
    symm_ctrl_t *c = p;
    /* failed_pe is not checked: another PE may already have failed by now. */
    if (c->magic != SYMM_CTRL_MAGIC || c->npes != (uint32_t)boot->npes || c->ctrl_size != size)
        die(10, "bad control page (magic %llx, npes %u, size %u)", (unsigned long long)c->magic,
            c->npes, c->ctrl_size);
    return c;
}

/* Each PE marked its segment before the rendezvous, so every segment received must
 * already carry its owner's mark: that proves seg_fd[r] really is PE r's memfd. */
static void check_segments(const symm_boot_t *boot, int my_seg)
{
    if (boot->seg_fd[boot->rank] != my_seg)
        die(10, "seg_fd[%d] is %d, not my own memfd %d", boot->rank, boot->seg_fd[boot->rank],
            my_seg);
    for (int r = 0; r < boot->npes; r++) {
        uint64_t *p = mmap(NULL, SEG_SIZE, PROT_READ, MAP_SHARED, boot->seg_fd[r], 0);
        if (p == MAP_FAILED) die(10, "mmap segment of PE %d: %s", r, strerror(errno));
        if (p[0] != (SEG_MARK | (uint64_t)r))
            die(10, "segment %d carries mark %llx", r, (unsigned long long)p[0]);
        munmap(p, SEG_SIZE);
    }
}

/* What a PE of the library does in a long wait: poll the abort flag that symmrun
 * raises. The sleep grows to 16 ms because a thousand PEs waking every millisecond
 * would starve symmrun of the two cores of a small machine. */
static _Noreturn void wait_for_abort(symm_ctrl_t *c)
{
    long nap = 1;
    for (long waited = 0; waited < WAIT_ABORT_MS; waited += nap) {
        if (__atomic_load_n(&c->abort, __ATOMIC_ACQUIRE)) {
            fprintf(stderr, "PE %d saw abort: %s\n", my_rank, c->message);
            exit(1);
        }
        sleep_ms(nap);
        if (nap < 16) nap *= 2;
    }
    die(4, "never saw the abort flag");
}

/* Gives back what the rendezvous handed over (the caller owns it), so that leak
 * checkers see a clean exit. */
static void boot_release(symm_boot_t *boot, symm_ctrl_t *ctrl)
{
    if (ctrl != NULL) munmap(ctrl, symm_ctrl_size((uint32_t)boot->npes));
    if (boot->ctrl_fd >= 0) close(boot->ctrl_fd);
    for (int r = 0; r < boot->npes; r++)
        close(boot->seg_fd[r]); /* seg_fd[rank] is my own memfd */
    free(boot->seg_fd);
}

static int parse_target(int argc, char **argv, int npes)
{
    if (argc < 3) die(10, "mode %s needs a PE number", argv[1]);
    int r = atoi(argv[2]);
    if (r < 0 || r >= npes) die(10, "PE %d is out of range for %d PEs", r, npes);
    return r;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: fault_exit ok|bye|nobye|quit R|fail R|crash R|abort R|hang|"
                        "sleep|mismatch [marker...]\n");
        return 10;
    }
    const char *mode = argv[1];
    const char *env_rank = getenv(SYMM_BOOT_ENV_RANK);
    const char *env_fd = getenv(SYMM_BOOT_ENV_FD);
    my_rank = env_rank ? atoi(env_rank) : 0;

    if (strcmp(mode, "ok") == 0 && env_fd != NULL) check_inherited_fds(atoi(env_fd));

    size_t seg_size = SEG_SIZE;
    if (strcmp(mode, "mismatch") == 0 && my_rank == 1) seg_size *= 2;
    int seg = memfd_create("fault_exit-seg", MFD_CLOEXEC);
    if (seg < 0 || ftruncate(seg, (off_t)seg_size) < 0) die(10, "memfd: %s", strerror(errno));
    uint64_t *mine = mmap(NULL, SEG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, seg, 0);
    if (mine == MAP_FAILED) die(10, "mmap my segment: %s", strerror(errno));
    mine[0] = SEG_MARK | (uint64_t)my_rank;

    /* Only where it is checked: reading /proc/self/fd leaves a dentry per fd, which
     * makes reaping a thousand PEs slow for symmrun. */
    bool check_fds = strcmp(mode, "ok") == 0;
    int fds_before = check_fds ? count_fds() : 0;
    symm_boot_t boot;
    if (symm_config_load() != 0) die(10, "bad SYMM_* environment");
    symm_status_t st = symm_boot_init(seg, seg_size, &boot);
    if (strcmp(mode, "mismatch") == 0) {
        if (st == SYMM_SUCCESS)
            die(9, "the rendezvous succeeded although the segment sizes differ");
        die(2, "boot failed as expected (status %d)", (int)st);
    }
    if (st != SYMM_SUCCESS) die(2, "boot failed (status %d)", (int)st);
    if (env_rank != NULL && boot.rank != my_rank)
        die(10, "boot says rank %d, SYMM_RANK says %d", boot.rank, my_rank);

    /* The rendezvous must add exactly the other PEs' segments and the control page. */
    int fds_expected = boot.npes - 1 + (boot.ctrl_fd >= 0 ? 1 : 0);
    int fds_added = check_fds ? count_fds() - fds_before : fds_expected;
    if (fds_added != fds_expected)
        die(10, "the rendezvous added %d fds, expected %d", fds_added, fds_expected);
    check_segments(&boot, seg);
    symm_ctrl_t *ctrl = ctrl_map(&boot);

    if (strcmp(mode, "ok") == 0 || strcmp(mode, "bye") == 0 || strcmp(mode, "nobye") == 0) {
        if (strcmp(mode, "nobye") != 0) symm_boot_finalize(&boot);
        munmap(mine, SEG_SIZE);
        boot_release(&boot, ctrl);
        return 0;
    }
    if (strcmp(mode, "hang") == 0) {
        for (;;)
            pause();
    }
    if (strcmp(mode, "sleep") == 0) {
        sleep_ms(30000);
        symm_boot_finalize(&boot);
        munmap(mine, SEG_SIZE);
        boot_release(&boot, ctrl);
        return 0;
    }

    int target = parse_target(argc, argv, boot.npes);
    if (ctrl == NULL) die(10, "mode %s needs symmrun", mode);
    if (boot.rank != target) wait_for_abort(ctrl);
    sleep_ms(FAIL_DELAY_MS);
    if (strcmp(mode, "fail") == 0) exit(3);
    if (strcmp(mode, "quit") == 0) exit(0);
    if (strcmp(mode, "crash") == 0) {
        /* No core file: the test checks that nothing new appears anywhere. */
        struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        prctl(PR_SET_DUMPABLE, 0);
        abort();
    }
    if (strcmp(mode, "abort") == 0) {
        symm_boot_abort(&boot, 5, "fault_exit abort test");
        exit(5);
    }
    die(10, "unknown mode '%s'", mode);
}
