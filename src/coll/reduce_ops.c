/* reduce_ops.c — the reduction kernels: one loop body per op, instantiated for every type
 * of SYMM_FOREACH_TYPE; the op switch sits outside the loop, so each case is a plain
 * elementwise loop the compiler vectorises (fp16/bf16 convert through float). */
#include <stdint.h>
#include <string.h>

/* The library builds at -O2, where GCC only vectorises loops of known trip count; these
 * loops are the bandwidth-bound core of every reduction, so they get -O3 (runtime alias
 * checks and vector epilogues). Clang vectorises them at -O2 already. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#include "coll/reduce_ops.h"
#include "core/log.h"

#include "symm/impl/half__common.h"
#include "symm/impl/plan__combine.h"
#include "symm/impl/plan__topk.h"

/* ---- type classes, decided from the enum column of SYMM_FOREACH_TYPE */
#define RED_IS_HALF(e) ((int)(e) == (int)SYMM_FP16 || (int)(e) == (int)SYMM_BF16)
#define RED_IS_FP8(e)  ((int)(e) == (int)SYMM_FP8_E4M3 || (int)(e) == (int)SYMM_FP8_E5M2)
#define RED_IS_FLOAT(e)                                                                        \
    ((int)(e) == (int)SYMM_FLOAT || (int)(e) == (int)SYMM_DOUBLE || RED_IS_HALF(e) ||          \
     RED_IS_FP8(e))

/* Inside a kernel: E_ is the type's enum, T_ its storage type, C_ the type it computes
 * in (float for fp16/bf16) and W_ the type arithmetic wraps in (uint64_t for integers,
 * so that signed sums and products never overflow; C_ for floating types). */
#define RED_LOAD(v)                                                                            \
    __builtin_choose_expr(                                                                     \
        (int)E_ == (int)SYMM_FP16, symm_half_fp16_to_float(v),                                 \
        __builtin_choose_expr((int)E_ == (int)SYMM_BF16, symm_half_bf16_to_float(v), (C_)(v)))
#define RED_STORE(v)                                                                           \
    __builtin_choose_expr(                                                                     \
        (int)E_ == (int)SYMM_FP16, symm_half_float_to_fp16(v),                                 \
        __builtin_choose_expr((int)E_ == (int)SYMM_BF16, symm_half_float_to_bf16(v), (T_)(v)))

/* One expression per op (the rule of plan__combine.h), on computing-type values u (from
 * a) and v (from b). The bitwise ones are instantiated for floating types too but never
 * reachable from symm_reduce_kernel, which refuses those pairs. */
#define RED_EXPR_sum(u, v)  ((C_)SYMM_PLAN_OP_SUM((W_)(u), (W_)(v)))
#define RED_EXPR_prod(u, v) ((C_)SYMM_PLAN_OP_PROD((W_)(u), (W_)(v)))
#define RED_EXPR_min(u, v)  SYMM_PLAN_OP_MIN(u, v)
#define RED_EXPR_max(u, v)  SYMM_PLAN_OP_MAX(u, v)
#define RED_EXPR_and(u, v)  ((C_)SYMM_PLAN_OP_AND((uint64_t)(u), (uint64_t)(v)))
#define RED_EXPR_or(u, v)   ((C_)SYMM_PLAN_OP_OR((uint64_t)(u), (uint64_t)(v)))
#define RED_EXPR_xor(u, v)  ((C_)SYMM_PLAN_OP_XOR((uint64_t)(u), (uint64_t)(v)))

