/* symmrun.c — starts an N-PE symm job on this host and watches over it.
 * Each PE gets a private SOCK_SEQPACKET socket to symmrun (its fd number in SYMM_BOOT_FD);
 * through it the PEs swap segment memfds (bootstrap/protocol.h) and receive the job's
 * control page, where symmrun writes which PE failed before it stops the others. Only
 * memfds and socketpairs are used, so a job leaves nothing in /dev/shm or /tmp. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, signalfd, strsignal */
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/protocol.h"
#include "bootstrap/wire.h"

/* After a failure the other PEs get this long to see the abort flag and report it
 * themselves (a PE's own message says more than "killed by SIGTERM"), then SIGTERM, then
 * SIGKILL: every PE is gone about a second after the first failure. */
#define SYMMRUN_GRACE_MS      300
#define SYMMRUN_KILL_AFTER_MS 700
/* Sockets, segment fds in transit and a PE's received segments all count against
 * RLIMIT_NOFILE; the bound only keeps the fd arithmetic far from overflow. */
#define SYMMRUN_MAX_NPES 65536
/* Unprivileged users may have only RLIMIT_NOFILE fds in flight in AF_UNIX sockets
 * (ETOOMANYREFS); symmrun then waits this long for PEs to take some before sending more. */
#define SYMMRUN_INFLIGHT_RETRY_MS 2
/* A PE's socket closes a moment before its death is reported: give the exit status
 * this long to arrive before telling the others that a PE left the rendezvous with its
 * socket closed, so that they hear the better reason. */
#define SYMMRUN_SOCKET_GONE_MS  200
#define SYMMRUN_EXIT_USAGE      2
#define SYMMRUN_EXIT_CANNOT_RUN 127
#define SYMMRUN_EXIT_TIMEOUT    124
#define SYMMRUN_EPOLL_SIGNALS   UINT64_MAX /* epoll key of the signalfd; PEs use their rank */

typedef enum {
    RV_HELLO, /* waiting for every PE's hello */
    RV_SEND,  /* handing every PE all segments and the control page */
    RV_DONE,  /* every PE has everything */
    RV_FAILED /* cannot complete: later hellos are answered with an error */
} symmrun_rv_t;

typedef struct {
    pid_t pid;     /* 0 before it is started */
    int sock;      /* symmrun's end of the PE's socket; -1 once closed */
    int seg_fd;    /* the PE's segment memfd from its hello, until handed out */
    int next_send; /* first PE whose segment it still needs; npes: the control page is
                    * next; npes + 1: it has everything */
    bool running;  /* started and not yet reaped */
    bool hello;
    bool watch_out; /* its socket is in the epoll set for EPOLLOUT too */
    bool bye;       /* it said it finalized (symm_finalize) */
} symmrun_pe_t;

