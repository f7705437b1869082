/* test_reduce_ops.c — the reduction kernels of src/coll/reduce_ops.h on their own (a
 * 1-PE program, no symmrun): every type x op against the serial reference of
 * coll_ref.h, on random bit patterns — for fp16/bf16 that includes subnormals,
 * infinities, overflow to infinity and rounding ties, which the collective tests' data
 * never reach — at lengths 0..67 and 1000 (vector bodies and scalar tails), in place
 * (dst == a, dst == b) and out of place; the invalid pairs (and fp8, whose reductions
 * accumulate in float in the tile calls) give NULL. NaN results
 * must be NaN (the SIMD conversions may keep another payload). */
#include <math.h>

#include "coll/coll_ref.h"
#include "coll/reduce_ops.h"
#include "common/test_util.h"

#define MAXN 1000

static int is_nan_bits(symm_type_t t, const uint8_t *p)
{
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case SYMM_FP16:
        memcpy(&h, p, 2);
        return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    case SYMM_BF16:
        memcpy(&h, p, 2);
        return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    case SYMM_FLOAT:
        memcpy(&f, p, 4);
        return isnan(f);
    case SYMM_DOUBLE:
        memcpy(&d, p, 8);
        return isnan(d);
    default:
        return 0;
    }
}

int main(void)
{
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    static uint8_t a[MAXN * 8], b[MAXN * 8], want[MAXN * 8], got[MAXN * 8 + 64];
    long checked = 0;
    for (int ti = 0; ti < SYMM_TYPE_COUNT; ti++) {
        symm_type_t t = (symm_type_t)ti;
        size_t es = symm_type_size(t);
        int flt = is_float(t);
        for (int oi = 0; oi < SYMM_OP_COUNT; oi++) {
            symm_op_t op = (symm_op_t)oi;
            int bitwise = op == SYMM_OP_AND || op == SYMM_OP_OR || op == SYMM_OP_XOR;
            symm_reduce_fn_t k = symm_reduce_kernel(t, op);
            if (t == SYMM_FP8_E4M3 || t == SYMM_FP8_E5M2) { /* float accumulation instead */
                CHECK_TRUE(k == NULL, "%s %s: fp8 has no pairwise kernel", symm_type_name(t),
                           symm_op_name(op));
                continue;
            }
            if (flt && bitwise) {
                CHECK_TRUE(k == NULL, "%s %s must be refused", symm_type_name(t),
                           symm_op_name(op));
                continue;
            }
            CHECK_TRUE(k != NULL, "no kernel for %s %s", symm_type_name(t), symm_op_name(op));
            for (size_t n = 0; n <= 68; n++) {
                size_t len = n == 68 ? MAXN : n;
                for (int mode = 0; mode < 3; mode++) { /* out of place, dst == a, dst == b */
                    test_fill_random(&r, a, len * es);
                    test_fill_random(&r, b, len * es);
                    if (flt && (len & 1)) /* half the time: values near 1 (ties, no NaNs) */
                        for (size_t i = 0; i < len * es; i++)
                            if (es == 2 ? (i & 1) : (i % es == es - 1)) {
                                a[i] = (uint8_t)(0x3c ^ (a[i] & 0x81));
                                b[i] = (uint8_t)(0x3c ^ (b[i] & 0x81));
                            }
                    memcpy(want, a, len * es);
                    for (size_t i = 0; i < len; i++)
                        ref_op1(t, op, want + i * es, b + i * es);
                    memset(got, 0xcd, sizeof got);
                    if (mode == 0) {
                        k(op, got, a, b, len);
                    } else if (mode == 1) {
                        memcpy(got, a, len * es);
                        k(op, got, got, b, len);
                    } else {
                        memcpy(got, b, len * es);
                        k(op, got, a, got, len);
                    }
                    for (size_t i = 0; i < len; i++) {
                        const uint8_t *g = got + i * es, *w = want + i * es;
                        if (!memcmp(g, w, es)) continue;
                        if (flt && is_nan_bits(t, g) && is_nan_bits(t, w)) continue;
                        uint64_t ga = 0, wa = 0, av = 0, bv = 0;
                        memcpy(&ga, g, es);
                        memcpy(&wa, w, es);
                        memcpy(&av, a + i * es, es);
                        memcpy(&bv, b + i * es, es);
                        TEST_FAIL(
                            "%s %s n %zu mode %d element %zu: op(0x%llx, 0x%llx) = 0x%llx, "
                            "expected 0x%llx",
                            symm_type_name(t), symm_op_name(op), len, mode, i,
                            (unsigned long long)av, (unsigned long long)bv,
                            (unsigned long long)ga, (unsigned long long)wa);
                    }
                    CHECK_ALL_BYTES(got + len * es, 0xcd, 64, "%s %s n %zu: past the end",
                                    symm_type_name(t), symm_op_name(op), len);
                    checked += (long)len;
                }
            }
        }
    }
    CHECK_TRUE(symm_reduce_kernel(SYMM_TYPE_COUNT, SYMM_OP_SUM) == NULL, "bad type");
    CHECK_TRUE(symm_reduce_kernel(SYMM_INT32, SYMM_OP_COUNT) == NULL, "bad op");
    printf("test_reduce_ops: %ld elements checked: OK\n", checked);
    return 0;
}