#define RED_CASE_(E, opname)                                                                   \
    case E:                                                                                    \
        for (size_t i = 0; i < n; i++) {                                                       \
            C_ u = RED_LOAD(x[i]), v = RED_LOAD(y[i]);                                         \
            d[i] = RED_STORE(RED_EXPR_##opname(u, v));                                         \
        }                                                                                      \
        break;

/* The one kernel body, instantiated per type. */
#define RED_KERNEL_(e, name, ctype)                                                            \
    static void red_##name(symm_op_t op, void *dst, const void *a, const void *b, size_t n)    \
    {                                                                                          \
        enum { E_ = e };                                                                       \
        typedef ctype T_;                                                                      \
        typedef __typeof__(__builtin_choose_expr(RED_IS_HALF(E_), 0.0f, (ctype)0)) C_;         \
        typedef __typeof__(__builtin_choose_expr(RED_IS_FLOAT(E_), (C_)0, (uint64_t)0)) W_;    \
        T_ *d = dst;                                                                           \
        const T_ *x = a, *y = b;                                                               \
        switch (op) {                                                                          \
            SYMM_FOREACH_OP(RED_CASE_)                                                         \
        default:                                                                               \
            break;                                                                             \
        }                                                                                      \
    }
SYMM_FOREACH_TYPE(RED_KERNEL_)
#undef RED_KERNEL_

/* fp16 with the F16C conversions where the CPU has them: the portable conversion above
 * is a branchy function of the bits (~0.7 GB/s), vcvtph2ps/vcvtps2ph convert 8 lanes
 * per instruction with the same rounding (nearest even; only a NaN's payload may
 * differ). Each op keeps the scalar kernel's operand order, so min/max ties agree too:
 * _mm256_min_ps(v, u) is v < u ? v : u. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define RED_HAVE_F16C 1

static int red_ymm_enabled(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6) == 6; /* XMM and YMM state */
}

__attribute__((target("avx,f16c"))) static inline __m256 red_fp16x8_load(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

__attribute__((target("avx,f16c"))) static inline void red_fp16x8_store(uint16_t *p, __m256 f)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
}

/* bf16 with AVX2: GCC does not vectorise the portable loops (the float <-> bits
 * punning), and they run at ~3 GB/s; these do 8 lanes with the same rounding as
 * symm_half_float_to_bf16 (nearest even; a NaN keeps its top bits and is made quiet). */
__attribute__((target("avx2"))) static inline __m256 red_bf16x8_load(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

__attribute__((target("avx2"))) static inline void red_bf16x8_store(uint16_t *p, __m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    __m256i v = _mm256_blendv_epi8(r, q, nan);
    /* 32 -> 16 bits: packus works within 128-bit lanes, the permute joins them */
    __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0xd8);
    _mm_storeu_si128((__m128i *)p, _mm256_castsi256_si128(pk));
}

/* One 8-lane kernel per 16-bit float type: the lanes widened to float by LOAD, combined,
 * narrowed by STORE; the tail by the scalar kernel TAIL. */
#define RED_HALF8_LOOP_(LOAD, STORE, EXPR)                                                     \
    for (; i + 8 <= n; i += 8) {                                                               \
        __m256 u = LOAD(x + i), v = LOAD(y + i);                                               \
        STORE(d + i, EXPR);                                                                    \
    }                                                                                          \
    break;
#define RED_HALF8_FN_(NAME, TARGET, LOAD, STORE, TAIL)                                         \
    __attribute__((target(TARGET))) static void NAME(symm_op_t op, void *dst, const void *a,   \
                                                     const void *b, size_t n)                  \
    {                                                                                          \
        uint16_t *d = dst;                                                                     \
        const uint16_t *x = a, *y = b;                                                         \
        size_t i = 0;                                                                          \
        switch (op) {                                                                          \
        case SYMM_OP_SUM:                                                                      \
            RED_HALF8_LOOP_(LOAD, STORE, _mm256_add_ps(u, v))                                  \
        case SYMM_OP_PROD:                                                                     \
            RED_HALF8_LOOP_(LOAD, STORE, _mm256_mul_ps(u, v))                                  \
        case SYMM_OP_MIN:                                                                      \
            RED_HALF8_LOOP_(LOAD, STORE, _mm256_min_ps(v, u))                                  \
        case SYMM_OP_MAX:                                                                      \
            RED_HALF8_LOOP_(LOAD, STORE, _mm256_max_ps(v, u))                                  \
        default:                                                                               \
            break;                                                                             \
        }                                                                                      \
        if (i < n) TAIL(op, d + i, x + i, y + i, n - i);                                       \
    }
