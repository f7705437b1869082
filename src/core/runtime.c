/* runtime.c — this PE's world at the bottom layer: its segment made and handed to the
 * bootstrap, the control page mapped, the heap and team region allocators set up (the
 * transport maps the peers' segments: transport/shm/segment.c). symm_init and symm_finalize
 * (lib/init.c) call symm_core_init first and symm_core_finalize last. */
#include "core/runtime.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/wait.h"

symm_runtime_t symm_g = {.me = -1,
                         .heap_lock = PTHREAD_MUTEX_INITIALIZER,
                         .team_lock = PTHREAD_MUTEX_INITIALIZER,
                         .create_lock = PTHREAD_MUTEX_INITIALIZER};

/* Bytes of my team region at or above this offset were never handed out since the
 * segment's memfd was made: they are still zero, and no peer has ever written them. */
static uint64_t team_fresh_from;

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static symm_status_t map_ctrl(void)
{
    if (symm_g.boot.ctrl_fd < 0) {
        /* In a 1-PE job nobody else writes the control page: a private one keeps the
         * wait path free of NULL checks. */
        symm_g.ctrl = calloc(1, symm_ctrl_size(1));
        if (!symm_g.ctrl) return symm_error_set(SYMM_ERR_NO_MEMORY, "control page");
        symm_g.ctrl->magic = SYMM_CTRL_MAGIC;
        symm_g.ctrl->npes = 1;
        symm_g.ctrl->failed_pe = -1;
        symm_g.ctrl_owned = 1;
        return SYMM_SUCCESS;
    }
    size_t size = symm_ctrl_size((uint32_t)symm_g.npes);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, symm_g.boot.ctrl_fd, 0);
    if (p == MAP_FAILED)
        return symm_error_set(SYMM_ERR_SYSTEM, "mmap of the control page: %s", strerror(errno));
    symm_g.ctrl = p;
    if (symm_g.ctrl->magic != SYMM_CTRL_MAGIC)
        return symm_error_set(SYMM_ERR_BOOTSTRAP, "the control page has a bad magic");
    return SYMM_SUCCESS;
}

void symm_core_boot_fds_close(void)
{
    if (symm_g.boot.seg_fd) {
        for (int p = 0; p < symm_g.npes; p++)
            if (symm_g.boot.seg_fd[p] >= 0) close(symm_g.boot.seg_fd[p]);
        free(symm_g.boot.seg_fd);
        symm_g.boot.seg_fd = NULL;
    }
    if (symm_g.boot.ctrl_fd >= 0) close(symm_g.boot.ctrl_fd);
    symm_g.boot.ctrl_fd = -1;
}

/* Frees the mailbox counters and releases the control page (map_ctrl's). */
static void mbox_ctrl_release(void)
{
    free(symm_g.mbox_sent);
    free(symm_g.mbox_recvd);
    free(symm_g.mbox_discard);
    symm_g.mbox_sent = symm_g.mbox_recvd = symm_g.mbox_discard = NULL;
    if (symm_g.ctrl_owned)
        free(symm_g.ctrl);
    else if (symm_g.ctrl)
        munmap(symm_g.ctrl, symm_ctrl_size((uint32_t)symm_g.npes));
    symm_g.ctrl = NULL;
    symm_g.ctrl_owned = 0;
}

/* Leaves the bootstrap after a failed init. Not symm_boot_finalize: the other PEs hold
 * this one in the world already, so its exit must read as a failure to the launcher, not
 * as a finalized PE. */
static void boot_abandon(void)
{
    symm_core_boot_fds_close();
    symm_boot_close(&symm_g.boot);
}

static symm_status_t setup_layout(void)
{
    /* The header size depends on npes, which is known only after the rendezvous; the
     * segment is sized for the largest header symmrun can produce so every PE agrees on
     * the layout without another round. */
    symm_g.info_off = (size_t)SYMM_MAX_PES * (sizeof(symm_mbox_t) + sizeof(symm_mbox_ack_t));
    size_t hdr = round_up(symm_g.info_off + sizeof(symm_pe_info_t), 4096);
    symm_g.team_off = hdr;
    symm_g.team_size = round_up(symm_config.team_heap_size, 4096);
    symm_g.heap_off = hdr + symm_g.team_size;
    symm_g.heap_size = round_up(symm_config.heap_size, 4096);
    if (symm_g.heap_size < 4096) symm_g.heap_size = 4096;
    symm_g.seg_size = symm_g.heap_off + symm_g.heap_size;
    return SYMM_SUCCESS;
}

