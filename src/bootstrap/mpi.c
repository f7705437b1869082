/* mpi.c — symm under an MPI launcher (mpirun, mpiexec, srun): MPI gives the ranks and
 * carries the name of each group's rendezvous socket (node.c); the segments themselves go
 * over that socket as under symmrun. A group is the PEs of one host, or a block of them
 * under SYMM_HOSTS: its PEs map each other's segments, and PEs of other groups share no
 * memory with them. Built without MPI, an MPI launch is refused with the reason rather
 * than run as 1-PE jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/boot.h"
#include "core/config.h"
#include "core/log.h"

#ifdef SYMM_HAVE_MPI
#include <mpi.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/wire.h"
#endif

/* Variables by which launchers tell a process it is one rank of a job: Open MPI's mpirun,
 * PMIx servers (Open MPI 5's prterun, srun --mpi=pmix), PMI-1/2 (MPICH's and Intel MPI's
 * Hydra, srun --mpi=pmi2), MVAPICH2's mpirun_rsh, and srun itself with more than one
 * task. SLURM_PROCID alone is no sign: a batch script has it too. */
const char *symm_boot_mpi_launcher(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                                       "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]) != NULL) return vars[i];
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS");
    if (tasks != NULL && atoi(tasks) > 1 && getenv("SLURM_PROCID") != NULL)
        return "SLURM_STEP_NUM_TASKS";
    return NULL;
}

#ifndef SYMM_HAVE_MPI

int symm_boot_mpi_initialized(void)
{
    return 0;
}

symm_status_t symm_boot_mpi_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    (void)my_seg_fd, (void)seg_size, (void)out;
    const char *var = symm_boot_mpi_launcher();
    char why[128] = "SYMM_BOOTSTRAP=mpi";
    if (var != NULL)
        snprintf(why, sizeof why, "an MPI launcher started this process (%s)", var);
    return symm_error_set(SYMM_ERR_UNSUPPORTED,
                          "%s, but this symm was built without MPI: rebuild it where MPI is "
                          "found (cmake -DSYMM_MPI=on), start the job with symmrun, or set "
                          "SYMM_BOOTSTRAP=none to run each process as its own 1-PE job",
                          why);
}

symm_status_t symm_boot_mpi_allgather(const void *mine, size_t n, void *all)
{
    (void)mine, (void)n, (void)all;
    return symm_error_set(SYMM_ERR_UNSUPPORTED, "MPI exchange in a symm built without MPI");
}

void symm_boot_mpi_finalize(void) {}

void symm_boot_mpi_close(void) {}

void symm_boot_mpi_abort(int code)
{
    (void)code;
}

#else

/* symm's MPI state of this process. */
static struct {
    int called_init; /* symm_init called MPI_Init: symm_finalize calls MPI_Finalize */
    int ended_mpi;   /* symm called MPI_Finalize: MPI cannot start again */
    int abandoned;   /* a symm_init failed after the rendezvous: no PE may try again */
    int open;        /* from the rendezvous to symm_finalize: an exit must end the job */
    int rank;        /* in MPI_COMM_WORLD, while open */
    MPI_Comm world;  /* symm's duplicate of MPI_COMM_WORLD, apart from the program's */
    MPI_Comm node;   /* its PEs of my group: this host's, or a block of them (SYMM_HOSTS) */
} boot_mpi = {0, 0, 0, 0, -1, MPI_COMM_NULL, MPI_COMM_NULL};

int symm_boot_mpi_initialized(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

/* An MPI call's failure, by the PE (rank -1: before it is known). */
static symm_status_t mpi_fail(int rank, int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    const char *why = len ? text : "(unknown MPI error)";
    if (rank < 0) return symm_error_set(SYMM_ERR_BOOTSTRAP, "%s failed: %s", what, why);
    return symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: %s failed: %s", rank, what, why);
}

#define MPI_CHECK(rank, call)                                                                  \
    do {                                                                                       \
        int mpi_rc_ = (call);                                                                  \
        if (mpi_rc_ != MPI_SUCCESS) return mpi_fail((rank), mpi_rc_, #call);                   \
    } while (0)

/* The duplicate of MPI_COMM_WORLD, waiting at most SYMM_BOOT_TIMEOUT_MS: it is the first
 * call that needs every rank, and a rank that never calls symm_init must not leave the
 * others blocked for ever. The request cannot be cancelled; a PE that gives up fails
 * symm_init, and its exit ends the job under mpirun. */
static symm_status_t mpi_world_dup(int rank, MPI_Comm *out)
{
    MPI_Request req;
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_CHECK(rank, MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req));
    int64_t deadline = symm_boot_now_ms() + SYMM_BOOT_TIMEOUT_MS;
    for (long polls = 0;; polls++) {
        int done = 0;
        MPI_CHECK(rank, MPI_Test(&req, &done, MPI_STATUS_IGNORE));
        if (done) {
            *out = dup;
            return SYMM_SUCCESS;
        }
        if (symm_boot_now_ms() > deadline)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "PE %d: not every rank of MPI_COMM_WORLD called symm_init "
                                  "within %d s (every rank of the job must)",
                                  rank, SYMM_BOOT_TIMEOUT_MS / 1000);
        /* After a short spin, poll every millisecond: with more ranks than cores, the
         * late ones need the CPU to get here. */
        if (polls > 1000) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
    }
}