RED_HALF8_FN_(red_fp16_f16c, "avx,f16c", red_fp16x8_load, red_fp16x8_store, red_fp16)
RED_HALF8_FN_(red_bf16_avx2, "avx2", red_bf16x8_load, red_bf16x8_store, red_bf16)
#undef RED_HALF8_FN_
#undef RED_HALF8_LOOP_
#endif

static const symm_reduce_fn_t red_table[SYMM_TYPE_COUNT] = {
#define RED_ENTRY_(e, name, ctype) [e] = red_##name,
    SYMM_FOREACH_TYPE(RED_ENTRY_)
#undef RED_ENTRY_
};

static int red_valid(symm_type_t type, symm_op_t op)
{
    if ((unsigned)type >= SYMM_TYPE_COUNT || (unsigned)op >= SYMM_OP_COUNT) return 0;
    if (RED_IS_FP8(type)) return 0; /* no pairwise kernel: float accumulation (below) */
    int bitwise = op == SYMM_OP_AND || op == SYMM_OP_OR || op == SYMM_OP_XOR;
    return !(bitwise && RED_IS_FLOAT(type));
}

#ifdef RED_HAVE_F16C
/* What this CPU can run, decided once per process: bit 0 F16C, bit 1 AVX2, bit 3 FMA
 * (bit 2: decided). */
static int red_features(void)
{
    static int have = 0;
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (!h) {
        /* CPUID.1:ECX: FMA (12), OSXSAVE (27), AVX (28), F16C (29); CPUID.7:EBX: AVX2 (5);
         * and the OS must save the YMM registers */
        unsigned ea, eb, ec, ed;
        int ymm =
            __get_cpuid(1, &ea, &eb, &ec, &ed) && (ec >> 27 & 3) == 3 && red_ymm_enabled();
        int f16c = ymm && (ec >> 29 & 1), fma = ymm && (ec >> 12 & 1);
        int avx2 = ymm && __get_cpuid_count(7, 0, &ea, &eb, &ec, &ed) && (eb >> 5 & 1);
        h = 4 | f16c | avx2 << 1 | fma << 3;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h;
}
#endif

static symm_reduce_fn_t red_pick(symm_type_t type)
{
#ifdef RED_HAVE_F16C
    if (type == SYMM_FP16 || type == SYMM_BF16) {
        int h = red_features();
        if (type == SYMM_FP16 && (h & 1)) return red_fp16_f16c;
        if (type == SYMM_BF16 && (h & 2)) return red_bf16_avx2;
    }
#endif
    return red_table[type];
}

symm_reduce_fn_t symm_reduce_kernel(symm_type_t type, symm_op_t op)
{
    return red_valid(type, op) ? red_pick(type) : NULL;
}

symm_status_t symm_reduce_lookup(const char *fn, symm_type_t type, symm_op_t op,
                                 symm_reduce_fn_t *fn_out, size_t *size_out)
{
    if ((unsigned)type >= SYMM_TYPE_COUNT)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid type %d", fn, (int)type);
    if ((unsigned)op >= SYMM_OP_COUNT)
        return symm_error_set(SYMM_ERR_INVALID_ARG, "%s: invalid op %d", fn, (int)op);
    if (RED_IS_FP8(type))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: type %s: fp8 reductions accumulate in float, which the tile "
                              "calls do (symm_tile_reduce, symm_tile_allreduce, "
                              "symm_tile_reduce_multi); this call does not take fp8",
                              fn, symm_type_name(type));
    if (!red_valid(type, op))
        return symm_error_set(SYMM_ERR_INVALID_ARG,
                              "%s: op %s is defined on integer types only, not on %s", fn,
                              symm_op_name(op), symm_type_name(type));
    *fn_out = red_pick(type);
    *size_out = symm_type_size(type);
    return SYMM_SUCCESS;
}

/* ---- fp8: float accumulation (the tile reductions) */
int symm_reduce_is_fp8(symm_type_t type)
{
    return RED_IS_FP8(type);
}

/* One loop per op, the op outside it (as the kernels above). */
#define RED_FP8_FOLD_(E5, EXPR)                                                                \
    for (size_t i = 0; i < n; i++) {                                                           \
        float u = acc[i], v = symm_half_fp8_to_float(E5, s[i]);                                \
        acc[i] = EXPR;                                                                         \
    }
