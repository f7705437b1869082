/* types.c — sizes and names of the types and operations, and fp16/bf16 conversions
 * (round to nearest even). */
#include <string.h>

#include "symm.h"

size_t symm_type_size(symm_type_t type)
{
    switch (type) {
#define SYMM_TYPE_SIZE_(e, name, ctype)                                                  \
    case e:                                                                              \
        return sizeof(ctype);
        SYMM_FOREACH_TYPE(SYMM_TYPE_SIZE_)
#undef SYMM_TYPE_SIZE_
    default:
        return 0;
    }
}

const char *symm_type_name(symm_type_t type)
{
    switch (type) {
#define SYMM_TYPE_NAME_(e, name, ctype)                                                  \
    case e:                                                                              \
        return #name;
        SYMM_FOREACH_TYPE(SYMM_TYPE_NAME_)
#undef SYMM_TYPE_NAME_
    default:
        return "invalid";
    }
}

const char *symm_op_name(symm_op_t op)
{
    switch (op) {
#define SYMM_OP_NAME_(e, name)                                                           \
    case e:                                                                              \
        return #name;
        SYMM_FOREACH_OP(SYMM_OP_NAME_)
#undef SYMM_OP_NAME_
    default:
        return "invalid";
    }
}

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

float symm_bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

uint16_t symm_float_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

float symm_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13)); /* inf / NaN */
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t symm_float_to_fp16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00; /* NaN */
    if (a >= 0x477ff000u) return sign | 0x7c00; /* rounds to infinity (>= 65520) */
    if (a < 0x38800000u) {
        /* result is subnormal or zero: scale to units of 2^-24 and round to even */
        if (a < 0x33000000u) return sign; /* < 2^-25: rounds to 0 */
        uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
        /* value / 2^-24 = m * 2^(e - 126): shift right by 126 - e (14..24) */
        int shift = 126 - (int)e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias exponent 127 -> 15 and round the 13 dropped bits to even */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1);
    return sign | (uint16_t)(r >> 13);
}
