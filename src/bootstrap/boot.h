/* boot.h — how a PE finds the others on one host: the client side of symmrun's
 * rendezvous. symmrun brokers a UNIX socket per PE; each PE hands it the memfd of its
 * segment and gets back every PE's segment and the job's control page, so nothing is
 * ever left in /dev/shm or /tmp. */
#ifndef SYMM_BOOT_H
#define SYMM_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"

/* The job control page, shared by symmrun and every PE (memfd made by symmrun). symmrun
 * writes a failure here before it stops the other PEs, so that their waits end with a
 * message naming the PE instead of a kill. */
#define SYMM_CTRL_MAGIC   0x73796d6d63746c31ull /* "symmctl1" */
#define SYMM_CTRL_MSG_LEN 256

typedef struct symm_ctrl {
    uint64_t magic;
    uint32_t npes;
    uint32_t ctrl_size;              /* bytes of the whole page */
    volatile uint32_t abort;         /* set by symmrun (or symm_abort) when the job fails */
    volatile int32_t failed_pe;      /* first PE that failed, -1 if none */
    volatile int32_t exit_code;      /* its exit status, or -1 */
    volatile int32_t signal;         /* its signal, or 0 */
    char message[SYMM_CTRL_MSG_LEN]; /* "PE 3 killed by signal 6 (Aborted)" */
    /* per PE: 0 running, 1 finalized/exited cleanly, 2 failed */
    volatile uint32_t pe_state[];
} symm_ctrl_t;

static inline size_t symm_ctrl_size(uint32_t npes)
{
    size_t s = sizeof(symm_ctrl_t) + (size_t)npes * sizeof(uint32_t);
    return (s + 4095) & ~(size_t)4095;
}

/* What the rendezvous gives a PE. */
typedef struct symm_boot {
    int rank;
    int npes;
    int sock;        /* connection to symmrun, -1 when run without it */
    int *seg_fd;     /* [npes] memfd of every PE's segment (mine included) */
    size_t seg_size; /* the same on every PE (checked by symmrun) */
    int ctrl_fd;     /* memfd of the control page, -1 without symmrun */
} symm_boot_t;

/* Without symmrun in the environment (SYMM_BOOT_FD unset) this is a 1-PE job: rank 0,
 * npes 1, seg_fd[0] = my_seg_fd, ctrl_fd = -1. Otherwise it sends my_seg_fd and
 * seg_size to symmrun and receives every PE's segment and the control page. The
 * caller owns the fds (and seg_fd) afterwards. */
symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* Tells symmrun this PE finalized cleanly and closes the socket. symmrun counts the exit
 * of a PE that joined the rendezvous and never did this as a failure, whatever its
 * status. A process joins once: a later symm_boot_init under symmrun is
 * SYMM_ERR_UNSUPPORTED. */
void symm_boot_finalize(symm_boot_t *boot);
/* Closes the socket without the bye, for a symm_init that fails after the rendezvous. */
void symm_boot_close(symm_boot_t *boot);
/* Asks symmrun to stop the job, naming this PE and the reason. */
void symm_boot_abort(symm_boot_t *boot, int code, const char *why);

#endif