/* Writes what this PE publishes (symm_pe_info_t) into its segment's memfd, before the
 * rendezvous hands the fd to anyone. */
static symm_status_t pe_info_write(int fd)
{
    symm_pe_info_t info;
    memset(&info, 0, sizeof info);
    cpu_set_t set;
    int ncpu = (int)(sizeof info.cpu_mask * 8);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < ncpu && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) info.cpu_mask[c / 64] |= (uint64_t)1 << (c % 64);
    } else {
        /* More CPUs than a cpu_set_t holds: count the online ones (up to the mask's size) */
        long on = sysconf(_SC_NPROCESSORS_ONLN);
        for (int c = 0; c < on && c < ncpu; c++)
            info.cpu_mask[c / 64] |= (uint64_t)1 << (c % 64);
    }
    info.node_cpus = (uint64_t)(symm_config.node_cpus > 0 ? symm_config.node_cpus : 0);
    info.barrier_fanin = (uint64_t)symm_config.barrier_flat_max;
    if (pwrite(fd, &info, sizeof info, (off_t)symm_g.info_off) != (ssize_t)sizeof info)
        return symm_error_set(SYMM_ERR_SYSTEM,
                              "writing this PE's information into its "
                              "segment: %s",
                              strerror(errno));
    return SYMM_SUCCESS;
}

symm_status_t symm_core_init(void)
{
    symm_status_t st = SYMM_SUCCESS;
    if (symm_config_load() != 0) return symm_last_status();
    symm_log_level = symm_log_parse_level(symm_config.log);
    setup_layout();

    int fd = memfd_create("symm-segment", MFD_CLOEXEC);
    if (fd < 0) {
        st = symm_error_set(SYMM_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
        return st;
    }
    if (ftruncate(fd, (off_t)symm_g.seg_size) != 0) {
        st = symm_error_set(SYMM_ERR_SYSTEM, "sizing the segment to %zu bytes: %s",
                            symm_g.seg_size, strerror(errno));
        close(fd);
        return st;
    }
    if ((st = pe_info_write(fd)) != SYMM_SUCCESS) {
        close(fd);
        return st;
    }
    CHECK_GOTO(symm_boot_init(fd, symm_g.seg_size, &symm_g.boot), st, out_close_fd);
    symm_g.me = symm_g.boot.rank;
    symm_g.npes = symm_g.boot.npes;
    if (symm_g.npes > SYMM_MAX_PES) {
        st = symm_error_set(SYMM_ERR_UNSUPPORTED, "%d PEs on one host; at most %d", symm_g.npes,
                            SYMM_MAX_PES);
        goto out_close_boot;
    }
    CHECK_GOTO(map_ctrl(), st, out_close_boot);
    symm_g.mbox_sent = calloc((size_t)symm_g.npes, sizeof(uint64_t));
    symm_g.mbox_recvd = calloc((size_t)symm_g.npes, sizeof(uint64_t));
    symm_g.mbox_discard = calloc((size_t)symm_g.npes, sizeof(uint64_t));
    if (!symm_g.mbox_sent || !symm_g.mbox_recvd || !symm_g.mbox_discard) {
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "mailbox counters");
        goto out_free_mbox;
    }
    team_fresh_from = 0; /* a new memfd: all of it is zero */
    if (symm_arena_init(&symm_g.heap_arena, symm_g.heap_size) ||
        symm_arena_init(&symm_g.team_arena, symm_g.team_size)) {
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "heap allocators");
        goto out_free_arenas;
    }
    symm_g.initialized = 1;
    return SYMM_SUCCESS;

out_free_arenas:
    symm_arena_destroy(&symm_g.heap_arena);
    symm_arena_destroy(&symm_g.team_arena);
out_free_mbox:
    mbox_ctrl_release();
out_close_boot:
    boot_abandon();
    symm_g.me = -1;
    symm_g.npes = 0;
    return st;
out_close_fd:
    /* symm_boot_init failed before owning the fd */
    close(fd);
    return st;
}

