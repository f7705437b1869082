/* boot.c — the PE side of symmrun's rendezvous (protocol.h): hand symmrun this PE's
 * segment memfd over the socket it inherited, and get back every PE's segment and the
 * job's control page. Without symmrun in the environment the job is this one process. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MSG_CMSG_CLOEXEC */
#endif

#include "bootstrap/boot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/protocol.h"
#include "core/log.h"

/* How long a PE waits for symmrun's next message. symmrun answers only once every PE
 * has said hello, so this also bounds how much later than this one the slowest PE may
 * reach symm_init. */
#define SYMM_BOOT_TIMEOUT_MS 60000

/* Room for the fds of the largest message (SEGS); a peer that sends more loses them
 * (MSG_CTRUNC) and the rendezvous fails. */
#define SYMM_BOOT_MAX_FDS SYMM_BOOT_SEGS_MAX

/* A process joins its symmrun job once: symmrun runs one rendezvous per job, and the
 * socket it gave the process is closed by symm_finalize (or by a failed symm_init).
 * Remembered so that a second symm_init says so, instead of finding SYMM_BOOT_FD closed
 * or, worse, reused by an unrelated socket that would then receive a hello. */
static enum { BOOT_FRESH, BOOT_JOINED, BOOT_FAILED } boot_state = BOOT_FRESH;
static int boot_rank = -1; /* for the message of a second symm_init */

static int64_t boot_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sends one message, carrying fd when fd >= 0. Only async-signal-safe calls, because
 * symm_boot_abort may run from a signal handler. MSG_NOSIGNAL: a PE whose symmrun is
 * gone gets an error back, not a SIGPIPE. Returns 0, or -1 with errno set. */
static int boot_send(int sock, const symm_boot_msg_t *msg, int fd, int flags)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof *msg};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } cmsg;

    if (fd >= 0) {
        memset(&cmsg, 0, sizeof cmsg);
        mh.msg_control = cmsg.buf;
        mh.msg_controllen = sizeof cmsg.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    ssize_t n;
    do {
        n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    if (n != (ssize_t)sizeof *msg) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

static void boot_close_fds(const int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

/* Receives one message; fds[0..*nfds_out) get the fds it carried. They are
 * close-on-exec from the start (MSG_CMSG_CLOEXEC) so that a PE's children never hold
 * other PEs' segments. Returns 1 for a message, 0 when symmrun closed the socket, -1
 * with errno set (EBADMSG: wrong size; EMFILE: fds lost, most likely to RLIMIT_NOFILE). */
static int boot_recv(int sock, symm_boot_msg_t *msg, int fds[SYMM_BOOT_MAX_FDS], int *nfds_out,
                     int flags)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(SYMM_BOOT_MAX_FDS * sizeof(int))];
    } cmsg;
    struct iovec iov = {.iov_base = msg, .iov_len = sizeof *msg};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = cmsg.buf,
                        .msg_controllen = sizeof cmsg.buf};
    ssize_t n;
    *nfds_out = 0;
    do {
        n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return (int)n;

    int nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (nfds < SYMM_BOOT_MAX_FDS)
                fds[nfds++] = fd;
            else
                close(fd); /* cannot happen: the buffer holds no more */
        }
    }
    if (n != (ssize_t)sizeof *msg || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        boot_close_fds(fds, nfds);
        errno = (mh.msg_flags & MSG_CTRUNC) ? EMFILE : EBADMSG;
        return -1;
    }
    *nfds_out = nfds;
    return 1;
}

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

static symm_status_t boot_init_single(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    int *seg_fd = malloc(sizeof *seg_fd);
    if (seg_fd == NULL)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE 0: cannot allocate the segment table");
    seg_fd[0] = my_seg_fd;
    *out = (symm_boot_t){.rank = 0,
                         .npes = 1,
                         .sock = -1,
                         .seg_fd = seg_fd,
                         .seg_size = seg_size,
                         .ctrl_fd = -1};
    return SYMM_SUCCESS;
}

