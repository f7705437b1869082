/* bench_topk.c — symm-bench topk: one MoE layer's communication with top-k routing, two ways
 * in the same run on the same data: symm_moe_topk_dispatch + symm_moe_topk_combine (each
 * token once per destination PE, the weights applied in the combine), against the same
 * layer built on the 2-D all-to-all (PyTorch's all_to_all_vdev_2d composite: every token
 * copied k times and grouped by expert, symm_moe_dispatch, symm_moe_combine, then the k
 * results gathered and weighted). The experts are the identity (their output is the
 * dispatch's output), so both layers give the same bf16 tokens, bit for bit (#wrong counts
 * the differences). Top-8 of TK_NE experts per PE, distinct experts per token, uniform;
 * rows of TK_HIDDEN bf16. */
#include "symm_bench.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

enum { TK_K = 8, TK_NE = 8, TK_HIDDEN = 1024, TK_ALIGN = 16 };
#define TK_RB ((size_t)TK_HIDDEN * 2)

enum { T_TOPK, T_COMPOSITE, T_COUNT };
static const char *const t_name[T_COUNT] = {"topk_layer", "composite_layer"};

typedef struct {
    size_t tokens, cap; /* tokens per PE; rows of every output */
    char *in, *rep, *mid, *mid2, *back;
    int64_t *idx, *trows;
    float *w;
    size_t *splits, *osplits, *ooffs, *csplits, *coffs, *pos; /* pos: slot -> row of rep */
    uint16_t *out;
} tk_t;

static uint64_t tk_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* My routes (distinct experts per token) and weights, my rows (bf16 values in [-1, 1)). */
static void tk_fill(tk_t *b)
{
    int nexp = sb_npes * TK_NE, k = nexp < TK_K ? nexp : TK_K;
    uint64_t s = tk_mix(0x70b4 + (uint64_t)sb_me);
    for (size_t t = 0; t < b->tokens; t++)
        for (int i = 0; i < TK_K; i++) {
            int64_t *row = b->idx + t * TK_K;
            row[i] = -1;
            b->w[t * TK_K + i] = 0.125f + 0.01f * (float)i;
            for (int tries = 0; i < k && tries < 64; tries++) {
                s = tk_mix(s);
                int64_t g = (int64_t)(s % (uint64_t)nexp);
                int dup = 0;
                for (int q = 0; q < i; q++)
                    dup |= row[q] == g;
                if (!dup) {
                    row[i] = g;
                    break;
                }
            }
        }
    uint16_t *in = (uint16_t *)b->in;
    for (size_t x = 0; x < b->tokens * TK_HIDDEN; x++) {
        s = tk_mix(s);
        in[x] = symm_float_to_bf16((float)(int)(s % 2001 - 1000) / 1000.0f);
    }
}

static symm_status_t tk_topk(tk_t *b)
{
    size_t counts[TK_NE], offs[TK_NE], rows;
    symm_status_t st = symm_moe_topk_dispatch(SYMM_TEAM_WORLD, b->mid2, b->cap, b->in,
                                              b->tokens, TK_RB, b->idx, TK_K, TK_NE, TK_ALIGN,
                                              NULL, 0, counts, offs, NULL, &rows, b->trows);
    if (st) return st;
    return symm_moe_topk_combine(SYMM_TEAM_WORLD, b->out, b->tokens, b->mid2, rows, TK_HIDDEN,
                                 SYMM_BF16, b->idx, b->trows, b->w, TK_K, TK_NE);
}

