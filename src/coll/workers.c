/* workers.c — persistent worker threads for the *_parallel forms. Starting threads on
 * every call cost tens of microseconds, more than a 256 KiB operation itself; these
 * threads are made once, park on a futex when idle (never spin for long: PEs may
 * outnumber cores), and serve one call at a time. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "coll/tile_moe.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/wait.h"

typedef struct worker_thread {
    pthread_t thread;
    uint32_t go;   /* futex: bumped by the caller to hand over a job */
    uint32_t done; /* futex: bumped by the worker when the job is finished */
    int quit;
    /* the job */
    symm_worker_fn_t fn;
    void *arg;
    symm_pool_t pool;
    int worker, nworkers;
    symm_coll_gate_t *gate; /* worker 0's first verdict, awaited before fn */
    symm_status_t st;
    char msg[512];
    struct worker_thread *next_idle;
} worker_thread_t;

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static worker_thread_t *idle_list;
static worker_thread_t **all_threads;
static size_t n_all, cap_all;

static void futex_wait(uint32_t *addr, uint32_t val)
{
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits for *addr to differ from old: a short spin (the hand-over is usually quick),
 * then sleep in the kernel. */
static void wait_change(uint32_t *addr, uint32_t old)
{
    for (int i = 0; i < 2000; i++) {
        if (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != old) return;
        symm_cpu_relax();
    }
    while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) == old)
        futex_wait(addr, old);
}

static void job_run(worker_thread_t *w)
{
    if (w->gate && (w->st = symm_coll_gate_wait(w->gate)) != SYMM_SUCCESS) {
        snprintf(w->msg, sizeof w->msg, "worker 0's call failed: %s", symm_strerror(w->st));
        return;
    }
    w->st = w->fn(w->pool, w->worker, w->nworkers, w->arg);
    if (w->st) snprintf(w->msg, sizeof w->msg, "%s", symm_last_error());
}

static __thread symm_coll_gate_t *gate_mine;

symm_coll_gate_t *symm_coll_take_gate(void)
{
    symm_coll_gate_t *g = gate_mine;
    gate_mine = NULL;
    return g;
}

static void *worker_main(void *p)
{
    worker_thread_t *w = p;
    uint32_t seen = 0;
    for (;;) {
        wait_change(&w->go, seen);
        seen = __atomic_load_n(&w->go, __ATOMIC_ACQUIRE);
        if (w->quit) return NULL;
        job_run(w);
        __atomic_add_fetch(&w->done, 1, __ATOMIC_RELEASE);
        futex_wake(&w->done);
    }
}

/* An idle thread, or a new one; NULL if none can be made. */
static worker_thread_t *thread_take(void)
{
    pthread_mutex_lock(&idle_lock);
    worker_thread_t *w = idle_list;
    if (w) {
        idle_list = w->next_idle;
        pthread_mutex_unlock(&idle_lock);
        return w;
    }
    if (n_all == cap_all) {
        size_t cap = cap_all ? cap_all * 2 : 16;
        worker_thread_t **a = realloc(all_threads, cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&idle_lock);
            return NULL;
        }
        all_threads = a;
        cap_all = cap;
    }
    w = calloc(1, sizeof *w);
    if (w && pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        free(w);
        w = NULL;
    }
    if (w) all_threads[n_all++] = w;
    pthread_mutex_unlock(&idle_lock);
    return w;
}

static void thread_give_back(worker_thread_t *w)
{
    pthread_mutex_lock(&idle_lock);
    w->next_idle = idle_list;
    idle_list = w;
    pthread_mutex_unlock(&idle_lock);
}

/* Keeps the first failure of the workers, with its message. */
static void keep_first(symm_status_t *st, char *msg, size_t len, const worker_thread_t *w,
                       int i)
{
    if (!w->st || *st) return;
    *st = w->st;
    if (snprintf(msg, len, "%s (worker %d)", w->msg, i) < 0) msg[0] = '\0';
}

int symm_coll_auto_workers(symm_pool_t pool, size_t work_bytes)
{
    /* Every PE must reach the same number (they meet on the same duplicates), so it is
     * made only of what all PEs see alike: the node's CPUs as agreed at symm_init
     * (symm_g.node_cpus), the PE count, the pool's size and the operation's size. */
    int n = symm_g.node_cpus / (symm_g.npes > 0 ? symm_g.npes : 1);
    if (n < 1) n = 1;
    if (n > SYMM_WORKERS_AUTO_MAX) n = SYMM_WORKERS_AUTO_MAX;
    size_t size = symm_pool_size(pool);
    if (size && (size_t)n > size) n = (int)size;
    if (work_bytes != SIZE_MAX) {
        size_t by_size = work_bytes / SYMM_WORKER_MIN_BYTES;
        if (by_size < (size_t)n) n = by_size > 1 ? (int)by_size : 1;
    }
    return n;
}