/* What goes round from the node's first PE: the socket's name, or why there is none. */
typedef struct {
    char name[SYMM_BOOT_NODE_NAME_LEN];
    char error[256];
} mpi_node_hello_t;

/* The node rendezvous between the PEs of my group (rank and npes within it); the control
 * page is sized for world_npes, the PEs of the job. */
static symm_status_t mpi_node_rendezvous(int rank, int npes, int world_npes, int my_seg_fd,
                                         size_t seg_size, symm_boot_t *out)
{
    mpi_node_hello_t h;
    symm_boot_node_t node = {.listen_fd = -1};
    memset(&h, 0, sizeof h);
    if (rank == 0) {
        if (symm_boot_node_listen(&node) == SYMM_SUCCESS)
            memcpy(h.name, node.name, sizeof h.name);
        else
            snprintf(h.error, sizeof h.error, "%s", symm_last_error());
    }
    int rc = MPI_Bcast(&h, (int)sizeof h, MPI_BYTE, 0, boot_mpi.node);
    if (rc != MPI_SUCCESS) {
        if (node.listen_fd >= 0) close(node.listen_fd);
        return mpi_fail(rank, rc, "MPI_Bcast of the node's socket name");
    }
    if (rank == 0)
        return node.listen_fd < 0
                   ? symm_last_status()
                   : symm_boot_node_serve(&node, npes, world_npes, my_seg_fd, seg_size, out);
    if (h.error[0] != '\0')
        return symm_error_set(SYMM_ERR_BOOTSTRAP, "PE %d: the rendezvous failed (PE 0: %s)",
                              rank, h.error);
    return symm_boot_node_join(h.name, rank, npes, my_seg_fd, seg_size, out);
}

/* Cuts the host's PEs into SYMM_HOSTS groups of consecutive node ranks (as even as they
 * divide), each of which then meets as if it were a host of its own. */
static symm_status_t mpi_group_split(int rank)
{
    int n = 0, r = 0;
    MPI_Comm group;
    if (symm_config.hosts <= 1) return SYMM_SUCCESS;
    MPI_Comm_size(boot_mpi.node, &n);
    MPI_Comm_rank(boot_mpi.node, &r);
    int color = (int)((int64_t)r * symm_config.hosts / n);
    MPI_CHECK(rank, MPI_Comm_split(boot_mpi.node, color, r, &group));
    MPI_Comm_free(&boot_mpi.node);
    boot_mpi.node = group;
    return SYMM_SUCCESS;
}

/* The group rendezvous gives segments by group rank: renumbered by world rank here, with
 * -1 for the PEs of other groups. */
static symm_status_t mpi_seg_by_world(int rank, int npes, int my_seg_fd, symm_boot_t *b)
{
    int n = b->npes, *world = malloc((size_t)n * sizeof(int)), *fd;
    if (world == NULL)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: ranks of %d PEs", rank, n);
    int rc = MPI_Allgather(&rank, 1, MPI_INT, world, 1, MPI_INT, boot_mpi.node);
    symm_status_t st = rc == MPI_SUCCESS ? symm_boot_fd_table_new(rank, npes, &fd)
                                         : mpi_fail(rank, rc, "MPI_Allgather of the ranks");
    if (st == SYMM_SUCCESS) {
        for (int i = 0; i < n; i++)
            fd[world[i]] = b->seg_fd[i];
        fd[rank] = my_seg_fd;
        free(b->seg_fd);
        b->seg_fd = fd;
        b->rank = rank;
        b->npes = npes;
    }
    free(world);
    return st;
}

/* symm's communicators, freed where MPI still allows it (the program may have finalized
 * MPI before symm_finalize). */
static void mpi_comms_free(void)
{
    if (!symm_boot_mpi_initialized()) return;
    if (boot_mpi.node != MPI_COMM_NULL) MPI_Comm_free(&boot_mpi.node);
    if (boot_mpi.world != MPI_COMM_NULL) MPI_Comm_free(&boot_mpi.world);
}

/* Ends what symm_boot_mpi_init started, after a failure that every PE saw alike: MPI
 * goes down cleanly with it where symm brought it up, so the job ends with the program's
 * own exit status. */
