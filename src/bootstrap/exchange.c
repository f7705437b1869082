/* exchange.c — symm started by a launcher it does not know (torchrun and its store, a
 * scheduler's key-value service): the caller supplies an allgather (symm_init_exchange),
 * which carries the name of the node's rendezvous socket and the outcome; the segments
 * themselves go over that socket as under MPI (node.c), so nothing is left in /dev/shm
 * or /tmp. Every PE must be on this host. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bootstrap/boot.h"
#include "bootstrap/wire.h"
#include "core/log.h"

/* The caller's exchange, set for the length of one symm_init_exchange. */
static const symm_exchange_t *boot_ex;

void symm_boot_exchange_use(const symm_exchange_t *ex)
{
    boot_ex = ex;
}

int symm_boot_exchange_pending(void)
{
    return boot_ex != NULL;
}

/* What every PE tells the others in the first round. Two PEs can meet on the node's
 * socket only if they run on one kernel (boot_id) in one network namespace (abstract
 * sockets belong to one). */
typedef struct {
    char boot_id[40];
    uint64_t netns_dev, netns_ino;
    int32_t rank, npes;
    uint64_t seg_size;
    char host[64];
    char name[SYMM_BOOT_NODE_NAME_LEN]; /* PE 0: the socket to connect to */
    char error[200];                    /* PE 0: why there is none */
} ex_hello_t;

static void ex_hello_fill(int rank, int npes, size_t seg_size, ex_hello_t *h)
{
    memset(h, 0, sizeof *h);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, h->boot_id, sizeof h->boot_id - 1);
        if (n > 0 && h->boot_id[n - 1] == '\n') h->boot_id[n - 1] = '\0';
        close(fd);
    }
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0) {
        h->netns_dev = (uint64_t)st.st_dev;
        h->netns_ino = (uint64_t)st.st_ino;
    }
    if (gethostname(h->host, sizeof h->host - 1) != 0) snprintf(h->host, sizeof h->host, "?");
    h->rank = rank;
    h->npes = npes;
    h->seg_size = seg_size;
}

static int ex_same_host(const ex_hello_t *a, const ex_hello_t *b)
{
    return strcmp(a->boot_id, b->boot_id) == 0 && a->netns_dev == b->netns_dev &&
           a->netns_ino == b->netns_ino;
}

/* The caller's allgather, its failure reported. */
static symm_status_t ex_allgather(int rank, const void *mine, void *all, size_t n,
                                  const char *what)
{
    int rc = boot_ex->allgather(boot_ex->ctx, mine, all, n);
    if (rc != 0)
        return symm_error_set(SYMM_ERR_BOOTSTRAP,
                              "PE %d: the caller's allgather of %s failed (it returned %d)",
                              rank, what, rc);
    return SYMM_SUCCESS;
}

/* Checks the first round's table, the same on every PE, so every PE decides alike.
 * Names the hosts when the PEs are on several: "h1 (PEs 0-3), h2 (PEs 4-7)". */
static symm_status_t ex_hello_check(int rank, int npes, const ex_hello_t *all)
{
    for (int p = 0; p < npes; p++) {
        if (all[p].rank != p || all[p].npes != npes)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "PE %d: entry %d of the caller's allgather comes from PE %d "
                                  "of %d (each PE's bytes must land at its rank, and every PE "
                                  "must pass the same npes, here %d)",
                                  rank, p, (int)all[p].rank, (int)all[p].npes, npes);
        if (all[p].seg_size != all[0].seg_size)
            return symm_error_set(SYMM_ERR_BOOTSTRAP,
                                  "segment sizes differ: PE 0 has %llu bytes, PE %d has %llu "
                                  "(every PE must use the same SYMM_HEAP_SIZE and "
                                  "SYMM_TEAM_HEAP_SIZE)",
                                  (unsigned long long)all[0].seg_size, p,
                                  (unsigned long long)all[p].seg_size);
    }
    int hosts = 1;
    for (int p = 1; p < npes; p++)
        if (!ex_same_host(&all[p], &all[p - 1])) hosts++;
    if (hosts > 1) {
        char list[320];
        const size_t room = sizeof list - 8;
        size_t n = 0;
        int p = 0;
        while (p < npes && n < room) {
            int q = p;
            while (q + 1 < npes && ex_same_host(&all[q + 1], &all[p]))
                q++;
            int w = q > p ? snprintf(list + n, room - n, "%s%s (PEs %d-%d)", n ? ", " : "",
                                     all[p].host, p, q)
                          : snprintf(list + n, room - n, "%s%s (PE %d)", n ? ", " : "",
                                     all[p].host, p);
            n = w < 0 ? room : n + (size_t)w;
            p = q + 1;
        }
        if (p < npes || n >= room) strcpy(list + (n < room ? n : room - 1), " ...");
        return symm_error_set(SYMM_ERR_UNSUPPORTED,
                              "the job's %d PEs are not all on one host (or not all in one "
                              "network namespace): %s; a caller-supplied exchange starts PEs "
                              "of one host only",
                              npes, list);
    }
    if (all[0].error[0] != '\0')
        return rank == 0 ? symm_last_status()
                         : symm_error_set(SYMM_ERR_BOOTSTRAP,
                                          "PE %d: the rendezvous failed (PE 0: %s)", rank,
                                          all[0].error);
    return SYMM_SUCCESS;
}

