/* type_op__funcs.cuh — symm_type_t x symm_op_t for the device tile code: the C++ type of
 * each symm_type_t (ty<>, and back: type_of<>), two elements combined by the rule of
 * plan__combine.h, fp8's float accumulation, and which ops a type takes. Host and device: a CPU
 * test checks them against the CPU kernels. Included by symm_device.cuh. */
#ifndef SYMM_IMPL_TYPE_OP__FUNCS_CUH
#define SYMM_IMPL_TYPE_OP__FUNCS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "symm/impl/tile_moe__common.h"

namespace symm_tm
{

template <int TY> struct ty;
#define SYMM_TM_TY_(E, T_, U_, INT_, SIGNED_)                                                  \
    template <> struct ty<E> {                                                                 \
        typedef T_ T;                                                                          \
        typedef U_ U;                                                                          \
        static constexpr bool integer = INT_;                                                  \
        static constexpr bool is_signed = SIGNED_;                                             \
    };
SYMM_TM_TY_(SYMM_INT8, int8_t, uint8_t, true, true)
SYMM_TM_TY_(SYMM_INT16, int16_t, uint16_t, true, true)
SYMM_TM_TY_(SYMM_INT32, int32_t, uint32_t, true, true)
SYMM_TM_TY_(SYMM_INT64, int64_t, uint64_t, true, true)
SYMM_TM_TY_(SYMM_UINT8, uint8_t, uint8_t, true, false)
SYMM_TM_TY_(SYMM_UINT16, uint16_t, uint16_t, true, false)
SYMM_TM_TY_(SYMM_UINT32, uint32_t, uint32_t, true, false)
SYMM_TM_TY_(SYMM_UINT64, uint64_t, uint64_t, true, false)
SYMM_TM_TY_(SYMM_FLOAT, float, uint32_t, false, true)
SYMM_TM_TY_(SYMM_DOUBLE, double, uint64_t, false, true)
SYMM_TM_TY_(SYMM_FP16, uint16_t, uint16_t, false, true)
SYMM_TM_TY_(SYMM_BF16, uint16_t, uint16_t, false, true)
SYMM_TM_TY_(SYMM_FP8_E4M3, uint8_t, uint8_t, false, true)
SYMM_TM_TY_(SYMM_FP8_E5M2, uint8_t, uint8_t, false, true)
#undef SYMM_TM_TY_

/* The symm_type_t of a C++ element type (for the typed public calls). */
template <typename T> struct type_of;
#define SYMM_TM_TYPE_OF_(T_, E)                                                                \
    template <> struct type_of<T_> {                                                           \
        static constexpr int value = E;                                                        \
    };
SYMM_TM_TYPE_OF_(int8_t, SYMM_INT8)
SYMM_TM_TYPE_OF_(int16_t, SYMM_INT16)
SYMM_TM_TYPE_OF_(int32_t, SYMM_INT32)
SYMM_TM_TYPE_OF_(long, sizeof(long) == 8 ? SYMM_INT64 : SYMM_INT32)
SYMM_TM_TYPE_OF_(long long, SYMM_INT64)
SYMM_TM_TYPE_OF_(uint8_t, SYMM_UINT8)
SYMM_TM_TYPE_OF_(uint16_t, SYMM_UINT16)
SYMM_TM_TYPE_OF_(uint32_t, SYMM_UINT32)
SYMM_TM_TYPE_OF_(unsigned long, sizeof(long) == 8 ? SYMM_UINT64 : SYMM_UINT32)
SYMM_TM_TYPE_OF_(unsigned long long, SYMM_UINT64)
SYMM_TM_TYPE_OF_(float, SYMM_FLOAT)
SYMM_TM_TYPE_OF_(double, SYMM_DOUBLE)
SYMM_TM_TYPE_OF_(__half, SYMM_FP16)
SYMM_TM_TYPE_OF_(__nv_bfloat16, SYMM_BF16)
SYMM_TM_TYPE_OF_(__nv_fp8_e4m3, SYMM_FP8_E4M3)
SYMM_TM_TYPE_OF_(__nv_fp8_e5m2, SYMM_FP8_E5M2)
#undef SYMM_TM_TYPE_OF_

/* a op b with a the running result (member 0 first): the rule of plan__combine.h, as
 * src/coll/reduce_ops.c applies it. Integer sum, prod, and, or, xor compute in 64 bits on
 * the sign-extended values, as the CPU does; min and max compare in the type itself. */
template <int TY, int OP>
SYMM_HD typename ty<TY>::T combine(typename ty<TY>::T a, typename ty<TY>::T b)
{
    typedef typename ty<TY>::T T;
    typedef typename ty<TY>::U U;
    if constexpr (TY == SYMM_FP16 || TY == SYMM_BF16)
        return symm_plan_half_combine(TY == SYMM_BF16, OP, a, b);
    else if constexpr (!ty<TY>::integer || OP == SYMM_OP_MIN || OP == SYMM_OP_MAX)
        return symm_plan_op<OP, T>(a, b);
    else
        return (T)(U)symm_plan_op<OP, uint64_t>((uint64_t)a, (uint64_t)b);
}

/* fp8 reductions (the tile calls) accumulate in float: every member folded in team order
 * by the float rule, the result rounded once (as src/coll/reduce_ops.c's
 * symm_reduce_fp8_fold and _store). */
template <int TY> struct fp8_of {
    static constexpr bool yes = TY == SYMM_FP8_E4M3 || TY == SYMM_FP8_E5M2;
    SYMM_HD float in(uint8_t v) { return symm_half_fp8_to_float(TY == SYMM_FP8_E5M2, v); }
    SYMM_HD uint8_t out(float v) { return symm_half_float_to_fp8(TY == SYMM_FP8_E5M2, v); }
};

/* 1 if op is defined on type (and, or, xor on integers only). */
SYMM_HD int op_valid(int type, int op)
{
    if (type < 0 || type >= SYMM_TYPE_COUNT || op < 0 || op >= SYMM_OP_COUNT) return 0;
    int flt = type == SYMM_FLOAT || type == SYMM_DOUBLE || type == SYMM_FP16 ||
              type == SYMM_BF16 || type == SYMM_FP8_E4M3 || type == SYMM_FP8_E5M2;
    return !(flt && op >= SYMM_OP_AND);
}

} // namespace symm_tm

#endif