static symm_status_t mpi_unwind(symm_status_t st)
{
    mpi_comms_free();
    if (boot_mpi.called_init) {
        MPI_Finalize();
        boot_mpi.ended_mpi = 1;
    }
    boot_mpi.called_init = 0;
    return st;
}

static symm_status_t mpi_setup(int *rank_out, int *npes_out)
{
    int fin = 0, init = 0;
    if (boot_mpi.abandoned)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "symm_init after a symm_init that failed after the rendezvous "
                              "under MPI: the other PEs may be anywhere, so it cannot be "
                              "retried (see the first error)");
    if (boot_mpi.ended_mpi)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "symm_init after symm_finalize is not supported under MPI when "
                              "symm_init started MPI: symm_finalize ended it, and MPI starts "
                              "once per process (call MPI_Init before the first symm_init to "
                              "keep MPI up across several)");
    MPI_Finalized(&fin);
    if (fin)
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "symm_init under MPI after the program called MPI_Finalize: MPI "
                              "cannot start again in this process");
    MPI_Initialized(&init);
    if (!init) {
        /* symm makes its MPI calls one at a time (the MPI transport holds a mutex around
         * them), so it asks for no more than that: Open MPI 4's one-sided communication
         * over TCP (osc/pt2pt) refuses MPI_THREAD_MULTIPLE. */
        int provided = MPI_THREAD_SINGLE;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) return mpi_fail(-1, rc, "MPI_Init_thread");
        boot_mpi.called_init = 1;
        SYMM_DEBUG("MPI initialized with thread level %d (%d asked)", provided,
                   MPI_THREAD_SERIALIZED);
    }
    int rank, npes;
    MPI_CHECK(-1, MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(rank, MPI_Comm_size(MPI_COMM_WORLD, &npes));
    CHECK(mpi_world_dup(rank, &boot_mpi.world));
    /* Errors come back to symm, which reports them, instead of ending the job. */
    MPI_CHECK(rank, MPI_Comm_set_errhandler(boot_mpi.world, MPI_ERRORS_RETURN));
    MPI_CHECK(rank, MPI_Comm_split_type(boot_mpi.world, MPI_COMM_TYPE_SHARED, rank,
                                        MPI_INFO_NULL, &boot_mpi.node));
    *rank_out = rank;
    *npes_out = npes;
    return SYMM_SUCCESS;
}

/* A PE killed by a signal must be named: Open MPI's mpirun names the rank it saw die,
 * but MPICH's Hydra names only the process id, and on stdout. So from the rendezvous
 * until symm_finalize, a PE that gets a fatal signal which it can catch names itself on
 * stderr, then dies of the signal as it would have (exit status and core file alike).
 * Only where nobody else handles the signal: the program, MPI (Open MPI prints its own
 * report of SIGABRT, SIGBUS, SIGFPE and SIGSEGV) and the sanitizers keep theirs. */
static const struct {
    int sig;
    const char *name;
} fatal_signals[] = {{SIGABRT, "SIGABRT"},
                     {SIGBUS, "SIGBUS"},
                     {SIGFPE, "SIGFPE"},
                     {SIGILL, "SIGILL"},
                     {SIGSEGV, "SIGSEGV"}};
#define FATAL_SIGNALS ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))
static int fatal_installed[FATAL_SIGNALS];
/* Written before the handlers are set: "[symm pe 2] error: killed by signal 6 (SIGABRT)" */
static char fatal_line[FATAL_SIGNALS][80];

static void mpi_fatal_signal(int sig)
{
    /* write(2) and raise(3) alone, both async-signal-safe. SA_RESETHAND has put the
     * default action back, which the raised signal meets once this handler returns. */
    for (int i = 0; i < FATAL_SIGNALS; i++)
        if (fatal_signals[i].sig == sig) {
            ssize_t w = write(STDERR_FILENO, fatal_line[i], strlen(fatal_line[i]));
            (void)w;
        }
    raise(sig);
}

static void mpi_fatal_signals_catch(int rank)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = mpi_fatal_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < FATAL_SIGNALS; i++) {
        snprintf(fatal_line[i], sizeof fatal_line[i],
                 "[symm pe %d] error: killed by signal %d (%s)\n", rank, fatal_signals[i].sig,
                 fatal_signals[i].name);
        if (sigaction(fatal_signals[i].sig, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            fatal_installed[i] = sigaction(fatal_signals[i].sig, &sa, NULL) == 0;
    }
}

/* Back to the default action, where the handler is still mine. */
static void mpi_fatal_signals_release(void)
{
    struct sigaction dfl, cur;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int i = 0; i < FATAL_SIGNALS; i++) {
        if (fatal_installed[i] && sigaction(fatal_signals[i].sig, NULL, &cur) == 0 &&
            cur.sa_handler == mpi_fatal_signal)
            sigaction(fatal_signals[i].sig, &dfl, NULL);
        fatal_installed[i] = 0;
    }
}