typedef struct {
    /* options */
    int npes;
    double timeout_s; /* 0: none */
    bool verbose;
    const char *gpu_map; /* --gpus or SYMM_GPU_MAP; NULL: the library chooses */
    char **prog_argv;

    symmrun_pe_t *pe;
    int running; /* PEs started and not yet reaped */
    /* epoll rather than poll: a wakeup costs the sockets that are ready, not all of
     * them, which matters while a thousand PEs take their segments. */
    int ep_fd;
    int sig_fd;
    sigset_t saved_mask; /* restored in the children before exec */

    symmrun_rv_t rv;
    int hellos;
    int first_hello; /* PE whose segment size the others must match */
    uint64_t seg_size;
    bool inflight_full; /* ETOOMANYREFS: retry sending at inflight_retry_ms */
    int64_t inflight_retry_ms;
    int64_t socket_gone_check_ms; /* 0, or when to look for PEs gone silent (pe_close) */
    char rv_error[sizeof(((symm_boot_msg_t *)0)->text)]; /* why RV_FAILED */

    int ctrl_fd;
    symm_ctrl_t *ctrl;
    size_t ctrl_size;

    int64_t start_ms;
    bool stopping; /* the first failure is recorded; PEs are being stopped */
    int exit_code;
    int64_t term_at_ms, kill_at_ms;
    bool term_sent, kill_sent;
} symmrun_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static __attribute__((format(printf, 2, 3))) void verbose(const symmrun_t *job, const char *fmt,
                                                          ...)
{
    if (!job->verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("symmrun: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *pes_word(int n)
{
    return n == 1 ? "PE" : "PEs";
}

/* ------------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: symmrun -n N [--timeout SECONDS] [--gpus MAP] [-v] [--] program [args...]\n"
            "Runs N copies (PEs) of program on this host as one symm job.\n"
            "\n"
            "  -n N, -np N, --npes N  number of PEs (1 to %d)\n"
            "  --timeout SECONDS      stop the job (exit status 124) if it runs longer\n"
            "  --gpus MAP             GPU of each PE (sets SYMM_GPU_DEVICE; default: the\n"
            "                         SYMM_GPU_MAP variable, else PE rank mod GPU count):\n"
            "                         'rr:G' PE r uses GPU r mod G; 'block:G' consecutive\n"
            "                         PEs share a GPU; '0,0,1,1' an explicit list, PE r\n"
            "                         takes entry r mod its length\n"
            "  -v, --verbose          report the rendezvous and every PE's exit\n"
            "  -h, --help             show this help\n"
            "\n"
            "If a PE fails (non-zero exit, killed by a signal, symm_abort, or any exit\n"
            "after symm_init without symm_finalize), symmrun tells the other PEs which\n"
            "one failed, stops them within about a second and exits with the failed PE's\n"
            "status (128+signal if it was killed; 1 if it exited 0 unfinalized).\n",
            SYMMRUN_MAX_NPES);
}

static bool parse_npes(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1 || v > SYMMRUN_MAX_NPES) {
        fprintf(stderr, "symmrun: bad number of PEs '%s' (expected 1 to %d)\n", s,
                SYMMRUN_MAX_NPES);
        return false;
    }
    *out = (int)v;
    return true;
}

/* GPU of PE r under map (validated by parse_gpu_map), or -1 when map is malformed. */
static int gpu_of_pe(const char *map, int r, int npes)
{
    char *end;
    if (strncmp(map, "rr:", 3) == 0 || strncmp(map, "block:", 6) == 0) {
        int block = map[0] == 'b';
        long g = strtol(map + (block ? 6 : 3), &end, 10);
        if (*end != '\0' || g < 1 || g > 4096) return -1;
        if (!block) return (int)(r % g);
        long per = (npes + g - 1) / g;
        return (int)(r / per);
    }
    /* explicit list */
    int count = 1;
    for (const char *p = map; *p; p++)
        count += *p == ',';
    int want = r % count, k = 0;
    const char *p = map;
    for (;;) {
        long v = strtol(p, &end, 10);
        /* 4095: the largest SYMM_GPU_DEVICE the library accepts (core/config.h) */
        if (end == p || v < 0 || v > 4095 || (*end != ',' && *end != '\0')) return -1;
        if (k++ == want) return (int)v;
        if (*end == '\0') return -1;
        p = end + 1;
    }
}

static bool parse_gpu_map(const char *s, int npes)
{
    for (int r = 0; r < (npes > 0 ? npes : 1); r++)
        if (gpu_of_pe(s, r, npes > 0 ? npes : 1) < 0) {
            fprintf(stderr,
                    "symmrun: bad GPU map '%s' (expected rr:G, block:G or a list "
                    "like 0,0,1,1)\n",
                    s);
            return false;
        }
    return true;
}

static bool parse_timeout(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* The range of SYMM_TIMEOUT (core/config.h): a millisecond, the deadline's unit, up
     * to 10^7 s. Written so that NaN fails too. */
    if (errno != 0 || end == s || *end != '\0' || !(v >= 1e-3 && v <= 1e7)) {
        fprintf(stderr,
                "symmrun: bad --timeout '%s' (expected seconds from 0.001 to "
                "10000000)\n",
                s);
        return false;
    }
    *out = v;
    return true;
}

/* The value of option opt at argv[*i]: "-n 4", "-n4" or "--npes=4". NULL (with a message)
 * when it is missing. */
static const char *option_value(int argc, char **argv, int *i, const char *opt)
{
    const char *arg = argv[*i];
    size_t len = strlen(opt);
    if (arg[len] == '=') return arg + len + 1;
    if (arg[len] != '\0') return arg + len; /* -n4 */
    if (*i + 1 >= argc) {
        fprintf(stderr, "symmrun: %s needs a value (see symmrun --help)\n", opt);
        return NULL;
    }
    return argv[++*i];
}

/* Returns -1 to go on, or the exit status symmrun should end with. */
static int parse_args(int argc, char **argv, symmrun_t *job)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *v;
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-' || arg[1] == '\0')
            break; /* the program: everything from here on is its own */
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(arg, "-v") == 0 || strcmp(arg, "--verbose") == 0) {
            job->verbose = true;
            continue;
        }
        /* -np before -n: "-np4" must not read as -n with value "p4". */
        const char *opt = strncmp(arg, "-np", 3) == 0         ? "-np"
                          : strncmp(arg, "--npes", 6) == 0    ? "--npes"
                          : strncmp(arg, "-n", 2) == 0        ? "-n"
                          : strncmp(arg, "--timeout", 9) == 0 ? "--timeout"
                          : strncmp(arg, "--gpus", 6) == 0    ? "--gpus"
                                                              : NULL;
        if (opt != NULL && opt[1] == '-' && arg[strlen(opt)] != '\0' && arg[strlen(opt)] != '=')
            opt = NULL; /* "--npesx" is not "--npes" */
        if (opt == NULL) {
            fprintf(stderr, "symmrun: unknown option '%s' (see symmrun --help)\n", arg);
            return SYMMRUN_EXIT_USAGE;
        }
        if ((v = option_value(argc, argv, &i, opt)) == NULL) return SYMMRUN_EXIT_USAGE;
        if (strcmp(opt, "--gpus") == 0) {
            job->gpu_map = v;
            continue;
        }
        if (strcmp(opt, "--timeout") == 0 ? !parse_timeout(v, &job->timeout_s)
                                          : !parse_npes(v, &job->npes))
            return SYMMRUN_EXIT_USAGE;
    }
    if (job->npes == 0) {
        fprintf(stderr, "symmrun: missing -n N, the number of PEs (see symmrun --help)\n");
        return SYMMRUN_EXIT_USAGE;
    }
    if (!job->gpu_map && getenv("SYMM_GPU_MAP") && *getenv("SYMM_GPU_MAP"))
        job->gpu_map = getenv("SYMM_GPU_MAP");
    if (job->gpu_map && !parse_gpu_map(job->gpu_map, job->npes)) return SYMMRUN_EXIT_USAGE;
    if (i >= argc) {
        fprintf(stderr, "symmrun: no program to run (usage: symmrun -n N [--timeout S] "
                        "[--] program [args...])\n");
        return SYMMRUN_EXIT_USAGE;
    }
    job->prog_argv = argv + i;
    return -1;
}

