/* test_arena.c — the first-fit offset allocator (src/core/arena.c) against a serial
 * model: random alloc/free sequences, alignment, coalescing, exhaustion, bad frees; the
 * index of live objects (lookup by any offset, with the size asked) and the largest free
 * block. */
#include "common/test_util.h"
#include "core/arena.h"

#include <pthread.h>
#include <sched.h>

#define GRAIN 64u

typedef struct {
    uint64_t off, size; /* size rounded to GRAIN, as the arena keeps it */
    uint64_t asked;     /* the size asked, which lookup reports */
} live_t;

typedef struct {
    uint64_t size;
    live_t *live;
    size_t n, cap;
} model_t;

static int cmp_live(const void *a, const void *b)
{
    const live_t *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* First fit over the free gaps in address order: what the arena must return. */
static int model_alloc(const model_t *m, uint64_t size, uint64_t align, uint64_t *off)
{
    if (size == 0 || size > m->size) return -1;
    size = (size + GRAIN - 1) / GRAIN * GRAIN;
    uint64_t gap = 0;
    for (size_t i = 0; i <= m->n; i++) {
        uint64_t end = i < m->n ? m->live[i].off : m->size;
        uint64_t start = (gap + align - 1) / align * align;
        if (start <= end && end - start >= size) {
            *off = start;
            return 0;
        }
        if (i < m->n) gap = m->live[i].off + m->live[i].size;
    }
    return -1;
}

static void model_add(model_t *m, uint64_t off, uint64_t size)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->live = realloc(m->live, m->cap * sizeof *m->live);
        if (!m->live) TEST_FAIL("out of memory");
    }
    m->live[m->n].off = off;
    m->live[m->n].size = (size + GRAIN - 1) / GRAIN * GRAIN;
    m->live[m->n].asked = size;
    m->n++;
    qsort(m->live, m->n, sizeof *m->live, cmp_live);
}

static void model_remove(model_t *m, size_t i)
{
    memmove(&m->live[i], &m->live[i + 1], (m->n - i - 1) * sizeof *m->live);
    m->n--;
}

/* The arena's block list must tile [0, size) exactly, have no two adjacent free blocks
 * (coalescing), its used blocks must be the model's live ones, and used must add up. */
static void check_structure(const symm_arena_t *a, const model_t *m, const char *when)
{
    uint64_t at = 0, used = 0;
    size_t k = 0;
    int prev_free = 0;
    const symm_arena_block_t *prev = NULL;
    for (const symm_arena_block_t *b = a->head; b; prev = b, b = b->next) {
        CHECK_TRUE(b->prev == prev, "%s: broken prev link at offset %llu", when,
                   (unsigned long long)b->off);
        CHECK_TRUE(b->off == at, "%s: block at %llu, expected %llu (gap or overlap)", when,
                   (unsigned long long)b->off, (unsigned long long)at);
        CHECK_TRUE(b->size > 0, "%s: empty block at %llu", when, (unsigned long long)b->off);
        if (b->used) {
            CHECK_TRUE(k < m->n && m->live[k].off == b->off && m->live[k].size == b->size,
                       "%s: used block [%llu,+%llu) is not the model's live block %zu", when,
                       (unsigned long long)b->off, (unsigned long long)b->size, k);
            k++;
            used += b->size;
            prev_free = 0;
        } else {
            CHECK_TRUE(!prev_free, "%s: two adjacent free blocks at %llu (not coalesced)", when,
                       (unsigned long long)b->off);
            prev_free = 1;
        }
        at += b->size;
    }
    CHECK_TRUE(at == a->size, "%s: blocks cover %llu of %llu bytes", when,
               (unsigned long long)at, (unsigned long long)a->size);
    CHECK_TRUE(k == m->n, "%s: %zu used blocks, model has %zu", when, k, m->n);
    CHECK_EQ_U64(a->used, used);
    /* the index holds exactly the live objects, in order, with the sizes asked */
    CHECK_TRUE(a->index && a->index->n == m->n && a->index->n <= a->index->cap,
               "%s: index of %llu objects, model has %zu", when,
               (unsigned long long)(a->index ? a->index->n : 0), m->n);
    for (size_t i = 0; i < m->n; i++)
        CHECK_TRUE(
            a->index->obj[i].off == m->live[i].off && a->index->obj[i].size == m->live[i].asked,
            "%s: index entry %zu is [%llu,+%llu), model [%llu,+%llu)", when, i,
            (unsigned long long)a->index->obj[i].off, (unsigned long long)a->index->obj[i].size,
            (unsigned long long)m->live[i].off, (unsigned long long)m->live[i].asked);
    CHECK_TRUE((a->seq & 1) == 0, "%s: seq %llu is odd outside a change", when,
               (unsigned long long)a->seq);
    uint64_t gap = 0, largest = 0;
    for (size_t i = 0; i <= m->n; i++) {
        uint64_t end = i < m->n ? m->live[i].off : m->size;
        if (end - gap > largest) largest = end - gap;
        if (i < m->n) gap = m->live[i].off + m->live[i].size;
    }
    CHECK_EQ_U64(symm_arena_largest_free(a), largest);
}

