/* config.h — every SYMM_* environment variable, declared once. The same table parses
 * the environment (config.c), prints symm-info and generates docs/ENVIRONMENT.md. */
#ifndef SYMM_CORE_CONFIG_H
#define SYMM_CORE_CONFIG_H

#include <stddef.h>

/* SYMM_ENV(NAME, kind, field, default, lo, hi, help). kind: SIZE (bytes, K/M/G/T
 * suffixes), INT and DOUBLE are valid from lo to hi inclusive; CHOICE is one of the names
 * in lo (SYMM_CHOICES, matched ignoring case), hi unused. symm_init rejects any other value,
 * naming the variable and this range: a nonsense value must not quietly change how waits
 * end (SYMM_SPIN=-1 once disabled SYMM_TIMEOUT). The bounds follow how the value is used:
 * TIMEOUT is multiplied into nanoseconds of a uint64_t (GPU waits), SLEEP_US must fit
 * nanosleep's tv_nsec, the sizes must be mappable in a 47-bit address space. */
#define SYMM_CHOICES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define SYMM_ENV_TB       ((size_t)1 << 40)

#define SYMM_FOREACH_ENV(SYMM_ENV)                                                             \
    SYMM_ENV(BOOTSTRAP, CHOICE, bootstrap, "auto",                                             \
             SYMM_CHOICES("auto", "symmrun", "mpi", "none"), 0,                                \
             "how PEs find each other: auto (symmrun if it started this process, else MPI "    \
             "under mpirun, mpiexec or srun, else a 1-PE job), symmrun, mpi (MPI_Init unless " \
             "the program did), none (every process a 1-PE job)")                              \
    SYMM_ENV(HOSTS, INT, hosts, "1", 1, 1 << 20,                                               \
             "under an MPI launch, the groups each host's PEs form, sharing no memory: "       \
             "contiguous blocks of node ranks, each its own SYMM_TEAM_NODE, reaching the "     \
             "others as if on other hosts")                                                    \
    SYMM_ENV(HEAP_SIZE, SIZE, heap_size, "1G", 1, 64 * SYMM_ENV_TB,                            \
             "bytes of symmetric heap per PE for symm_malloc (K, M, G, T suffixes)")           \
    SYMM_ENV(HEAP_PREFAULT, INT, heap_prefault, "0", 0, 1,                                     \
             "1: symm_malloc maps every new object's pages in all PEs' views at once")         \
    SYMM_ENV(TEAM_HEAP_SIZE, SIZE, team_heap_size, "256M", 1, 64 * SYMM_ENV_TB,                \
             "bytes per PE for the synchronisation state of teams and pools")                  \
    SYMM_ENV(TIMEOUT, DOUBLE, timeout, "120", 1e-3, 1e7,                                       \
             "seconds any wait may last before it fails naming the PEs that never came")       \
    SYMM_ENV(LOG, CHOICE, log, "warn",                                                         \
             SYMM_CHOICES("none", "error", "warn", "info", "debug", "trace"), 0,               \
             "log level: how much symm writes to stderr (each level adds to the one before)")  \
    SYMM_ENV(SPIN, INT, spin, "2000", 1, 1000000000,                                           \
             "busy-poll iterations of a wait before it starts yielding the CPU (a poll "       \
             "that drives MPI's progress counts 16)")                                          \
    SYMM_ENV(YIELD_US, INT, yield_us, "2000", 0, 1000000000,                                   \
             "microseconds a wait yields (sched_yield) before it sleeps between polls")        \
    SYMM_ENV(SLEEP_US, INT, sleep_us, "50", 0, 999999,                                         \
             "microseconds a long wait sleeps between polls (waits past 100 ms sleep at "      \
             "least 1 ms)")                                                                    \
    SYMM_ENV(BARRIER_FANIN, INT, barrier_flat_max, "16", 1, 1000000000,                        \
             "largest team that uses the one-round all-to-all barrier (else dissemination); "  \
             "a team across groups (SYMM_HOSTS, hosts) within it whose members have at most "  \
             "3 members each outside their group keeps that barrier, others sync in two "      \
             "levels")                                                                         \
    SYMM_ENV(COLL_SMALL, SIZE, coll_small, "16K", 0, 64 * SYMM_ENV_TB,                         \
             "bytes up to which collectives read peers' buffers directly in one step")         \
    SYMM_ENV(NODE_CPUS, INT, node_cpus, "0", 0, 1 << 20,                                       \
             "CPUs the node's PEs share, for the automatic worker count of the _parallel "     \
             "forms (0: the union of the PEs' CPU affinity masks at symm_init)")               \
    SYMM_ENV(GPU, CHOICE, gpu, "auto", SYMM_CHOICES("auto", "on", "off"), 0,                   \
             "GPU transport: auto (use it where a GPU is present), on, off")                   \
    SYMM_ENV(GPU_HEAP_SIZE, SIZE, gpu_heap_size, "1G", 1, 64 * SYMM_ENV_TB,                    \
             "bytes of GPU symmetric heap per PE")                                             \
    SYMM_ENV(GPU_DEVICE, INT, gpu_device, "-1", -1, 4095,                                      \
             "GPU of this PE; -1 lets symmrun's SYMM_GPU_MAP decide (rank mod GPU count)")     \
    SYMM_ENV(                                                                                  \
        GPU_COLL_BLOCKS, INT, gpu_coll_blocks, "0", 0, 65536,                                  \
        "blocks of a collective on a stream: 0 chooses (the one-launch latency path up "       \
        "to about 4 KiB per member, else one block per 32 KiB up to this PE's share of the "   \
        "GPU), 1 always one block of the team's own duplicate, N >= 2 every size on N "        \
        "blocks (at most 128)")                                                                \
    SYMM_ENV(GPU_SYNC_SYS, INT, gpu_sync_sys, "0", 0, 1,                                       \
             "1: device rounds always at system scope; 0: at GPU scope in pools whose "        \
             "members all share this PE's GPU (MPS)")                                          \
    SYMM_ENV(GPU_PDL, INT, gpu_pdl, "1", 0, 1,                                                 \
             "1: symm's stream kernels (tile, MoE, low-latency top-k MoE) launch with "        \
             "programmatic dependent launch, so each starts while the kernel before it on "    \
             "the stream drains; 0: plain launches")