/* acc[h] = fmaf(w, x[h], acc[h]) over a row: 8 lanes with AVX2 and FMA where the CPU has
 * them (as the library's combine), the same bits either way. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static void tk_wacc_avx2(float *acc, const uint16_t *x,
                                                             float w)
{
    const __m256 vw = _mm256_set1_ps(w);
    for (int h = 0; h < TK_HIDDEN; h += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + h)));
        __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        _mm256_storeu_ps(acc + h, _mm256_fmadd_ps(vw, f, _mm256_loadu_ps(acc + h)));
    }
}
#define TK_HAVE_AVX2 1
#endif

static void tk_wacc(float *acc, const uint16_t *x, float w)
{
#ifdef TK_HAVE_AVX2
    static int fast = -1;
    if (fast < 0) fast = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (fast) {
        tk_wacc_avx2(acc, x, w);
        return;
    }
#endif
    for (int h = 0; h < TK_HIDDEN; h++)
        acc[h] = fmaf(w, symm_bf16_to_float(x[h]), acc[h]);
}

/* The composite: replicate and group by expert, the 2-D dispatch and combine, gather and
 * weight (the same fmaf order as symm_moe_topk_combine). */
static symm_status_t tk_composite(tk_t *b)
{
    const size_t nexp = (size_t)sb_npes * TK_NE, slots = b->tokens * TK_K;
    /* a counting sort of the slots by expert: the copies, rank-major and expert-major */
    memset(b->splits, 0, nexp * sizeof(size_t));
    for (size_t q = 0; q < slots; q++)
        if (b->idx[q] >= 0) b->splits[b->idx[q]]++;
    size_t run = 0;
    for (size_t g = 0; g < nexp; g++) {
        b->coffs[g] = run; /* (a scratch until the combine writes it) */
        run += b->splits[g];
    }
    for (size_t q = 0; q < slots; q++) {
        if (b->idx[q] < 0) continue;
        size_t r = b->coffs[b->idx[q]]++;
        memcpy(b->rep + r * TK_RB, b->in + (q / TK_K) * TK_RB, TK_RB);
        b->pos[q] = r;
    }
    size_t rows, crows;
    symm_status_t st = symm_moe_dispatch(SYMM_TEAM_WORLD, b->mid, b->cap, b->rep, b->splits,
                                         TK_NE, TK_RB, TK_ALIGN, b->osplits, b->ooffs, &rows);
    if (!st)
        st = symm_moe_combine(SYMM_TEAM_WORLD, b->back, b->tokens * TK_K, b->mid, b->osplits,
                              b->ooffs, TK_NE, TK_RB, b->csplits, b->coffs, &crows);
    if (st) return st;
    float acc[TK_HIDDEN];
    for (size_t t = 0; t < b->tokens; t++) {
        memset(acc, 0, sizeof acc);
        for (int i = 0; i < TK_K; i++) {
            size_t q = t * TK_K + (size_t)i;
            if (b->idx[q] < 0) continue;
            tk_wacc(acc, (const uint16_t *)(b->back + b->pos[q] * TK_RB), b->w[q]);
        }
        for (int h = 0; h < TK_HIDDEN; h++)
            b->out[t * TK_HIDDEN + h] = symm_float_to_bf16(acc[h]);
    }
    return SYMM_SUCCESS;
}

static symm_status_t tk_run(const void *ctx, int op, size_t slot)
{
    (void)slot;
    tk_t *b = (tk_t *)ctx;
    return op == T_TOPK ? tk_topk(b) : tk_composite(b);
}

