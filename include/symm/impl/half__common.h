/* half__common.h — fp16 / bf16 / fp8 <-> float conversions (round to nearest even; NaN and
 * infinities kept), the one copy used by the CPU reduction kernels and the public
 * symm_fp16_to_float family (src/coll/reduce_ops.c, src/core/types.c) and by the device
 * kernels (type_op__funcs.cuh): the GPU rounds exactly as the CPU does. Valid C11 and
 * CUDA C++, host and device; inline, so that reduction loops make no call per element. */
#ifndef SYMM_IMPL_HALF__COMMON_H
#define SYMM_IMPL_HALF__COMMON_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SYMM_HALF_HD static __host__ __device__ __forceinline__
#else
#define SYMM_HALF_HD static inline
#endif

SYMM_HALF_HD uint32_t symm_half_f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

SYMM_HALF_HD float symm_half_u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

SYMM_HALF_HD float symm_half_bf16_to_float(uint16_t b)
{
    return symm_half_u2f((uint32_t)b << 16);
}

/* Branch-free (a select for NaN), so that the bf16 loops vectorise. */
SYMM_HALF_HD uint16_t symm_half_float_to_bf16(float f)
{
    uint32_t u = symm_half_f2u(f);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16, q = (u >> 16) | 0x40;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? q : r);
}

SYMM_HALF_HD float symm_half_fp16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return symm_half_u2f(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return symm_half_u2f(sign | ((exp + 112) << 23) | (man << 13));
}

SYMM_HALF_HD uint16_t symm_half_float_to_fp16(float f)
{
    uint32_t u = symm_half_f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000u) {
        if (a < 0x33000000u) return sign;
        uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
        int shift = 126 - (int)e;
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | (uint16_t)q);
    }
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1);
    return (uint16_t)(sign | (uint16_t)(r >> 13));
}

/* fp8 (symm.h: e4m3 with e5m2 = 0, e5m2 with e5m2 = 1), from and to float. */
SYMM_HALF_HD float symm_half_fp8_to_float(int e5m2, uint8_t b)
{
    const uint32_t M = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    const uint32_t sign = (uint32_t)(b & 0x80) << 24;
    const uint32_t exp = (uint32_t)(b & 0x7f) >> M, man = b & ((1u << M) - 1);
    if (e5m2 ? exp == 31 : (exp == 15 && man == 7))
        return symm_half_u2f(sign | (man ? 0x7fc00000u | (man << (23 - M)) : 0x7f800000u));
    if (exp == 0) {
        const float v = (float)man * (e5m2 ? 1.52587890625e-05f /* 2^-16 */
                                           : 0.001953125f /* 2^-9 */);
        return sign ? -v : v;
    }
    return symm_half_u2f(sign | ((exp + 127 - bias) << 23) | (man << (23 - M)));
}

SYMM_HALF_HD uint8_t symm_half_float_to_fp8(int e5m2, float f)
{
    const uint32_t M = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7, drop = 23 - M;
    const uint32_t u = symm_half_f2u(f), a = u & 0x7fffffffu;
    const uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    if (a > 0x7f800000u) return (uint8_t)(sign | 0x7f);
    if (a < ((128 - bias) << 23)) { /* below the smallest normal: units of 2^(1-bias-M) */
        const uint32_t ef = a >> 23;
        const uint32_t shift = 151 - bias - M - ef; /* 24 - M .. when ef >= 1 */
        if (ef == 0 || shift > 25) return sign;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t q = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint8_t)(sign | q); /* q == 1 << M is the smallest normal's code */
    }
    uint32_t r = a - ((127 - bias) << 23);
    r += (1u << (drop - 1)) - 1 + ((r >> drop) & 1);
    r >>= drop;
    if (r > (e5m2 ? 0x7bu : 0x7eu)) return (uint8_t)(sign | (e5m2 ? 0x7c : 0x7f));
    return (uint8_t)(sign | r);
}

#endif
