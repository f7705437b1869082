/* boot.h — how a PE finds the others on its host. Every launcher ends the same way: each
 * PE hands over the memfd of its segment and gets back every PE's segment and the job's
 * control page, passed over UNIX sockets, so nothing is ever left in /dev/shm or /tmp.
 * Under symmrun (symmrun.c) symmrun brokers a socket per PE. Run directly, a program is
 * a 1-PE job (boot.c). */
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

/* Which launcher a PE's world came from. */
typedef enum {
    SYMM_BOOT_VIA_NONE,   /* run directly: a 1-PE job */
    SYMM_BOOT_VIA_SYMMRUN /* symmrun's socket (SYMM_BOOT_FD) */
} symm_boot_via_t;

/* What the rendezvous gives a PE. */
typedef struct symm_boot {
    symm_boot_via_t via;
    int rank; /* in the job; under MPI, the rank in MPI_COMM_WORLD */
    int npes;
    int sock;        /* connection to symmrun, -1 without it */
    int *seg_fd;     /* [npes] memfd of every PE's segment (mine included) */
    size_t seg_size; /* the same on every PE (checked by whoever hands them out) */
    int ctrl_fd;     /* memfd of the control page, -1 in a 1-PE job */
} symm_boot_t;

/* symmrun's rendezvous if symmrun started this process (SYMM_BOOT_FD), else a 1-PE job:
 * rank 0, npes 1, seg_fd[0] = my_seg_fd, ctrl_fd = -1. The caller owns the fds (and
 * seg_fd) afterwards. */
symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* Tells the launcher this PE finalized cleanly: symmrun gets a bye. */
void symm_boot_finalize(symm_boot_t *boot);
/* Leaves the launcher without a clean finalize, for a symm_init that fails after the
 * rendezvous: the exit of this PE must read as a failure, since the others may already
 * count on it. */
void symm_boot_close(symm_boot_t *boot);
/* Asks the launcher to stop the job, naming this PE and the reason. Returns where there
 * is nobody to ask. */
void symm_boot_abort(symm_boot_t *boot, int code, const char *why);
/* "symmrun" or "none". */
const char *symm_boot_via_name(symm_boot_via_t via);

/* ---- symmrun (symmrun.c) */
/* Sends my_seg_fd and seg_size to symmrun over the socket named by SYMM_BOOT_FD and
 * receives every PE's segment and the control page. A process joins once: a later call
 * is SYMM_ERR_UNSUPPORTED. */
symm_status_t symm_boot_symmrun_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* Says bye and closes the socket. symmrun counts the exit of a PE that joined the
 * rendezvous and never did this as a failure, whatever its status. */
void symm_boot_symmrun_finalize(symm_boot_t *boot);
/* Closes the socket without the bye. */
void symm_boot_symmrun_close(symm_boot_t *boot);
void symm_boot_symmrun_abort(symm_boot_t *boot, int code, const char *why);

#endif
