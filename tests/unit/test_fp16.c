/* test_fp16.c — fp16/bf16 conversions: every one of the 65536 bit patterns round-trips
 * through float; float -> half/bf16 rounds to nearest even, checked against an
 * independent reference in double arithmetic (and against _Float16 where gcc has it)
 * on hand-picked values (ties, subnormals, overflow edges) and on random floats. */
#include <float.h>
#include <math.h>

#include "common/test_util.h"

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Reference: round |f| to a binary format with `mbits` stored mantissa bits, minimum
 * normal exponent emin and all-ones exponent ebias*2+1, in exact double arithmetic
 * (a float scaled by a power of two is exact in a double, and rint rounds to even). */
static uint16_t ref_round(float f, int mbits, int emin, int ebias)
{
    uint16_t sign = (f2u(f) >> 31) ? 0x8000 : 0;
    uint16_t inf = (uint16_t)(((2 * ebias + 1) << mbits));
    if (isnan(f)) return 0xffff; /* caller checks NaN separately */
    double a = fabs((double)f);
    if (isinf(f)) return sign | inf;
    if (a == 0) return sign;
    int e;
    frexp(a, &e); /* a = m * 2^e, m in [0.5, 1): the leading bit has weight 2^(e-1) */
    e -= 1;
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mbits);
    double q = rint(a / ulp); /* exact division; rint: ties to even */
    uint64_t r = (uint64_t)q;
    if (r == 0) return sign;
    if (r < ((uint64_t)1 << mbits)) return sign | (uint16_t)r; /* subnormal (e == emin) */
    if (r == ((uint64_t)2 << mbits)) { /* rounded up to the next binade */
        r >>= 1;
        e++;
    }
    int biased = e + ebias;
    if (biased >= 2 * ebias + 1) return sign | inf;
    return sign | (uint16_t)((biased << mbits) | (int)(r - ((uint64_t)1 << mbits)));
}

static uint16_t ref_fp16(float f)
{
    return ref_round(f, 10, -14, 15);
}
static uint16_t ref_bf16(float f)
{
    return ref_round(f, 7, -126, 127);
}

static int is_nan16(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
}
static int is_nan_bf16(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f);
}

static int failures;

static void check_one(float f)
{
    uint16_t h = symm_float_to_fp16(f), b = symm_float_to_bf16(f);
    if (isnan(f)) {
        if (!is_nan16(h) || (h >> 15) != (f2u(f) >> 31))
            TEST_FAIL("fp16 of NaN 0x%08x is 0x%04x", f2u(f), h);
        if (!is_nan_bf16(b) || (b >> 15) != (f2u(f) >> 31))
            TEST_FAIL("bf16 of NaN 0x%08x is 0x%04x", f2u(f), b);
        return;
    }
    uint16_t rh = ref_fp16(f), rb = ref_bf16(f);
    if (h != rh && failures++ < 20)
        fprintf(stderr, "fp16(%a = 0x%08x) = 0x%04x, reference 0x%04x\n", (double)f, f2u(f), h,
                rh);
    if (b != rb && failures++ < 20)
        fprintf(stderr, "bf16(%a = 0x%08x) = 0x%04x, reference 0x%04x\n", (double)f, f2u(f), b,
                rb);
#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))
    _Float16 c = (_Float16)f;
    uint16_t ch;
    memcpy(&ch, &c, 2);
    if (h != ch && failures++ < 20)
        fprintf(stderr, "fp16(%a) = 0x%04x, _Float16 gives 0x%04x\n", (double)f, h, ch);
#endif
}