/* ------------------------------------------------------------------ setup */

/* 0 if path can be executed, else the errno execve would most likely give. */
static int exec_check(const char *path)
{
    struct stat st;
    if (stat(path, &st) < 0) return errno;
    if (!S_ISREG(st.st_mode)) return EACCES;
    return access(path, X_OK) < 0 ? errno : 0;
}

/* execvp's search, done once here so that a typo gives one clear message instead of one
 * per PE. Returns 0 or an errno. */
static int program_check(const char *prog)
{
    if (prog[0] == '\0') return ENOENT;
    if (strchr(prog, '/') != NULL) return exec_check(prog);
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/bin:/usr/bin"; /* glibc's default when PATH is unset */
    int err = ENOENT;
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        char buf[PATH_MAX];
        int n = end == p ? snprintf(buf, sizeof buf, "%s", prog) /* empty entry: cwd */
                         : snprintf(buf, sizeof buf, "%.*s/%s", (int)(end - p), p, prog);
        if (n > 0 && (size_t)n < sizeof buf) {
            int e = exec_check(buf);
            if (e == 0) return 0;
            if (e == EACCES) err = EACCES; /* execvp reports EACCES over ENOENT too */
        }
        if (*end == '\0') break;
        p = end;
    }
    return err;
}

/* symmrun holds a socket and, during the rendezvous, a segment fd per PE; each PE
 * receives a segment fd per PE. Raise the soft limit (inherited by the PEs) as far as
 * that needs, but no further: some programs loop over every possible fd. */
static bool raise_fd_limit(int npes)
{
    rlim_t need = 2 * (rlim_t)npes + 64;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        fprintf(stderr, "symmrun: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
        return false;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) return true;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr,
                "symmrun: %d PEs need about %llu open files each, but the hard limit is %llu "
                "(ulimit -Hn)\n",
                npes, (unsigned long long)need, (unsigned long long)rl.rlim_max);
        return false;
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        fprintf(stderr, "symmrun: cannot raise the open files limit to %llu: %s\n",
                (unsigned long long)need, strerror(errno));
        return false;
    }
    return true;
}

/* Makes sure fds 0-2 are open, so that no socket of ours becomes a PE's stdin or stdout. */
static void std_fds_open(void)
{
    for (;;) {
        int fd = open("/dev/null", O_RDWR);
        if (fd < 0) return;
        if (fd > 2) {
            close(fd);
            return;
        }
    }
}

static bool ctrl_create(symmrun_t *job)
{
    job->ctrl_size = symm_ctrl_size((uint32_t)job->npes);
    /* Sealed against resizing: a PE that truncated the page would make symmrun itself
     * fault (SIGBUS) the next time it writes a failure there. */
    job->ctrl_fd = memfd_create("symm-ctrl", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (job->ctrl_fd < 0) {
        fprintf(stderr, "symmrun: memfd_create for the control page: %s\n", strerror(errno));
        return false;
    }
    if (ftruncate(job->ctrl_fd, (off_t)job->ctrl_size) < 0) {
        fprintf(stderr, "symmrun: cannot size the control page to %zu bytes: %s\n",
                job->ctrl_size, strerror(errno));
        goto out_close;
    }
    if (fcntl(job->ctrl_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        fprintf(stderr, "symmrun: cannot seal the control page: %s\n", strerror(errno));
        goto out_close;
    }
    void *p = mmap(NULL, job->ctrl_size, PROT_READ | PROT_WRITE, MAP_SHARED, job->ctrl_fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "symmrun: cannot map the control page: %s\n", strerror(errno));
        goto out_close;
    }
    job->ctrl = p;
    /* A fresh memfd reads as zeros: abort = 0 and every pe_state is 0 (running). */
    job->ctrl->magic = SYMM_CTRL_MAGIC;
    job->ctrl->npes = (uint32_t)job->npes;
    job->ctrl->ctrl_size = (uint32_t)job->ctrl_size;
    job->ctrl->failed_pe = -1;
    job->ctrl->exit_code = -1;
    job->ctrl->signal = 0;
    return true;

out_close:
    close(job->ctrl_fd);
    job->ctrl_fd = -1;
    return false;
}

/* SIGCHLD and the stop signals arrive through a signalfd in the epoll loop, so no
 * handler races with the loop's state. They stay blocked until then; the children
 * unblock them before exec. */
static bool events_setup(symmrun_t *job)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    /* An inherited SIG_IGN for SIGCHLD would make the kernel reap the PEs for us and
     * lose their exit statuses. */
    signal(SIGCHLD, SIG_DFL);
    if (sigprocmask(SIG_BLOCK, &set, &job->saved_mask) < 0) {
        fprintf(stderr, "symmrun: sigprocmask: %s\n", strerror(errno));
        return false;
    }
    job->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (job->sig_fd < 0) {
        fprintf(stderr, "symmrun: signalfd: %s\n", strerror(errno));
        return false;
    }
    job->ep_fd = epoll_create1(EPOLL_CLOEXEC);
    if (job->ep_fd < 0) {
        fprintf(stderr, "symmrun: epoll_create1: %s\n", strerror(errno));
        goto out_close_sig;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = SYMMRUN_EPOLL_SIGNALS};
    if (epoll_ctl(job->ep_fd, EPOLL_CTL_ADD, job->sig_fd, &ev) < 0) {
        fprintf(stderr, "symmrun: epoll_ctl: %s\n", strerror(errno));
        goto out_close_ep;
    }
    return true;

out_close_ep:
    close(job->ep_fd);
out_close_sig:
    close(job->sig_fd);
    return false;
}

