/* test_tile_moe_host.cu — runs on the CPU (no GPU needed): the host/device code the tile
 * and MoE kernels share (symm/impl/tile_moe__common.h and the combine<> of
 * type_op__funcs.cuh), against the CPU library (the fp16/bf16 conversions are one copy,
 * symm/impl/half__common.h, checked by tests/unit/test_fp16.c): every type x op folded
 * over 1..5 members bitwise against the CPU reduction kernels, tile units
 * covering every element exactly once, 16-byte splits, bands; and a lane-by-lane emulation
 * of the device's windowed warp-scan layout against the serial dispatch / combine layout
 * of symm.h, over random counts, team sizes, expert counts and alignments. */
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "symm_device.cuh"

extern "C" {
#include "coll/reduce_ops.h"
}

static int g_fail;
#define CHECK_T(c, ...)                                                                        \
    do {                                                                                       \
        if (!(c)) {                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
            if (++g_fail > 20) exit(1);                                                        \
        }                                                                                      \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

template <int TY, int OP> static void fold_one(void)
{
    typedef typename symm_tm::ty<TY>::T T;
    symm_reduce_fn_t kern = symm_reduce_kernel((symm_type_t)TY, (symm_op_t)OP);
    CHECK_T(kern, "no CPU kernel");
    for (int n = 1; n <= 5; n++)
        for (int it = 0; it < 2000; it++) {
            T v[5], cpu, dev;
            for (int m = 0; m < n; m++) {
                uint64_t b = next();
                if constexpr (TY == SYMM_FLOAT)
                    v[m] = (float)((int64_t)b % 2001) / 997.0f;
                else if constexpr (TY == SYMM_DOUBLE)
                    v[m] = (double)((int64_t)b % 20001) / 9973.0;
                else if constexpr (TY == SYMM_FP16)
                    v[m] = symm_float_to_fp16((float)((int64_t)b % 2001) / 997.0f);
                else if constexpr (TY == SYMM_BF16)
                    v[m] = symm_float_to_bf16((float)((int64_t)b % 2001) / 997.0f);
                else
                    memcpy(&v[m], &b, sizeof(T));
            }
            cpu = v[0];
            dev = v[0];
            for (int m = 1; m < n; m++) {
                kern((symm_op_t)OP, &cpu, &cpu, &v[m], 1);
                dev = symm_tm::combine<TY, OP>(dev, v[m]);
            }
            CHECK_T(!memcmp(&cpu, &dev, sizeof(T)), "%s %s over %d members differs",
                    symm_type_name((symm_type_t)TY), symm_op_name((symm_op_t)OP), n);
        }
}

/* fp8: the device's float accumulation (fp8_of, symm_plan_op on floats) against the CPU's
 * (symm_reduce_fp8_fold / _store), over 1..5 members of random codes. */
template <int TY, int OP> static void fold_one_fp8(void)
{
    typedef symm_tm::fp8_of<TY> F;
    for (int n = 1; n <= 5; n++)
        for (int it = 0; it < 2000; it++) {
            uint8_t v[5], cpu, dev;
            float acc = 0, dacc = 0;
            for (int m = 0; m < n; m++) {
                v[m] = (uint8_t)next();
                symm_reduce_fp8_fold((symm_type_t)TY, (symm_op_t)OP, &acc, &v[m], 1, m == 0);
                dacc = m ? symm_plan_op<OP, float>(dacc, F::in(v[m])) : F::in(v[m]);
            }
            symm_reduce_fp8_store((symm_type_t)TY, &cpu, &acc, 1);
            dev = F::out(dacc);
            /* a NaN result may differ in sign (the NaN operand that propagates) */
            const int nan_c = (cpu & 0x7f) > (TY == SYMM_FP8_E5M2 ? 0x7c : 0x7e),
                      nan_d = (dev & 0x7f) > (TY == SYMM_FP8_E5M2 ? 0x7c : 0x7e);
            CHECK_T(cpu == dev || (nan_c && nan_d), "%s %s over %d members differs",
                    symm_type_name((symm_type_t)TY), symm_op_name((symm_op_t)OP), n);
        }
}

template <int TY> static void fold_type(void)
{
    if constexpr (symm_tm::fp8_of<TY>::yes) {
        fold_one_fp8<TY, SYMM_OP_SUM>();
        fold_one_fp8<TY, SYMM_OP_PROD>();
        fold_one_fp8<TY, SYMM_OP_MIN>();
        fold_one_fp8<TY, SYMM_OP_MAX>();
        return;
    }
    fold_one<TY, SYMM_OP_SUM>();
    fold_one<TY, SYMM_OP_PROD>();
    fold_one<TY, SYMM_OP_MIN>();
    fold_one<TY, SYMM_OP_MAX>();
    if constexpr (symm_tm::ty<TY>::integer) {
        fold_one<TY, SYMM_OP_AND>();
        fold_one<TY, SYMM_OP_OR>();
        fold_one<TY, SYMM_OP_XOR>();
    }
}

static void test_units(void)
{
    static const uint32_t sizes[] = {1, 2, 4, 8};
    for (int it = 0; it < 300; it++) {
        uint32_t es = sizes[next() % 4];
        uint64_t rows = next() % 40, cols = (it % 3 == 0) ? next() % 20000 : next() % 300;
        std::vector<uint8_t> seen(rows * cols, 0);
        uint64_t U = symm_tm_tile_units(rows, cols, es);
        for (uint64_t u = 0; u < U; u++) {
            uint64_t r0, r1, c0, c1;
            symm_tm_tile_unit(rows, cols, es, u, &r0, &r1, &c0, &c1);
            CHECK_T(r0 < r1 && r1 <= rows && c0 < c1 && c1 <= cols, "unit %llu out of range",
                    (unsigned long long)u);
            for (uint64_t r = r0; r < r1 && r < rows; r++)
                for (uint64_t c = c0; c < c1 && c < cols; c++)
                    seen[r * cols + c]++;
        }
        for (size_t i = 0; i < seen.size(); i++)
            CHECK_T(seen[i] == 1, "%llux%llu es %u: element %zu covered %d times",
                    (unsigned long long)rows, (unsigned long long)cols, es, i, seen[i]);
        uint64_t parts = 1 + next() % 9, expect = 0;
        for (uint64_t p = 0; p < parts; p++) {
            uint64_t lo, hi;
            symm_plan_band(U, parts, p, &lo, &hi);
            CHECK_T(lo == expect && hi >= lo, "band %llu", (unsigned long long)p);
            expect = hi;
        }
        CHECK_T(expect == U, "bands do not cover the units");
        uintptr_t a = (uintptr_t)(next() % 64) * es;
        uint64_t len = next() % 100, h, nv, t;
        symm_tm_split16(a, len, es, 1, &h, &nv, &t);
        CHECK_T(h + nv * (16 / es) + t == len && (h == len || ((a + h * es) & 15) == 0),
                "split16 a %zu len %llu", (size_t)a, (unsigned long long)len);
        /* the kernels' division: 32 bits when both fit, else 64 */
        uint64_t x = next(), d = 1 + next() % 1000;
        if (it % 3 == 0) x &= 0xffffffffu;
        if (it % 5 == 0) d = (next() >> (next() % 64)) | 1;
        if (it % 7 == 0) d = 0xffffffffu - next() % 3;
        CHECK_T(symm_tm_div(x, d) == x / d, "symm_tm_div(%llu, %llu)", (unsigned long long)x,
                (unsigned long long)d);
    }
    /* MoE workspace: SYMM_TM_A2A_COPIES tables; entries indexed in 32 bits */
    CHECK_T(symm_tm_a2a_ws_bytes(3, 5) == (SYMM_TM_A2A_HDR + 2 * 15) * 8 * SYMM_TM_A2A_COPIES,
            "ws bytes of 3 x 5");
    CHECK_T(symm_tm_a2a_ws_bytes(1 << 16, 1 << 15) == 0, "n * ne = 2^31 must be refused");
    CHECK_T(symm_tm_a2a_ws_bytes(1 << 16, (1 << 15) - 1) != 0, "n * ne < 2^31 must be taken");
    CHECK_T(symm_tm_a2a_ws_bytes(0, 4) == 0 && symm_tm_a2a_ws_bytes(4, 0) == 0, "empty team");
}

/* The MoE copy's chunks (symm_tm_moe_chunk_rows, symm_tm_moe_my_chunks): over all blocks,
 * every moved row of every entry is copied once, chunks hold at most SYMM_TM_MOE_CHUNK
 * bytes (or one row), and no block has more than one chunk more than another. */
static void test_moe_chunks(void)
{
    for (int it = 0; it < 400; it++) {
        const uint64_t rb = it % 5 == 0 ? 100000 + next() % 100000 : 1 + next() % 9000;
        const uint32_t np = 1 + (uint32_t)(next() % (it % 3 ? 300 : 8));
        const int ne = 1 + (int)(next() % 40);
        std::vector<uint64_t> cnt(ne);
        uint64_t moved = 0;
        for (int e = 0; e < ne; e++) {
            cnt[e] = it % 4 == 0 ? next() % 3 : next() % 700;
            moved += cnt[e];
        }
        const uint64_t R = symm_tm_moe_chunk_rows(moved, rb, np);
        CHECK_T(R >= 1 && (R == 1 || R * rb <= SYMM_TM_MOE_CHUNK), "R %llu for row %llu",
                (unsigned long long)R, (unsigned long long)rb);
        std::vector<uint8_t> seen(moved, 0);
        std::vector<uint64_t> per(np, 0);
        for (uint32_t p = 0; p < np; p++) {
            std::vector<uint64_t> mine; /* chunk numbers of this block */
            uint64_t mov = 0;
            for (int e = 0; e < ne; e++) {
                uint64_t c1, cl;
                symm_tm_moe_my_chunks(mov, cnt[e], R, p, np, &c1, &cl);
                for (uint64_t c = c1; c <= cl; c += np) {
                    CHECK_T(c % np == p, "chunk %llu dealt to block %u of %u",
                            (unsigned long long)c, p, np);
                    uint64_t a0 = c * R > mov ? c * R : mov;
                    uint64_t a1 = (c + 1) * R < mov + cnt[e] ? (c + 1) * R : mov + cnt[e];
                    for (uint64_t r = a0; r < a1; r++)
                        seen[r]++;
                    if (mine.empty() || mine.back() != c) mine.push_back(c);
                }
                mov += cnt[e];
            }
            per[p] = mine.size();
        }
        for (uint64_t r = 0; r < moved; r++)
            CHECK_T(seen[r] == 1, "moved row %llu of %llu copied %d times (np %u, R %llu)",
                    (unsigned long long)r, (unsigned long long)moved, seen[r], np,
                    (unsigned long long)R);
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t p = 0; p < np; p++) {
            lo = per[p] < lo ? per[p] : lo;
            hi = per[p] > hi ? per[p] : hi;
        }
        CHECK_T(hi - lo <= 1, "blocks hold %llu to %llu chunks", (unsigned long long)lo,
                (unsigned long long)hi);
    }
}