/* lookup: every byte of an object's asked size finds it; the padding past it, and free
 * space, find nothing. */
static void check_lookup(const symm_arena_t *a, const model_t *m, test_rng_t *r)
{
    symm_arena_obj_t o = {12345, 678};
    for (int t = 0; t < 4 && m->n; t++) {
        const live_t *l = &m->live[test_rng_below(r, m->n)];
        uint64_t in = test_rng_below(r, l->asked);
        CHECK_TRUE(
            symm_arena_lookup(a, l->off + in, &o) && o.off == l->off && o.size == l->asked,
            "lookup(%llu) in [%llu,+%llu) gave [%llu,+%llu)", (unsigned long long)(l->off + in),
            (unsigned long long)l->off, (unsigned long long)l->asked, (unsigned long long)o.off,
            (unsigned long long)o.size);
        CHECK_TRUE(symm_arena_lookup(a, l->off + l->asked - 1, &o) && o.off == l->off,
                   "lookup of the last byte");
        if (l->asked < l->size) {
            o.off = 999;
            CHECK_TRUE(!symm_arena_lookup(a, l->off + l->asked, &o) && o.off == 999,
                       "lookup in the padding past [%llu,+%llu) found an object",
                       (unsigned long long)l->off, (unsigned long long)l->asked);
        }
    }
    /* a free offset: right after the last object's block, if that is not the end */
    uint64_t after = m->n ? m->live[m->n - 1].off + m->live[m->n - 1].size : 0;
    if (after < m->size)
        CHECK_TRUE(!symm_arena_lookup(a, after + test_rng_below(r, m->size - after), &o),
                   "lookup in free space past %llu found an object", (unsigned long long)after);
    CHECK_TRUE(!symm_arena_lookup(a, m->size, &o) && !symm_arena_lookup(a, UINT64_MAX, &o),
               "lookup past the arena");
}

