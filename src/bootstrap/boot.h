/* boot.h — how a PE finds the others on its host. Every launcher ends the same way: each
 * PE hands over the memfd of its segment and gets back every PE's segment and the job's
 * control page, passed over UNIX sockets, so nothing is ever left in /dev/shm or /tmp.
 * Under symmrun (symmrun.c) symmrun brokers a socket per PE; under mpirun or srun
 * (mpi.c) the node's first PE does, on an abstract socket whose name goes round by MPI
 * (node.c). Run directly, a program is a 1-PE job (boot.c). */
#ifndef SYMM_BOOT_H
#define SYMM_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "symm.h"

/* The job control page, shared by symmrun and every PE (a memfd made by symmrun, or under
 * MPI by the node's first PE). symmrun, or under MPI a PE that calls symm_abort, writes a
 * failure here before the other PEs are stopped, so that their waits end with a message
 * naming the PE instead of a kill. */
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

/* Which launcher a PE's world came from (SYMM_BOOTSTRAP chooses). */
typedef enum {
    SYMM_BOOT_VIA_NONE,    /* run directly: a 1-PE job */
    SYMM_BOOT_VIA_SYMMRUN, /* symmrun's socket (SYMM_BOOT_FD) */
    SYMM_BOOT_VIA_MPI,     /* mpirun, srun: MPI's ranks, the node's sockets */
    SYMM_BOOT_VIA_EXCHANGE /* symm_init_exchange: the caller's allgather, the node's sockets */
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

/* The rendezvous of the caller's exchange during symm_init_exchange; otherwise that of
 * the launcher SYMM_BOOTSTRAP names; with auto, symmrun's if it started
 * this process (SYMM_BOOT_FD), else MPI's if an MPI launcher did (symm_boot_mpi_launcher)
 * or the program initialized MPI, else a 1-PE job: rank 0, npes 1, seg_fd[0] =
 * my_seg_fd, ctrl_fd = -1. The caller owns the fds (and seg_fd) afterwards. */
symm_status_t symm_boot_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* Tells the launcher this PE finalized cleanly: symmrun gets a bye, and MPI_Finalize
 * runs if symm_init called MPI_Init. Every PE calls it together (after the last barrier
 * of symm_finalize). */
void symm_boot_finalize(symm_boot_t *boot);
/* Leaves the launcher without a clean finalize, for a symm_init that fails after the
 * rendezvous: the exit of this PE must read as a failure, since the others may already
 * count on it. */
void symm_boot_close(symm_boot_t *boot);
/* Asks the launcher to stop the job, naming this PE and the reason: a message to
 * symmrun, or MPI_Abort. Returns where there is nobody to ask. */
void symm_boot_abort(symm_boot_t *boot, int code, const char *why);
/* n bytes of every PE into all ([npes * n], by rank) through the launcher: for PEs that
 * share no memory (under MPI; a 1-PE job copies). SYMM_ERR_UNSUPPORTED under the other
 * launchers, where every PE reads the others' segments. */
symm_status_t symm_boot_allgather(const symm_boot_t *boot, const void *mine, size_t n,
                                  void *all);
/* "symmrun", "mpi" or "none". */
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

/* ---- MPI (mpi.c) */
/* The environment variable by which an MPI launcher shows it started this process
 * (OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK, ...), or NULL. */
const char *symm_boot_mpi_launcher(void);
/* 1 if the program has initialized MPI itself (0 when symm is built without MPI). */
int symm_boot_mpi_initialized(void);
/* Initializes MPI unless the program did (MPI_THREAD_MULTIPLE asked, whatever is given
 * taken) and runs the rendezvous of this PE's group: the PEs of its host
 * (MPI_Comm_split_type SHARED), cut into SYMM_HOSTS blocks of consecutive node ranks.
 * rank = MPI_COMM_WORLD rank; seg_fd holds -1 for the PEs of other groups. Fails alike
 * on every PE. Without MPI in the build, SYMM_ERR_UNSUPPORTED saying so. */
symm_status_t symm_boot_mpi_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* MPI_Allgather of n bytes from every PE of the job into all ([npes * n], by rank): for
 * what PEs of different groups cannot read from each other's memory. */
symm_status_t symm_boot_mpi_allgather(const void *mine, size_t n, void *all);
/* MPI_Finalize if symm_boot_mpi_init called MPI_Init; the program's MPI stays up. */
void symm_boot_mpi_finalize(void);
/* Forgets symm's MPI state without any call that other PEs must match. */
void symm_boot_mpi_close(void);
/* MPI_Abort on MPI_COMM_WORLD, where MPI is up. */
void symm_boot_mpi_abort(int code);

/* ---- a caller-supplied exchange (exchange.c) */
/* The exchange of one symm_init_exchange (NULL after it): while one is set, symm_boot_init
 * takes its rendezvous from it, whatever SYMM_BOOTSTRAP says. */
void symm_boot_exchange_use(const symm_exchange_t *ex);
int symm_boot_exchange_pending(void);
/* Checks that every PE is on this host (else SYMM_ERR_UNSUPPORTED naming the hosts, on
 * every PE alike) and runs the node rendezvous, its socket's name and the outcome carried
 * by the caller's allgather; rank and npes are the caller's. No state is kept: nothing
 * to finalize. */
symm_status_t symm_boot_exchange_init(int my_seg_fd, size_t seg_size, symm_boot_t *out);

/* ---- the node rendezvous without symmrun (node.c) */
/* Name of an abstract UNIX socket (without its leading NUL): nothing in the file
 * system, gone with its last fd, even when its process is killed. */
#define SYMM_BOOT_NODE_NAME_LEN 64
typedef struct symm_boot_node {
    int listen_fd;
    char name[SYMM_BOOT_NODE_NAME_LEN];
} symm_boot_node_t;
/* The node's first PE: listens on a new abstract socket with a random name. */
symm_status_t symm_boot_node_listen(symm_boot_node_t *out);
/* The node's first PE (rank 0 of npes): accepts the other PEs' hellos on node, hands
 * every PE all segments and a new control page for ctrl_npes PEs (the whole job), and
 * closes the listening socket. */
symm_status_t symm_boot_node_serve(symm_boot_node_t *node, int npes, int ctrl_npes,
                                   int my_seg_fd, size_t seg_size, symm_boot_t *out);
/* Every other PE: connects to name and joins as rank. */
symm_status_t symm_boot_node_join(const char *name, int rank, int npes, int my_seg_fd,
                                  size_t seg_size, symm_boot_t *out);

#endif
