/* heap.c — collective allocation on the symmetric heap. Every PE runs the same
 * allocator with the same calls, so offsets agree; an exchange on the internal world
 * team checks that the calls really were the same and that all PEs succeeded, so a
 * failure changes nothing anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/team.h"


/* SYMM_HEAP_PREFAULT: map the new object's pages in this process's view of every PE's
 * heap now, so that the first collective on it does not pay a page fault per page and
 * peer (which halves the bandwidth of a first 256 KiB operation). */
static void prefault(uint64_t off, size_t size)
{
    long page = sysconf(_SC_PAGESIZE);
    for (int pe = 0; pe < symm_g.npes; pe++) {
        uint8_t *base = symm_heap_base(pe) + off;
        uint8_t *lo = (uint8_t *)((uintptr_t)base & ~(uintptr_t)(page - 1));
#ifdef MADV_POPULATE_WRITE
        if (madvise(lo, (size_t)(base + size - lo), MADV_POPULATE_WRITE) == 0) continue;
#endif
        /* Older kernels: a read of each page maps it (shmem allocates on a read fault). */
        for (uint8_t *q = lo; q < base + size; q += page) (void)*(volatile uint8_t *)q;
    }
}

/* Why symm_arena_alloc found no room for size bytes at align: the alignment when a free
 * block holds the size at the heap's own alignment (64: every block starts on one), the
 * heap otherwise. Caller holds heap_lock. */
static symm_status_t no_room(const char *fn, size_t size, size_t align)
{
    const symm_arena_t *a = &symm_g.heap_arena;
    uint64_t largest = symm_arena_largest_free(a);
    uint64_t need = size <= a->size ? ((uint64_t)size + 63) & ~(uint64_t)63 : UINT64_MAX;
    if (align > 64 && need <= largest)
        return symm_error_set(SYMM_ERR_ALIGNMENT, "%s: no free block of the symmetric heap "
                              "holds %zu bytes at alignment %zu (the largest free block, "
                              "%llu bytes, has no room for them past an aligned start; %zu "
                              "of %zu bytes in use)", fn, size, align,
                              (unsigned long long)largest, (size_t)a->used, symm_g.heap_size);
    return symm_error_set(SYMM_ERR_NO_MEMORY, "%s: %zu bytes do not fit in the symmetric heap "
                          "(%zu of %zu bytes in use, largest free block %llu; raise "
                          "SYMM_HEAP_SIZE)", fn, size, (size_t)a->used, symm_g.heap_size,
                          (unsigned long long)largest);
}

/* count x size bytes (count 1 but for symm_calloc). Every check that can fail on one PE
 * only runs before the agreement, so that a failure anywhere fails the call everywhere. */
static void *heap_alloc(const char *fn, size_t count, size_t size1, size_t align, int zero)
{
    if (!symm_g.initialized) {
        symm_error_set(SYMM_ERR_NOT_INITIALIZED, "%s before symm_init", fn);
        return NULL;
    }
    size_t size;
    int over = __builtin_mul_overflow(count, size1, &size);
    if (over) size = SIZE_MAX;
    uint64_t args = symm_hash64(symm_hash64(SYMM_HASH_INIT, size), align);
    int ok = 1;
    symm_status_t local = SYMM_SUCCESS;
    if (over) {
        local = symm_error_set(SYMM_ERR_OVERFLOW, "%s: %zu x %zu bytes overflows size_t", fn,
                               count, size1);
        ok = 0;
    } else if (align == 0 || (align & (align - 1))) {
        local = symm_error_set(SYMM_ERR_ALIGNMENT, "%s: alignment %zu is not a power of two",
                               fn, align);
        ok = 0;
    } else if (align > SYMM_HEAP_ALIGN_MAX) {
        local = symm_error_set(SYMM_ERR_ALIGNMENT, "%s: alignment %zu is larger than the "
                               "largest supported (%zu)", fn, align, SYMM_HEAP_ALIGN_MAX);
        ok = 0;
    }
    uint64_t off = 0;
    pthread_mutex_lock(&symm_g.heap_lock);
    if (ok && size && symm_arena_alloc(&symm_g.heap_arena, size, align < 64 ? 64 : align, &off)) {
        local = no_room(fn, size, align);
        ok = 0;
    }
    char why[512] = "";
    if (!ok) snprintf(why, sizeof why, "%s", symm_last_error());
    symm_status_t st = symm_agree(fn, args, ok, local);
    if (st && ok && size) symm_arena_free(&symm_g.heap_arena, off);
    pthread_mutex_unlock(&symm_g.heap_lock);
    if (!ok) symm_error_set(local, "%s", why); /* this PE's own reason, not the agreement's */
    if (st || !ok || size == 0) {
        if (!st && ok) symm_error_set(SYMM_SUCCESS, "%s(0)", fn);
        return NULL;
    }
    void *p = symm_heap_base(symm_g.me) + off;
    if (symm_config.heap_prefault) prefault(off, size);
    if (zero) memset(p, 0, size);
    return p;
}

void *symm_malloc(size_t size) { return heap_alloc(__func__, 1, size, 64, 0); }

void *symm_align(size_t alignment, size_t size)
{
    return heap_alloc(__func__, 1, size, alignment, 0);
}

