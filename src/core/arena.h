/* arena.h — a first-fit allocator of offsets inside a fixed range. The symmetric heap
 * runs one on every PE with the same sequence of calls, which gives the same offsets
 * everywhere; the team region runs one per PE with its own calls. Not thread-safe: the
 * owner holds a lock, except around symm_arena_lookup, which readers call without it. */
#ifndef SYMM_CORE_ARENA_H
#define SYMM_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct symm_arena_block {
    uint64_t off, size;
    int used;
    struct symm_arena_block *prev, *next;
} symm_arena_block_t;

/* A live allocation as its caller asked for it: size is the size asked, not the block's
 * (which is rounded up to 64 bytes). */
typedef struct symm_arena_obj {
    uint64_t off, size;
} symm_arena_obj_t;

/* The live objects in offset order. An index that grew into a larger one stays allocated
 * (chained by retired) until symm_arena_destroy: a lock-free reader may still be in it. */
typedef struct symm_arena_index {
    struct symm_arena_index *retired;
    uint64_t cap; /* fixed when allocated */
    uint64_t n;   /* <= cap */
    symm_arena_obj_t obj[];
} symm_arena_index_t;

typedef struct symm_arena {
    uint64_t size;
    uint64_t used;
    symm_arena_block_t *head;
    /* Odd while the owner changes the index; every change adds 2. It starts at a value no
     * other arena of this process has had, so (seq, offset) never names two objects and a
     * reader may cache what a lookup found for as long as seq stays the same. */
    uint64_t seq;
    symm_arena_index_t *index;
} symm_arena_t;

int symm_arena_init(symm_arena_t *a, uint64_t size);
void symm_arena_destroy(symm_arena_t *a);
/* 0 and *off_out on success; -1 if no room (align is a power of two) or no host memory
 * for the bookkeeping. The object is recorded with the size asked. */
int symm_arena_alloc(symm_arena_t *a, uint64_t size, uint64_t align, uint64_t *off_out);
/* 0 on success; -1 if off is not the start of a live block (nothing changes). */
int symm_arena_free(symm_arena_t *a, uint64_t off);
/* The live block containing [off, off+n), or NULL (the block's rounded size counts). */
const symm_arena_block_t *symm_arena_find(const symm_arena_t *a, uint64_t off, uint64_t n);
/* 1 and the live object whose [off, +size) contains off in *out; 0 if none. Safe without
 * the owner's lock, concurrently with its changes (it retries over one); O(log objects). */
int symm_arena_lookup(const symm_arena_t *a, uint64_t off, symm_arena_obj_t *out);
/* The size of the largest free block (for error messages; walks the blocks). */
uint64_t symm_arena_largest_free(const symm_arena_t *a);

#endif