static void test_random(uint64_t seed, uint64_t arena_size, int steps)
{
    symm_arena_t a;
    CHECK_TRUE(symm_arena_init(&a, arena_size) == 0, "init");
    model_t m = {.size = arena_size};
    test_rng_t r;
    test_rng_seed(&r, seed);
    int fails = 0, allocs = 0;
    for (int s = 0; s < steps; s++) {
        int do_alloc = m.n == 0 || test_rng_below(&r, 100) < 55;
        if (do_alloc) {
            uint64_t size;
            switch (test_rng_below(&r, 4)) {
            case 0:
                size = 1 + test_rng_below(&r, 64);
                break;
            case 1:
                size = 1 + test_rng_below(&r, 4096);
                break;
            case 2:
                size = 1 + test_rng_below(&r, arena_size / 8);
                break;
            default:
                size = 1 + test_rng_below(&r, arena_size);
                break;
            }
            uint64_t align = (uint64_t)1 << test_rng_below(&r, 14); /* 1 .. 8K */
            uint64_t want = 0, got = 0;
            int mrc = model_alloc(&m, size, align, &want);
            int rc = symm_arena_alloc(&a, size, align, &got);
            CHECK_TRUE(rc == mrc, "step %d: alloc(%llu, align %llu) returned %d, model %d", s,
                       (unsigned long long)size, (unsigned long long)align, rc, mrc);
            if (rc == 0) {
                CHECK_TRUE(got == want,
                           "step %d: alloc(%llu, align %llu) at %llu, first fit "
                           "is %llu",
                           s, (unsigned long long)size, (unsigned long long)align,
                           (unsigned long long)got, (unsigned long long)want);
                CHECK_TRUE(got % align == 0, "misaligned");
                model_add(&m, got, size);
                allocs++;
            } else {
                fails++;
            }
        } else {
            size_t i = (size_t)test_rng_below(&r, m.n);
            CHECK_TRUE(symm_arena_free(&a, m.live[i].off) == 0, "step %d: free(%llu)", s,
                       (unsigned long long)m.live[i].off);
            /* a second free of the same offset fails and changes nothing */
            uint64_t off = m.live[i].off;
            model_remove(&m, i);
            CHECK_TRUE(symm_arena_free(&a, off) == -1,
                       "step %d: double free of %llu "
                       "succeeded",
                       s, (unsigned long long)off);
        }
        check_structure(&a, &m, "random step");
        check_lookup(&a, &m, &r);
        /* find: a byte inside a live block finds it; a range running past it does not */
        if (m.n) {
            live_t *l = &m.live[test_rng_below(&r, m.n)];
            uint64_t in = test_rng_below(&r, l->size);
            const symm_arena_block_t *b = symm_arena_find(&a, l->off + in, l->size - in);
            CHECK_TRUE(b && b->off == l->off, "find inside a live block");
            CHECK_TRUE(!symm_arena_find(&a, l->off + in, l->size - in + 1),
                       "find of a range past the block's end succeeded");
        }
    }
    CHECK_TRUE(allocs > steps / 4 && fails > 0,
               "the sequence exercised too little "
               "(%d allocs, %d failures)",
               allocs, fails);
    /* free everything in random order: one free block again */
    while (m.n) {
        size_t i = (size_t)test_rng_below(&r, m.n);
        CHECK_TRUE(symm_arena_free(&a, m.live[i].off) == 0, "final free");
        model_remove(&m, i);
        check_structure(&a, &m, "final free");
    }
    CHECK_TRUE(a.head && !a.head->next && !a.head->used && a.head->size == arena_size,
               "not one free block after freeing everything");
    symm_arena_destroy(&a);
    free(m.live);
}

static void test_edges(void)
{
    symm_arena_t a;
    CHECK_TRUE(symm_arena_init(&a, 4096) == 0, "init");
    model_t m = {.size = 4096};
    uint64_t off = 12345;
    /* bad arguments fail and change nothing */
    CHECK_TRUE(symm_arena_alloc(&a, 0, 64, &off) == -1, "alloc of 0 bytes");
    CHECK_TRUE(symm_arena_alloc(&a, 64, 0, &off) == -1, "alignment 0");
    CHECK_TRUE(symm_arena_alloc(&a, 64, 48, &off) == -1, "alignment 48");
    CHECK_TRUE(symm_arena_alloc(&a, 4097, 1, &off) == -1, "more than the arena");
    CHECK_TRUE(symm_arena_alloc(&a, UINT64_MAX, 1, &off) == -1, "UINT64_MAX bytes");
    CHECK_TRUE(symm_arena_alloc(&a, UINT64_MAX - 62, 1, &off) == -1, "UINT64_MAX-62 bytes");
    CHECK_TRUE(symm_arena_alloc(&a, 64, (uint64_t)1 << 63, &off) != 0 || off == 0,
               "huge alignment");
    if (off == 0) { /* offset 0 is aligned to anything: legal */
        CHECK_TRUE(symm_arena_free(&a, 0) == 0, "free");
    }
    CHECK_TRUE(off == 0 || off == 12345, "a failed alloc wrote its output");
    check_structure(&a, &m, "bad args");
    CHECK_TRUE(symm_arena_free(&a, 0) == -1, "free of a free block");
    CHECK_TRUE(symm_arena_free(&a, 64) == -1, "free inside a free block");
    CHECK_TRUE(symm_arena_free(&a, 1 << 20) == -1, "free past the end");
    check_structure(&a, &m, "bad frees");

    /* exact fill: 64 blocks of 64 bytes, then nothing fits; sizes 1 and 63 round up */
    uint64_t offs[64];
    for (int i = 0; i < 64; i++) {
        uint64_t asked = (i % 3 == 0) ? 1 : (i % 3 == 1) ? 63 : 64;
        CHECK_TRUE(symm_arena_alloc(&a, asked, 1, &offs[i]) == 0, "fill %d", i);
        CHECK_EQ_U64(offs[i], (uint64_t)i * 64);
        model_add(&m, offs[i], asked);
    }
    CHECK_TRUE(symm_arena_alloc(&a, 1, 1, &off) == -1, "alloc in a full arena");
    CHECK_EQ_U64(a.used, 4096);
    check_structure(&a, &m, "full");
    /* free in the middle of a block fails */
    CHECK_TRUE(symm_arena_free(&a, 65) == -1, "free of a non-start offset");
    /* coalescing: free 10, 12, then 11 — one 192-byte hole that a 192-byte request fits */
    CHECK_TRUE(symm_arena_free(&a, 640) == 0 && symm_arena_free(&a, 768) == 0, "free");
    CHECK_TRUE(symm_arena_alloc(&a, 128, 1, &off) == -1, "128 bytes in 64-byte holes");
    CHECK_TRUE(symm_arena_free(&a, 704) == 0, "free");
    CHECK_TRUE(symm_arena_alloc(&a, 192, 1, &off) == 0 && off == 640, "coalesced hole");
    /* alignment beyond the grain: 256-aligned 64 bytes in a hole at 640..832 is 768 */
    CHECK_TRUE(symm_arena_free(&a, 640) == 0, "free");
    CHECK_TRUE(symm_arena_alloc(&a, 64, 256, &off) == 0 && off == 768, "aligned in hole: %llu",
               (unsigned long long)off);
    CHECK_TRUE(symm_arena_alloc(&a, 128, 1, &off) == 0 && off == 640, "pad reused: %llu",
               (unsigned long long)off);
    symm_arena_destroy(&a);
    free(m.live);
}