static void test_exhaustive_roundtrip(void)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = symm_fp16_to_float(h);
        if (is_nan16(h)) {
            CHECK_TRUE(isnan(f), "fp16 NaN 0x%04x -> %g", h, (double)f);
            CHECK_TRUE(is_nan16(symm_float_to_fp16(f)), "fp16 NaN 0x%04x lost", h);
            CHECK_TRUE((f2u(f) >> 31) == (uint32_t)(h >> 15), "fp16 NaN sign 0x%04x", h);
        } else {
            uint16_t back = symm_float_to_fp16(f);
            CHECK_TRUE(back == h, "fp16 0x%04x -> %a -> 0x%04x", h, (double)f, back);
#if defined(__FLT16_MAX__) && (defined(__x86_64__) || defined(__aarch64__))
            _Float16 c;
            memcpy(&c, &h, 2);
            CHECK_TRUE((float)c == f && signbit((float)c) == signbit(f),
                       "fp16 0x%04x -> %a, _Float16 says %a", h, (double)f, (double)(float)c);
#endif
        }
        uint16_t b = (uint16_t)i;
        float g = symm_bf16_to_float(b);
        CHECK_TRUE(f2u(g) == (uint32_t)b << 16 || is_nan_bf16(b), "bf16 0x%04x -> 0x%08x", b,
                   f2u(g));
        if (is_nan_bf16(b)) {
            CHECK_TRUE(isnan(g) && is_nan_bf16(symm_float_to_bf16(g)), "bf16 NaN 0x%04x", b);
        } else {
            uint16_t back = symm_float_to_bf16(g);
            CHECK_TRUE(back == b, "bf16 0x%04x -> %a -> 0x%04x", b, (double)g, back);
        }
        /* the reference agrees on exact values too (checks the reference) */
        if (!is_nan16(h)) CHECK_TRUE(ref_fp16(f) == h, "reference fp16 0x%04x", h);
        if (!is_nan_bf16(b)) CHECK_TRUE(ref_bf16(g) == b, "reference bf16 0x%04x", b);
    }
}

/* Values exactly halfway between two neighbours, and one float ulp either side. */
static void test_ties(void)
{
    for (uint32_t i = 0; i < 0x7c00; i++) {
        float lo = symm_fp16_to_float((uint16_t)i);
        float hi = i + 1 < 0x7c00 ? symm_fp16_to_float((uint16_t)(i + 1)) : 65536.0f;
        float mid = (float)(((double)lo + (double)hi) / 2); /* exact in float */
        CHECK_TRUE((double)mid * 2 == (double)lo + (double)hi, "mid not exact at 0x%04x", i);
        uint16_t want = (i & 1) ? (uint16_t)(i + 1) : (uint16_t)i; /* even mantissa */
        if (i + 1 == 0x7c00) want = 0x7c00; /* 65520 rounds to infinity */
        CHECK_TRUE(symm_float_to_fp16(mid) == want, "fp16 tie %a -> 0x%04x, expected 0x%04x",
                   (double)mid, symm_float_to_fp16(mid), want);
        CHECK_TRUE(symm_float_to_fp16(-mid) == (want | 0x8000), "fp16 tie -%a", (double)mid);
        check_one(mid);
        check_one(nextafterf(mid, 0));
        check_one(nextafterf(mid, INFINITY));
        check_one(-nextafterf(mid, INFINITY));
    }
    for (uint32_t i = 0; i < 0x7f80; i++) {
        float lo = symm_bf16_to_float((uint16_t)i);
        double hi =
            i + 1 < 0x7f80 ? (double)symm_bf16_to_float((uint16_t)(i + 1)) : ldexp(1.0, 128);
        double mid = ((double)lo + hi) / 2;
        if ((double)(float)mid != mid) continue; /* beyond float range: cannot be input */
        uint16_t want = (i & 1) ? (uint16_t)(i + 1) : (uint16_t)i;
        CHECK_TRUE(symm_float_to_bf16((float)mid) == want,
                   "bf16 tie %a -> 0x%04x, expected 0x%04x", mid,
                   symm_float_to_bf16((float)mid), want);
        check_one((float)mid);
        check_one(nextafterf((float)mid, 0));
        check_one(nextafterf((float)mid, INFINITY));
    }
}

