/* moe_ref.h — the serial reference of the GPU MoE tests: how many rows each PE sends to
 * each expert of each PE, the bytes of every row, and the dispatch layout of symm.h, all
 * computed on the host from the case alone, so that any PE knows every PE's input and
 * output. */
#ifndef SYMM_GPU_MOE_REF_H
#define SYMM_GPU_MOE_REF_H

#include <algorithm>
#include <vector>

#include "gpu_test.h"

struct moe_ref_case {
    int ne; /* experts per PE */
    size_t row_bytes, align;
    uint64_t seed;
    bool empty;               /* no PE sends any row */
    int mute = -1, deaf = -1; /* a PE that sends no rows, one that receives none (-1: none) */
};

/* rows PE src sends to expert e of PE dst */
static inline size_t moe_cnt(const moe_ref_case &c, int src, int dst, int e)
{
    if (c.empty || src == c.mute || dst == c.deaf) return 0;
    uint64_t b = gt_bits(c.seed, src, (size_t)dst * 4096 + (size_t)e);
    return (b & 3) == 0 ? 0 : (size_t)((b >> 8) % 9);
}
/* rows of PE pe's input, in a team of n */
static inline size_t moe_in_rows(int n, const moe_ref_case &c, int pe)
{
    size_t r = 0;
    for (int j = 0; j < n; j++)
        for (int e = 0; e < c.ne; e++)
            r += moe_cnt(c, pe, j, e);
    return r;
}
/* rank-major offset of (dst, e) in src's input */
static inline size_t moe_src_off(int n, const moe_ref_case &c, int src, int dst, int e)
{
    size_t r = 0;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < c.ne; k++) {
            if (j == dst && k == e) return r;
            r += moe_cnt(c, src, j, k);
        }
    return r;
}
/* byte b of row `row` of PE pe's input */
static inline uint8_t moe_row_byte(const moe_ref_case &c, int pe, size_t row, size_t b)
{
    return (uint8_t)gt_bits(c.seed ^ 0xabcdef, pe, row * c.row_bytes + b);
}
/* Dispatch layout of PE m (symm.h): splits/offsets in e*n + s order, total rows. */
static inline size_t moe_dispatch_layout(int n, const moe_ref_case &c, int m,
                                         std::vector<size_t> *sp, std::vector<size_t> *of)
{
    size_t pos = 0;
    sp->assign((size_t)c.ne * n, 0);
    of->assign((size_t)c.ne * n, 0);
    for (int e = 0; e < c.ne; e++) {
        size_t start = pos;
        for (int s = 0; s < n; s++) {
            (*sp)[(size_t)e * n + s] = moe_cnt(c, s, m, e);
            (*of)[(size_t)e * n + s] = pos;
            pos += moe_cnt(c, s, m, e);
        }
        if (c.align) {
            size_t len = pos - start, al = (len + c.align - 1) / c.align * c.align;
            if (al < c.align) al = c.align;
            pos = start + al;
        }
    }
    return pos;
}

/* The largest input (rows) and dispatch output (rows, padding included) of any PE. */
static inline void moe_max_rows(int n, const moe_ref_case &c, size_t *max_in, size_t *max_out)
{
    std::vector<size_t> sp, of;
    *max_in = *max_out = 0;
    for (int p = 0; p < n; p++) {
        *max_in = std::max(*max_in, moe_in_rows(n, c, p));
        *max_out = std::max(*max_out, moe_dispatch_layout(n, c, p, &sp, &of));
    }
}
/* PE me's input: its rows (rank-major, row_bytes each) and its splits (n * ne, rank-major). */
static inline void moe_input(int n, const moe_ref_case &c, int me, std::vector<uint8_t> *rows,
                             std::vector<size_t> *splits)
{
    const size_t nrows = moe_in_rows(n, c, me), rb = c.row_bytes;
    rows->assign(nrows * rb, 0);
    for (size_t r = 0; r < nrows; r++)
        for (size_t b = 0; b < rb; b++)
            (*rows)[r * rb + b] = moe_row_byte(c, me, r, b);
    splits->assign((size_t)n * c.ne, 0);
    for (int j = 0; j < n; j++)
        for (int e = 0; e < c.ne; e++)
            (*splits)[(size_t)j * c.ne + e] = moe_cnt(c, me, j, e);
}

