/* test_bounds.c — RMA, atomics, signals and collectives are checked against the heap's
 * live objects, not the whole heap: a range one byte past an object (into the padding or
 * into the adjacent object) is SYMM_ERR_OVERFLOW, an address in a freed object or in the
 * padding is SYMM_ERR_NOT_SYMMETRIC, a range ending exactly at the end is accepted; no
 * bad call writes anything. Also symm_free(NULL) against symm_free(p) on other PEs, and
 * the messages of alignment requests that cannot be met. */
#include "common/test_util.h"

static int me, npes;

/* Objects allocated one after another: sizes that are multiples of 64 leave no padding,
 * so the byte past one is the first byte of the next. */
static const size_t sizes[] = {1, 8, 12, 63, 64, 64, 65, 100, 128, 4096, 4097, 192};
enum { NOBJ = sizeof sizes / sizeof sizes[0] };
static uint8_t *obj[NOBJ];
static uint8_t local[8192], local_copy[8192];

#define TAG(k, pe) (0x5eed00ull + (uint64_t)(k)*64 + (uint64_t)(pe))

static void refill(void)
{
    for (int k = 0; k < NOBJ; k++)
        if (obj[k]) test_fill_pattern(obj[k], sizes[k], TAG(k, me));
    memcpy(local_copy, local, sizeof local);
    CHECK_OK(symm_barrier_all());
}

/* No object changed on this PE, nor the local buffer. */
static void check_untouched(const char *what)
{
    CHECK_OK(symm_barrier_all());
    for (int k = 0; k < NOBJ; k++) {
        if (!obj[k]) continue;
        size_t i = test_find_pattern_mismatch(obj[k], sizes[k], TAG(k, me));
        CHECK_TRUE(i == (size_t)-1, "%s changed byte %zu of object %d (%zu bytes)", what, i, k,
                   sizes[k]);
    }
    CHECK_BYTES(local, local_copy, sizeof local, "%s changed the local buffer", what);
    CHECK_OK(symm_barrier_all()); /* before anyone writes again */
}

static void check_msg(const char *want, const char *what)
{
    CHECK_TRUE(strstr(symm_last_error(), want) != NULL, "%s: message lacks \"%s\": %s", what,
               want, symm_last_error());
}

static int adjacent(int k)
{
    return k + 1 < NOBJ && obj[k] + sizes[k] == obj[k + 1];
}

