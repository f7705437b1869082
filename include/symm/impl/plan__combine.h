/* plan__combine.h — the one rule for combining two elements in a reduction, for every
 * type x op of symm.h: the CPU kernels (src/coll/reduce_ops.c), the stream/device
 * reductions (dev__funcs.cuh) and the device tile code (type_op__funcs.cuh) all expand
 * these, so the same call gives the same bits everywhere. Valid C11 and CUDA C++. */
#ifndef SYMM_IMPL_PLAN__COMBINE_H
#define SYMM_IMPL_PLAN__COMBINE_H

#include <stdint.h>

#include "symm.h"
#include "symm/impl/half__common.h"

#include "symm/impl/plan__hd.h"

/* u op v, u the running result (member 0 first), v the next member's value, both in the
 * type the combine computes in:
 * - integers: sum and prod in uint64_t (they wrap, no signed overflow), and/or/xor on
 *   the bits, min/max in the type itself (signed compares for signed types);
 * - float, double: their own type;
 * - fp16, bf16: float, and the result rounded to the half type (nearest even) after every
 *   combine, before the next member is folded in.
 * min keeps u on ties (v < u ? v : u), max likewise, so NaN and -0/+0 pick alike. */
#define SYMM_PLAN_OP_SUM(u, v)  ((u) + (v))
#define SYMM_PLAN_OP_PROD(u, v) ((u) * (v))
#define SYMM_PLAN_OP_MIN(u, v)  ((v) < (u) ? (v) : (u))
#define SYMM_PLAN_OP_MAX(u, v)  ((v) > (u) ? (v) : (u))
#define SYMM_PLAN_OP_AND(u, v)  ((u) & (v))
#define SYMM_PLAN_OP_OR(u, v)   ((u) | (v))
#define SYMM_PLAN_OP_XOR(u, v)  ((u) ^ (v))

/* a op b for two fp16 (bf16 != 0: bf16) values, by the rule above; op is sum, prod, min
 * or max (a constant where inlined: the switch folds away). */
SYMM_HD uint16_t symm_plan_half_combine(int bf16, int op, uint16_t a, uint16_t b)
{
    float u = bf16 ? symm_half_bf16_to_float(a) : symm_half_fp16_to_float(a);
    float v = bf16 ? symm_half_bf16_to_float(b) : symm_half_fp16_to_float(b);
    float r = op == SYMM_OP_SUM    ? SYMM_PLAN_OP_SUM(u, v)
              : op == SYMM_OP_PROD ? SYMM_PLAN_OP_PROD(u, v)
              : op == SYMM_OP_MIN  ? SYMM_PLAN_OP_MIN(u, v)
                                   : SYMM_PLAN_OP_MAX(u, v);
    return bf16 ? symm_half_float_to_bf16(r) : symm_half_float_to_fp16(r);
}

#ifdef __cplusplus
/* u op v by the rule above for an op known at compile time (OP a symm_op_t), in the type A
 * the combine computes in: the C++ kernels instantiate one loop per op from it. */
template <int OP, typename A> SYMM_HD A symm_plan_op(A u, A v)
{
    if constexpr (OP == SYMM_OP_SUM)
        return SYMM_PLAN_OP_SUM(u, v);
    else if constexpr (OP == SYMM_OP_PROD)
        return SYMM_PLAN_OP_PROD(u, v);
    else if constexpr (OP == SYMM_OP_MIN)
        return SYMM_PLAN_OP_MIN(u, v);
    else if constexpr (OP == SYMM_OP_MAX)
        return SYMM_PLAN_OP_MAX(u, v);
    else if constexpr (OP == SYMM_OP_AND)
        return SYMM_PLAN_OP_AND(u, v);
    else if constexpr (OP == SYMM_OP_OR)
        return SYMM_PLAN_OP_OR(u, v);
    else
        return SYMM_PLAN_OP_XOR(u, v);
}
#endif

#endif