/* In the child: becomes PE r. Never returns. */
static _Noreturn void pe_exec(const symmrun_t *job, int r, int sock, pid_t symmrun_pid)
{
    /* If symmrun dies, even by SIGKILL, its PEs must not linger; the getppid check
     * closes the window where it died before the prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != symmrun_pid)
        _exit(SYMMRUN_EXIT_CANNOT_RUN);
    /* The one fd this PE must keep across exec; every other fd of symmrun's is CLOEXEC. */
    if (fcntl(sock, F_SETFD, 0) < 0) {
        fprintf(stderr, "symmrun: PE %d: fcntl on its socket: %s\n", r, strerror(errno));
        _exit(SYMMRUN_EXIT_CANNOT_RUN);
    }
    char buf[24];
    snprintf(buf, sizeof buf, "%d", sock);
    setenv(SYMM_BOOT_ENV_FD, buf, 1);
    snprintf(buf, sizeof buf, "%d", r);
    setenv(SYMM_BOOT_ENV_RANK, buf, 1);
    snprintf(buf, sizeof buf, "%d", job->npes);
    setenv(SYMM_BOOT_ENV_NPES, buf, 1);
    if (job->gpu_map) {
        snprintf(buf, sizeof buf, "%d", gpu_of_pe(job->gpu_map, r, job->npes));
        setenv("SYMM_GPU_DEVICE", buf, 1);
    }
    sigprocmask(SIG_SETMASK, &job->saved_mask, NULL);

    execvp(job->prog_argv[0], job->prog_argv);
    fprintf(stderr, "symmrun: cannot run '%s': %s\n", job->prog_argv[0], strerror(errno));
    _exit(SYMMRUN_EXIT_CANNOT_RUN);
}

static bool pe_spawn(symmrun_t *job, int r)
{
    int sv[2];
    /* CLOEXEC on both ends: no PE may inherit another PE's socket, and its own end is
     * made inheritable in the child only. */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        fprintf(stderr, "symmrun: cannot start PE %d: socketpair: %s\n", r, strerror(errno));
        return false;
    }
    /* Only symmrun's end is non-blocking (a PE's end stays blocking): one slow PE must
     * not hold up the rendezvous or the supervision of the others. */
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK) < 0) {
        fprintf(stderr, "symmrun: cannot start PE %d: fcntl: %s\n", r, strerror(errno));
        goto out_close_pair;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)r};
    if (epoll_ctl(job->ep_fd, EPOLL_CTL_ADD, sv[0], &ev) < 0) {
        fprintf(stderr, "symmrun: cannot start PE %d: epoll_ctl: %s\n", r, strerror(errno));
        goto out_close_pair;
    }
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "symmrun: cannot start PE %d: fork: %s\n", r, strerror(errno));
        goto out_unwatch;
    }
    if (pid == 0) pe_exec(job, r, sv[1], self);
    close(sv[1]);
    job->pe[r].pid = pid;
    job->pe[r].sock = sv[0];
    job->pe[r].running = true;
    job->running++;
    verbose(job, "PE %d started (pid %d)", r, (int)pid);
    return true;

out_unwatch:
    epoll_ctl(job->ep_fd, EPOLL_CTL_DEL, sv[0], NULL);
out_close_pair:
    close(sv[0]);
    close(sv[1]);
    return false;
}

/* ------------------------------------------------------------------ stopping */

static void kill_all(symmrun_t *job, int sig)
{
    for (int r = 0; r < job->npes; r++)
        if (job->pe[r].running) kill(job->pe[r].pid, sig);
}

static void send_error(int sock, const char *text)
{
    symm_boot_msg_t msg;
    memset(&msg, 0, sizeof msg);
    msg.type = SYMM_BOOT_ERROR;
    msg.rank = -1;
    snprintf(msg.text, sizeof msg.text, "%s", text);
    /* Best effort: a PE that is gone or not listening will fail some other way. */
    (void)symm_boot_send(sock, &msg, NULL, 0, MSG_DONTWAIT);
}

/* The rendezvous can no longer complete: tell every PE waiting in it (and, through
 * rv_error, every PE that says hello later) instead of letting them time out. */
