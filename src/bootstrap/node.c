/* node.c — the rendezvous of one host's PEs without symmrun (under MPI): the node's first
 * PE listens on an abstract UNIX socket, the others connect and say hello with their
 * segment memfd as they would to symmrun (protocol.h), and the first PE hands every PE
 * all segments and a control page it made. An abstract socket has no file to remove,
 * and a memfd lives only as long as its fds and mappings, so a job leaves nothing
 * behind in /dev/shm or /tmp, even when a PE is killed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, accept4, struct ucred */
#endif

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/wire.h"
#include "core/log.h"

/* Names the node's first PE in the others' messages. */
#define NODE_FROM "PE 0"

/* The abstract address of name: sun_path starts with a NUL, the length ends the name.
 * SYMM_BOOT_NODE_NAME_LEN is well below sun_path's 108 bytes. */
static socklen_t node_addr(const char *name, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    size_t len = strnlen(name, SYMM_BOOT_NODE_NAME_LEN - 1);
    memcpy(a->sun_path + 1, name, len);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

symm_status_t symm_boot_node_listen(symm_boot_node_t *out)
{
    /* 128 random bits: the name cannot be guessed, although anyone on the host may list
     * it (/proc/net/unix); the peer's uid is checked at accept for the rest. */
    uint8_t r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom(r + got, sizeof r - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return symm_error_set(SYMM_ERR_SYSTEM, "PE 0: getrandom for the socket name: %s",
                                  strerror(errno));
        got += (size_t)n;
    }
    int len = snprintf(out->name, sizeof out->name, "symm-boot-%d-", (int)getpid());
    for (size_t i = 0; i < sizeof r; i++)
        len += snprintf(out->name + len, sizeof out->name - (size_t)len, "%02x", r[i]);

    out->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (out->listen_fd < 0)
        return symm_error_set(SYMM_ERR_SYSTEM, "PE 0: socket for the node rendezvous: %s",
                              strerror(errno));
    struct sockaddr_un a;
    socklen_t alen = node_addr(out->name, &a);
    if (bind(out->listen_fd, (struct sockaddr *)&a, alen) < 0 ||
        listen(out->listen_fd, SOMAXCONN) < 0) {
        int e = errno;
        close(out->listen_fd);
        out->listen_fd = -1;
        return symm_error_set(SYMM_ERR_SYSTEM, "PE 0: listening on abstract socket @%s: %s",
                              out->name, strerror(e));
    }
    return SYMM_SUCCESS;
}

/* A sealed memfd holding a fresh control page for npes PEs. Sealed against resizing: a
 * PE that truncated it would make every other PE fault (SIGBUS) on its next look. */
static symm_status_t node_ctrl_create(int npes, int *fd_out)
{
    size_t size = symm_ctrl_size((uint32_t)npes);
    int fd = memfd_create("symm-ctrl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return symm_error_set(SYMM_ERR_SYSTEM, "PE 0: memfd_create for the control page: %s",
                              strerror(errno));
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
        (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        int e = errno;
        close(fd);
        return symm_error_set(SYMM_ERR_SYSTEM, "PE 0: making the control page (%zu bytes): %s",
                              size, strerror(e));
    }
    /* A fresh memfd reads as zeros: abort = 0 and every pe_state is 0 (running). */
    symm_ctrl_t *c = p;
    c->magic = SYMM_CTRL_MAGIC;
    c->npes = (uint32_t)npes;
    c->ctrl_size = (uint32_t)size;
    c->failed_pe = -1;
    c->exit_code = -1;
    munmap(p, size);
    *fd_out = fd;
    return SYMM_SUCCESS;
}

/* Waits until fd is ready for events, at most until deadline. 1 ready, 0 timed out, -1
 * with errno. */
static int node_poll(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - symm_boot_now_ms();
        if (left <= 0) return 0;
        struct pollfd pfd = {.fd = fd, .events = events};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR) continue;
        return n < 0 ? -1 : n > 0;
    }
}

/* Accepts one PE and takes its hello: its rank and segment into conn[] and seg_fd[], and
 * *joined counts it. A connection refused or lost before its hello counts nothing. */
