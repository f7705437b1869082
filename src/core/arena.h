/* arena.h — a first-fit allocator of offsets inside a fixed range. The symmetric heap
 * runs one on every PE with the same sequence of calls, which gives the same offsets
 * everywhere; the team region runs one per PE with its own calls. Not thread-safe: the
 * owner holds a lock. */
#ifndef SYMM_CORE_ARENA_H
#define SYMM_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct symm_arena_block {
    uint64_t off, size;
    int used;
    struct symm_arena_block *prev, *next;
} symm_arena_block_t;

typedef struct symm_arena {
    uint64_t size;
    uint64_t used;
    symm_arena_block_t *head;
} symm_arena_t;

int symm_arena_init(symm_arena_t *a, uint64_t size);
void symm_arena_destroy(symm_arena_t *a);
/* 0 and *off_out on success; -1 if no room (align is a power of two). */
int symm_arena_alloc(symm_arena_t *a, uint64_t size, uint64_t align, uint64_t *off_out);
/* 0 on success; -1 if off is not the start of a live block (nothing changes). */
int symm_arena_free(symm_arena_t *a, uint64_t off);
/* The live block containing [off, off+n), or NULL. */
const symm_arena_block_t *symm_arena_find(const symm_arena_t *a, uint64_t off, uint64_t n);

#endif
