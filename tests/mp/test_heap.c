/* test_heap.c — collective allocation: symm_malloc/calloc/align/free give the same
 * offsets on every PE (checked by reading each PE's copy through symm_get), calloc
 * zeroes, alignment is honoured, exhaustion and mismatched calls fail on every PE and
 * change nothing, bad frees fail and change nothing; symm_ptr and symm_addr_accessible. */
#include "common/test_util.h"

static int me, npes;

static size_t heap_used(void)
{
    symm_info_t i;
    CHECK_OK(symm_get_info(&i));
    return i.heap_used;
}

/* Every PE fills its copy of p (n bytes) with a pattern tagged by its rank, then every
 * PE reads every other's copy through symm_get: if offsets differed, the bytes would. */
static void check_symmetric(void *p, size_t n, uint64_t tag)
{
    test_fill_pattern(p, n, tag * 1000 + (uint64_t)me);
    CHECK_OK(symm_barrier_all());
    size_t m = n < 4096 ? n : 4096; /* the head and tail of big objects */
    uint8_t *buf = malloc(m ? m : 1), *want = malloc(n ? n : 1);
    for (int pe = 0; pe < npes; pe++) {
        test_fill_pattern(want, n, tag * 1000 + (uint64_t)pe);
        CHECK_OK(symm_get(buf, p, m, pe));
        CHECK_BYTES(buf, want, m, "head of object %llu (%zu bytes) on PE %d",
                    (unsigned long long)tag, n, pe);
        CHECK_OK(symm_get(buf, (uint8_t *)p + n - m, m, pe));
        CHECK_BYTES(buf, want + n - m, m, "tail of object %llu on PE %d",
                    (unsigned long long)tag, pe);
        /* a peer pointer exists exactly for the PEs of my group (SYMM_TEAM_NODE) */
        uint8_t *q = symm_ptr(p, pe);
        if (symm_team_translate_pe(SYMM_TEAM_WORLD, pe, SYMM_TEAM_NODE) < 0) {
            CHECK_TRUE(q == NULL, "symm_ptr(%p, %d) of another group", p, pe);
            continue;
        }
        CHECK_TRUE(q != NULL, "symm_ptr(%p, %d)", p, pe);
        CHECK_TRUE(q[0] == want[0] && q[n - 1] == want[n - 1], "symm_ptr copy of PE %d", pe);
    }
    free(buf);
    free(want);
    CHECK_OK(symm_barrier_all());
}

static void test_sizes(void)
{
    static const size_t sizes[] = {1, 7, 63, 64, 65, 100, 4095, 4096, 4097, (1u << 20) + 3, 3};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    size_t used0 = heap_used();
    CHECK_NULL_STATUS(symm_malloc(0), SYMM_SUCCESS);
    CHECK_NULL_STATUS(symm_calloc(0, 8), SYMM_SUCCESS);
    CHECK_NULL_STATUS(symm_calloc(8, 0), SYMM_SUCCESS);
    CHECK_NULL_STATUS(symm_align(64, 0), SYMM_SUCCESS);
    CHECK_EQ_U64(heap_used(), used0);
    for (size_t i = 0; i < N; i++) {
        p[i] = symm_malloc(sizes[i]);
        CHECK_TRUE(p[i] != NULL, "symm_malloc(%zu)", sizes[i]);
        CHECK_TRUE((uintptr_t)p[i] % 64 == 0, "symm_malloc(%zu) = %p not 64-aligned", sizes[i],
                   p[i]);
        CHECK_TRUE(symm_addr_accessible(p[i], sizes[i]), "accessible(%p, %zu)", p[i], sizes[i]);
        CHECK_TRUE(symm_addr_accessible((uint8_t *)p[i] + sizes[i] - 1, 1), "last byte");
        for (size_t j = 0; j < i; j++) /* no overlap with the earlier objects */
            CHECK_TRUE((uint8_t *)p[i] >= (uint8_t *)p[j] + sizes[j] ||
                           (uint8_t *)p[j] >= (uint8_t *)p[i] + sizes[i],
                       "objects %zu and %zu overlap", i, j);
        check_symmetric(p[i], sizes[i], i + 1);
    }
    CHECK_TRUE(heap_used() >= used0 + (1u << 20), "heap_used %zu", heap_used());
    /* free the odd ones, allocate again (reuse), then the rest */
    for (size_t i = 1; i < N; i += 2)
        CHECK_OK(symm_free(p[i]));
    for (size_t i = 1; i < N; i += 2)
        CHECK_TRUE(!symm_addr_accessible(p[i], 1), "freed object %zu accessible", i);
    for (size_t i = 1; i < N; i += 2) {
        p[i] = symm_malloc(sizes[i] + 5);
        CHECK_TRUE(p[i] != NULL, "realloc %zu", i);
        check_symmetric(p[i], sizes[i] + 5, 100 + i);
    }
    for (size_t i = 0; i < N; i++)
        CHECK_OK(symm_free(p[i]));
    CHECK_EQ_U64(heap_used(), used0);
}

