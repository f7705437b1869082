/* wire.c — protocol.h's messages over a SOCK_SEQPACKET socket (wire.h): sending and
 * receiving them with their fds. Plain system calls only, so that tools/symmrun.c
 * builds this file in too. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* MSG_CMSG_CLOEXEC */
#endif

#include "bootstrap/wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

int64_t symm_boot_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int symm_boot_send(int sock, const symm_boot_msg_t *msg, const int *fds, int nfds, int flags)
{
    struct iovec iov = {.iov_base = (void *)msg, .iov_len = sizeof *msg};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(SYMM_BOOT_SEGS_MAX * sizeof(int))];
    } cmsg;

    if (nfds < 0 || nfds > SYMM_BOOT_SEGS_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (nfds > 0) {
        memset(&cmsg, 0, sizeof cmsg);
        mh.msg_control = cmsg.buf;
        mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
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

void symm_boot_fds_close(const int *fds, int nfds)
{
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}

void symm_boot_fd_table_free(int *fds, int npes, int keep_fd)
{
    if (fds == NULL) return;
    for (int i = 0; i < npes; i++)
        if (fds[i] >= 0 && fds[i] != keep_fd) close(fds[i]);
    free(fds);
}

int symm_boot_recv(int sock, symm_boot_msg_t *msg, int fds[SYMM_BOOT_SEGS_MAX], int *nfds_out,
                   int flags)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(SYMM_BOOT_SEGS_MAX * sizeof(int))];
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
            if (nfds < SYMM_BOOT_SEGS_MAX)
                fds[nfds++] = fd;
            else
                close(fd); /* cannot happen: the buffer holds no more */
        }
    }
    if (n != (ssize_t)sizeof *msg || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
        symm_boot_fds_close(fds, nfds);
        errno = (mh.msg_flags & MSG_CTRUNC) ? EMFILE : EBADMSG;
        return -1;
    }
    *nfds_out = nfds;
    return 1;
}