/* Lock-free lookups while the owner allocates and frees (and the index grows): objects
 * that stay allocated throughout are always found with their bounds. */
typedef struct {
    symm_arena_t *a;
    uint64_t pinned_off[4], pinned_size[4];
    int stop, bad, rounds;
} race_t;

static void *race_reader(void *arg)
{
    race_t *x = arg;
    uint64_t k = 0;
    while (!__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) {
        int i = (int)(k++ % 4);
        symm_arena_obj_t o;
        uint64_t at = x->pinned_off[i] + k % x->pinned_size[i];
        if (!symm_arena_lookup(x->a, at, &o) || o.off != x->pinned_off[i] ||
            o.size != x->pinned_size[i])
            __atomic_add_fetch(&x->bad, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void test_race(uint64_t seed)
{
    symm_arena_t a;
    CHECK_TRUE(symm_arena_init(&a, 1 << 24) == 0, "init");
    race_t x = {.a = &a};
    test_rng_t r;
    test_rng_seed(&r, seed);
    uint64_t offs[512];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        x.pinned_size[i] = 1 + test_rng_below(&r, 300);
        CHECK_TRUE(symm_arena_alloc(&a, x.pinned_size[i], 64, &x.pinned_off[i]) == 0, "pin");
        for (int j = 0; j < 20; j++) /* objects between the pinned ones, freed later */
            if (symm_arena_alloc(&a, 1 + test_rng_below(&r, 200), 64, &offs[n]) == 0) n++;
    }
    pthread_t th;
    CHECK_TRUE(pthread_create(&th, NULL, race_reader, &x) == 0, "pthread_create");
    for (int s = 0; s < 20000; s++) {
        if (n < 512 && (n == 0 || test_rng_below(&r, 100) < 55)) {
            if (symm_arena_alloc(&a, 1 + test_rng_below(&r, 4096), 64, &offs[n]) == 0) n++;
        } else {
            int i = (int)test_rng_below(&r, (uint64_t)n);
            CHECK_TRUE(symm_arena_free(&a, offs[i]) == 0, "free");
            offs[i] = offs[--n];
        }
        if (s % 64 == 0) sched_yield(); /* let the reader run between changes too */
    }
    __atomic_store_n(&x.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK_TRUE(x.bad == 0, "%d lookups of pinned objects went wrong during changes", x.bad);
    CHECK_TRUE(a.index->cap >= 256, "the index never grew (cap %llu)",
               (unsigned long long)a.index->cap);
    symm_arena_destroy(&a);
}

int main(void)
{
    test_edges();
    uint64_t seed = test_seed();
    test_random(seed, 1 << 20, 4000);
    test_random(seed + 1, 64 * 1024, 4000);
    test_random(seed + 2, 4096 + 64 * 3, 2000);
    test_race(seed + 3);
    printf("test_arena: OK\n");
    return 0;
}