static symm_status_t ex_check_args(const symm_exchange_t *ex)
{
    if (ex->size < sizeof(symm_exchange_t) || ex->allgather == NULL || ex->npes < 1 ||
        ex->rank < 0 || ex->rank >= ex->npes)
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "symm_init_exchange: bad exchange (size %zu of at least %zu, "
                              "rank %d of %d PEs, allgather %s)",
                              ex->size, sizeof(symm_exchange_t), ex->rank, ex->npes,
                              ex->allgather ? "given" : "NULL");
    return SYMM_SUCCESS;
}

/* A round in which every PE says whether it succeeded so far; st if it failed here,
 * else a failure naming the first PE that failed, else success. The same outcome on every
 * PE whose allgather works: a PE that failed in the caller's allgather still takes part,
 * so that the others stop at once instead of waiting for it on the node's socket. */
static symm_status_t ex_agree(int rank, int npes, symm_status_t st, const char *what)
{
    int32_t ok = st == SYMM_SUCCESS, *oks = calloc((size_t)npes, sizeof *oks);
    int rc = oks == NULL ? -1 : boot_ex->allgather(boot_ex->ctx, &ok, oks, sizeof ok);
    if (st == SYMM_SUCCESS && oks == NULL)
        st = symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: the outcomes of %d PEs", rank, npes);
    else if (st == SYMM_SUCCESS && rc != 0)
        st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                            "PE %d: the caller's allgather of %s failed (it returned %d)", rank,
                            what, rc);
    for (int p = 0; st == SYMM_SUCCESS && p < npes; p++)
        if (!oks[p])
            st = symm_error_set(SYMM_ERR_BOOTSTRAP,
                                "PE %d: the rendezvous failed on PE %d (its message says why)",
                                rank, p);
    free(oks);
    return st;
}

symm_status_t symm_boot_exchange_init(int my_seg_fd, size_t seg_size, symm_boot_t *out)
{
    CHECK(ex_check_args(boot_ex));
    const int rank = boot_ex->rank, npes = boot_ex->npes;
    if (npes == 1) {
        int *seg_fd;
        CHECK(symm_boot_fd_table_new(0, 1, &seg_fd));
        seg_fd[0] = my_seg_fd;
        *out = (symm_boot_t){.via = SYMM_BOOT_VIA_EXCHANGE,
                             .rank = 0,
                             .npes = 1,
                             .sock = -1,
                             .seg_fd = seg_fd,
                             .seg_size = seg_size,
                             .ctrl_fd = -1};
        return SYMM_SUCCESS;
    }

    /* Round 1: who is where, and PE 0's socket. */
    symm_status_t st;
    ex_hello_t mine, *all = calloc((size_t)npes, sizeof *all);
    if (all == NULL)
        return symm_error_set(SYMM_ERR_NO_MEMORY, "PE %d: the rendezvous table of %d PEs", rank,
                              npes);
    ex_hello_fill(rank, npes, seg_size, &mine);
    symm_boot_node_t node = {.listen_fd = -1};
    if (rank == 0) {
        if (symm_boot_node_listen(&node) == SYMM_SUCCESS)
            memcpy(mine.name, node.name, sizeof mine.name);
        else
            snprintf(mine.error, sizeof mine.error, "%s", symm_last_error());
    }
    st = ex_allgather(rank, &mine, all, sizeof mine, "the rendezvous hello");
    if (st == SYMM_SUCCESS) st = ex_hello_check(rank, npes, all);
    char name[SYMM_BOOT_NODE_NAME_LEN];
    memcpy(name, all[0].name, sizeof name);
    name[sizeof name - 1] = '\0';
    free(all);
    /* Round 2: did every PE get a good table? */
    st = ex_agree(rank, npes, st, "the hellos' outcome");
    if (st != SYMM_SUCCESS) {
        if (node.listen_fd >= 0) close(node.listen_fd);
        return st;
    }

    /* The segments over the node's socket, then round 3: the outcome must be the same
     * everywhere, since a PE that failed here may have left others holding segments. */
    symm_boot_t b = {.via = SYMM_BOOT_VIA_NONE, .sock = -1, .ctrl_fd = -1};
    st = rank == 0 ? symm_boot_node_serve(&node, npes, npes, my_seg_fd, seg_size, &b)
                   : symm_boot_node_join(name, rank, npes, my_seg_fd, seg_size, &b);
    st = ex_agree(rank, npes, st, "the rendezvous' outcome");
    if (st != SYMM_SUCCESS) {
        if (b.seg_fd != NULL) {
            symm_boot_fd_table_free(b.seg_fd, npes, my_seg_fd);
            if (b.ctrl_fd >= 0) close(b.ctrl_fd);
        }
        return st;
    }
    b.via = SYMM_BOOT_VIA_EXCHANGE;
    *out = b;
    return SYMM_SUCCESS;
}