/* A PE that exits between the rendezvous and symm_finalize (returning from main, exit,
 * or after a symm_init that failed on it alone) leaves the others waiting for it. Open
 * MPI's mpirun ends the job with an error when a rank exits without MPI_Finalize; MPICH's
 * Hydra kills the others too, but its own exit status is that of whichever rank it looked
 * at, 0 where that is the one that left. So the PE says why it leaves and calls
 * MPI_Abort: the job fails under every launcher, naming it. */
static void mpi_exit_check(int status, void *arg)
{
    (void)arg;
    if (!boot_mpi.open || !symm_boot_mpi_initialized()) return;
    boot_mpi.open = 0;
    symm_log_write(SYMM_LOG_ERROR,
                   "PE %d exits with status %d without calling symm_finalize: MPI_Abort "
                   "ends the job",
                   boot_mpi.rank, status);
    /* MPICH's Hydra forwards a rank's output and handles its abort in one loop, in either
     * order, and kills the rank's proxy once it has handled the abort: a moment for the
     * line to leave first. */
    struct timespec pause = {0, 200 * 1000 * 1000};
    nanosleep(&pause, NULL);
    MPI_Abort(MPI_COMM_WORLD, status ? status : 1);
}

static void mpi_exit_watch(int rank)
{
    static int registered;
    boot_mpi.rank = rank;
    boot_mpi.open = 1;
    if (!registered) registered = on_exit(mpi_exit_check, NULL) == 0;
}

symm_status_t symm_boot_mpi_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    symm_status_t st;
    int rank = -1, npes = 0;
    if ((st = mpi_setup(&rank, &npes)) != SYMM_SUCCESS) {
        /* Only the duplicate can have left other PEs waiting; past it, every PE fails
         * here alike. */
        if (boot_mpi.world != MPI_COMM_NULL) return mpi_unwind(st);
        return st;
    }

    int node_npes = 0, node_rank = 0;
    if ((st = mpi_group_split(rank)) != SYMM_SUCCESS) return mpi_unwind(st);
    MPI_Comm_size(boot_mpi.node, &node_npes);
    MPI_Comm_rank(boot_mpi.node, &node_rank);

    symm_boot_t b = {.via = SYMM_BOOT_VIA_NONE, .sock = -1, .ctrl_fd = -1};
    st = mpi_node_rendezvous(node_rank, node_npes, npes, my_seg_fd, seg_size, &b);
    if (st == SYMM_SUCCESS) st = mpi_seg_by_world(rank, npes, my_seg_fd, &b);

    /* The outcome must be the same everywhere: a PE that failed in the rendezvous may
     * have left others holding segments, and they must not go on without it. MINLOC
     * finds the first PE that failed. */
    int mine[2] = {st == SYMM_SUCCESS, rank}, all[2];
    int rc = MPI_Allreduce(mine, all, 1, MPI_2INT, MPI_MINLOC, boot_mpi.world);
    if (rc != MPI_SUCCESS && st == SYMM_SUCCESS) st = mpi_fail(rank, rc, "MPI_Allreduce");
    if (st == SYMM_SUCCESS && !all[0])
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: the rendezvous failed on PE %d (its message says why)",
                            rank, all[1]);
    if (st != SYMM_SUCCESS) {
        if (b.seg_fd != NULL) {
            symm_boot_fd_table_free(b.seg_fd, b.npes, my_seg_fd);
            if (b.ctrl_fd >= 0) close(b.ctrl_fd);
        }
        return rc == MPI_SUCCESS ? mpi_unwind(st) : st;
    }
    mpi_fatal_signals_catch(rank);
    mpi_exit_watch(rank);
    *out = b;
    return SYMM_SUCCESS;
}

symm_status_t symm_boot_mpi_allgather(const void *mine, size_t n, void *all)
{
    int rank = 0;
    MPI_Comm_rank(boot_mpi.world, &rank);
    MPI_CHECK(rank,
              MPI_Allgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, boot_mpi.world));
    return SYMM_SUCCESS;
}

void symm_boot_mpi_finalize(void)
{
    boot_mpi.open = 0;
    mpi_fatal_signals_release();
    mpi_unwind(SYMM_SUCCESS);
}

void symm_boot_mpi_close(void)
{
    /* MPI_Comm_free and MPI_Finalize are collective: the other PEs may be anywhere. The
     * process exits with MPI up, and its exit ends the job (mpi_exit_check). */
    boot_mpi.node = boot_mpi.world = MPI_COMM_NULL;
    boot_mpi.abandoned = 1;
}

void symm_boot_mpi_abort(int code)
{
    if (symm_boot_mpi_initialized()) MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
}

#endif