static void test_hand_picked(void)
{
    const float v[] = {0.0f,
                       -0.0f,
                       1.0f,
                       -1.0f,
                       0.5f,
                       2.0f,
                       65504.0f,
                       65519.99f,
                       65520.0f,
                       65536.0f,
                       1e10f,
                       -1e10f,
                       FLT_MAX,
                       -FLT_MAX,
                       INFINITY,
                       -INFINITY,
                       5.9604644775390625e-8f,  /* smallest fp16 subnormal */
                       2.98023223876953125e-8f, /* half of it: ties to 0 */
                       2.98023259404089e-8f,    /* just above half: rounds up */
                       8.940696716308594e-8f,   /* 1.5 ulp: ties to 2 ulp */
                       6.103515625e-5f,         /* smallest fp16 normal */
                       6.1005353927612305e-5f,  /* largest subnormal */
                       FLT_MIN,
                       FLT_TRUE_MIN,
                       -FLT_TRUE_MIN,
                       1.0009765625f,
                       1.00048828125f,
                       1.00146484375f,
                       3.14159265f,
                       -2.71828183f,
                       0.1f,
                       1.0f / 3.0f,
                       3.3895313892515355e38f /* largest bf16 */,
                       3.3961775292304797e38f,
                       NAN,
                       -NAN};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        check_one(v[i]);
    /* exact expectations that do not depend on the reference */
    CHECK_EQ_U64(symm_float_to_fp16(1.0f), 0x3c00);
    CHECK_EQ_U64(symm_float_to_fp16(-2.0f), 0xc000);
    CHECK_EQ_U64(symm_float_to_fp16(65504.0f), 0x7bff);
    CHECK_EQ_U64(symm_float_to_fp16(65520.0f), 0x7c00);
    CHECK_EQ_U64(symm_float_to_fp16(65519.99f), 0x7bff);
    CHECK_EQ_U64(symm_float_to_fp16(INFINITY), 0x7c00);
    CHECK_EQ_U64(symm_float_to_fp16(-INFINITY), 0xfc00);
    CHECK_EQ_U64(symm_float_to_fp16(-0.0f), 0x8000);
    CHECK_EQ_U64(symm_float_to_fp16(5.9604644775390625e-8f), 0x0001);
    CHECK_EQ_U64(symm_float_to_fp16(2.98023223876953125e-8f), 0x0000);
    CHECK_EQ_U64(symm_float_to_fp16(8.940696716308594e-8f), 0x0002);
    CHECK_EQ_U64(symm_float_to_fp16(1.00048828125f), 0x3c00); /* tie -> even */
    CHECK_EQ_U64(symm_float_to_fp16(1.00146484375f), 0x3c02); /* tie -> even (up) */
    CHECK_EQ_U64(symm_float_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_U64(symm_float_to_bf16(u2f(0x3f808000u)), 0x3f80); /* tie -> even */
    CHECK_EQ_U64(symm_float_to_bf16(u2f(0x3f818000u)), 0x3f82); /* tie -> even (up) */
    CHECK_EQ_U64(symm_float_to_bf16(u2f(0x3f808001u)), 0x3f81);
    CHECK_EQ_U64(symm_float_to_bf16(FLT_MAX), 0x7f80); /* rounds to infinity */
    CHECK_EQ_U64(symm_float_to_bf16(u2f(0x7f7f7fffu)), 0x7f7f);
    CHECK_EQ_U64(symm_float_to_bf16(-INFINITY), 0xff80);
    CHECK_TRUE(symm_fp16_to_float(0x7c00) == INFINITY, "fp16 inf");
    CHECK_TRUE(symm_fp16_to_float(0x0001) == 5.9604644775390625e-8f, "fp16 min subnormal");
    CHECK_TRUE(symm_fp16_to_float(0x3555) == 0x1.554p-2f, "fp16 0x3555");
}

static void test_random(void)
{
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)test_rng_next(&r);
        if (i & 1) {
            /* concentrate on the fp16 range, where the rounding paths are */
            u = (u & 0x80000000u) | (0x30000000u + (u & 0x0fffffffu) % 0x18000000u);
        }
        check_one(u2f(u));
    }
}

int main(void)
{
    test_exhaustive_roundtrip();
    test_hand_picked();
    test_ties();
    test_random();
    if (failures) TEST_FAIL("%d conversions differ from the reference", failures);
    printf("test_fp16: OK\n");
    return 0;
}
