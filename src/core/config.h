/* config.h — every SYMM_* environment variable, declared once. The same table parses
 * the environment (config.c), prints symm-info and generates docs/ENVIRONMENT.md. */
#ifndef SYMM_CORE_CONFIG_H
#define SYMM_CORE_CONFIG_H

#include <stddef.h>

/* SYMM_ENV(NAME, kind, field, default, help); kind: SIZE (bytes, K/M/G suffixes),
 * DOUBLE, INT, STRING. */
#define SYMM_FOREACH_ENV(SYMM_ENV)                                                        \
    SYMM_ENV(HEAP_SIZE, SIZE, heap_size, "1G",                                          \
             "bytes of symmetric heap per PE for symm_malloc (K, M, G suffixes)")         \
    SYMM_ENV(HEAP_PREFAULT, INT, heap_prefault, "0",                                      \
             "1: symm_malloc maps every new object's pages in all PEs' views at once")    \
    SYMM_ENV(TEAM_HEAP_SIZE, SIZE, team_heap_size, "256M",                              \
             "bytes per PE for the synchronisation state of teams and pools")             \
    SYMM_ENV(TIMEOUT, DOUBLE, timeout, "120",                                           \
             "seconds any wait may last before it fails naming the PEs that never came")  \
    SYMM_ENV(LOG, STRING, log, "warn",                                                  \
             "log level: none, error, warn, info, debug, trace")                          \
    SYMM_ENV(SPIN, INT, spin, "2000",                                                   \
             "busy-poll iterations of a wait before it starts yielding the CPU")          \
    SYMM_ENV(YIELD_US, INT, yield_us, "2000",                                           \
             "microseconds a wait yields (sched_yield) before it sleeps between polls")   \
    SYMM_ENV(SLEEP_US, INT, sleep_us, "50",                                             \
             "microseconds a long wait sleeps between polls")                             \
    SYMM_ENV(BARRIER_FANIN, INT, barrier_flat_max, "16",                                \
             "largest team that uses the one-round all-to-all barrier (else dissemination)") \
    SYMM_ENV(COLL_SMALL, SIZE, coll_small, "16K",                                       \
             "bytes up to which collectives read peers' buffers directly in one step")    \
    SYMM_ENV(NODE_CPUS, INT, node_cpus, "0",                                            \
             "CPUs the node's PEs share, for the automatic worker count of the _parallel " \
             "forms (0: the union of the PEs' CPU affinity masks at symm_init)")          \
    SYMM_ENV(GPU, STRING, gpu, "auto",                                                  \
             "GPU transport: auto (use it where a GPU is present), on, off")              \
    SYMM_ENV(GPU_HEAP_SIZE, SIZE, gpu_heap_size, "1G",                                  \
             "bytes of GPU symmetric heap per PE")                                        \
    SYMM_ENV(GPU_DEVICE, INT, gpu_device, "-1",                                         \
             "GPU of this PE; -1 lets symmrun's SYMM_GPU_MAP decide (rank mod GPU count)") \
    SYMM_ENV(GPU_COLL_BLOCKS, INT, gpu_coll_blocks, "0",                                \
             "blocks of a collective on a stream: 0 chooses (one below 64K, else one per " \
             "64K up to this PE's share of the GPU), 1 always one, N a grid of up to N") \
    SYMM_ENV(GPU_SYNC_SYS, INT, gpu_sync_sys, "0",                                      \
             "1: device rounds always at system scope; 0: at GPU scope in pools whose "   \
             "members all share this PE's GPU (MPS)")                                     \
    SYMM_ENV(GPU_PDL, INT, gpu_pdl, "1",                                                \
             "1: symm's stream kernels (tile, MoE) launch with programmatic dependent "   \
             "launch, so each starts while the kernel before it on the stream drains; 0: " \
             "plain launches")

typedef struct symm_config {
#define SYMM_CONFIG_FIELD_SIZE(f) size_t f;
#define SYMM_CONFIG_FIELD_DOUBLE(f) double f;
#define SYMM_CONFIG_FIELD_INT(f) int f;
#define SYMM_CONFIG_FIELD_STRING(f) const char *f;
#define SYMM_CONFIG_FIELD_(NAME, kind, field, def, help) SYMM_CONFIG_FIELD_##kind(field)
    SYMM_FOREACH_ENV(SYMM_CONFIG_FIELD_)
#undef SYMM_CONFIG_FIELD_
} symm_config_t;

extern symm_config_t symm_config;

/* Reads the environment; an unparsable value is an error naming the variable. */
int symm_config_load(void);
/* One line per variable: name, current value, default, help. markdown!=0 for docs. */
void symm_config_print(int fd, int markdown);
/* Parses "64K", "1G", "4096": returns 0 on success. */
int symm_parse_size(const char *s, size_t *out);

#endif