static void test_rma_bounds(void)
{
    int t = (me + 1) % npes;
    int nadj = 0;
    for (int k = 0; k < NOBJ; k++) {
        uint8_t *p = obj[k];
        size_t n = sizes[k];
        nadj += adjacent(k);
        refill();
        /* one byte past: overflow, whether the byte is padding or the next object */
        CHECK_STATUS(symm_put(p, local, n + 1, t), SYMM_ERR_OVERFLOW);
        check_msg("past the end of its object", "put one byte past");
        char bounds[64];
        snprintf(bounds, sizeof bounds, "[%p, +%zu bytes)", (void *)p, n);
        check_msg(bounds, "put one byte past names the object");
        CHECK_STATUS(symm_get(local, p, n + 1, t), SYMM_ERR_OVERFLOW);
        CHECK_STATUS(symm_put_nbi(p + n - 1, local, 2, t), SYMM_ERR_OVERFLOW);
        CHECK_STATUS(symm_get_nbi(local, p + n - 1, 2, t), SYMM_ERR_OVERFLOW);
        CHECK_STATUS(symm_put_typed(p, local, n + 1, SYMM_UINT8, t), SYMM_ERR_OVERFLOW);
        CHECK_STATUS(
            symm_put_signal(p, local, n + 1, (uint64_t *)obj[1], 1, SYMM_SIGNAL_ADD, t),
            SYMM_ERR_OVERFLOW);
        if (!adjacent(k)) { /* the byte past is padding: in no object */
            CHECK_STATUS(symm_put(p + n, local, 1, t), SYMM_ERR_NOT_SYMMETRIC);
            check_msg("no live object", "put into padding");
        }
        check_untouched("a put or get one byte past an object");
        /* exactly to the end: accepted, and lands */
        test_fill_pattern(local, n, TAG(k, 1000 + me));
        CHECK_OK(symm_put(p, local, n, t));
        CHECK_OK(symm_barrier_all());
        int from = (me + npes - 1) % npes;
        size_t bad = test_find_pattern_mismatch(p, n, TAG(k, 1000 + from));
        CHECK_TRUE(bad == (size_t)-1, "put of object %d (%zu bytes) from PE %d: byte %zu", k, n,
                   from, bad);
        CHECK_OK(symm_get(local, p + n - 1, 1, t));
        CHECK_TRUE(local[0] == test_pattern_byte(TAG(k, 1000 + me), n - 1),
                   "get of the last byte of object %d", k);
        CHECK_OK(symm_put(p + n, local, 0, t)); /* nothing at the end: fine */
        CHECK_OK(symm_barrier_all());
    }
    CHECK_TRUE(nadj >= 3, "only %d adjacent pairs: the test lost its point", nadj);
    /* a range that starts in one object and covers the next, adjacent one */
    for (int k = 0; k + 1 < NOBJ; k++) {
        if (!adjacent(k)) continue;
        refill();
        CHECK_STATUS(symm_put(obj[k], local, sizes[k] + sizes[k + 1], t), SYMM_ERR_OVERFLOW);
        CHECK_STATUS(symm_get(local, obj[k] + sizes[k] - 8, 16, t), SYMM_ERR_OVERFLOW);
        check_untouched("a range across two adjacent objects");
    }

    /* atomics and signals on the last word: inside is fine, straddling the end is not */
    refill();
    uint8_t *o12 = obj[2]; /* 12 bytes */
    uint64_t f64 = 0xdead;
    uint32_t f32 = 0;
    CHECK_STATUS(symm_atomic64(SYMM_AMO_ADD, (uint64_t *)(o12 + 8), 1, 0, t, NULL),
                 SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_FETCH, (uint64_t *)(o12 + 8), 0, 0, t, &f64),
                 SYMM_ERR_OVERFLOW);
    CHECK_EQ_U64(f64, 0xdead);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_SET, (uint64_t *)(obj[0]), 1, 0, t, NULL),
                 SYMM_ERR_OVERFLOW); /* a 1-byte object */
    CHECK_STATUS(
        symm_put_signal(obj[4], local, 8, (uint64_t *)(o12 + 8), 1, SYMM_SIGNAL_SET, t),
        SYMM_ERR_OVERFLOW);
    uint64_t sv;
    CHECK_STATUS(symm_signal_fetch((const uint64_t *)(o12 + 8), &sv), SYMM_ERR_OVERFLOW);
    int res = 7;
    CHECK_STATUS(symm_test_uint64((uint64_t *)(o12 + 8), SYMM_CMP_EQ, 0, &res),
                 SYMM_ERR_OVERFLOW);
    CHECK_TRUE(res == 7, "test wrote its result on a bad call");
    check_untouched("an atomic or signal straddling the end of an object");
    /* the last 4 bytes of the 12-byte object hold a 32-bit word */
    CHECK_OK(symm_atomic32(SYMM_AMO_FETCH_ADD, (uint32_t *)(o12 + 8), 5, 0, t, &f32));
    CHECK_OK(symm_barrier_all());
    uint32_t want32;
    uint8_t pat[12];
    test_fill_pattern(pat, 12, TAG(2, me));
    memcpy(&want32, pat + 8, 4);
    uint32_t got32;
    memcpy(&got32, o12 + 8, 4);
    CHECK_EQ_U64(got32, (uint32_t)(want32 + 5));
    CHECK_OK(symm_barrier_all());
}