void symm_core_finalize(symm_core_end_t how)
{
    symm_g.initialized = 0;
    symm_arena_destroy(&symm_g.heap_arena);
    symm_arena_destroy(&symm_g.team_arena);
    mbox_ctrl_release();
    if (how == SYMM_CORE_END_CLEAN) {
        symm_boot_finalize(&symm_g.boot);
    } else if (how == SYMM_CORE_END_INIT_FAILED) {
        /* Where every PE failed alike, all of them get here: they leave together, as
         * after symm_finalize (under mpirun, a PE that exits with MPI up would have the
         * job killed before the others report their error). */
        if (symm_g.init_failed_alike) {
            symm_core_boot_fds_close();
            symm_boot_finalize(&symm_g.boot);
        } else {
            boot_abandon();
        }
        symm_g.init_failed_alike = 0;
    }
    symm_g.me = -1;
    symm_g.npes = 0;
}

int symm_initialized(void)
{
    return symm_g.initialized;
}
int symm_my_pe(void)
{
    return symm_g.initialized ? symm_g.me : -1;
}
int symm_n_pes(void)
{
    return symm_g.initialized ? symm_g.npes : -1;
}

/* How long the other PEs get to see an abort on the control page before MPI_Abort stops
 * them: their waits look every millisecond or so. */
#define SYMM_ABORT_GRACE_NS 200000000L

/* Under MPI or a caller's exchange nobody else tells the other PEs who failed (symmrun
 * does that under symmrun): this PE writes it on the control page itself, unless another PE's
 * failure is there already. */
static void ctrl_note_abort(int code, const char *why)
{
    symm_ctrl_t *c = symm_g.ctrl;
    int32_t none = -1;
    __atomic_store_n(&c->pe_state[symm_g.me], 2, __ATOMIC_RELAXED);
    if (!__atomic_compare_exchange_n(&c->failed_pe, &none, symm_g.me, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    snprintf(c->message, sizeof c->message, "PE %d aborted the job (code %d): %s", symm_g.me,
             code, why);
    c->exit_code = code;
    /* Release: a PE that sees abort set also sees the message. */
    __atomic_store_n(&c->abort, 1, __ATOMIC_RELEASE);
    struct timespec grace = {0, SYMM_ABORT_GRACE_NS};
    nanosleep(&grace, NULL);
}

void symm_abort(int code, const char *why)
{
    if (why == NULL) why = "";
    SYMM_ERROR("symm_abort(%d): %s", code, why);
    if ((symm_g.boot.via == SYMM_BOOT_VIA_MPI || symm_g.boot.via == SYMM_BOOT_VIA_EXCHANGE) &&
        symm_g.ctrl != NULL && !symm_g.ctrl_owned)
        ctrl_note_abort(code, why);
    symm_boot_abort(&symm_g.boot, code, why);
    _exit(code ? code : 1);
}

/* ---------------------------------------------------------------- team region */
/* 0, or -1 if the region has no room. clear: zero what an earlier allocation may have
 * left (sync state); scratch skips it. */
static int team_region_alloc(size_t size, int clear, uint64_t *off_out)
{
    pthread_mutex_lock(&symm_g.team_lock);
    int rc = symm_arena_alloc(&symm_g.team_arena, size, 64, off_out);
    uint64_t fresh = team_fresh_from;
    if (!rc && *off_out + size > team_fresh_from) team_fresh_from = *off_out + size;
    pthread_mutex_unlock(&symm_g.team_lock);
    if (rc) return -1;
    /* Synchronisation state starts at zero: a block reused after a destroyed team
     * must not carry old flags. Fresh memory is not cleared: the predefined teams are
     * made without an exchange, so a faster peer may already have signalled into them
     * while this PE is still in symm_init; a memset would erase its signal. */
    if (clear && *off_out < fresh)
        memset(symm_team_region_ptr(symm_g.me, *off_out), 0,
               (size_t)(fresh - *off_out < size ? fresh - *off_out : size));
    return 0;
}

symm_status_t symm_team_region_alloc(size_t size, uint64_t *off_out)
{
    if (team_region_alloc(size, 1, off_out))
        return symm_error_set(SYMM_ERR_NO_MEMORY,
                              "team region full: %zu bytes asked, %zu of %zu in use "
                              "(raise SYMM_TEAM_HEAP_SIZE)",
                              size, (size_t)symm_g.team_arena.used, symm_g.team_size);
    return SYMM_SUCCESS;
}

int symm_team_region_scratch(size_t size, uint64_t *off_out)
{
    return team_region_alloc(size, 0, off_out);
}

void symm_team_region_free(uint64_t off)
{
    pthread_mutex_lock(&symm_g.team_lock);
    symm_arena_free(&symm_g.team_arena, off);
    pthread_mutex_unlock(&symm_g.team_lock);
}
