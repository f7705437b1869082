/* wire.h — the messages of protocol.h on a SOCK_SEQPACKET socket, with the fds they carry
 * (wire.c, built into tools/symmrun.c as well), and a PE's side of a rendezvous (join.c):
 * symmrun and its PEs (symmrun.c), and both sides of the node rendezvous under MPI
 * (node.c), go through these. */
#ifndef SYMM_BOOT_WIRE_H
#define SYMM_BOOT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "bootstrap/protocol.h"
#include "symm.h"

/* How long a PE waits for the next message of the rendezvous. The side that hands out
 * the segments answers only once every PE has said hello, so this also bounds how much
 * later than this one the slowest PE may reach symm_init. */
#define SYMM_BOOT_TIMEOUT_MS 60000

/* ---- wire.c */
int64_t symm_boot_now_ms(void);

/* Sends one message carrying fds[0..nfds) (nfds <= SYMM_BOOT_SEGS_MAX). Only
 * async-signal-safe calls, because symm_boot_abort may run from a signal handler.
 * MSG_NOSIGNAL: a PE whose peer is gone gets an error back, not a SIGPIPE. Returns 0, or
 * -1 with errno set. */
int symm_boot_send(int sock, const symm_boot_msg_t *msg, const int *fds, int nfds, int flags);

/* Receives one message; fds[0..*nfds_out) get the fds it carried, close-on-exec from the
 * start (MSG_CMSG_CLOEXEC) so that a PE's children never hold other PEs' segments.
 * Returns 1 for a message, 0 when the peer closed the socket, -1 with errno set
 * (EBADMSG: wrong size; EMFILE: fds lost, most likely to RLIMIT_NOFILE). */
int symm_boot_recv(int sock, symm_boot_msg_t *msg, int fds[SYMM_BOOT_SEGS_MAX], int *nfds_out,
                   int flags);

void symm_boot_fds_close(const int *fds, int nfds);
/* Closes every fd of a table of npes (-1: none) but keep_fd (the caller's own segment)
 * and frees it. */
void symm_boot_fd_table_free(int *fds, int npes, int keep_fd);

/* ---- join.c */
/* A new table of npes fds, all -1 (PE rank names itself in the error). */
symm_status_t symm_boot_fd_table_new(int rank, int npes, int **out);

/* This PE's side of a rendezvous on sock, with `from` (symmrun, or the node's first PE:
 * named in messages) handing out the segments: sends the hello carrying my_seg_fd, then
 * receives every PE's segment into seg_fd[0..npes) (all -1 on entry) and the control page
 * into *ctrl_fd (-1 on entry). On success seg_fd[rank] is my_seg_fd itself; on failure
 * the caller closes every fd that seg_fd and *ctrl_fd hold (my_seg_fd is not among them). */
symm_status_t symm_boot_join(int sock, const char *from, int rank, int npes, int my_seg_fd,
                             size_t seg_size, int *seg_fd, int *ctrl_fd);

#endif