void symm_reduce_fp8_fold(symm_type_t type, symm_op_t op, float *acc, const void *src, size_t n,
                          int first)
{
    const uint8_t *s = src;
    const int e5 = type == SYMM_FP8_E5M2;
    if (first) {
        for (size_t i = 0; i < n; i++)
            acc[i] = symm_half_fp8_to_float(e5, s[i]);
        return;
    }
    switch (op) {
    case SYMM_OP_SUM:
        RED_FP8_FOLD_(e5, SYMM_PLAN_OP_SUM(u, v))
        break;
    case SYMM_OP_PROD:
        RED_FP8_FOLD_(e5, SYMM_PLAN_OP_PROD(u, v))
        break;
    case SYMM_OP_MIN:
        RED_FP8_FOLD_(e5, SYMM_PLAN_OP_MIN(u, v))
        break;
    default:
        RED_FP8_FOLD_(e5, SYMM_PLAN_OP_MAX(u, v))
    }
}
#undef RED_FP8_FOLD_

void symm_reduce_fp8_store(symm_type_t type, void *dst, const float *acc, size_t n)
{
    uint8_t *d = dst;
    const int e5 = type == SYMM_FP8_E5M2;
    for (size_t i = 0; i < n; i++)
        d[i] = symm_half_float_to_fp8(e5, acc[i]);
}

/* ---- weighted sums in float (the top-k combine) */
static void wacc_scalar(symm_type_t type, float *acc, const void *src, float w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        acc[i] = symm_plan_topk_acc(acc[i], w, symm_plan_topk_load(type, src, i));
}

static void store_scalar(symm_type_t type, void *dst, const float *acc, size_t n)
{
    for (size_t i = 0; i < n; i++)
        symm_plan_topk_store(type, dst, i, acc[i]);
}

#ifdef RED_HAVE_F16C
/* 8 lanes with _mm256_fmadd_ps: one rounding per step, as fmaf; the conversions are the
 * reduction kernels' (the same bits as the scalar ones). */
__attribute__((target("avx2,fma,f16c"))) static void
wacc_avx2(symm_type_t type, float *acc, const void *src, float w, size_t n)
{
    const __m256 vw = _mm256_set1_ps(w);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = type == SYMM_FLOAT  ? _mm256_loadu_ps((const float *)src + i)
                   : type == SYMM_BF16 ? red_bf16x8_load((const uint16_t *)src + i)
                                       : red_fp16x8_load((const uint16_t *)src + i);
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vw, x, _mm256_loadu_ps(acc + i)));
    }
    if (i < n)
        wacc_scalar(type, acc + i, (const uint8_t *)src + i * symm_type_size(type), w, n - i);
}

__attribute__((target("avx2,fma,f16c"))) static void store_avx2(symm_type_t type, void *dst,
                                                                const float *acc, size_t n)
{
    size_t i = 0;
    if (type == SYMM_FLOAT) {
        memcpy(dst, acc, n * sizeof(float));
        return;
    }
    for (; i + 8 <= n; i += 8) {
        if (type == SYMM_BF16)
            red_bf16x8_store((uint16_t *)dst + i, _mm256_loadu_ps(acc + i));
        else
            red_fp16x8_store((uint16_t *)dst + i, _mm256_loadu_ps(acc + i));
    }
    if (i < n) store_scalar(type, (uint16_t *)dst + i, acc + i, n - i);
}
#define RED_WACC_FAST(h) (((h)&11) == 11) /* F16C, AVX2 and FMA */
#endif

void symm_reduce_wacc(symm_type_t type, float *acc, const void *src, float w, size_t n)
{
#ifdef RED_HAVE_F16C
    if (RED_WACC_FAST(red_features())) {
        wacc_avx2(type, acc, src, w, n);
        return;
    }
#endif
    wacc_scalar(type, acc, src, w, n);
}

void symm_reduce_round_store(symm_type_t type, void *dst, const float *acc, size_t n)
{
#ifdef RED_HAVE_F16C
    if (RED_WACC_FAST(red_features())) {
        store_avx2(type, dst, acc, n);
        return;
    }
#endif
    store_scalar(type, dst, acc, n);
}