/* The device layout (a2a_impl's warp-0 loop), one lane at a time. */
static void emulate_layout(int kind, int n, int ne, uint64_t A,
                           const std::vector<uint64_t> &cnt, std::vector<uint64_t> *dst,
                           std::vector<uint64_t> *mov, uint64_t *total)
{
    const uint64_t N = (uint64_t)n * ne;
    const int inner = kind == SYMM_TM_A2A_DISPATCH ? n : ne;
    const bool pad_mode = kind == SYMM_TM_A2A_DISPATCH && A > 0;
    uint64_t c_moved = 0, c_pad = 0, c_gsm = 0;
    dst->assign(N, 0);
    mov->assign(N, 0);
    for (uint64_t w0 = 0; w0 < N; w0 += SYMM_TM_WIN) {
        uint64_t wn = N - w0 < SYMM_TM_WIN ? N - w0 : SYMM_TM_WIN;
        for (uint64_t c0 = w0; c0 < w0 + wn; c0 += 32) {
            uint64_t c[32], incl[32], mv[32], pad[32], pincl[32];
            uint32_t j[32];
            bool valid[32];
            for (int l = 0; l < 32; l++) {
                uint64_t o = c0 + l;
                valid[l] = o < w0 + wn;
                c[l] = valid[l] ? cnt[o] : 0;
                j[l] = valid[l] ? (uint32_t)(o % inner) : 0;
                incl[l] = c[l] + (l ? incl[l - 1] : 0);
                mv[l] = c_moved + incl[l] - c[l];
            }
            for (int l = 0; l < 32; l++) {
                uint32_t gl = j[l] <= (uint32_t)l ? l - j[l] : l;
                uint64_t gsm = j[l] <= (uint32_t)l ? mv[gl] : c_gsm;
                pad[l] = 0;
                if (valid[l] && pad_mode && j[l] == (uint32_t)inner - 1) {
                    uint64_t len = mv[l] + c[l] - gsm, al;
                    symm_tm_aligned_len(len, A, &al);
                    pad[l] = al - len;
                }
                pincl[l] = pad[l] + (l ? pincl[l - 1] : 0);
            }
            int last_start = -1;
            for (int l = 0; l < 32; l++) {
                if (valid[l]) {
                    (*dst)[c0 + l] = mv[l] + c_pad + pincl[l] - pad[l];
                    (*mov)[c0 + l] = mv[l];
                    if (j[l] == 0) last_start = l;
                }
            }
            if (last_start >= 0) c_gsm = mv[last_start];
            c_moved += incl[31];
            c_pad += pincl[31];
        }
    }
    *total = c_moved + c_pad;
}