static void test_calloc_align(void)
{
    size_t used0 = heap_used();
    /* dirty memory, freed, then calloc'd again: must read as zeros on every PE */
    for (size_t n = 1; n <= (1u << 16) + 5; n = n * 3 + 1) {
        uint8_t *d = symm_malloc(n);
        CHECK_TRUE(d != NULL, "malloc %zu", n);
        memset(d, 0xa5, n);
        CHECK_OK(symm_free(d));
        uint8_t *z = symm_calloc(n, 1);
        CHECK_TRUE(z != NULL, "calloc %zu", n);
        /* peers' copies are zero as soon as calloc returns */
        uint8_t *buf = malloc(n);
        for (int pe = 0; pe < npes; pe++) {
            CHECK_OK(symm_get(buf, z, n, pe));
            CHECK_ALL_BYTES(buf, 0, n, "calloc(%zu) on PE %d", n, pe);
        }
        free(buf);
        CHECK_OK(symm_barrier_all());
        CHECK_OK(symm_free(z));
    }
    uint64_t *c = symm_calloc(1000, sizeof(uint64_t));
    CHECK_TRUE(c != NULL, "calloc(1000, 8)");
    CHECK_ALL_BYTES(c, 0, 8000, "calloc(1000, 8)");
    CHECK_OK(symm_free(c));
    CHECK_NULL_STATUS(symm_calloc(SIZE_MAX / 2, 3), SYMM_ERR_OVERFLOW);
    /* alignments 1 .. 1M, with odd sizes */
    void *held[21];
    for (int k = 0; k <= 20; k++) {
        size_t a = (size_t)1 << k, n = 1 + (size_t)k * 37;
        held[k] = symm_align(a, n);
        CHECK_TRUE(held[k] != NULL, "symm_align(%zu, %zu)", a, n);
        CHECK_TRUE((uintptr_t)held[k] % a == 0, "symm_align(%zu) = %p", a, held[k]);
        check_symmetric(held[k], n, 200 + (uint64_t)k);
    }
    for (int k = 0; k <= 20; k++)
        CHECK_OK(symm_free(held[k]));
    size_t used1 = heap_used();
    CHECK_NULL_STATUS(symm_align(0, 64), SYMM_ERR_ALIGNMENT);
    CHECK_NULL_STATUS(symm_align(3, 64), SYMM_ERR_ALIGNMENT);
    CHECK_NULL_STATUS(symm_align(96, 64), SYMM_ERR_ALIGNMENT);
    /* beyond SYMM_HEAP_ALIGN_MAX: the alignment is at fault, not the heap */
    CHECK_NULL_STATUS(symm_align((size_t)1 << 40, 64), SYMM_ERR_ALIGNMENT);
    CHECK_TRUE(strstr(symm_last_error(), "alignment") && !strstr(symm_last_error(), "fit"),
               "message: %s", symm_last_error());
    CHECK_EQ_U64(heap_used(), used1);
    CHECK_EQ_U64(heap_used(), used0);
}