static symm_status_t node_accept_one(int listen_fd, int npes, size_t seg_size, int *conn,
                                     int *seg_fd, int *joined, int64_t deadline)
{
    int pr = node_poll(listen_fd, POLLIN, deadline);
    if (pr <= 0)
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "PE 0: %s: %d of the other %d PEs connected within %d s (did "
                              "every PE of the job call symm_init?)",
                              pr < 0 ? strerror(errno) : "timed out", *joined, npes - 1,
                              SYMM_BOOT_TIMEOUT_MS / 1000);
    int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return errno == EINTR || errno == EAGAIN || errno == ECONNABORTED
                   ? SYMM_SUCCESS /* the caller tries again */
                   : symm_error_set(SYMM_ERR_SYSTEM, "PE 0: accept on the node socket: %s",
                                    strerror(errno));
    /* Only processes of this user may join: the socket's name is visible to all. */
    struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
    socklen_t clen = sizeof cred;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 || cred.uid != getuid()) {
        SYMM_WARN("PE 0: refused a connection to the node rendezvous from pid %d, uid %d",
                  (int)cred.pid, (int)cred.uid);
        close(c);
        return SYMM_SUCCESS;
    }
    symm_boot_msg_t msg;
    int fds[SYMM_BOOT_SEGS_MAX], nfds = 0;
    int rr = node_poll(c, POLLIN, deadline);
    if (rr > 0) rr = symm_boot_recv(c, &msg, fds, &nfds, MSG_DONTWAIT);
    symm_status_t st = SYMM_SUCCESS;
    if (rr <= 0)
        st = symm_error_set(SYMM_ERR_BOOTSTRAP, "PE 0: no hello from pid %d (%s)",
                            (int)cred.pid, rr < 0 ? strerror(errno) : "closed or timed out");
    else if (msg.type != SYMM_BOOT_HELLO || nfds != 1 || msg.rank < 1 || msg.rank >= npes ||
             conn[msg.rank] >= 0)
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE 0: bad hello from pid %d (type %u, rank %d of %d, %d fds%s)",
                            (int)cred.pid, (unsigned)msg.type, (int)msg.rank, npes, nfds,
                            msg.rank >= 1 && msg.rank < npes && conn[msg.rank] >= 0
                                ? ", that rank joined already"
                                : "");
    else if (msg.size != seg_size)
        st =
            symm_error_set(SYMM_ERR_BOOTSTRAP,
                           "segment sizes differ: PE 0 has %zu bytes, PE %d has %llu (every PE "
                           "must use the same SYMM_HEAP_SIZE and SYMM_TEAM_HEAP_SIZE)",
                           seg_size, (int)msg.rank, (unsigned long long)msg.size);
    if (st != SYMM_SUCCESS) {
        symm_boot_fds_close(fds, nfds);
        close(c);
        return st;
    }
    conn[msg.rank] = c;
    seg_fd[msg.rank] = fds[0];
    ++*joined;
    return SYMM_SUCCESS;
}

/* Sends one message to a PE that is reading its segments, however long its socket stays
 * full. */
static symm_status_t node_send(int c, int r, const symm_boot_msg_t *msg, const int *fds,
                               int nfds, int64_t deadline)
{
    for (;;) {
        if (symm_boot_send(c, msg, fds, nfds, MSG_DONTWAIT) == 0) return SYMM_SUCCESS;
        int e = errno, pr = 1;
        if (e == EAGAIN || e == EWOULDBLOCK) {
            pr = node_poll(c, POLLOUT, deadline);
        } else if (e == ETOOMANYREFS) {
            /* Unprivileged users may have only RLIMIT_NOFILE fds in flight: the PEs
             * take some as they read. */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            pr = symm_boot_now_ms() < deadline;
        } else {
            return symm_error_set(SYMM_ERR_BOOTSTRAP, "PE 0: sending PE %d its segments: %s", r,
                                  strerror(e));
        }
        if (pr <= 0)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "PE 0: PE %d took no segments for %d s (%s)", r,
                                  SYMM_BOOT_TIMEOUT_MS / 1000, pr < 0 ? strerror(errno) : "");
    }
}

/* Every segment, then the control page, to PE r. */
static symm_status_t node_hand_out(int c, int r, int npes, int ctrl_npes, size_t seg_size,
                                   const int *seg_fd, int ctrl_fd)
{
    symm_boot_msg_t msg;
    int64_t deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    for (int first = 0; first < npes; first += SYMM_BOOT_SEGS_MAX) {
        int n = npes - first < SYMM_BOOT_SEGS_MAX ? npes - first : SYMM_BOOT_SEGS_MAX;
        memset(&msg, 0, sizeof msg);
        msg.type = SYMM_BOOT_SEGS;
        msg.rank = first;
        msg.code = n;
        msg.size = seg_size;
        CHECK(node_send(c, r, &msg, seg_fd + first, n, deadline));
        deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    }
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_CTRL;
    msg.rank = -1;
    msg.size = symm_ctrl_size((uint32_t)ctrl_npes);
    return node_send(c, r, &msg, &ctrl_fd, 1, deadline);
}

