/* segment.c — the shared-memory transport's segments: the memfd of every PE of my group
 * (handed out by the bootstrap) mapped in this process, what each PE published in its
 * segment header read back (through the launcher for PEs of other groups), the mailboxes
 * of team creation placed in this PE's header. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/config.h"
#include "core/log.h"
#include "transport/shm/shm.h"

symm_status_t symm_shm_segment_map(int p)
{
    /* MAP_NORESERVE: the heap is large and mostly untouched; pages come from the
     * memfd only when first written. */
    /* The heap must start at a multiple of SYMM_HEAP_ALIGN_MAX: reserve that much
     * more address space, map the segment at the right place inside, trim the rest. */
    size_t slack = SYMM_HEAP_ALIGN_MAX;
    uint8_t *r = mmap(NULL, symm_g.seg_size + slack, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return symm_error_set(SYMM_ERR_SYSTEM, "reserving %zu bytes for PE %d's segment: %s",
                              symm_g.seg_size + slack, p, strerror(errno));
    uintptr_t heap = ((uintptr_t)r + symm_g.heap_off + slack - 1) & ~(uintptr_t)(slack - 1);
    uint8_t *at = (uint8_t *)(heap - symm_g.heap_off);
    void *m = mmap(at, symm_g.seg_size, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED | MAP_NORESERVE, symm_g.boot.seg_fd[p], 0);
    if (m == MAP_FAILED) {
        int e = errno;
        munmap(r, symm_g.seg_size + slack);
        return symm_error_set(SYMM_ERR_SYSTEM, "mmap of PE %d's segment (%zu bytes): %s", p,
                              symm_g.seg_size, strerror(e));
    }
    if (at > r) munmap(r, (size_t)(at - r));
    size_t tail = (size_t)(r + symm_g.seg_size + slack - (at + symm_g.seg_size));
    if (tail) munmap(at + symm_g.seg_size, tail);
    symm_g.seg[p] = m;
    return SYMM_SUCCESS;
}

void symm_shm_segment_unmap(int p)
{
    if (symm_g.seg && symm_g.seg[p]) munmap(symm_g.seg[p], symm_g.seg_size);
    if (symm_g.seg) symm_g.seg[p] = NULL;
}

static void unmap_segments(void)
{
    if (!symm_g.seg) return;
    for (int p = 0; p < symm_g.npes; p++)
        symm_shm_segment_unmap(p);
    free(symm_g.seg);
    symm_g.seg = NULL;
    free(symm_g.group);
    symm_g.group = NULL;
}

/* The CPUs the node's PEs may run on, from every PE's published information, so that
 * all PEs compute the same number: the smallest SYMM_NODE_CPUS any PE set, else the
 * size of the union of their affinity masks (PEs pinned to disjoint CPUs add up; PEs
 * free to run anywhere count each CPU once). At least 1. */
static int node_cpus_agree(const symm_pe_info_t *info)
{
    uint64_t uni[SYMM_CPU_MASK_WORDS] = {0}, forced = 0;
    for (int p = 0; p < symm_g.npes; p++) {
        const symm_pe_info_t *i = &info[p];
        for (int w = 0; w < SYMM_CPU_MASK_WORDS; w++)
            uni[w] |= i->cpu_mask[w];
        if (i->node_cpus && (!forced || i->node_cpus < forced)) forced = i->node_cpus;
    }
    int n = 0;
    for (int w = 0; w < SYMM_CPU_MASK_WORDS; w++)
        n += __builtin_popcountll(uni[w]);
    if (forced) n = forced > 1 << 20 ? 1 << 20 : (int)forced;
    return n > 0 ? n : 1;
}

/* Settings that decide the pattern of a collective's episodes must be the same on every
 * PE, or members would wait for signals that never come. Every PE reads the same
 * published values, so every PE fails alike. */
