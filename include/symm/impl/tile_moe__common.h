/* tile_moe__common.h — arithmetic shared by the device tile reduce / MoE code
 * (tile__funcs.cuh, a2a__funcs.cuh) and the host: the fp16/bf16 conversions of the CPU
 * reduction kernels (half__common.h), band splitting (plan__tile.h), the tile's work
 * units, MoE segment alignment and the size of the MoE workspace. Valid C11 and CUDA C++,
 * host and device, so a CPU unit test checks the very code the kernels run. */
#ifndef SYMM_IMPL_TILE_MOE__COMMON_H
#define SYMM_IMPL_TILE_MOE__COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "symm/impl/half__common.h"
#include "symm/impl/plan__combine.h"
#include "symm/impl/plan__hd.h"
#include "symm/impl/plan__tile.h"

/* A tile is cut into units of about this many bytes: one unit per (row, column range)
 * for rows at least this wide, else one unit per run of whole rows. A block works
 * through the units of its band in order. */
#define SYMM_TM_UNIT_BYTES 16384u

/* The MoE workspace, per member, in the GPU symmetric heap: SYMM_TM_A2A_COPIES copies of
 * one table (block b of a call uses copy b % SYMM_TM_A2A_COPIES: a line shared by every
 * block of the grid cost microseconds of L2 contention per call). A table is a header
 * of SYMM_TM_A2A_HDR words (status, out_capacity, the byte offset of the member's in from
 * its workspace, argument fingerprint), then
 * (count, source offset) for every (receiver j, index e), receiver-major. */
#define SYMM_TM_A2A_HDR    4
#define SYMM_TM_A2A_COPIES 32
/* Bytes of workspace a team of n members with ne experts each needs (0 on overflow). */
SYMM_HD size_t symm_tm_a2a_ws_bytes(int n, int ne)
{
    if (n < 1 || ne < 1) return 0;
    /* n, ne < 2^31, so the product fits in 64 bits and needs no division check (the
     * kernels run this on their critical path); n * ne < 2^31: they index entries in 32
     * bits */
    const uint64_t k = (uint64_t)n * (uint64_t)ne;
    if (k >= 0x80000000u ||
        k > (uint64_t)(SIZE_MAX / 16 / SYMM_TM_A2A_COPIES) - SYMM_TM_A2A_HDR)
        return 0;
    return (SYMM_TM_A2A_HDR + 2 * k) * 8 * SYMM_TM_A2A_COPIES;
}

/* ---------------------------------------------------------------- bands and units */
/* Units of a rows x cols tile of esize-byte elements (0 for an empty tile). */
SYMM_HD uint64_t symm_tm_tile_units(uint64_t rows, uint64_t cols, uint32_t esize)
{
    if (!rows || !cols) return 0;
    uint64_t rb = cols * esize;
    if (rb >= SYMM_TM_UNIT_BYTES) {
        uint64_t cw = SYMM_TM_UNIT_BYTES / esize;
        return rows * ((cols + cw - 1) / cw);
    }
    uint64_t rpu = SYMM_TM_UNIT_BYTES / rb;
    return (rows + rpu - 1) / rpu;
}
/* Unit u: rows [*r0, *r1), columns [*c0, *c1). */
SYMM_HD void symm_tm_tile_unit(uint64_t rows, uint64_t cols, uint32_t esize, uint64_t u,
                               uint64_t *r0, uint64_t *r1, uint64_t *c0, uint64_t *c1)
{
    uint64_t rb = cols * esize;
    if (rb >= SYMM_TM_UNIT_BYTES) {
        uint64_t cw = SYMM_TM_UNIT_BYTES / esize, upr = (cols + cw - 1) / cw;
        *r0 = u / upr;
        *r1 = *r0 + 1;
        *c0 = (u % upr) * cw;
        *c1 = *c0 + cw < cols ? *c0 + cw : cols;
    } else {
        uint64_t rpu = SYMM_TM_UNIT_BYTES / rb;
        *r0 = u * rpu;
        *r1 = *r0 + rpu < rows ? *r0 + rpu : rows;
        *c0 = 0;
        *c1 = cols;
    }
}

/* Work items of a row piece of len elements at address a: scalar elements until a
 * 16-byte boundary (head), 16-byte vectors, scalar tail. vec = 0: all scalar. */
SYMM_HD void symm_tm_split16(uintptr_t a, uint64_t len, uint32_t esize, int vec, uint64_t *head,
                             uint64_t *nvec, uint64_t *tail)
{
    *head = len;
    *nvec = 0;
    *tail = 0;
    if (!vec) return;
    uint64_t h = ((16 - (a & 15)) & 15) / esize;
    if (h > len) h = len;
    *head = h;
    *nvec = (len - h) / (16 / esize);
    *tail = len - h - *nvec * (16 / esize);
}