static void rv_fail(symmrun_t *job, const char *why)
{
    if (job->rv != RV_HELLO) return;
    job->rv = RV_FAILED;
    snprintf(job->rv_error, sizeof job->rv_error, "%s", why);
    verbose(job, "rendezvous cannot complete: %s", why);
    for (int r = 0; r < job->npes; r++)
        if (job->pe[r].sock >= 0) send_error(job->pe[r].sock, why);
}

/* Records the job's first failure and starts stopping the PEs: the message goes to the
 * control page, where the PEs' waits find it, then to stderr. failed_pe is -1 for a
 * failure of the whole job (timeout, signal to symmrun). Later failures are only
 * consequences of the first and are not reported. */
static __attribute__((format(printf, 7, 8))) void job_fail(symmrun_t *job, int failed_pe,
                                                           int pe_status, int pe_signal,
                                                           int exit_code, int grace_ms,
                                                           const char *fmt, ...)
{
    if (failed_pe >= 0) __atomic_store_n(&job->ctrl->pe_state[failed_pe], 2, __ATOMIC_RELAXED);
    if (job->stopping) return;

    char msg[SYMM_CTRL_MSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    symm_ctrl_t *c = job->ctrl;
    memcpy(c->message, msg, sizeof msg);
    c->failed_pe = failed_pe;
    c->exit_code = pe_status;
    c->signal = pe_signal;
    /* Release: a PE that sees abort set also sees the message and the failed PE. */
    __atomic_store_n(&c->abort, 1, __ATOMIC_RELEASE);

    int others = job->running - (failed_pe >= 0 && job->pe[failed_pe].running ? 1 : 0);
    if (others == 0)
        fprintf(stderr, "symmrun: %s\n", msg);
    else
        fprintf(stderr, "symmrun: %s; stopping %s%d %s\n", msg,
                failed_pe >= 0 ? "the other " : "", others, pes_word(others));

    job->stopping = true;
    job->exit_code = exit_code;
    job->term_at_ms = now_ms() + grace_ms;
    job->kill_at_ms = job->term_at_ms + SYMMRUN_KILL_AFTER_MS;
    /* PEs still in the rendezvous have no control page yet: tell them directly. */
    rv_fail(job, msg);
}

/* ------------------------------------------------------------------ messages */

static void rv_send_pending(symmrun_t *job, int r);
static void rv_check_done(symmrun_t *job);

/* pe_state 1 (finalized or exited cleanly), unless it is already 2: a PE that aborted
 * and then exited 0 still failed. */
static void pe_state_clean(symmrun_t *job, int r)
{
    uint32_t running = 0;
    __atomic_compare_exchange_n(&job->ctrl->pe_state[r], &running, 1, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

static void pe_close(symmrun_t *job, int r)
{
    symmrun_pe_t *p = &job->pe[r];
    if (p->sock < 0) return;
    /* Explicitly: closing alone would leave it in the epoll set while a child that is
     * between fork and exec still holds a copy of the fd. */
    epoll_ctl(job->ep_fd, EPOLL_CTL_DEL, p->sock, NULL);
    close(p->sock);
    p->sock = -1;
    /* A PE that will never say hello (a program that does not use symm, or one that
     * closed its fds) would leave the others waiting in the rendezvous for a minute:
     * supervise tells them soon, unless pe_exited does first. */
    if (!p->hello && p->running && job->rv == RV_HELLO && job->socket_gone_check_ms == 0)
        job->socket_gone_check_ms = now_ms() + SYMMRUN_SOCKET_GONE_MS;
    rv_check_done(job);
}

static void rv_hello(symmrun_t *job, int r, const symm_boot_msg_t *msg, int fd)
{
    symmrun_pe_t *p = &job->pe[r];

    if (fd < 0 || msg->rank != r || p->hello) {
        job_fail(job, r, -1, 0, 1, SYMMRUN_GRACE_MS, "PE %d said hello %s (rank %d)", r,
                 fd < 0     ? "without its segment fd"
                 : p->hello ? "twice"
                            : "as another PE",
                 (int)msg->rank);
        goto out_close_fd;
    }
    p->hello = true;
    if (job->rv == RV_FAILED) {
        send_error(p->sock, job->rv_error);
        goto out_close_fd;
    }
    if (job->hellos == 0) {
        job->seg_size = msg->size;
        job->first_hello = r;
    } else if (msg->size != job->seg_size) {
        job_fail(job, -1, -1, 0, 1, SYMMRUN_GRACE_MS,
                 "segment sizes differ: PE %d has %llu bytes, PE %d has "
                 "%llu (every PE must use the same heap size)",
                 job->first_hello, (unsigned long long)job->seg_size, r,
                 (unsigned long long)msg->size);
        goto out_close_fd;
    }
    p->seg_fd = fd;
    job->hellos++;
    verbose(job, "PE %d joined (%d of %d), segment %llu bytes", r, job->hellos, job->npes,
            (unsigned long long)msg->size);

    if (job->hellos == job->npes) {
        verbose(job, "all %d PEs joined after %lld ms; handing out segments", job->npes,
                (long long)(now_ms() - job->start_ms));
        job->rv = RV_SEND;
        for (int i = 0; i < job->npes; i++)
            rv_send_pending(job, i);
    }
    return;

out_close_fd:
    if (fd >= 0) close(fd);
}

static void pe_message(symmrun_t *job, int r, const symm_boot_msg_t *msg, int fd)
{
    char text[sizeof msg->text + 1];

    switch (msg->type) {
    case SYMM_BOOT_HELLO:
        rv_hello(job, r, msg, fd);
        return; /* rv_hello owns fd */
    case SYMM_BOOT_BYE:
        job->pe[r].bye = true;
        pe_state_clean(job, r);
        verbose(job, "PE %d finalized", r);
        break;
    case SYMM_BOOT_ABORT: {
        memcpy(text, msg->text, sizeof msg->text);
        text[sizeof msg->text] = '\0';
        /* symmrun's status must say failure even for symm_abort(0, ...). */
        int code = msg->code > 0 && msg->code < 256 ? msg->code : 1;
        if (job->stopping)
            verbose(job, "PE %d aborted too (code %d): %s", r, (int)msg->code, text);
        job_fail(job, r, msg->code, 0, code, SYMMRUN_GRACE_MS,
                 "PE %d aborted the job (code %d): %s", r, (int)msg->code, text);
        break;
    }
    default:
        job_fail(job, r, -1, 0, 1, SYMMRUN_GRACE_MS,
                 "PE %d sent an unknown bootstrap message (type %u)", r, (unsigned)msg->type);
        break;
    }
    if (fd >= 0) close(fd);
}

/* Reads every message queued on PE r's socket; closes it at end of file. */
static void pe_read(symmrun_t *job, int r)
{
    symmrun_pe_t *p = &job->pe[r];
    while (p->sock >= 0) {
        symm_boot_msg_t msg;
        int fds[SYMM_BOOT_SEGS_MAX], nfds;
        int rr = symm_boot_recv(p->sock, &msg, fds, &nfds, MSG_DONTWAIT);
        if (rr < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (rr < 0 && (errno == EBADMSG || errno == EMFILE)) {
            job_fail(job, r, -1, 0, 1, SYMMRUN_GRACE_MS,
                     "PE %d sent a malformed bootstrap message (%s)", r,
                     errno == EMFILE ? "fds lost" : "wrong size");
            continue;
        }
        if (rr <= 0) {
            /* End of file, or the PE died with messages unread (ECONNRESET). Either way
             * its exit status, not the socket, says whether it failed. */
            if (rr < 0 && errno != ECONNRESET)
                verbose(job, "PE %d: recvmsg: %s", r, strerror(errno));
            pe_close(job, r);
            return;
        }
        /* One fd per message; more would only leak. */
        if (nfds > 1) symm_boot_fds_close(fds + 1, nfds - 1);
        pe_message(job, r, &msg, nfds > 0 ? fds[0] : -1);
    }
}

/* ------------------------------------------------------------------ rendezvous */

/* Asks epoll to report PE r's socket writable too, or stops asking. */
static void pe_watch_out(symmrun_t *job, int r, bool out)
{
    symmrun_pe_t *p = &job->pe[r];
    if (p->sock < 0 || p->watch_out == out) return;
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u64 = (uint64_t)r};
    if (epoll_ctl(job->ep_fd, EPOLL_CTL_MOD, p->sock, &ev) == 0)
        p->watch_out = out;
    else
        verbose(job, "PE %d: epoll_ctl: %s", r, strerror(errno));
}

static void rv_check_done(symmrun_t *job)
{
    if (job->rv != RV_SEND) return;
    for (int r = 0; r < job->npes; r++)
        if (job->pe[r].sock >= 0 && job->pe[r].next_send <= job->npes) return;
    /* Every PE holds its own copies now; symmrun keeps only the control page. */
    for (int r = 0; r < job->npes; r++) {
        if (job->pe[r].seg_fd >= 0) close(job->pe[r].seg_fd);
        job->pe[r].seg_fd = -1;
    }
    job->rv = RV_DONE;
    verbose(job, "rendezvous complete after %lld ms", (long long)(now_ms() - job->start_ms));
}

/* Sends PE r as much of its SEGS..., CTRL sequence as its socket takes now; it runs
 * again each time the socket is writable. */
static void rv_send_pending(symmrun_t *job, int r)
{
    symmrun_pe_t *p = &job->pe[r];
    bool refs_full = false;
    while (p->sock >= 0 && p->next_send <= job->npes) {
        symm_boot_msg_t msg;
        memset(&msg, 0, sizeof msg);
        int fds[SYMM_BOOT_SEGS_MAX];
        int nfds;
        if (p->next_send < job->npes) {
            nfds = job->npes - p->next_send;
            if (nfds > SYMM_BOOT_SEGS_MAX) nfds = SYMM_BOOT_SEGS_MAX;
            msg.type = SYMM_BOOT_SEGS;
            msg.rank = p->next_send;
            msg.code = nfds;
            msg.size = job->seg_size;
            for (int i = 0; i < nfds; i++)
                fds[i] = job->pe[p->next_send + i].seg_fd;
        } else {
            msg.type = SYMM_BOOT_CTRL;
            msg.rank = -1;
            msg.size = job->ctrl_size;
            fds[0] = job->ctrl_fd;
            nfds = 1;
        }
        if (symm_boot_send(p->sock, &msg, fds, nfds, MSG_DONTWAIT) == 0) {
            p->next_send += p->next_send < job->npes ? nfds : 1;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == ETOOMANYREFS) {
            /* No wakeup comes for this: supervise retries on a timer. */
            refs_full = true;
            if (!job->inflight_full)
                job->inflight_retry_ms = now_ms() + SYMMRUN_INFLIGHT_RETRY_MS;
            job->inflight_full = true;
            break;
        }
        /* EPIPE, ECONNRESET...: the PE is gone; its exit status tells the rest. */
        verbose(job, "PE %d: cannot send it the segments: %s", r, strerror(errno));
        pe_close(job, r);
    }
    pe_watch_out(job, r, p->sock >= 0 && p->next_send <= job->npes && !refs_full);
    rv_check_done(job);
}

/* ------------------------------------------------------------------ children */

static void pe_exited(symmrun_t *job, int r, int status)
{
    symmrun_pe_t *p = &job->pe[r];
    p->running = false;
    job->running--;
    /* Read what it sent before it died first: an abort's own words beat its status. */
    pe_read(job, r);
    pe_close(job, r);

    /* A PE that got every segment is in the others' world: if it leaves without
     * symm_finalize (returning from main mid-collective), they would wait for it until
     * SYMM_TIMEOUT, so its status 0 is a failure like any other. One that never joined
     * (a program that does not use symm, or whose rendezvous failed) is not. */
    bool joined = p->hello && p->next_send > job->npes;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && joined && !p->bye) {
        if (job->stopping)
            verbose(job, "PE %d exited with status 0 without calling symm_finalize", r);
        job_fail(job, r, 0, 0, 1, SYMMRUN_GRACE_MS,
                 "PE %d exited with status 0 without calling symm_finalize", r);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        pe_state_clean(job, r);
        verbose(job, "PE %d exited with status 0", r);
    } else {
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        char what[96];
        if (sig != 0)
            snprintf(what, sizeof what, "PE %d killed by signal %d (%s)", r, sig,
                     strsignal(sig));
        else
            snprintf(what, sizeof what, "PE %d exited with status %d", r, code);
        if (job->stopping) /* job_fail reports only the first failure */
            verbose(job, "%s", what);
        job_fail(job, r, code, sig, sig != 0 ? 128 + sig : code, SYMMRUN_GRACE_MS, "%s", what);
    }
    /* After the status, so that a failure is what the waiting PEs are told. Exiting
     * cleanly without joining is no failure (a program that does not use symm), but the
     * others must not wait for it. */
    if (!p->hello && job->rv == RV_HELLO) {
        char why[128];
        snprintf(why, sizeof why, "PE %d exited before joining the rendezvous", r);
        rv_fail(job, why);
    }
}

static void reap_children(symmrun_t *job)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR) continue;
        if (pid <= 0) return;
        for (int r = 0; r < job->npes; r++) {
            if (job->pe[r].running && job->pe[r].pid == pid) {
                pe_exited(job, r, status);
                break;
            }
        }
    }
}

