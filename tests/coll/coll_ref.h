/* coll_ref.h — the serial reference of one reduction step, written independently of
 * src/coll/reduce_ops.c: integers wrap in uint64_t and compare sign-extended, floats
 * compute in their own type, fp16/bf16 in float with symm_float_to_fp16/bf16 rounding;
 * min keeps a on ties (b < a ? b : a), max likewise. */
#ifndef SYMM_TEST_COLL_REF_H
#define SYMM_TEST_COLL_REF_H

#include <stdint.h>
#include <string.h>

#include "symm.h"

static inline int is_signed(symm_type_t t)
{
    return t == SYMM_INT8 || t == SYMM_INT16 || t == SYMM_INT32 || t == SYMM_INT64;
}
static inline int is_float(symm_type_t t)
{
    return t == SYMM_FLOAT || t == SYMM_DOUBLE || t == SYMM_FP16 || t == SYMM_BF16;
}

/* a[i] = op(a[i], b[i]) for one element, written independently of the library. */
static inline void ref_op1(symm_type_t t, symm_op_t op, uint8_t *a, const uint8_t *b)
{
    size_t es = symm_type_size(t);
    if (t == SYMM_DOUBLE || t == SYMM_FLOAT || t == SYMM_FP16 || t == SYMM_BF16) {
        double x, y, r;
        if (t == SYMM_DOUBLE) {
            memcpy(&x, a, 8);
            memcpy(&y, b, 8);
            r = op == SYMM_OP_SUM    ? x + y
                : op == SYMM_OP_PROD ? x * y
                : op == SYMM_OP_MIN  ? (y < x ? y : x)
                                     : (y > x ? y : x);
            memcpy(a, &r, 8);
            return;
        }
        float fx, fy, fr;
        if (t == SYMM_FLOAT) {
            memcpy(&fx, a, 4);
            memcpy(&fy, b, 4);
        } else {
            uint16_t hx, hy;
            memcpy(&hx, a, 2);
            memcpy(&hy, b, 2);
            fx = t == SYMM_FP16 ? symm_fp16_to_float(hx) : symm_bf16_to_float(hx);
            fy = t == SYMM_FP16 ? symm_fp16_to_float(hy) : symm_bf16_to_float(hy);
        }
        fr = op == SYMM_OP_SUM    ? fx + fy
             : op == SYMM_OP_PROD ? fx * fy
             : op == SYMM_OP_MIN  ? (fy < fx ? fy : fx)
                                  : (fy > fx ? fy : fx);
        if (t == SYMM_FLOAT) {
            memcpy(a, &fr, 4);
        } else {
            uint16_t h = t == SYMM_FP16 ? symm_float_to_fp16(fr) : symm_float_to_bf16(fr);
            memcpy(a, &h, 2);
        }
        return;
    }
    uint64_t ux = 0, uy = 0, ur;
    memcpy(&ux, a, es);
    memcpy(&uy, b, es);
    int bits = (int)es * 8;
    int64_t sx = (int64_t)ux, sy = (int64_t)uy;
    if (bits < 64) { /* sign-extend */
        sx = (int64_t)(ux << (64 - bits)) >> (64 - bits);
        sy = (int64_t)(uy << (64 - bits)) >> (64 - bits);
    }
    switch (op) {
    case SYMM_OP_SUM:
        ur = ux + uy;
        break;
    case SYMM_OP_PROD:
        ur = ux * uy;
        break;
    case SYMM_OP_MIN:
        ur = is_signed(t) ? (sy < sx ? uy : ux) : (uy < ux ? uy : ux);
        break;
    case SYMM_OP_MAX:
        ur = is_signed(t) ? (sy > sx ? uy : ux) : (uy > ux ? uy : ux);
        break;
    case SYMM_OP_AND:
        ur = ux & uy;
        break;
    case SYMM_OP_OR:
        ur = ux | uy;
        break;
    default:
        ur = ux ^ uy;
        break;
    }
    memcpy(a, &ur, es);
}

#endif