/* Checks PE me's dispatch (or 1-D: ne 1, align 0) outputs against the reference: splits
 * osp and offsets oof (e*n + s order), out_rows, the rows received in hmid (the whole
 * output, copied back) and its padding rows, which must still hold fill. Returns the
 * reference splits and offsets in *rsp, *rof. what names the call in messages. */
static inline void moe_check_dispatch(int n, const moe_ref_case &c, int me, const char *what,
                                      const std::vector<size_t> &osp,
                                      const std::vector<size_t> &oof, size_t out_rows,
                                      const std::vector<uint8_t> &hmid, uint8_t fill,
                                      std::vector<size_t> *rsp, std::vector<size_t> *rof)
{
    const size_t rb = c.row_bytes, out_cap = hmid.size() / rb;
    const size_t total = moe_dispatch_layout(n, c, me, rsp, rof);
    const std::vector<size_t> &sp = *rsp, &of = *rof;
    for (size_t i = 0; i < sp.size(); i++)
        GT_TRUE(osp[i] == sp[i] && oof[i] == of[i],
                "%s: entry %zu split %zu offset %zu, want %zu %zu", what, i, osp[i], oof[i],
                sp[i], of[i]);
    GT_TRUE(out_rows == total, "%s: out_rows %zu, want %zu", what, out_rows, total);
    std::vector<char> covered(out_cap, 0);
    for (int e = 0; e < c.ne; e++)
        for (int s = 0; s < n; s++) {
            size_t i = (size_t)e * n + s, so = moe_src_off(n, c, s, me, e);
            for (size_t r = 0; r < sp[i]; r++) {
                covered[of[i] + r] = 1;
                for (size_t b = 0; b < rb; b++) {
                    uint8_t got = hmid[(of[i] + r) * rb + b],
                            want = moe_row_byte(c, s, so + r, b);
                    if (got != want)
                        GT_FAIL("%s: row %zu of (e %d, s %d) byte %zu = %02x, want %02x", what,
                                r, e, s, b, got, want);
                }
            }
        }
    for (size_t r = 0; r < out_cap; r++)
        if (!covered[r])
            for (size_t b = 0; b < rb; b++)
                GT_TRUE(hmid[r * rb + b] == fill, "%s: padding row %zu written", what, r);
}

/* Checks the combine that sent back every row a dispatch (or 1-D) delivered: splits bsp
 * and offsets bof (rank-major, packed) are those of my input, whose splits are hsp;
 * out_rows counts its rows; hback (the whole output, copied back) holds my input hin, then
 * fill. */
static inline void moe_check_combine(const char *what, size_t rb,
                                     const std::vector<size_t> &hsp,
                                     const std::vector<size_t> &bsp,
                                     const std::vector<size_t> &bof, size_t out_rows,
                                     const std::vector<uint8_t> &hin,
                                     const std::vector<uint8_t> &hback, uint8_t fill)
{
    size_t run = 0;
    for (size_t i = 0; i < hsp.size(); i++) {
        GT_TRUE(bsp[i] == hsp[i] && bof[i] == run,
                "combine after %s: entry %zu split %zu offset %zu, want %zu %zu", what, i,
                bsp[i], bof[i], hsp[i], run);
        run += hsp[i];
    }
    GT_TRUE(out_rows == run, "combine after %s: out_rows %zu, want %zu", what, out_rows, run);
    for (size_t i = 0; i < hback.size(); i++) {
        uint8_t want = i < run * rb ? hin[i] : fill;
        GT_TRUE(hback[i] == want, "combine after %s: byte %zu (row %zu) = %02x, want %02x",
                what, i, i / rb, hback[i], want);
    }
}

#endif
