/* join.c — a PE's side of a rendezvous (wire.h), the same under symmrun (symmrun.c) and
 * under MPI (node.c): hello with this PE's segment, then every PE's segment and the
 * control page back. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/wire.h"
#include "core/log.h"

symm_status_t symm_boot_fd_table_new(int rank, int npes, int **out)
{
    int *fds = malloc((size_t)npes * sizeof *fds);
    if (fds == NULL)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: cannot allocate a table of %d fds",
                              rank, npes);
    for (int i = 0; i < npes; i++)
        fds[i] = -1;
    *out = fds;
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
static symm_status_t boot_take_msg(const char *from, int rank, int npes, size_t seg_size,
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
                                "PE %d: bad segment message from %s (PEs %d+%d of %d, "
                                "%d fds, %llu bytes, mine is %zu bytes)",
                                rank, from, (int)msg->rank, count, npes, nfds,
                                (unsigned long long)msg->size, seg_size);
            goto out_close_fds;
        }
        for (int i = 0; i < count; i++)
            seg_fd[msg->rank + i] = fds[i];
        *have += count;
        return SYMM_SUCCESS;
    }
    case SYMM_BOOT_CTRL:
        /* A size other than ours means the sender was built from another version of
         * boot.h: mapping the page with our layout would read garbage. */
        if (*ctrl_fd >= 0 || nfds != 1 || msg->size != symm_ctrl_size((uint32_t)npes)) {
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: bad control page message from %s (%llu bytes, "
                                "expected %zu; are %s and this library from the same "
                                "build?)",
                                rank, from, (unsigned long long)msg->size,
                                symm_ctrl_size((uint32_t)npes), from);
            goto out_close_fds;
        }
        *ctrl_fd = fds[0];
        return SYMM_SUCCESS;
    case SYMM_BOOT_ERROR: {
        char text[sizeof msg->text + 1];
        memcpy(text, msg->text, sizeof msg->text);
        text[sizeof msg->text] = '\0';
        st = symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: the rendezvous failed (%s: %s)", rank,
                            from, text);
        goto out_close_fds;
    }
    default:
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: unexpected message type %u from %s during the "
                            "rendezvous",
                            rank, (unsigned)msg->type, from);
        goto out_close_fds;
    }

out_close_fds:
    symm_boot_fds_close(fds, nfds);
    return st;
}

symm_status_t symm_boot_join(int sock, const char *from, int rank, int npes, int my_seg_fd,
                             size_t seg_size, int *seg_fd, int *ctrl_fd)
{
    symm_status_t st;
    int have = 0;
    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_HELLO;
    msg.rank = rank;
    msg.size = seg_size;
    if (symm_boot_send(sock, &msg, &my_seg_fd, 1, 0) < 0)
        return symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: cannot send hello to %s: %s", rank,
                              from, strerror(errno));

    /* The deadline restarts with every message: a large job may take a while to hand
     * out all its segments, but the sender never goes silent for long once it starts. */
    int64_t deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    while (have < npes || *ctrl_fd < 0) {
        int64_t left = deadline - symm_boot_now_ms();
        if (left <= 0)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "PE %d: no answer from %s within %d s (got %d of %d "
                                  "segments; did every PE of the job call symm_init?)",
                                  rank, from, SYMM_BOOT_TIMEOUT_MS / 1000, have, npes);
        /* Take what is queued before polling: the sender sends in bursts, and a poll
         * before every message would double the system calls of a large job. */
        int fds[SYMM_BOOT_SEGS_MAX], nfds;
        int rr = symm_boot_recv(sock, &msg, fds, &nfds, MSG_DONTWAIT);
        if (rr < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = sock, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)left);
            if (pr < 0 && errno != EINTR)
                return symm_error_set(SYMM_ERR_SYSTEM, "PE %d: poll on the socket to %s: %s",
                                      rank, from, strerror(errno));
            continue; /* the deadline check above reports a timeout */
        }
        if (rr == 0)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "PE %d: %s closed the connection during the rendezvous "
                                  "(got %d of %d segments)",
                                  rank, from, have, npes);
        if (rr < 0)
            return symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: receiving from %s: %s%s", rank,
                                  from, strerror(errno),
                                  errno == EMFILE ? " (raise the open files limit, ulimit -n)"
                                                  : "");
        st = boot_take_msg(from, rank, npes, seg_size, &msg, fds, nfds, seg_fd, &have, ctrl_fd);
        if (st != SYMM_SUCCESS) return st;
        deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    }

    /* My own segment came back as a new fd. Keep my_seg_fd in its place instead, so that
     * seg_fd[rank] == my_seg_fd however the job was started and the caller never holds
     * two fds for one segment; but first check that the sender paired them right. */
    if (!boot_same_file(seg_fd[rank], my_seg_fd))
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "PE %d: %s returned another memfd as this PE's segment", rank,
                              from);
    close(seg_fd[rank]);
    seg_fd[rank] = my_seg_fd;
    return SYMM_SUCCESS;
}