static const char *stop_signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

static void handle_signals(symmrun_t *job)
{
    struct signalfd_siginfo si[16];
    ssize_t n;
    while ((n = read(job->sig_fd, si, sizeof si)) > 0) {
        for (size_t i = 0; i < (size_t)n / sizeof si[0]; i++) {
            int sig = (int)si[i].ssi_signo;
            if (sig == SIGCHLD) continue; /* reaped below, all at once */
            if (!job->stopping) {
                job_fail(job, -1, -1, 0, 128 + sig, 0, "job interrupted by %s",
                         stop_signal_name(sig));
            } else {
                /* Asked again (a second Ctrl-C): do not wait any longer. */
                int64_t now = now_ms();
                if (job->term_sent)
                    job->kill_at_ms = now;
                else
                    job->term_at_ms = now;
            }
        }
    }
    reap_children(job);
}

/* ------------------------------------------------------------------ main loop */

static int ms_until(int64_t t, int64_t now)
{
    int64_t d = t - now;
    return d <= 0 ? 0 : d > INT_MAX ? INT_MAX : (int)d;
}

static int min_timeout(int a, int b)
{
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* PEs still running that closed their socket without joining: the rendezvous cannot
 * complete. */
static void rv_check_socket_gone(symmrun_t *job)
{
    job->socket_gone_check_ms = 0;
    for (int r = 0; r < job->npes && job->rv == RV_HELLO; r++) {
        symmrun_pe_t *p = &job->pe[r];
        if (p->running && p->sock < 0 && !p->hello) {
            char why[128];
            snprintf(why, sizeof why,
                     "PE %d closed its symmrun socket before joining the rendezvous", r);
            rv_fail(job, why);
        }
    }
}

/* Last resort when symmrun can no longer watch the PEs: make sure they are gone. */
static void reap_all_now(symmrun_t *job)
{
    kill_all(job, SIGKILL);
    while (job->running > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0 && errno == EINTR) continue;
        if (pid < 0) return;
        for (int r = 0; r < job->npes; r++)
            if (job->pe[r].running && job->pe[r].pid == pid) pe_exited(job, r, status);
    }
}