/* 1 if a and b are the same open file (the same memfd passed around). */
static int boot_same_file(int a, int b)
{
    struct stat sa, sb;
    if (fstat(a, &sa) < 0 || fstat(b, &sb) < 0) return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The segments of PEs first..first+count-1, unless one is out of range or came
 * before. */
static int boot_segs_fit(int npes, const int *seg_fd, int first, int count)
{
    if (count < 1 || first < 0 || first > npes - count) return 0;
    for (int i = 0; i < count; i++)
        if (seg_fd[first + i] >= 0) return 0;
    return 1;
}

/* Handles one message of the rendezvous, taking ownership of its fds. *have counts the
 * segments received so far. */
static symm_status_t boot_take_msg(int rank, int npes, size_t seg_size,
                                   const symm_boot_msg_t *msg, const int *fds, int nfds,
                                   int *seg_fd, int *have, int *ctrl_fd)
{
    symm_status_t st;

    switch (msg->type) {
    case SYMM_BOOT_SEG:
    case SYMM_BOOT_SEGS: {
        int count = msg->type == SYMM_BOOT_SEG ? 1 : msg->code;
        if (nfds != count || !boot_segs_fit(npes, seg_fd, msg->rank, count) ||
            msg->size != seg_size) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: bad segment message from symmrun (PEs %d+%d of %d, "
                                "%d fds, %llu bytes, mine is %zu bytes)",
                                rank, (int)msg->rank, count, npes, nfds,
                                (unsigned long long)msg->size, seg_size);
            goto out_close_fds;
        }
        for (int i = 0; i < count; i++)
            seg_fd[msg->rank + i] = fds[i];
        *have += count;
        return SYMM_SUCCESS;
    }
    case SYMM_BOOT_CTRL:
        /* A size other than ours means symmrun was built from another version of
         * boot.h: mapping the page with our layout would read garbage. */
        if (*ctrl_fd >= 0 || nfds != 1 || msg->size != symm_ctrl_size((uint32_t)npes)) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: bad control page message from symmrun (%llu bytes, "
                                "expected %zu; are symmrun and the library from the same "
                                "build?)",
                                rank, (unsigned long long)msg->size,
                                symm_ctrl_size((uint32_t)npes));
            goto out_close_fds;
        }
        *ctrl_fd = fds[0];
        return SYMM_SUCCESS;
    case SYMM_BOOT_ERROR: {
        char text[sizeof msg->text + 1];
        memcpy(text, msg->text, sizeof msg->text);
        text[sizeof msg->text] = '\0';
        st = symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: symmrun rendezvous failed: %s", rank,
                            text);
        goto out_close_fds;
    }
    default:
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: unexpected message type %u from symmrun during the "
                            "rendezvous",
                            rank, (unsigned)msg->type);
        goto out_close_fds;
    }

out_close_fds:
    boot_close_fds(fds, nfds);
    return st;
}

symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    symm_status_t st;

    if (out == NULL || my_seg_fd < 0)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "symm_boot_init: bad arguments (segment fd %d, out %p)",
                              my_seg_fd, (void *)out);
    if (getenv(SYMM_BOOT_ENV_FD) == NULL) return boot_init_single(my_seg_fd, seg_size, out);
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

    int *seg_fd = malloc((size_t)npes * sizeof *seg_fd);
    if (seg_fd == NULL) {
        st = symm_error_set(SYMM_ERR_NO_MEMORY,
                            "PE %d: cannot allocate the segment table for %d PEs", rank, npes);
        goto out_close_sock;
    }
    for (int i = 0; i < npes; i++)
        seg_fd[i] = -1;
    int ctrl_fd = -1;
    int have = 0;

    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_HELLO;
    msg.rank = rank;
    msg.size = seg_size;
    if (boot_send(sock, &msg, my_seg_fd, 0) < 0) {
        st = symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: cannot send hello to symmrun: %s", rank,
                            strerror(errno));
        goto out_close_fds;
    }

    /* The deadline restarts with every message: a large job may take a while to hand
     * out all its segments, but symmrun never goes silent for long once it starts. */
    int64_t deadline = boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    while (have < npes || ctrl_fd < 0) {
        int64_t left = deadline - boot_now_ms();
        if (left <= 0) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: no answer from symmrun within %d s (got %d of %d "
                                "segments; did every PE of the job call symm_init?)",
                                rank, SYMM_BOOT_TIMEOUT_MS / 1000, have, npes);
            goto out_close_fds;
        }
        /* Take what is queued before polling: symmrun sends in bursts, and a poll
         * before every message would double the system calls of a large job. */
        int fds[SYMM_BOOT_MAX_FDS], nfds;
        int rr = boot_recv(sock, &msg, fds, &nfds, MSG_DONTWAIT);
        if (rr < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = sock, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)left);
            if (pr < 0 && errno != EINTR) {
                st = symm_error_set(SYMM_ERR_SYSTEM, "PE %d: poll on the symmrun socket: %s",
                                    rank, strerror(errno));
                goto out_close_fds;
            }
            continue; /* the deadline check above reports a timeout */
        }
        if (rr == 0) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: symmrun closed the connection during the "
                                "rendezvous (got %d of %d segments)",
                                rank, have, npes);
            goto out_close_fds;
        }
        if (rr < 0) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: receiving from symmrun: %s%s", rank,
                                strerror(errno),
                                errno == EMFILE ? " (raise the open files limit, ulimit -n)"
                                                : "");
            goto out_close_fds;
        }
        st = boot_take_msg(rank, npes, seg_size, &msg, fds, nfds, seg_fd, &have, &ctrl_fd);
        if (st != SYMM_SUCCESS) goto out_close_fds;
        deadline = boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    }

    /* symmrun sent my own segment back as a new fd. Keep my_seg_fd in its place instead,
     * so that seg_fd[rank] == my_seg_fd with or without symmrun and the caller never
     * holds two fds for one segment; but first check that symmrun paired them right. */
    if (!boot_same_file(seg_fd[rank], my_seg_fd)) {
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: symmrun returned another memfd as this PE's segment", rank);
        goto out_close_fds;
    }
    close(seg_fd[rank]);
    seg_fd[rank] = my_seg_fd;

    boot_state = BOOT_JOINED;
    *out = (symm_boot_t){.rank = rank,
                         .npes = npes,
                         .sock = sock,
                         .seg_fd = seg_fd,
                         .seg_size = seg_size,
                         .ctrl_fd = ctrl_fd};
    return SYMM_SUCCESS;

out_close_fds:
    for (int i = 0; i < npes; i++)
        if (seg_fd[i] >= 0) close(seg_fd[i]);
    if (ctrl_fd >= 0) close(ctrl_fd);
    free(seg_fd);
out_close_sock:
    /* symmrun sees the socket close and goes on watching for this PE's exit status. */
    close(sock);
    return st;
}

void symm_boot_finalize(symm_boot_t *boot)
{
    if (boot == NULL || boot->sock < 0) return;
    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_BYE;
    msg.rank = boot->rank;
    /* Best effort: if symmrun is already gone there is nobody left to tell. */
    (void)boot_send(boot->sock, &msg, -1, 0);
    close(boot->sock);
    boot->sock = -1;
}

void symm_boot_close(symm_boot_t *boot)
{
    if (boot == NULL || boot->sock < 0) return;
    /* No bye: symmrun must count this PE's exit as a failure, since the others may
     * already count on it. */
    close(boot->sock);
    boot->sock = -1;
    boot_state = BOOT_FAILED;
}

void symm_boot_abort(symm_boot_t *boot, int code, const char *why)
{
    if (boot == NULL || boot->sock < 0) return;
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
    (void)boot_send(boot->sock, &msg, -1, MSG_DONTWAIT);
    errno = saved_errno;
}
