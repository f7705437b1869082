/* arena.c — first-fit offset allocator with coalescing (see arena.h). */
#include "core/arena.h"

#include <stdlib.h>

int symm_arena_init(symm_arena_t *a, uint64_t size)
{
    a->size = size;
    a->used = 0;
    a->head = calloc(1, sizeof *a->head);
    if (!a->head) return -1;
    a->head->size = size;
    return 0;
}

void symm_arena_destroy(symm_arena_t *a)
{
    symm_arena_block_t *b = a->head;
    while (b) {
        symm_arena_block_t *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
}

/* Splits b so that a new free block starts at b->off + at. */
static int split(symm_arena_block_t *b, uint64_t at)
{
    symm_arena_block_t *n = calloc(1, sizeof *n);
    if (!n) return -1;
    n->off = b->off + at;
    n->size = b->size - at;
    n->prev = b;
    n->next = b->next;
    if (b->next) b->next->prev = n;
    b->next = n;
    b->size = at;
    return 0;
}

int symm_arena_alloc(symm_arena_t *a, uint64_t size, uint64_t align, uint64_t *off_out)
{
    /* size > a->size first: rounding a size near UINT64_MAX up to 64 would wrap to 0 */
    if (size == 0 || size > a->size || align == 0 || (align & (align - 1))) return -1;
    size = (size + 63) & ~(uint64_t)63; /* keep objects on their own cache lines */
    for (symm_arena_block_t *b = a->head; b; b = b->next) {
        if (b->used) continue;
        uint64_t start = (b->off + align - 1) & ~(align - 1);
        uint64_t pad = start - b->off;
        if (pad > b->size || b->size - pad < size) continue;
        if (pad) {
            if (split(b, pad)) return -1;
            b = b->next;
        }
        if (b->size > size && split(b, size)) return -1;
        b->used = 1;
        a->used += b->size;
        *off_out = b->off;
        return 0;
    }
    return -1;
}

static void merge_next(symm_arena_block_t *b)
{
    symm_arena_block_t *n = b->next;
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    free(n);
}

int symm_arena_free(symm_arena_t *a, uint64_t off)
{
    symm_arena_block_t *b = a->head;
    while (b && b->off < off) b = b->next;
    if (!b || b->off != off || !b->used) return -1;
    b->used = 0;
    a->used -= b->size;
    if (b->next && !b->next->used) merge_next(b);
    if (b->prev && !b->prev->used) merge_next(b->prev);
    return 0;
}

const symm_arena_block_t *symm_arena_find(const symm_arena_t *a, uint64_t off, uint64_t n)
{
    for (const symm_arena_block_t *b = a->head; b; b = b->next) {
        if (off >= b->off && off - b->off < b->size)
            return (b->used && n <= b->size - (off - b->off)) ? b : NULL;
        if (b->off > off) break;
    }
    return NULL;
}