/* ---------------------------------------------------------------- MoE layout */
/* x / d, in 32 bits when both fit: on a GPU a 64-bit division is a long chain of
 * dependent instructions (~1000 cycles per division measured on an H200 in the MoE
 * kernel's layout, where it sat on every block's critical path). */
SYMM_HD uint64_t symm_tm_div(uint64_t x, uint64_t d)
{
    return ((x | d) >> 32) ? x / d : (uint64_t)((uint32_t)x / (uint32_t)d);
}

/* Rows a dispatch segment of len rows takes with major_align A (A == 0: len; else len
 * rounded up to a multiple of A, at least A). Returns 1 on overflow. */
SYMM_HD int symm_tm_aligned_len(uint64_t len, uint64_t A, uint64_t *out)
{
    if (!A) {
        *out = len;
        return 0;
    }
    if (len > UINT64_MAX - (A - 1)) return 1;
    uint64_t a = symm_tm_div(len + A - 1, A) * A;
    *out = a < A ? A : a;
    return 0;
}

/* MoE rows move in chunks of at most this many bytes (whole rows, at least one); chunk c
 * of a member's moved rows (output order) is copied by block c % nparts, so all blocks
 * sweep the output together. */
#ifndef SYMM_TM_MOE_CHUNK
#define SYMM_TM_MOE_CHUNK 65536u /* H200: 32 KiB slower, 96 and 128 KiB no better */
#endif

/* ceil(x / d), d > 0, without overflow. */
SYMM_HD uint64_t symm_tm_ceil_div(uint64_t x, uint64_t d)
{
    const uint64_t q = symm_tm_div(x, d);
    return q + (q * d != x);
}

/* Rows per chunk for `moved` rows of row_bytes over nparts blocks: at most
 * SYMM_TM_MOE_CHUNK bytes (at least a row), and close to an equal number of chunks per
 * block, so that no block has one more than most. Integer math with 32-bit divisions
 * when the operands fit (every block of a member computes it, on its critical path). */
SYMM_HD uint64_t symm_tm_moe_chunk_rows(uint64_t moved, uint64_t row_bytes, uint32_t nparts)
{
    const uint64_t rmax = row_bytes >= SYMM_TM_MOE_CHUNK ? 1 : SYMM_TM_MOE_CHUNK / row_bytes;
    const uint64_t np = nparts ? nparts : 1;
    if (!moved) return 1;
    const uint64_t per_block = symm_tm_ceil_div(moved, np * rmax); /* chunks per block, >= 1 */
    /* np < 2^32: the product below fits unless per_block >= 2^32 (a 64-bit division only
     * then: it is a long routine on a GPU) */
    if ((per_block >> 32) && per_block > UINT64_MAX / np) return rmax;
    const uint64_t r = symm_tm_ceil_div(moved, np * per_block);
    return r < 1 ? 1 : r > rmax ? rmax : r;
}

/* Block part's chunks of an entry of cnt rows at moved position mov: *c1, *c1 + nparts,
 * ... up to *cl (chunk c holds moved rows [c * R, (c + 1) * R)); none when *c1 > *cl. */
SYMM_HD void symm_tm_moe_my_chunks(uint64_t mov, uint64_t cnt, uint64_t R, uint32_t part,
                                   uint32_t nparts, uint64_t *c1, uint64_t *cl)
{
    *c1 = 1;
    *cl = 0;
    if (!cnt) return;
    const uint64_t cf = symm_tm_div(mov, R);
    const uint32_t cm = (uint32_t)(cf - symm_tm_div(cf, nparts) * nparts);
    *cl = symm_tm_div(mov + cnt - 1, R);
    *c1 = cf + (part + nparts - cm) % nparts;
}

/* The kinds of the all-to-all-v family. */
enum { SYMM_TM_A2A_1D = 0, SYMM_TM_A2A_DISPATCH = 1, SYMM_TM_A2A_COMBINE = 2 };

/* A fingerprint of the arguments every member must pass alike. */
SYMM_HD uint64_t symm_tm_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

/* The fingerprint of what every member of an all-to-all-v call must pass alike: the
 * CPU calls (src/coll/moe.c) fold in their worker split, the device calls their block
 * count and team size. */
SYMM_HD uint64_t symm_tm_a2a_args_fp(uint64_t kind, uint64_t ne, uint64_t row_bytes,
                                     uint64_t major_align)
{
    uint64_t fp = symm_tm_mix(0x5a3d, kind);
    fp = symm_tm_mix(fp, ne);
    fp = symm_tm_mix(fp, row_bytes);
    return symm_tm_mix(fp, major_align);
}

#endif