int symm_pool_auto_workers(symm_pool_t pool, size_t work_bytes)
{
    if (!symm_g.initialized || !symm_pool_size(pool)) return 0;
    return symm_coll_auto_workers(pool, work_bytes);
}

/* Worker 0 runs first on duplicate 0, where every member takes part whatever its
 * arguments (a bad worker count included: worker 0 then fails there). Its first
 * verdict (the gate) says that every member runs the same call with the same worker
 * count; only then do the others touch their duplicates, so a member whose arguments
 * would pick another count never leaves a duplicate out of step. */
symm_status_t symm_coll_run_workers(const char *fn_name, symm_pool_t pool, int nworkers,
                                    size_t work_bytes, symm_worker_fn_t fn, void *arg)
{
    if (nworkers == 0) nworkers = symm_coll_auto_workers(pool, work_bytes);
    symm_team_t t;
    symm_status_t pre = symm_coll_worker_team(fn_name, pool, 0, nworkers, &t);
    if (pre && t == SYMM_TEAM_INVALID) return pre;
    int nrun = pre ? 1 : nworkers; /* a bad count: worker 0 alone, failing on dup 0 */
    symm_coll_gate_t gate = {0, SYMM_SUCCESS};
    worker_thread_t *w_stack[SYMM_WORKERS_AUTO_MAX], **w = w_stack;
    uint32_t done_stack[SYMM_WORKERS_AUTO_MAX], *done0 = done_stack;
    if (nrun > SYMM_WORKERS_AUTO_MAX) {
        w = calloc((size_t)nrun, sizeof *w);
        done0 = calloc((size_t)nrun, sizeof *done0);
        if (!w || !done0) {
            free(w);
            free(done0);
            return symm_error_set(SYMM_ERR_NO_MEMORY, "%s: no memory for %d workers", fn_name,
                                  nworkers);
        }
    }
    for (int i = 1; i < nrun; i++) {
        w[i] = thread_take();
        if (!w[i]) continue;
        w[i]->fn = fn;
        w[i]->arg = arg;
        w[i]->pool = pool;
        w[i]->worker = i;
        w[i]->nworkers = nworkers;
        w[i]->gate = &gate;
        done0[i] = __atomic_load_n(&w[i]->done, __ATOMIC_ACQUIRE);
        __atomic_add_fetch(&w[i]->go, 1, __ATOMIC_RELEASE);
        futex_wake(&w[i]->go);
    }
    worker_thread_t self = {
        .fn = fn, .arg = arg, .pool = pool, .worker = 0, .nworkers = nworkers};
    gate_mine = nrun > 1 ? &gate : NULL;
    job_run(&self);
    gate_mine = NULL;
    symm_coll_gate_open(&gate, self.st); /* where worker 0 never reached a verdict */
    self.gate = &gate;
    symm_status_t st = SYMM_SUCCESS;
    char msg[600];
    keep_first(&st, msg, sizeof msg, &self, 0);
    /* Duplicates are independent: a worker with no thread runs late on this one, which
     * delays its peers on that duplicate only (bounded by SYMM_TIMEOUT). */
    for (int i = 1; i < nrun; i++) {
        if (w[i]) continue;
        self.worker = i;
        job_run(&self);
        keep_first(&st, msg, sizeof msg, &self, i);
    }
    for (int i = 1; i < nrun; i++) {
        if (!w[i]) continue;
        wait_change(&w[i]->done, done0[i]);
        keep_first(&st, msg, sizeof msg, w[i], i);
        thread_give_back(w[i]);
    }
    if (w != w_stack) {
        free(w);
        free(done0);
    }
    if (st) return symm_error_set(st, "%s", msg);
    return SYMM_SUCCESS;
}

void symm_coll_workers_shutdown(void)
{
    /* Called at symm_finalize, when no operation can be running: every thread is idle. */
    pthread_mutex_lock(&idle_lock);
    for (size_t i = 0; i < n_all; i++) {
        worker_thread_t *w = all_threads[i];
        w->quit = 1;
        __atomic_add_fetch(&w->go, 1, __ATOMIC_RELEASE);
        futex_wake(&w->go);
        pthread_join(w->thread, NULL);
        free(w);
    }
    free(all_threads);
    all_threads = NULL;
    n_all = cap_all = 0;
    idle_list = NULL;
    pthread_mutex_unlock(&idle_lock);
}