static void test_freed(void)
{
    int t = (me + 1) % npes;
    /* free a middle object: every access inside it is refused, its neighbours work */
    int k = 7; /* 100 bytes */
    uint8_t *dead = obj[k];
    CHECK_OK(symm_free(dead));
    obj[k] = NULL;
    refill();
    CHECK_STATUS(symm_put(dead, local, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    check_msg("no live object", "put into a freed object");
    CHECK_STATUS(symm_get(local, dead + 50, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_atomic64(SYMM_AMO_ADD, (uint64_t *)dead, 1, 0, t, NULL),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put_signal(obj[4], local, 8, (uint64_t *)dead, 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_STATUS(symm_put_signal(dead, local, 8, (uint64_t *)obj[4], 1, SYMM_SIGNAL_SET, t),
                 SYMM_ERR_NOT_SYMMETRIC);
    int res = 3;
    CHECK_STATUS(symm_test_uint64((uint64_t *)dead, SYMM_CMP_EQ, 0, &res),
                 SYMM_ERR_NOT_SYMMETRIC);
    CHECK_TRUE(res == 3 && !symm_addr_accessible(dead, 1), "freed object accessible");
    CHECK_STATUS(symm_broadcast(SYMM_TEAM_WORLD, dead, obj[9], 8, 0), SYMM_ERR_NOT_SYMMETRIC);
    check_msg("no live object", "broadcast into a freed object");
    CHECK_STATUS(symm_allreduce(SYMM_TEAM_WORLD, obj[9], dead + 8, 2, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_NOT_SYMMETRIC);
    /* a range from the previous object into the freed one */
    CHECK_STATUS(symm_put(obj[k - 1], local, sizes[k - 1] + 1, t), SYMM_ERR_OVERFLOW);
    check_untouched("an access to a freed object");
    /* the same offset reallocated with another size: the new bounds apply */
    uint8_t *again = symm_malloc(40);
    CHECK_TRUE(again == dead, "first fit reuses the freed object (%p, %p)", (void *)again,
               (void *)dead);
    CHECK_STATUS(symm_put(again, local, 41, t), SYMM_ERR_OVERFLOW);
    CHECK_OK(symm_put(again, local, 40, t));
    CHECK_OK(symm_barrier_all());
    CHECK_OK(symm_free(again));
    /* an address of the heap never allocated: well past the last object */
    uint8_t *never = obj[NOBJ - 1] + sizes[NOBJ - 1] + 1024 * 1024;
    CHECK_TRUE(symm_ptr(never, me) == never, "%p is not in the heap", (void *)never);
    CHECK_STATUS(symm_put(never, local, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    check_msg("never allocated", "put to a never-allocated address");
    CHECK_STATUS(symm_get(local, never, 8, t), SYMM_ERR_NOT_SYMMETRIC);
    check_untouched("an access to an address never allocated");
}

static void test_coll_bounds(void)
{
    /* every PE passes the same bad range: each fails alone, nothing moves */
    uint8_t *d = obj[9], *s = obj[8]; /* 4096 and 128 bytes */
    refill();
    CHECK_STATUS(symm_allreduce(SYMM_TEAM_WORLD, d, s, 33, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_OVERFLOW); /* 132 bytes of a 128-byte src */
    check_msg("past the end of its object", "allreduce src one element past");
    CHECK_STATUS(symm_allreduce(SYMM_TEAM_WORLD, obj[8], obj[9], 33, SYMM_INT32, SYMM_OP_SUM),
                 SYMM_ERR_OVERFLOW); /* dest too short */
    CHECK_STATUS(symm_broadcast(SYMM_TEAM_WORLD, obj[4], obj[9], 65, 0), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_broadcast(SYMM_TEAM_WORLD, obj[1], obj[9], 9, 0), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_fcollect(SYMM_TEAM_WORLD, obj[9], obj[3], 64), SYMM_ERR_OVERFLOW);
    CHECK_STATUS(symm_fcollect(SYMM_TEAM_WORLD, obj[9], obj[10], 4096 / (size_t)npes + 1),
                 SYMM_ERR_OVERFLOW); /* dest one byte short per PE */
    CHECK_STATUS(symm_alltoall(SYMM_TEAM_WORLD, obj[9], obj[8], 128 / (size_t)npes + 1),
                 SYMM_ERR_OVERFLOW);
    check_untouched("a collective one element past an object");
    /* exactly to the end: accepted, and right */
    refill();
    CHECK_OK(symm_allreduce(SYMM_TEAM_WORLD, d, s, 32, SYMM_INT32, SYMM_OP_SUM));
    for (int i = 0; i < 32; i++) {
        uint64_t sum = 0;
        for (int pe = 0; pe < npes; pe++) {
            uint8_t pat[128];
            test_fill_pattern(pat, 128, TAG(8, pe));
            int32_t v;
            memcpy(&v, pat + 4 * i, 4);
            sum += (uint32_t)v;
        }
        int32_t got;
        memcpy(&got, d + 4 * i, 4);
        CHECK_EQ_U64((uint32_t)got, (uint32_t)sum);
    }
    refill();
    CHECK_OK(symm_broadcast(SYMM_TEAM_WORLD, obj[10], obj[9], 4096, 0));
    uint8_t pat0[4096];
    test_fill_pattern(pat0, 4096, TAG(9, 0));
    CHECK_BYTES(obj[10], pat0, 4096, "broadcast of 4096 bytes into a 4097-byte object");
    CHECK_OK(symm_barrier_all());
}

/* symm_free(NULL) on some PEs while the others free p: MISMATCH everywhere at once, p
 * still allocated and usable. */
static void test_free_null(void)
{
    uint64_t *p = symm_malloc(64 * sizeof(uint64_t));
    CHECK_TRUE(p != NULL, "malloc");
    symm_info_t i0;
    CHECK_OK(symm_get_info(&i0));
    for (int pattern = 0; pattern < 3 && npes > 1; pattern++) {
        int null_here = pattern == 0 ? me == 0 : pattern == 1 ? me == npes - 1 : me % 2 == 1;
        CHECK_STATUS(symm_free(null_here ? NULL : p), SYMM_ERR_MISMATCH);
        check_msg("symm_free", "free(NULL) against free(p)");
        symm_info_t i1;
        CHECK_OK(symm_get_info(&i1));
        CHECK_EQ_U64(i1.heap_used, i0.heap_used);
        CHECK_TRUE(symm_addr_accessible(p, 64 * sizeof(uint64_t)), "p freed by a mismatch");
        /* p still works: write mine, read the next PE's */
        for (int k = 0; k < 64; k++)
            p[k] = TAG(pattern, me) * 1000 + (uint64_t)k;
        CHECK_OK(symm_barrier_all());
        uint64_t got[64];
        int t = (me + 1) % npes;
        CHECK_OK(symm_get(got, p, sizeof got, t));
        for (int k = 0; k < 64; k++)
            CHECK_EQ_U64(got[k], TAG(pattern, t) * 1000 + (uint64_t)k);
        CHECK_OK(symm_barrier_all());
    }
    CHECK_OK(symm_free(NULL)); /* on every PE: fine */
    CHECK_OK(symm_free(p));
    CHECK_TRUE(!symm_addr_accessible(p, 1), "p accessible after free");
}

static void test_alignment_messages(void)
{
    symm_info_t info;
    CHECK_OK(symm_get_info(&info));
    size_t used = info.heap_used;
    CHECK_NULL_STATUS(symm_align((size_t)128 << 20, 64), SYMM_ERR_ALIGNMENT);
    check_msg("largest supported", "alignment above the maximum");
    CHECK_NULL_STATUS(symm_align((size_t)1 << 40, 64), SYMM_ERR_ALIGNMENT);
    CHECK_NULL_STATUS(symm_align(96, 64), SYMM_ERR_ALIGNMENT);
    check_msg("power of two", "alignment 96");
    /* The heap is 64 MiB and its start is in use: 32 MiB + 1 at 32 MiB alignment can
     * only start at 32 MiB, where it does not fit; unaligned, it would. */
    size_t half = info.heap_size / 2;
    CHECK_NULL_STATUS(symm_align(half, half + 1), SYMM_ERR_ALIGNMENT);
    check_msg("alignment", "an alignment that leaves no room");
    check_msg("largest free block", "an alignment that leaves no room");
    void *unaligned = symm_malloc(half + 1); /* the same size at the heap's alignment fits */
    CHECK_TRUE(unaligned != NULL, "malloc(%zu)", half + 1);
    CHECK_OK(symm_free(unaligned));
    /* a size that fits nowhere is the heap's fault, whatever the alignment */
    CHECK_NULL_STATUS(symm_align(4096, info.heap_size - 64), SYMM_ERR_NO_MEMORY);
    check_msg("SYMM_HEAP_SIZE", "too big");
    check_msg("largest free block", "too big");
    CHECK_NULL_STATUS(symm_calloc(SIZE_MAX / 2, 3), SYMM_ERR_OVERFLOW);
    if (npes > 1) { /* one PE overflowing fails every PE at once, with its status */
        symm_status_t want = SYMM_ERR_OVERFLOW;
        CHECK_TRUE(symm_calloc(me == 0 ? SIZE_MAX / 2 : 1, me == 0 ? 3 : 64) == NULL &&
                       symm_last_status() == want,
                   "calloc overflowing on PE 0: status %d", (int)symm_last_status());
    }
    CHECK_OK(symm_get_info(&info));
    CHECK_EQ_U64(info.heap_used, used);
}

int main(void)
{
    setenv("SYMM_HEAP_SIZE", "64M", 0);
    setenv("SYMM_TIMEOUT", "30", 0); /* a free that waits for a peer fails, not hangs */
    CHECK_OK(symm_init());
    me = symm_my_pe();
    npes = symm_n_pes();
    test_rng_t r;
    test_rng_seed(&r, test_seed() + (uint64_t)me);
    test_fill_random(&r, local, sizeof local);
    uint8_t *first = symm_malloc(64); /* keeps the heap's start in use */
    CHECK_TRUE(first != NULL, "malloc");
    for (int k = 0; k < NOBJ; k++) {
        obj[k] = symm_malloc(sizes[k]);
        CHECK_TRUE(obj[k] != NULL, "malloc(%zu)", sizes[k]);
    }
    test_rma_bounds();
    test_coll_bounds();
    test_freed();
    test_free_null();
    test_alignment_messages();
    for (int k = NOBJ - 1; k >= 0; k--)
        CHECK_OK(symm_free(obj[k]));
    CHECK_OK(symm_free(first));
    CHECK_OK(symm_finalize());
    if (me == 0) printf("test_bounds: OK (%d PEs)\n", npes);
    return 0;
}