static void test_exhaustion_and_mismatch(void)
{
    symm_info_t info;
    CHECK_OK(symm_get_info(&info));
    size_t used0 = info.heap_used;
    uint64_t *keep = symm_malloc(256);
    CHECK_TRUE(keep != NULL, "malloc");
    test_fill_pattern(keep, 256, 77 + (uint64_t)me);
    size_t used1 = heap_used();
    /* too big for everyone: NULL and NO_MEMORY on every PE, nothing changed */
    CHECK_NULL_STATUS(symm_malloc(info.heap_size + 1), SYMM_ERR_NO_MEMORY);
    CHECK_NULL_STATUS(symm_malloc(info.heap_size), SYMM_ERR_NO_MEMORY);
    CHECK_NULL_STATUS(symm_malloc(SIZE_MAX), SYMM_ERR_NO_MEMORY);
    CHECK_NULL_STATUS(symm_calloc(info.heap_size / 8, 16), SYMM_ERR_NO_MEMORY);
    CHECK_NULL_STATUS(symm_align(4096, info.heap_size), SYMM_ERR_NO_MEMORY);
    CHECK_TRUE(strstr(symm_last_error(), "SYMM_HEAP_SIZE") != NULL,
               "the message does not point at SYMM_HEAP_SIZE: %s", symm_last_error());
    CHECK_EQ_U64(heap_used(), used1);
    /* fill the heap with big objects until it is exhausted, then free them */
    void *big[64];
    int nbig = 0;
    size_t chunk = info.heap_size / 7;
    while (nbig < 64 && (big[nbig] = symm_malloc(chunk)) != NULL)
        nbig++;
    CHECK_TRUE(symm_last_status() == SYMM_ERR_NO_MEMORY, "filling the heap ended with %d",
               (int)symm_last_status());
    CHECK_TRUE(nbig >= 5 && nbig <= 7, "%d chunks of 1/7 of the heap fit", nbig);
    size_t usedf = heap_used();
    CHECK_NULL_STATUS(symm_malloc(chunk), SYMM_ERR_NO_MEMORY);
    CHECK_EQ_U64(heap_used(), usedf);
    /* a small object still fits */
    void *small = symm_malloc(100);
    CHECK_TRUE(small != NULL, "small object in a nearly full heap");
    CHECK_OK(symm_free(small));
    for (int i = 0; i < nbig; i++)
        CHECK_OK(symm_free(big[i]));
    CHECK_EQ_U64(heap_used(), used1);

    if (npes > 1) {
        /* PEs passing different sizes: MISMATCH on every PE, nothing allocated */
        CHECK_NULL_STATUS(symm_malloc(64 + (size_t)me * 64), SYMM_ERR_MISMATCH);
        CHECK_EQ_U64(heap_used(), used1);
        CHECK_NULL_STATUS(symm_malloc(me == npes - 1 ? 65 : 64), SYMM_ERR_MISMATCH);
        CHECK_NULL_STATUS(symm_align(me == 0 ? 128 : 256, 64), SYMM_ERR_MISMATCH);
        CHECK_NULL_STATUS(symm_calloc(me == 0 ? 2 : 1, 64), SYMM_ERR_MISMATCH);
        CHECK_EQ_U64(heap_used(), used1);
        /* one PE cannot fit its request: every PE fails, nothing allocated */
        void *q = symm_malloc(me == npes - 1 ? info.heap_size * 2 : 64);
        CHECK_TRUE(q == NULL && symm_last_status() != SYMM_SUCCESS,
                   "allocation that failed on one PE returned %p / %d", q,
                   (int)symm_last_status());
        if (me == npes - 1) CHECK_TRUE(symm_last_status() == SYMM_ERR_NO_MEMORY, "own reason");
        CHECK_EQ_U64(heap_used(), used1);
        /* PE 0 frees another object than the others: MISMATCH, nothing freed */
        uint8_t *a = symm_malloc(64), *b = symm_malloc(64);
        CHECK_TRUE(a && b, "malloc");
        size_t used2 = heap_used();
        CHECK_STATUS(symm_free(me == 0 ? a : b), SYMM_ERR_MISMATCH);
        CHECK_EQ_U64(heap_used(), used2);
        CHECK_TRUE(symm_addr_accessible(a, 64) && symm_addr_accessible(b, 64), "freed anyway");
        CHECK_OK(symm_free(a));
        CHECK_OK(symm_free(b));
    }
    /* the allocator still agrees everywhere after all those failures */
    void *after = symm_malloc(1000);
    CHECK_TRUE(after != NULL, "malloc after failures");
    check_symmetric(after, 1000, 900);
    CHECK_OK(symm_free(after));
    /* keep's contents survived */
    CHECK_TRUE(test_find_pattern_mismatch(keep, 256, 77 + (uint64_t)me) == (size_t)-1,
               "an object changed across failed calls");
    CHECK_OK(symm_free(keep));
    CHECK_EQ_U64(heap_used(), used0);
}

