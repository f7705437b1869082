/* symmrun.c — the PE side of symmrun's rendezvous (protocol.h): hand symmrun this PE's
 * segment memfd over the socket it inherited, and get back every PE's segment and the
 * job's control page; at the end say bye, or ask symmrun to stop the job. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/wire.h"
#include "core/log.h"

/* A process joins its symmrun job once: symmrun runs one rendezvous per job, and the
 * socket it gave the process is closed by symm_finalize (or by a failed symm_init).
 * Remembered so that a second symm_init says so, instead of finding SYMM_BOOT_FD closed
 * or, worse, reused by an unrelated socket that would then receive a hello. */
static enum { BOOT_FRESH, BOOT_JOINED, BOOT_FAILED } boot_state = BOOT_FRESH;
static int boot_rank = -1; /* for the message of a second symm_init */

static symm_status_t boot_env_int(const char *name, long min, long max, int *out)
{
    const char *s = getenv(name);
    if (s == NULL)
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "%s is set but %s is not (start symm programs with symmrun)",
                              SYMM_BOOT_ENV_FD, name);
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return symm_error_set(SYMM_ERR_BOOTSTRAP, "%s='%s' is not a number from %ld to %ld",
                              name, s, min, max);
    *out = (int)v;
    return SYMM_SUCCESS;
}

symm_status_t symm_boot_symmrun_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    symm_status_t st;

    if (getenv(SYMM_BOOT_ENV_FD) == NULL)
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "SYMM_BOOTSTRAP=symmrun, but this process was not started by "
                              "symmrun (%s is not set)",
                              SYMM_BOOT_ENV_FD);
    if (boot_state == BOOT_JOINED)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "PE %d: symm_init after symm_finalize is not supported under "
                              "symmrun: a process joins its job's rendezvous once, at its "
                              "first symm_init (call symm_init and symm_finalize once per "
                              "process; to run again, start a new job)",
                              boot_rank);
    if (boot_state == BOOT_FAILED)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "PE %d: symm_init after a symm_init that failed in or after the "
                              "rendezvous: a process joins its job's rendezvous once, so it "
                              "cannot be retried (see the first error; start a new job)",
                              boot_rank);

    int sock, npes, rank;
    st = boot_env_int(SYMM_BOOT_ENV_FD, 0, INT_MAX, &sock);
    if (st != SYMM_SUCCESS) return st;
    st = boot_env_int(SYMM_BOOT_ENV_NPES, 1, INT_MAX, &npes);
    if (st != SYMM_SUCCESS) return st;
    st = boot_env_int(SYMM_BOOT_ENV_RANK, 0, npes - 1, &rank);
    if (st != SYMM_SUCCESS) return st;

    /* The fd number comes from the environment, which a PE's own children inherit
     * although the socket itself is close-on-exec: make sure it still is ours. */
    struct stat sst;
    if (fstat(sock, &sst) < 0 || !S_ISSOCK(sst.st_mode))
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "PE %d: %s=%d is not an open socket (was this process "
                              "started by symmrun, and not by one of its PEs?)",
                              rank, SYMM_BOOT_ENV_FD, sock);
    if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0)
        return symm_error_set(SYMM_ERR_SYSTEM, "PE %d: fcntl(%s=%d, FD_CLOEXEC): %s", rank,
                              SYMM_BOOT_ENV_FD, sock, strerror(errno));
    /* From here on the socket belongs to this symm_init: it is closed or kept, never reused. */
    boot_state = BOOT_FAILED;
    boot_rank = rank;

    int *seg_fd;
    CHECK_GOTO(symm_boot_fd_table_new(rank, npes, &seg_fd), st, out_close_sock);
    int ctrl_fd = -1;
    CHECK_GOTO(
        symm_boot_join(sock, "symmrun", rank, npes, my_seg_fd, seg_size, seg_fd, &ctrl_fd), st,
        out_close_fds);

    boot_state = BOOT_JOINED;
    *out = (symm_boot_t){.via = SYMM_BOOT_VIA_SYMMRUN,
                         .rank = rank,
                         .npes = npes,
                         .sock = sock,
                         .seg_fd = seg_fd,
                         .seg_size = seg_size,
                         .ctrl_fd = ctrl_fd};
    return SYMM_SUCCESS;

out_close_fds:
    symm_boot_fd_table_free(seg_fd, npes, my_seg_fd);
    if (ctrl_fd >= 0) close(ctrl_fd);
out_close_sock:
    /* symmrun sees the socket close and goes on watching for this PE's exit status. */
    close(sock);
    return st;
}

void symm_boot_symmrun_finalize(symm_boot_t *boot)
{
    if (boot->sock < 0) return;
    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_BYE;
    msg.rank = boot->rank;
    /* Best effort: if symmrun is already gone there is nobody left to tell. */
    (void)symm_boot_send(boot->sock, &msg, NULL, 0, 0);
    close(boot->sock);
    boot->sock = -1;
}

void symm_boot_symmrun_close(symm_boot_t *boot)
{
    if (boot->sock < 0) return;
    /* No bye: symmrun must count this PE's exit as a failure, since the others may
     * already count on it. */
    close(boot->sock);
    boot->sock = -1;
    boot_state = BOOT_FAILED;
}

void symm_boot_symmrun_abort(symm_boot_t *boot, int code, const char *why)
{
    if (boot->sock < 0) return;
    int saved_errno = errno;
    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_ABORT;
    msg.rank = boot->rank;
    msg.code = code;
    /* No snprintf: this may run in a signal handler or with the heap corrupted. */
    if (why != NULL)
        for (size_t i = 0; i + 1 < sizeof msg.text && why[i] != '\0'; i++)
            msg.text[i] = why[i];
    /* MSG_DONTWAIT: a PE on its way down must not block on a stalled symmrun. */
    (void)symm_boot_send(boot->sock, &msg, NULL, 0, MSG_DONTWAIT);
    errno = saved_errno;
}
