/* test_fp8.c — fp8 conversions (e4m3 and e5m2): every one of the 256 codes of each
 * decodes to the value its fields say (computed here in double) and encodes back to
 * itself (NaNs to the NaN of their sign); float -> fp8 rounds to nearest even, checked
 * against a brute-force search over all codes in double arithmetic on hand-picked values
 * (midpoints, subnormals, the overflow edges) and on many random floats; overflow gives
 * NaN for e4m3 and infinity for e5m2. */
#include <float.h>
#include <math.h>

#include "common/test_util.h"

typedef struct {
    const char *name;
    int e5m2, mbits, bias;
    float (*dec)(uint8_t);
    uint8_t (*enc)(float);
} fmt_t;

static const fmt_t fmts[2] = {
    {"e4m3", 0, 3, 7, symm_fp8_e4m3_to_float, symm_float_to_fp8_e4m3},
    {"e5m2", 1, 2, 15, symm_fp8_e5m2_to_float, symm_float_to_fp8_e5m2},
};

static int is_nan_code(const fmt_t *f, uint8_t c)
{
    return f->e5m2 ? (c & 0x7f) > 0x7c : (c & 0x7f) == 0x7f;
}
static int is_inf_code(const fmt_t *f, uint8_t c)
{
    return f->e5m2 && (c & 0x7f) == 0x7c;
}

/* The value of a finite code, from its fields. */
static double value_of(const fmt_t *f, uint8_t c)
{
    int exp = (c & 0x7f) >> f->mbits, man = c & ((1 << f->mbits) - 1);
    double v = exp == 0 ? ldexp((double)man, 1 - f->bias - f->mbits)
                        : ldexp((double)((1 << f->mbits) + man), exp - f->bias - f->mbits);
    return (c & 0x80) ? -v : v;
}

/* Reference rounding: the nearest finite code of |x|'s sign (ties: the even code), or
 * overflow when the nearest is the first step beyond the largest finite value. */
static uint8_t ref_enc(const fmt_t *f, float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    uint8_t ovf = f->e5m2 ? 0x7c : 0x7f;
    if (isnan(x)) return sign | 0x7f;
    if (isinf(x)) return sign | ovf;
    double a = fabs((double)x);
    uint8_t maxc = f->e5m2 ? 0x7b : 0x7e;
    double next = value_of(f, maxc) + (value_of(f, maxc) - value_of(f, (uint8_t)(maxc - 1)));
    if (a >= next) return sign | ovf; /* (the distances below would lose their meaning) */
    uint8_t best = 0;
    double bd = a;
    for (int c = 1; c <= maxc + 1; c++) {
        double v = c <= maxc ? value_of(f, (uint8_t)c) : next;
        double d = fabs(v - a);
        if (d < bd || (d == bd && !(c & 1))) {
            bd = d;
            best = (uint8_t)c;
        }
    }
    if (best == maxc + 1) return sign | ovf;
    return sign | best;
}

static void check_enc(const fmt_t *f, float x)
{
    uint8_t got = f->enc(x), want = ref_enc(f, x);
    if (isnan(x)) {
        CHECK_TRUE(is_nan_code(f, got) && (got & 0x80) == (want & 0x80),
                   "%s: NaN %a encodes to 0x%02x", f->name, (double)x, got);
        return;
    }
    CHECK_TRUE(got == want, "%s: %a encodes to 0x%02x, expected 0x%02x", f->name, (double)x,
               got, want);
}

int main(void)
{
    test_rng_t r;
    test_rng_seed(&r, test_seed());
    long checked = 0;
    for (int fi = 0; fi < 2; fi++) {
        const fmt_t *f = &fmts[fi];
        /* every code */
        for (int c = 0; c < 256; c++) {
            float v = f->dec((uint8_t)c);
            if (is_nan_code(f, (uint8_t)c)) {
                CHECK_TRUE(isnan(v), "%s: NaN code 0x%02x decodes to %g", f->name, c,
                           (double)v);
                CHECK_TRUE(!!signbit(v) == !!(c & 0x80), "%s: NaN code 0x%02x sign", f->name,
                           c);
                uint8_t b = f->enc(v);
                CHECK_TRUE(is_nan_code(f, b) && (b & 0x80) == (c & 0x80),
                           "%s: NaN 0x%02x -> 0x%02x", f->name, c, b);
                continue;
            }
            if (is_inf_code(f, (uint8_t)c)) {
                CHECK_TRUE(isinf(v) && !!signbit(v) == !!(c & 0x80), "%s: inf code 0x%02x",
                           f->name, c);
            } else {
                CHECK_TRUE((double)v == value_of(f, (uint8_t)c) && !!signbit(v) == !!(c & 0x80),
                           "%s: code 0x%02x decodes to %a, its fields say %a", f->name, c,
                           (double)v, value_of(f, (uint8_t)c));
            }
            CHECK_TRUE(f->enc(v) == c, "%s: 0x%02x -> %a -> 0x%02x", f->name, c, (double)v,
                       f->enc(v));
            checked++;
        }
        /* midpoints between neighbours, and just either side of them */
        uint8_t maxc = f->e5m2 ? 0x7b : 0x7e;
        for (int c = 0; c <= maxc; c++) {
            double lo = value_of(f, (uint8_t)c);
            double hi = c < maxc ? value_of(f, (uint8_t)(c + 1))
                                 : 2 * lo - value_of(f, (uint8_t)(c - 1));
            float mid = (float)((lo + hi) / 2);
            float xs[] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY), (float)lo,
                          (float)hi};
            for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
                check_enc(f, xs[i]);
                check_enc(f, -xs[i]);
                checked += 2;
            }
        }
        float edges[] = {0.0f,       -0.0f,      INFINITY, -INFINITY, NAN,      -NAN,
                         448.0f,     464.0f,     480.0f,   1e9f,      57344,    61440,
                         65536.0f,   1e-30f,     1e-45f,   0x1p-10f,  0x1p-17f, 0x1p-18f,
                         0x1.8p-17f, 0x1.8p-10f, FLT_MAX,  0x1p-149f};
        for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
            check_enc(f, edges[i]);
            checked++;
        }
        /* random floats: any bits, and values spread over the format's range */
        for (int i = 0; i < 200000; i++) {
            uint32_t u = (uint32_t)test_rng_next(&r);
            float x;
            memcpy(&x, &u, 4);
            if (i & 1)
                x = ldexpf((float)(test_rng_next(&r) >> 40) / (float)(1 << 24),
                           (int)test_rng_below(&r, 44) - 24);
            check_enc(f, x);
            checked++;
        }
    }
    printf("test_fp8: %ld conversions checked: OK\n", checked);
    return 0;
}
