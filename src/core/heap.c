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

static void *heap_alloc(const char *fn, size_t size, size_t align, int zero)
{
    if (!symm_g.initialized) {
        symm_error_set(SYMM_ERR_NOT_INITIALIZED, "%s before symm_init", fn);
        return NULL;
    }
    uint64_t args = symm_hash64(symm_hash64(SYMM_HASH_INIT, size), align);
    int ok = 1;
    symm_status_t local = SYMM_SUCCESS;
    if (align == 0 || (align & (align - 1))) {
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
        local = symm_error_set(SYMM_ERR_NO_MEMORY, "%s: %zu bytes do not fit in the symmetric "
                               "heap (%zu of %zu in use; raise SYMM_HEAP_SIZE)", fn, size,
                               (size_t)symm_g.heap_arena.used, symm_g.heap_size);
        ok = 0;
    }
    char why[512] = "";
    if (!ok) snprintf(why, sizeof why, "%s", symm_last_error());
    symm_status_t st = symm_agree(fn, args, ok, SYMM_ERR_INVALID_ARG);
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

void *symm_malloc(size_t size) { return heap_alloc(__func__, size, 64, 0); }

void *symm_align(size_t alignment, size_t size) { return heap_alloc(__func__, size, alignment, 0); }

void *symm_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        symm_error_set(SYMM_ERR_OVERFLOW, "symm_calloc: %zu x %zu overflows", count, size);
        return NULL;
    }
    void *p = heap_alloc(__func__, count * size, 64, 1);
    /* Peers may read the zeros as soon as the call returns on every PE. */
    if (p && symm_barrier(symm_team_internal)) return NULL;
    return p;
}

symm_status_t symm_free(void *ptr)
{
    SYMM_REQUIRE_INIT();
    if (!ptr) return SYMM_SUCCESS; /* like free(NULL) — and every PE must agree, see below */
    int ok = 1;
    uint64_t off = 0;
    symm_status_t local = SYMM_SUCCESS;
    if (!symm_in_heap(ptr, 0)) {
        local = symm_error_set(SYMM_ERR_NOT_SYMMETRIC, "symm_free(%p): not in the symmetric "
                               "heap", ptr);
        ok = 0;
    } else {
        off = (uint64_t)((uint8_t *)ptr - symm_heap_base(symm_g.me));
    }
    pthread_mutex_lock(&symm_g.heap_lock);
    if (ok) {
        const symm_arena_block_t *b = symm_arena_find(&symm_g.heap_arena, off, 0);
        if (!b || b->off != off) {
            local = symm_error_set(SYMM_ERR_DOUBLE_FREE, "symm_free(%p): not the start of a "
                                   "live symmetric object (freed twice?)", ptr);
            ok = 0;
        }
    }
    char why[512] = "";
    if (!ok) snprintf(why, sizeof why, "%s", symm_last_error());
    symm_status_t st =
        symm_agree("symm_free", symm_hash64(SYMM_HASH_INIT, off), ok, SYMM_ERR_INVALID_ARG);
    if (!st && ok) symm_arena_free(&symm_g.heap_arena, off);
    pthread_mutex_unlock(&symm_g.heap_lock);
    if (!ok) return symm_error_set(local, "%s", why);
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
    pthread_mutex_lock(&symm_g.heap_lock);
    int ok = symm_arena_find(&symm_g.heap_arena, off, size) != NULL;
    pthread_mutex_unlock(&symm_g.heap_lock);
    return ok;
}
