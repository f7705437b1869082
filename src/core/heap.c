/* heap.c — this PE's side of the symmetric heap: the pages of a new object, why an
 * allocation found no room, the object-bounds checks. The collective calls that agree
 * on every allocation (symm_malloc, symm_free) are in lib/heap.c, above the team layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"

/* SYMM_HEAP_PREFAULT: map the new object's pages in this process's view of every PE's
 * heap now, so that the first collective on it does not pay a page fault per page and
 * peer (which halves the bandwidth of a first 256 KiB operation). */
void symm_heap_prefault(uint64_t off, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    for (int pe = 0; pe < symm_g.npes; pe++) {
        if (!symm_g.seg[pe]) continue; /* another group's: not mapped here */
        uint8_t *base = symm_heap_base(pe) + off;
        uint8_t *lo = (uint8_t *)((uintptr_t)base & ~(uintptr_t)(page - 1));
#ifdef MADV_POPULATE_WRITE
        if (madvise(lo, (size_t)(base + size - lo), MADV_POPULATE_WRITE) == 0) continue;
#endif
        /* Older kernels: a read of each page maps it (shmem allocates on a read fault). */
        for (uint8_t *q = lo; q < base + size; q += page)
            (void)*(volatile uint8_t *)q;
    }
}

/* Why symm_arena_alloc found no room for size bytes at align: the alignment when a free
 * block holds the size at the heap's own alignment (64: every block starts on one), the
 * heap otherwise. Caller holds heap_lock. */
symm_status_t symm_heap_no_room(const char *fn, size_t size, size_t align)
{
    const symm_arena_t *a = &symm_g.heap_arena;
    uint64_t largest = symm_arena_largest_free(a);
    uint64_t need = size <= a->size ? ((uint64_t)size + 63) & ~(uint64_t)63 : UINT64_MAX;
    if (align > 64 && need <= largest)
        return symm_error_set(SYMM_ERR_ALIGNMENT,
                              "%s: no free block of the symmetric heap "
                              "holds %zu bytes at alignment %zu (the largest free block, "
                              "%llu bytes, has no room for them past an aligned start; %zu "
                              "of %zu bytes in use)",
                              fn, size, align, (unsigned long long)largest, (size_t)a->used,
                              symm_g.heap_size);
    return symm_error_set(SYMM_ERR_NO_MEMORY,
                          "%s: %zu bytes do not fit in the symmetric heap "
                          "(%zu of %zu bytes in use, largest free block %llu; raise "
                          "SYMM_HEAP_SIZE)",
                          fn, size, (size_t)a->used, symm_g.heap_size,
                          (unsigned long long)largest);
}

int symm_addr_accessible(const void *addr, size_t size)
{
    if (!symm_g.initialized || !symm_in_heap(addr, size)) return 0;
    uint64_t off = (uint64_t)((const uint8_t *)addr - symm_heap_base(symm_g.me));
    symm_arena_obj_t o;
    return symm_arena_lookup(&symm_g.heap_arena, off, &o) && size <= o.size - (off - o.off);
}

/* ---------------------------------------------------------------- object bounds */
_Thread_local symm_heap_last_t symm_heap_last;

__attribute__((noinline, cold)) static symm_status_t
heap_check_slow(const char *fn, const char *arg, const void *p, size_t n)
{
    uint8_t *heap = symm_heap_base(symm_g.me);
    if (!symm_in_heap(p, n)) { /* callers check this first, each with its own status */
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s [%p, +%zu bytes) on PE %d is "
                              "not inside the symmetric heap",
                              fn, arg, p, n, symm_g.me);
    }
    if (n == 0) return SYMM_SUCCESS; /* nothing is accessed: the heap is enough */
    uint64_t off = (uint64_t)((const uint8_t *)p - heap);
    uint64_t seq = __atomic_load_n(&symm_g.heap_arena.seq, __ATOMIC_ACQUIRE);
    symm_arena_obj_t o;
    if (!symm_arena_lookup(&symm_g.heap_arena, off, &o))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                              "%s: %s %p on PE %d is in the symmetric "
                              "heap but in no live object (freed, or never allocated)",
                              fn, arg, p, symm_g.me);
    if (n > o.size - (off - o.off))
        return symm_error_set(SYMM_ERR_OVERFLOW,
                              "%s: %s [%p, +%zu bytes) on PE %d runs %llu "
                              "bytes past the end of its object [%p, +%llu bytes)",
                              fn, arg, p, n, symm_g.me,
                              (unsigned long long)(n - (o.size - (off - o.off))), heap + o.off,
                              (unsigned long long)o.size);
    /* seq was read before the lookup: if the index changed in between, the entries never
     * hit (a later seq is never this one), which is only a miss */
    symm_heap_last_t *c = &symm_heap_last;
    if (c->seq == seq)
        c->e[1] = c->e[0];
    else
        c->e[1].size = 0;
    c->seq = seq;
    c->e[0].base = (uintptr_t)heap + o.off;
    c->e[0].size = o.size;
    return SYMM_SUCCESS;
}

symm_status_t symm_heap_check(const char *fn, const char *arg, const void *p, size_t n)
{
    if (SYMM_LIKELY(symm_heap_hit(p, n))) return SYMM_SUCCESS;
    return heap_check_slow(fn, arg, p, n);
}