/* Runs until every started PE has been reaped. */
static void supervise(symmrun_t *job)
{
    int64_t deadline =
        job->timeout_s > 0 ? job->start_ms + (int64_t)(job->timeout_s * 1000) : -1;
    while (job->running > 0) {
        int64_t now = now_ms();
        int timeout = -1;

        if (job->stopping) {
            if (!job->term_sent && now >= job->term_at_ms) {
                verbose(job, "sending SIGTERM to %d %s", job->running, pes_word(job->running));
                kill_all(job, SIGTERM);
                job->term_sent = true;
            }
            if (!job->kill_sent && now >= job->kill_at_ms) {
                verbose(job, "sending SIGKILL to %d %s", job->running, pes_word(job->running));
                kill_all(job, SIGKILL);
                job->kill_sent = true;
            }
            if (!job->term_sent)
                timeout = ms_until(job->term_at_ms, now);
            else if (!job->kill_sent)
                timeout = ms_until(job->kill_at_ms, now);
        } else if (deadline >= 0) {
            if (now >= deadline) {
                job_fail(job, -1, -1, 0, SYMMRUN_EXIT_TIMEOUT, SYMMRUN_GRACE_MS,
                         "job timed out after %g s", job->timeout_s);
                continue;
            }
            timeout = ms_until(deadline, now);
        }
        if (job->socket_gone_check_ms != 0) {
            if (now >= job->socket_gone_check_ms)
                rv_check_socket_gone(job);
            else
                timeout = min_timeout(timeout, ms_until(job->socket_gone_check_ms, now));
        }
        if (job->inflight_full) {
            if (now >= job->inflight_retry_ms) {
                job->inflight_full = false;
                for (int r = 0; r < job->npes; r++)
                    if (job->pe[r].sock >= 0 && job->pe[r].next_send <= job->npes)
                        rv_send_pending(job, r);
            }
            if (job->inflight_full)
                timeout = min_timeout(timeout, ms_until(job->inflight_retry_ms, now));
        }

        struct epoll_event ev[64];
        int n = epoll_wait(job->ep_fd, ev, (int)(sizeof ev / sizeof ev[0]), timeout);
        if (n < 0) {
            if (errno == EINTR) continue;
            fprintf(stderr, "symmrun: epoll_wait: %s\n", strerror(errno));
            job_fail(job, -1, -1, 0, 1, 0, "symmrun failed (epoll_wait: %s)", strerror(errno));
            reap_all_now(job);
            return;
        }
        /* Sockets before signals, so that an abort a PE sent just before it died is
         * read before its death is handled (pe_exited reads its socket too). */
        bool signals = false;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 == SYMMRUN_EPOLL_SIGNALS) {
                signals = true;
                continue;
            }
            int r = (int)ev[i].data.u64;
            if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) pe_read(job, r);
            if ((ev[i].events & EPOLLOUT) && job->rv == RV_SEND) rv_send_pending(job, r);
        }
        if (signals) handle_signals(job);
    }
}

