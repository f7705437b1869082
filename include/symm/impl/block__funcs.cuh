/* block__funcs.cuh — block- and warp-wide building blocks of the device tile and MoE
 * bodies: loads and stores of data touched once, saturating scans over a warp or a block,
 * and the block copy from a peer's memory. Included by symm_device.cuh. */
#ifndef SYMM_IMPL_BLOCK__FUNCS_CUH
#define SYMM_IMPL_BLOCK__FUNCS_CUH

#include "symm/impl/dev__funcs.cuh"
#include "symm/impl/tile_moe__common.h"

namespace symm_tm
{

/* Loads and stores of data each block touches once: a peer's input (read after a round's
 * acquire, so these weak loads see the peer's writes) and the outputs. Both with the
 * streaming hint (.cs: evict first), so that the streamed bytes do not push the kernels'
 * code, the split tables and the round flags out of the L2 between calls; the hint pays
 * only on both sides together. */
SYMM_DEV uint4 ld_once(const uint4 *p)
{
    return __ldcs(p);
}
SYMM_DEV void st_once(uint4 *p, const uint4 &v)
{
    __stcs(p, v);
}

SYMM_DEV uint64_t warp_incl_scan(uint64_t v, uint32_t lane)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint64_t x = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (uint32_t)d) v += x;
    }
    return v;
}
SYMM_DEV uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}
/* Inclusive saturating sum over the warp's lanes, in lane order. */
SYMM_DEV uint64_t warp_scan_sat(uint64_t v, uint32_t lane)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        uint64_t x = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= (uint32_t)d) v = sat_add(v, x);
    }
    return v;
}
/* Saturating sum of v over the warp's lanes, in every lane. */
SYMM_DEV uint64_t warp_sum_sat(uint64_t v)
{
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        v = sat_add(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
}

/* Inclusive saturating sum of v over the block's threads, in thread order (block size a
 * multiple of 32); *total: the block's sum. Every thread calls. */
SYMM_DEV uint64_t block_scan_sat(uint64_t v, uint64_t *total)
{
    using namespace symm_detail;
    __shared__ uint64_t s_w[32];
    const uint32_t tid = thread_linear(), lane = tid & 31u, warp = tid >> 5,
                   nw = block_threads() / 32;
    v = warp_scan_sat(v, lane);
    if (lane == 31) s_w[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const uint64_t w = warp_scan_sat(lane < nw ? s_w[lane] : 0, lane);
        if (lane < nw) s_w[lane] = w;
    }
    __syncthreads();
    if (warp) v = sat_add(v, s_w[warp - 1]);
    *total = s_w[nw - 1];
    __syncthreads(); /* s_w is free for the next call */
    return v;
}

/* Block copy of nbytes from a peer's memory (read at L2) into local memory: up to U
 * 16-byte loads in flight per thread before any store (a store could alias the next
 * loads, so the compiler would not overlap iterations by itself). U = 8: enough loads in
 * flight to cover a peer's latency within the MoE kernel's registers. */
SYMM_DEV void copy_from_peer(uint8_t *dst, const uint8_t *src, uint64_t nbytes)
{
    constexpr int U = 8;
    const uint32_t tid = symm_detail::thread_linear(), nthr = symm_detail::block_threads();
    int vec = (((uintptr_t)src ^ (uintptr_t)dst) & 15) == 0;
    uint64_t head, nvec, tail;
    symm_tm_split16((uintptr_t)src, nbytes, 1, vec, &head, &nvec, &tail);
    for (uint64_t i = tid; i < head; i += nthr)
        dst[i] = __ldcg(src + i);
    const uint4 *s4 = (const uint4 *)(src + head);
    uint4 *d4 = (uint4 *)(dst + head);
    for (uint64_t b = tid; b < nvec; b += U * (uint64_t)nthr) {
        uint4 v[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * (uint64_t)nthr < nvec) v[k] = ld_once(s4 + b + k * (uint64_t)nthr);
#pragma unroll
        for (int k = 0; k < U; k++)
            if (b + k * (uint64_t)nthr < nvec) st_once(d4 + b + k * (uint64_t)nthr, v[k]);
    }
    uint64_t t0 = head + nvec * 16;
    for (uint64_t k = tid; k < tail; k += nthr)
        dst[t0 + k] = __ldcg(src + t0 + k);
}

} // namespace symm_tm

#endif
