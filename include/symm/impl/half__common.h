/* half__common.h — fp16 / bf16 <-> float conversions (round to nearest even; NaN and
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

#endif