static void test_layout(void)
{
    for (int it = 0; it < 3000; it++) {
        int kind = (int)(next() % 3);
        int n = 1 + (int)(next() % 9), ne = kind == SYMM_TM_A2A_1D ? 1 : 1 + (int)(next() % 70);
        uint64_t A = kind == SYMM_TM_A2A_DISPATCH ? next() % 6 : 0;
        uint64_t N = (uint64_t)n * ne;
        int zero_pct = (int)(next() % 100);
        std::vector<uint64_t> cnt(N);
        for (auto &x : cnt)
            x = (int)(next() % 100) < zero_pct ? 0 : next() % 13;
        std::vector<uint64_t> dst, mov, ref(N);
        uint64_t total, pos = 0;
        /* serial reference (moe.c a2a_layout), in output order */
        if (kind == SYMM_TM_A2A_DISPATCH) {
            for (int e = 0; e < ne; e++) {
                uint64_t start = pos;
                for (int s = 0; s < n; s++) {
                    ref[(uint64_t)e * n + s] = pos;
                    pos += cnt[(uint64_t)e * n + s];
                }
                if (A) {
                    uint64_t len = pos - start, al = (len + A - 1) / A * A;
                    pos = start + (al < A ? A : al);
                }
            }
        } else {
            for (uint64_t o = 0; o < N; o++) {
                ref[o] = pos;
                pos += cnt[o];
            }
        }
        emulate_layout(kind, n, ne, A, cnt, &dst, &mov, &total);
        CHECK_T(total == pos, "kind %d n %d ne %d A %llu: total %llu, want %llu", kind, n, ne,
                (unsigned long long)A, (unsigned long long)total, (unsigned long long)pos);
        uint64_t m = 0;
        for (uint64_t o = 0; o < N; o++) {
            CHECK_T(dst[o] == ref[o] && mov[o] == m, "kind %d n %d ne %d A %llu: entry %llu",
                    kind, n, ne, (unsigned long long)A, (unsigned long long)o);
            m += cnt[o];
        }
    }
}

int main(void)
{
#define FT_(e, name, ctype) fold_type<e>();
    SYMM_FOREACH_TYPE(FT_)
#undef FT_
    test_units();
    test_moe_chunks();
    test_layout();
    if (g_fail) {
        printf("FAILED (%d)\n", g_fail);
        return 1;
    }
    printf("PASS test_tile_moe_host\n");
    return 0;
}