int sb_suite_topk(void)
{
    size_t lo = 64, hi = sb_opts.quick ? 64 : 4096;
    SB_PRINT("# symm-bench topk: %d PEs, top-%d of %d experts per PE (distinct, uniform), "
             "rows of %d bf16, major_align %d\n"
             "# topk_layer: symm_moe_topk_dispatch + symm_moe_topk_combine (a token once per "
             "destination PE, weights in the combine)\n"
             "# composite_layer: every token copied k times and grouped by expert, "
             "symm_moe_dispatch, symm_moe_combine, gather and weight (the all_to_all_vdev_2d "
             "way)\n"
             "# experts: identity; both give the same bits (#wrong). time: per layer, median "
             "of %d repetitions of the average over PEs\n",
             sb_npes, TK_K, TK_NE, TK_HIDDEN, TK_ALIGN, sb_opts.reps);
    SB_PRINT("\n%10s %12s %10s %14s %10s %14s %16s %7s\n", "# tokens", "bytes/PE", "topk_us",
             "spread(%)", "comp_us", "spread(%)", "ratio(comp/topk)", "#wrong");
    tk_t b;
    memset(&b, 0, sizeof b);
    size_t maxslots = hi * TK_K;
    /* every PE receives about tokens x k rows (uniform routing): twice that, plus padding */
    b.cap = 2 * maxslots + (size_t)TK_NE * TK_ALIGN;
    b.in = sb_symm_region(hi * TK_RB);
    b.rep = sb_symm_region(maxslots * TK_RB);
    b.mid = sb_symm_region(b.cap * TK_RB);
    b.mid2 = sb_symm_region(b.cap * TK_RB);
    b.back = sb_symm_region(maxslots * TK_RB);
    b.idx = malloc(maxslots * sizeof(int64_t));
    b.trows = malloc(maxslots * sizeof(int64_t));
    b.w = malloc(maxslots * sizeof(float));
    b.pos = malloc(maxslots * sizeof(size_t));
    b.splits = calloc(5 * (size_t)sb_npes * TK_NE, sizeof(size_t));
    b.out = malloc(hi * TK_RB);
    uint16_t *ref = malloc(hi * TK_RB);
    if (!b.idx || !b.trows || !b.w || !b.pos || !b.splits || !b.out || !ref)
        sb_fail("malloc", __FILE__, __LINE__, SYMM_ERR_NO_MEMORY);
    size_t ng = (size_t)sb_npes * TK_NE;
    b.osplits = b.splits + ng;
    b.ooffs = b.splits + 2 * ng;
    b.csplits = b.splits + 3 * ng;
    b.coffs = b.splits + 4 * ng;
    long total_wrong = 0;
    for (size_t T = lo; T <= hi; T *= 4) {
        b.tokens = T;
        tk_fill(&b);
        SB_CHECK(symm_barrier_all());
        SB_CHECK(tk_composite(&b));
        memcpy(ref, b.out, T * TK_RB);
        SB_CHECK(symm_barrier_all());
        SB_CHECK(tk_topk(&b));
        long wrong = 0;
        for (size_t x = 0; x < T * TK_HIDDEN; x++)
            wrong += ref[x] != b.out[x];
        wrong = (long)sb_max_all((double)wrong);
        total_wrong += wrong;
        int iters = bench_iters_for(T * TK_RB, sb_opts.quick);
        if (iters > 20) iters = 20;
        bench_stat_t st = sb_time_slots(tk_run, &b, T_TOPK, 1, iters, 1);
        bench_stat_t sc = sb_time_slots(tk_run, &b, T_COMPOSITE, 1, iters, 1);
        SB_PRINT("%10zu %12zu %10.1f %14.1f %10.1f %14.1f %16.2f %7ld\n", T, T * TK_RB,
                 st.median, bench_spread_pct(st), sc.median, bench_spread_pct(sc),
                 sc.median / st.median, wrong);
        bench_tsv_row(&sb_opts, "topk", t_name[T_TOPK], (int64_t)(T * TK_RB), st, 0, NAN, NAN);
        bench_tsv_row(&sb_opts, "topk", t_name[T_COMPOSITE], (int64_t)(T * TK_RB), sc, 0, NAN,
                      NAN);
    }
    SB_PRINT("\n# total wrong: %ld\n", total_wrong);
    free(ref);
    free(b.out);
    free(b.splits);
    free(b.pos);
    free(b.w);
    free(b.trows);
    free(b.idx);
    symm_free(b.back);
    symm_free(b.mid2);
    symm_free(b.mid);
    symm_free(b.rep);
    symm_free(b.in);
    return total_wrong ? 1 : 0;
}