void *symm_calloc(size_t count, size_t size)
{
    void *p = heap_alloc(__func__, count, size, 64, 1);
    /* Peers may read the zeros as soon as the call returns on every PE. */
    if (p && symm_team_internal_barrier()) return NULL;
    return p;
}

/* What symm_free(NULL) agrees on: no object's offset hashes to it (offsets are below the
 * heap size), so NULL on one PE and an object on another is a mismatch on both. */
#define FREE_NULL_ARGS symm_hash64(SYMM_HASH_INIT, UINT64_MAX)

symm_status_t symm_free(void *ptr)
{
    SYMM_REQUIRE_INIT();
    /* symm_free(NULL) is collective too, like free(NULL) a no-op when every PE passes it:
     * it takes part in the agreement so that a PE freeing an object while another passes
     * NULL fails at once on both rather than waiting for SYMM_TIMEOUT. */
    int ok = 1;
    uint64_t off = 0, args = FREE_NULL_ARGS;
    symm_status_t local = SYMM_SUCCESS;
    if (ptr && !symm_in_heap(ptr, 0)) {
        local = symm_error_set(SYMM_ERR_NOT_SYMMETRIC, "symm_free(%p): not in the symmetric "
                               "heap of PE %d", ptr, symm_g.me);
        ok = 0;
    } else if (ptr) {
        off = (uint64_t)((uint8_t *)ptr - symm_heap_base(symm_g.me));
        args = symm_hash64(SYMM_HASH_INIT, off);
    }
    pthread_mutex_lock(&symm_g.heap_lock);
    symm_arena_obj_t o;
    if (ptr && ok && !symm_arena_lookup(&symm_g.heap_arena, off, &o)) {
        local = symm_error_set(SYMM_ERR_DOUBLE_FREE, "symm_free(%p): not a live symmetric "
                               "object on PE %d (freed twice, or never allocated)", ptr,
                               symm_g.me);
        ok = 0;
    } else if (ptr && ok && o.off != off) {
        local = symm_error_set(SYMM_ERR_DOUBLE_FREE, "symm_free(%p): %llu bytes into the "
                               "object [%p, +%llu bytes) on PE %d, not its start", ptr,
                               (unsigned long long)(off - o.off),
                               symm_heap_base(symm_g.me) + o.off, (unsigned long long)o.size,
                               symm_g.me);
        ok = 0;
    }
    char why[512] = "";
    if (!ok) snprintf(why, sizeof why, "%s", symm_last_error());
    symm_status_t st = symm_agree("symm_free", args, ok, local);
    if (!st && ok && ptr) symm_arena_free(&symm_g.heap_arena, off);
    pthread_mutex_unlock(&symm_g.heap_lock);
    if (!ok) return symm_error_set(local, "%s", why);
    if (st == SYMM_ERR_MISMATCH) {
        snprintf(why, sizeof why, "%s", symm_last_error());
        return symm_error_set(st, "%s; this PE passed %p (every PE must free the same object, "
                              "or every PE NULL); nothing was freed", why, ptr);
    }
    return st;
}

void *symm_ptr(const void *addr, int pe)
{
    if (!symm_g.initialized || pe < 0 || pe >= symm_g.npes || !symm_in_heap(addr, 1)) return NULL;
    return symm_seg_ptr(addr, pe);
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

__attribute__((noinline, cold)) static symm_status_t heap_check_slow(const char *fn,
                                                                    const char *arg,
                                                                    const void *p, size_t n)
{
    uint8_t *heap = symm_heap_base(symm_g.me);
    if (!symm_in_heap(p, n)) { /* callers check this first, each with its own status */
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC, "%s: %s [%p, +%zu bytes) on PE %d is "
                              "not inside the symmetric heap", fn, arg, p, n, symm_g.me);
    }
    if (n == 0) return SYMM_SUCCESS; /* nothing is accessed: the heap is enough */
    uint64_t off = (uint64_t)((const uint8_t *)p - heap);
    uint64_t seq = __atomic_load_n(&symm_g.heap_arena.seq, __ATOMIC_ACQUIRE);
    symm_arena_obj_t o;
    if (!symm_arena_lookup(&symm_g.heap_arena, off, &o))
        return symm_error_set(SYMM_ERR_NOT_SYMMETRIC, "%s: %s %p on PE %d is in the symmetric "
                              "heap but in no live object (freed, or never allocated)", fn,
                              arg, p, symm_g.me);
    if (n > o.size - (off - o.off))
        return symm_error_set(SYMM_ERR_OVERFLOW, "%s: %s [%p, +%zu bytes) on PE %d runs %llu "
                              "bytes past the end of its object [%p, +%llu bytes)", fn, arg,
                              p, n, symm_g.me,
                              (unsigned long long)(n - (o.size - (off - o.off))),
                              heap + o.off, (unsigned long long)o.size);
    /* seq was read before the lookup: if the index changed in between, the entries never
     * hit (a later seq is never this one), which is only a miss */
    symm_heap_last_t *c = &symm_heap_last;
    if (c->seq == seq) c->e[1] = c->e[0];
    else c->e[1].size = 0;
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
