/* moe_ref.h — the serial reference of the GPU MoE tests: how many rows each PE sends to
 * each expert of each PE, the bytes of every row, and the dispatch layout of symm.h, all
 * computed on the host from the case alone, so that any PE knows every PE's input and
 * output. */
#ifndef SYMM_GPU_MOE_REF_H
#define SYMM_GPU_MOE_REF_H

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

#endif