typedef struct symm_config {
#define SYMM_CONFIG_FIELD_SIZE(f)                                size_t f;
#define SYMM_CONFIG_FIELD_DOUBLE(f)                              double f;
#define SYMM_CONFIG_FIELD_INT(f)                                 int f;
#define SYMM_CONFIG_FIELD_CHOICE(f)                              const char *f; /* one of the names, as listed */
#define SYMM_CONFIG_FIELD_(NAME, kind, field, def, lo, hi, help) SYMM_CONFIG_FIELD_##kind(field)
    SYMM_FOREACH_ENV(SYMM_CONFIG_FIELD_)
#undef SYMM_CONFIG_FIELD_
} symm_config_t;

extern symm_config_t symm_config;

/* Reads the environment into symm_config. A value that does not parse or lies outside
 * its range is SYMM_ERR_INVALID_ARG with a message naming the variable, the value and
 * the valid range; symm_config is then unchanged. Returns 0 or -1. */
int symm_config_load(void);
/* One line per variable: name, current value, default, valid values, help.
 * markdown!=0 for docs. */
void symm_config_print(int fd, int markdown);
/* Writes the valid values of SYMM_<name> ("1..1000000000", "one of auto, on, off") into
 * buf; returns 0, or -1 for a name not in the table. */
int symm_config_range(const char *name, char *buf, size_t len);
/* Parses "64K", "1G", "4096": returns 0 on success. */
int symm_parse_size(const char *s, size_t *out);

#endif
