/* heap.c — collective allocation on the symmetric heap. Every PE runs the same
 * allocator with the same calls, so offsets agree; an exchange on the internal world
 * team checks that the calls really were the same and that all PEs succeeded, so a
 * failure changes nothing anywhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "team/team.h"

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
        local = symm_error_set(SYMM_ERR_ALIGNMENT,
                               "%s: alignment %zu is larger than the "
                               "largest supported (%zu)",
                               fn, align, SYMM_HEAP_ALIGN_MAX);
        ok = 0;
    }
    uint64_t off = 0;
    pthread_mutex_lock(&symm_g.heap_lock);
    if (ok && size &&
        symm_arena_alloc(&symm_g.heap_arena, size, align < 64 ? 64 : align, &off)) {
        local = symm_heap_no_room(fn, size, align);
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
    if (symm_config.heap_prefault) symm_heap_prefault(off, size);
    if (zero) memset(p, 0, size);
    return p;
}

void *symm_malloc(size_t size)
{
    return heap_alloc(__func__, 1, size, 64, 0);
}

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
        local = symm_error_set(SYMM_ERR_NOT_SYMMETRIC,
                               "symm_free(%p): not in the symmetric "
                               "heap of PE %d",
                               ptr, symm_g.me);
        ok = 0;
    } else if (ptr) {
        off = (uint64_t)((uint8_t *)ptr - symm_heap_base(symm_g.me));
        args = symm_hash64(SYMM_HASH_INIT, off);
    }
    pthread_mutex_lock(&symm_g.heap_lock);
    symm_arena_obj_t o;
    if (ptr && ok && !symm_arena_lookup(&symm_g.heap_arena, off, &o)) {
        local = symm_error_set(SYMM_ERR_DOUBLE_FREE,
                               "symm_free(%p): not a live symmetric "
                               "object on PE %d (freed twice, or never allocated)",
                               ptr, symm_g.me);
        ok = 0;
    } else if (ptr && ok && o.off != off) {
        local = symm_error_set(SYMM_ERR_DOUBLE_FREE,
                               "symm_free(%p): %llu bytes into the "
                               "object [%p, +%llu bytes) on PE %d, not its start",
                               ptr, (unsigned long long)(off - o.off),
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
        return symm_error_set(st,
                              "%s; this PE passed %p (every PE must free the same object, "
                              "or every PE NULL); nothing was freed",
                              why, ptr);
    }
    return st;
}
