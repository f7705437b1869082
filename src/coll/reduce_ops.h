/* reduce_ops.h — the elementwise reduction kernels (every type x op of symm.h), shared by
 * the collectives of src/coll and by the tile-reduce and MoE code: one call reduces n
 * elements, so callers pay one indirect call per block, never per element. */
#ifndef SYMM_COLL_REDUCE_OPS_H
#define SYMM_COLL_REDUCE_OPS_H

#include <stddef.h>

#include "symm.h"

/* dst[i] = op(a[i], b[i]) for i < n, elements of the kernel's type. dst may be a or b
 * (the same elements; any other overlap is undefined). Integers wrap (two's complement,
 * no signed overflow); float and double compute in their own type; fp16 and bf16 compute
 * in float and round to nearest even on every store, as symm_float_to_fp16 does. min
 * keeps a[i] on ties (b < a ? b : a), max likewise (b > a ? b : a). */
typedef void (*symm_reduce_fn_t)(symm_op_t op, void *dst, const void *a, const void *b,
                                 size_t n);

/* The kernel of type, to be called with op; NULL when the pair is invalid (an unknown
 * type or op, and/or/xor on float, double, fp16 or bf16, or an fp8 type). */
symm_reduce_fn_t symm_reduce_kernel(symm_type_t type, symm_op_t op);

/* fp8 (e4m3, e5m2) has no pairwise kernel: its reductions (the tile calls) accumulate in
 * float over the members, in team order, and round once. is_fp8: whether type is one.
 * fold: acc[i] = op(acc[i], src[i]) for i < n in float (first: acc[i] = src[i]), by the rule
 * of plan__combine.h; store: dst[i] = acc[i] rounded to the type (nearest even). */
int symm_reduce_is_fp8(symm_type_t type);
void symm_reduce_fp8_fold(symm_type_t type, symm_op_t op, float *acc, const void *src, size_t n,
                          int first);
void symm_reduce_fp8_store(symm_type_t type, void *dst, const float *acc, size_t n);

/* The weighted sums of the top-k combine (plan__topk.h's rule, vectorised where the CPU
 * allows, the same bits): acc[i] = fmaf(w, src[i], acc[i]) for i < n, src of type (float,
 * fp16 or bf16); round_store: dst[i] = acc[i] rounded to type (nearest even). */
void symm_reduce_wacc(symm_type_t type, float *acc, const void *src, float w, size_t n);
void symm_reduce_round_store(symm_type_t type, void *dst, const float *acc, size_t n);

/* As symm_reduce_kernel, recording the error (SYMM_ERR_INVALID_ARG, naming fn, the type
 * and the op) when the pair is invalid; *size_out gets the element size. */
symm_status_t symm_reduce_lookup(const char *fn, symm_type_t type, symm_op_t op,
                                 symm_reduce_fn_t *fn_out, size_t *size_out);

/* dst = op over k sources (k >= 1) in the order given: ((s[0] op s[1]) op s[2]) ...
 * Every reduction of src/coll folds members in team order this way, so that all members
 * (and every algorithm) produce bitwise-identical results. dst may be one of srcs[0] or
 * srcs[1] only if it is not read again afterwards (dst is written by the first step). */
static inline void symm_reduce_fold(symm_reduce_fn_t fn, symm_op_t op, void *dst,
                                    const void *const *srcs, int k, size_t n, size_t size)
{
    if (k == 1) {
        if (dst != srcs[0] && n) __builtin_memcpy(dst, srcs[0], n * size);
        return;
    }
    fn(op, dst, srcs[0], srcs[1], n);
    for (int j = 2; j < k; j++)
        fn(op, dst, dst, srcs[j], n);
}

#endif