static symm_status_t settings_agree(const symm_pe_info_t *info)
{
    for (int p = 0; p < symm_g.npes; p++) {
        const symm_pe_info_t *i = &info[p];
        if (i->barrier_fanin != (uint64_t)symm_config.barrier_flat_max) {
            symm_g.init_failed_alike = 1;
            return symm_error_set(SYMM_ERR_INVALID_ARG,
                                  "SYMM_BARRIER_FANIN is %d on PE %d but %llu on PE %d: it "
                                  "must be the same on every PE of the job",
                                  symm_config.barrier_flat_max, symm_g.me,
                                  (unsigned long long)i->barrier_fanin, p);
        }
    }
    return SYMM_SUCCESS;
}

/* What every PE published (symm_pe_info_t), by rank: read from the segments mapped here;
 * where some PE's segment is not (another group's), from the launcher, which gives every
 * PE the same table. */
static symm_status_t pe_info_gather(symm_pe_info_t **out)
{
    symm_pe_info_t *info = malloc((size_t)symm_g.npes * sizeof *info);
    if (!info) return symm_error_set(SYMM_ERR_NO_MEMORY, "information of %d PEs", symm_g.npes);
    int all_mapped = 1;
    for (int p = 0; p < symm_g.npes; p++)
        all_mapped &= symm_g.seg[p] != NULL;
    symm_status_t st = SYMM_SUCCESS;
    if (all_mapped) {
        for (int p = 0; p < symm_g.npes; p++)
            memcpy(&info[p], symm_g.seg[p] + symm_g.info_off, sizeof *info);
    } else {
        st = symm_boot_allgather(&symm_g.boot, symm_g.seg[symm_g.me] + symm_g.info_off,
                                 sizeof *info, info);
    }
    if (st != SYMM_SUCCESS) {
        free(info);
        return st;
    }
    *out = info;
    return SYMM_SUCCESS;
}

/* symm_g.group: every PE names its group by the lowest PE whose segment it maps; where
 * some segment is not mapped here, the launcher gathers the names. */
static symm_status_t group_gather(void)
{
    int n = symm_g.npes, mine = -1, all_mapped = 1;
    symm_g.group = calloc((size_t)n, sizeof(int));
    if (!symm_g.group) return symm_error_set(SYMM_ERR_NO_MEMORY, "group table of %d PEs", n);
    for (int p = 0; p < n; p++) {
        all_mapped &= symm_g.seg[p] != NULL;
        if (mine < 0 && symm_g.seg[p]) mine = p;
    }
    if (all_mapped) return SYMM_SUCCESS;
    return symm_boot_allgather(&symm_g.boot, &mine, sizeof mine, symm_g.group);
}

symm_status_t symm_shm_init(void)
{
    symm_status_t st;
    symm_g.seg = calloc((size_t)symm_g.npes, sizeof *symm_g.seg);
    if (!symm_g.seg) return symm_error_set(SYMM_ERR_NO_MEMORY, "segment table");
    for (int p = 0; p < symm_g.npes; p++)
        if (symm_g.boot.seg_fd[p] >= 0) CHECK_GOTO(symm_shm_segment_map(p), st, out_unmap);
    symm_core_boot_fds_close();
    CHECK_GOTO(group_gather(), st, out_unmap);
    symm_pe_info_t *info = NULL;
    CHECK_GOTO(pe_info_gather(&info), st, out_unmap);
    symm_g.node_cpus = node_cpus_agree(info);
    st = settings_agree(info);
    free(info);
    if (st) goto out_unmap;
    uint8_t *my = symm_g.seg[symm_g.me];
    symm_g.mbox = (symm_mbox_t *)my;
    symm_g.mbox_ack = (symm_mbox_ack_t *)(my + (size_t)SYMM_MAX_PES * sizeof(symm_mbox_t));
    return SYMM_SUCCESS;

out_unmap:
    unmap_segments();
    return st;
}

void symm_shm_finalize(void)
{
    unmap_segments();
    symm_g.mbox = NULL;
    symm_g.mbox_ack = NULL;
}