/* What a node PE holds once the rendezvous is done; no connection stays open. */
static symm_boot_t node_boot(int rank, int npes, int *seg_fd, size_t seg_size, int ctrl_fd)
{
    return (symm_boot_t){.via = SYMM_BOOT_VIA_MPI,
                         .rank = rank,
                         .npes = npes,
                         .sock = -1,
                         .seg_fd = seg_fd,
                         .seg_size = seg_size,
                         .ctrl_fd = ctrl_fd};
}

symm_status_t symm_boot_node_serve(symm_boot_node_t *node, int npes, int ctrl_npes,
                                   int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    symm_status_t st;
    int *seg_fd = NULL, *conn = NULL, ctrl_fd = -1;
    CHECK_GOTO(symm_boot_fd_table_new(0, npes, &seg_fd), st, out_close_listen);
    CHECK_GOTO(symm_boot_fd_table_new(0, npes, &conn), st, out_close_fds);
    seg_fd[0] = my_seg_fd;
    CHECK_GOTO(node_ctrl_create(ctrl_npes, &ctrl_fd), st, out_close_fds);

    /* The deadline restarts with every PE that joins, as a PE's wait for its segments
     * restarts with every message (symm_boot_join). */
    int64_t deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    for (int joined = 0; joined < npes - 1;) {
        int before = joined;
        CHECK_GOTO(
            node_accept_one(node->listen_fd, npes, seg_size, conn, seg_fd, &joined, deadline),
            st, out_close_fds);
        if (joined > before) deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    }
    close(node->listen_fd);
    node->listen_fd = -1;
    for (int r = 1; r < npes; r++)
        CHECK_GOTO(node_hand_out(conn[r], r, npes, ctrl_npes, seg_size, seg_fd, ctrl_fd), st,
                   out_close_fds);
    /* Closing is safe at once: what was sent stays queued for the PE, fds included. */
    symm_boot_fd_table_free(conn, npes, -1);
    *out = node_boot(0, npes, seg_fd, seg_size, ctrl_fd);
    return SYMM_SUCCESS;

out_close_fds:
    /* The PEs that joined hear why, rather than just that PE 0 went away. */
    if (conn != NULL) {
        symm_boot_msg_t msg;
        memset(&msg, 0, sizeof msg);
        msg.type = SYMM_BOOT_ERROR;
        msg.rank = -1;
        snprintf(msg.text, sizeof msg.text, "%s", symm_last_error());
        for (int r = 1; r < npes; r++)
            if (conn[r] >= 0) (void)symm_boot_send(conn[r], &msg, NULL, 0, MSG_DONTWAIT);
    }
    symm_boot_fd_table_free(conn, npes, -1);
    symm_boot_fd_table_free(seg_fd, npes, my_seg_fd);
    if (ctrl_fd >= 0) close(ctrl_fd);
out_close_listen:
    if (node->listen_fd >= 0) close(node->listen_fd);
    node->listen_fd = -1;
    return st;
}

symm_status_t symm_boot_node_join(const char *name, int rank, int npes, int my_seg_fd,
                                  size_t seg_size, symm_boot_t *out)
{
    symm_status_t st;
    int *seg_fd, ctrl_fd = -1;
    CHECK(symm_boot_fd_table_new(rank, npes, &seg_fd));
    int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        st = symm_error_set(SYMM_ERR_SYSTEM, "PE %d: socket for the node rendezvous: %s", rank,
                            strerror(errno));
        goto out_free;
    }
    struct sockaddr_un a;
    socklen_t alen = node_addr(name, &a);
    int rc;
    do {
        rc = connect(sock, (struct sockaddr *)&a, alen);
    } while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        /* Abstract sockets belong to a network namespace: PEs in different ones (separate
         * containers) cannot meet this way. */
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: cannot connect to PE 0's abstract socket @%s: %s (are all "
                            "PEs in one network namespace?)",
                            rank, name, strerror(errno));
        goto out_close;
    }
    CHECK_GOTO(
        symm_boot_join(sock, NODE_FROM, rank, npes, my_seg_fd, seg_size, seg_fd, &ctrl_fd), st,
        out_close);
    close(sock);
    *out = node_boot(rank, npes, seg_fd, seg_size, ctrl_fd);
    return SYMM_SUCCESS;

out_close:
    close(sock);
    if (ctrl_fd >= 0) close(ctrl_fd);
out_free:
    symm_boot_fd_table_free(seg_fd, npes, my_seg_fd);
    return st;
}