int main(int argc, char **argv)
{
    symmrun_t job = {.ep_fd = -1, .sig_fd = -1, .ctrl_fd = -1, .rv = RV_HELLO};
    int rc = parse_args(argc, argv, &job);
    if (rc >= 0) return rc;

    int err = program_check(job.prog_argv[0]);
    if (err != 0) {
        fprintf(stderr, "symmrun: cannot run '%s': %s\n", job.prog_argv[0], strerror(err));
        return SYMMRUN_EXIT_CANNOT_RUN;
    }
    std_fds_open();
    if (!raise_fd_limit(job.npes)) return 1;

    job.pe = calloc((size_t)job.npes, sizeof *job.pe);
    if (job.pe == NULL) {
        fprintf(stderr, "symmrun: out of memory for %d PEs\n", job.npes);
        return 1;
    }
    for (int r = 0; r < job.npes; r++)
        job.pe[r] = (symmrun_pe_t){.sock = -1, .seg_fd = -1};

    rc = 1;
    if (!ctrl_create(&job)) goto out_free;
    if (!events_setup(&job)) goto out_unmap_ctrl;

    /* Nothing buffered may be written twice by the children. */
    fflush(NULL);
    job.start_ms = now_ms();
    for (int r = 0; r < job.npes; r++) {
        if (!pe_spawn(&job, r)) {
            job_fail(&job, -1, -1, 0, 1, 0, "could not start PE %d of %d", r, job.npes);
            break;
        }
    }
    supervise(&job);

    rc = job.stopping ? job.exit_code : 0;
    if (rc == 0 && job.stopping) rc = 1; /* a stopped job never reports success */
    if (rc == 0) verbose(&job, "all %d PEs exited cleanly", job.npes);

    for (int r = 0; r < job.npes; r++) {
        if (job.pe[r].sock >= 0) close(job.pe[r].sock);
        if (job.pe[r].seg_fd >= 0) close(job.pe[r].seg_fd);
    }
    close(job.ep_fd);
    close(job.sig_fd);
out_unmap_ctrl:
    munmap(job.ctrl, job.ctrl_size);
    close(job.ctrl_fd);
out_free:
    free(job.pe);
    return rc;
}
