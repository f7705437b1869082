/* arena.c — first-fit offset allocator with coalescing, and the sorted index of its live
 * objects that lock-free readers search (see arena.h). */
#include "core/arena.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Every arena's seq starts in its own range of 2^32 changes (see arena.h). */
static uint64_t arena_epoch;

static symm_arena_index_t *index_new(uint64_t cap)
{
    symm_arena_index_t *ix = calloc(1, sizeof *ix + cap * sizeof ix->obj[0]);
    if (ix) ix->cap = cap;
    return ix;
}

int symm_arena_init(symm_arena_t *a, uint64_t size)
{
    a->size = size;
    a->used = 0;
    a->seq = __atomic_add_fetch(&arena_epoch, (uint64_t)1 << 32, __ATOMIC_RELAXED);
    a->index = index_new(16);
    a->head = calloc(1, sizeof *a->head);
    if (!a->head || !a->index) {
        free(a->head);
        free(a->index);
        a->head = NULL;
        a->index = NULL;
        return -1;
    }
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
    symm_arena_index_t *ix = a->index;
    while (ix) {
        symm_arena_index_t *r = ix->retired;
        free(ix);
        ix = r;
    }
    a->index = NULL;
}

/* ---------------------------------------------------------------- index (owner's side) */
/* Room for one more object. The larger copy has the same contents, so it may be
 * published outside a change: a reader sees the old one or the new one, both right. */
static int index_reserve(symm_arena_t *a)
{
    symm_arena_index_t *ix = a->index;
    if (ix->n < ix->cap) return 0;
    symm_arena_index_t *nx = index_new(ix->cap * 2);
    if (!nx) return -1;
    memcpy(nx->obj, ix->obj, ix->n * sizeof ix->obj[0]);
    nx->n = ix->n;
    nx->retired = ix;
    __atomic_store_n(&a->index, nx, __ATOMIC_RELEASE);
    return 0;
}

/* The first position whose object starts after off. */
static uint64_t index_upper(const symm_arena_index_t *ix, uint64_t n, uint64_t off)
{
    uint64_t lo = 0, hi = n;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (__atomic_load_n(&ix->obj[mid].off, __ATOMIC_ACQUIRE) <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* No fences (ThreadSanitizer does not model them): the entries' stores are releases, so
 * the odd count is visible before any of them, and readers load them with acquire, so
 * their second look at the count comes after. On x86 both are plain moves. */
static void change_begin(symm_arena_t *a)
{
    __atomic_store_n(&a->seq, a->seq + 1, __ATOMIC_RELAXED);
}

static void change_end(symm_arena_t *a)
{
    __atomic_store_n(&a->seq, a->seq + 1, __ATOMIC_RELEASE);
}

/* Readers load the entries while they move, so every store is atomic. */
static void obj_store(symm_arena_obj_t *d, uint64_t off, uint64_t size)
{
    __atomic_store_n(&d->off, off, __ATOMIC_RELEASE);
    __atomic_store_n(&d->size, size, __ATOMIC_RELEASE);
}

static void index_insert(symm_arena_t *a, uint64_t off, uint64_t size)
{
    symm_arena_index_t *ix = a->index; /* index_reserve made room */
    uint64_t at = index_upper(ix, ix->n, off);
    change_begin(a);
    for (uint64_t i = ix->n; i > at; i--)
        obj_store(&ix->obj[i], ix->obj[i - 1].off, ix->obj[i - 1].size);
    obj_store(&ix->obj[at], off, size);
    __atomic_store_n(&ix->n, ix->n + 1, __ATOMIC_RELEASE);
    change_end(a);
}

static void index_remove(symm_arena_t *a, uint64_t off)
{
    symm_arena_index_t *ix = a->index;
    uint64_t at = index_upper(ix, ix->n, off);
    if (at == 0 || ix->obj[at - 1].off != off) return;
    change_begin(a);
    for (uint64_t i = at; i < ix->n; i++)
        obj_store(&ix->obj[i - 1], ix->obj[i].off, ix->obj[i].size);
    __atomic_store_n(&ix->n, ix->n - 1, __ATOMIC_RELEASE);
    change_end(a);
}

/* ---------------------------------------------------------------- blocks */
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
    if (index_reserve(a)) return -1;
    uint64_t asked = size;
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
        index_insert(a, b->off, asked);
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
    while (b && b->off < off)
        b = b->next;
    if (!b || b->off != off || !b->used) return -1;
    index_remove(a, off);
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

uint64_t symm_arena_largest_free(const symm_arena_t *a)
{
    uint64_t best = 0;
    for (const symm_arena_block_t *b = a->head; b; b = b->next)
        if (!b->used && b->size > best) best = b->size;
    return best;
}

/* ---------------------------------------------------------------- lock-free lookup */
int symm_arena_lookup(const symm_arena_t *a, uint64_t off, symm_arena_obj_t *out)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t s = __atomic_load_n(&a->seq, __ATOMIC_ACQUIRE);
        if (s & 1) { /* the owner is moving entries; it may be descheduled mid-change */
            if (spins > 64) sched_yield();
            continue;
        }
        const symm_arena_index_t *ix = __atomic_load_n(&a->index, __ATOMIC_ACQUIRE);
        uint64_t n = ix ? __atomic_load_n(&ix->n, __ATOMIC_ACQUIRE) : 0;
        if (ix && n > ix->cap) n = ix->cap;
        uint64_t at = ix ? index_upper(ix, n, off) : 0;
        symm_arena_obj_t o = {0, 0};
        if (at) {
            o.off = __atomic_load_n(&ix->obj[at - 1].off, __ATOMIC_ACQUIRE);
            o.size = __atomic_load_n(&ix->obj[at - 1].size, __ATOMIC_ACQUIRE);
        }
        if (__atomic_load_n(&a->seq, __ATOMIC_RELAXED) != s) continue;
        int found = at && off >= o.off && off - o.off < o.size;
        if (found) *out = o;
        return found;
    }
}