static void test_bad_free(void)
{
    uint8_t *p = symm_malloc(128);
    CHECK_TRUE(p != NULL, "malloc");
    test_fill_pattern(p, 128, 5);
    size_t used = heap_used();
    int local = 0;
    uint8_t *heap_copy = malloc(16);
    CHECK_STATUS(symm_free(&local), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_free(heap_copy), SYMM_ERR_NOT_SYMMETRIC);
    /* a peer's mapping of p, where a peer of my group exists */
    if (symm_team_n_pes(SYMM_TEAM_NODE) > 1) {
        int peer = symm_team_translate_pe(SYMM_TEAM_NODE,
                                          (symm_team_my_pe(SYMM_TEAM_NODE) + 1) %
                                              symm_team_n_pes(SYMM_TEAM_NODE),
                                          SYMM_TEAM_WORLD);
        CHECK_STATUS(symm_free(symm_ptr(p, peer)), SYMM_ERR_NOT_SYMMETRIC);
    }
    CHECK_STATUS(symm_free(p + 8), SYMM_ERR_DOUBLE_FREE);
    CHECK_TRUE(strstr(symm_last_error(), "not its start") != NULL, "message: %s",
               symm_last_error());
    CHECK_STATUS(symm_free(p + 64), SYMM_ERR_DOUBLE_FREE);
    CHECK_EQ_U64(heap_used(), used);
    CHECK_TRUE(test_find_pattern_mismatch(p, 128, 5) == (size_t)-1, "object changed");
    CHECK_OK(symm_free(NULL));
    CHECK_OK(symm_free(p));
    CHECK_STATUS(symm_free(p), SYMM_ERR_DOUBLE_FREE);
    CHECK_TRUE(strstr(symm_last_error(), "twice") != NULL, "message: %s", symm_last_error());
    CHECK_EQ_U64(heap_used(), used - 128);
    /* a freed object's offset is reused by the next equal allocation */
    uint8_t *q = symm_malloc(128);
    CHECK_TRUE(q == p, "first fit reuses the freed object (%p, %p)", (void *)q, (void *)p);
    CHECK_OK(symm_free(q));
    free(heap_copy);
    /* symm_ptr on bad input */
    uint8_t *r = symm_malloc(64);
    CHECK_TRUE(symm_ptr(r, -1) == NULL && symm_ptr(r, npes) == NULL, "symm_ptr bad pe");
    CHECK_TRUE(symm_ptr(&local, 0) == NULL, "symm_ptr of a stack address");
    CHECK_TRUE(symm_ptr(NULL, 0) == NULL, "symm_ptr(NULL)");
    CHECK_TRUE(symm_ptr(r, me) == r, "symm_ptr to myself");
    CHECK_TRUE(!symm_addr_accessible(&local, 4) && !symm_addr_accessible(NULL, 1),
               "accessible non-symmetric");
    CHECK_TRUE(!symm_addr_accessible(r, 4096), "accessible past the object");
    CHECK_OK(symm_free(r));
}

int main(void)
{
    setenv("SYMM_HEAP_SIZE", "64M", 0);
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_sizes();
    test_calloc_align();
    test_exhaustion_and_mismatch();
    test_bad_free();
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_heap: OK (%d PEs)\n", npes);
    return 0;
}
