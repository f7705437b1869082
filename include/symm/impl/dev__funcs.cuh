/* dev__funcs.cuh — bodies of the team, synchronisation, collective and RMA calls declared
 * in symm_device.cuh, and the primitives (claims, rounds, op dispatch) that the tile and
 * MoE bodies (tile__funcs.cuh, a2a__funcs.cuh) build on.
 *
 * Synchronisation: a round (episode) on a duplicate is "each member stores the episode
 * number into its flag in every peer's block with st.release, then waits until every
 * peer's flag in its own block reaches it with ld.acquire", at system scope, or at GPU
 * scope when every member of the pool is on this GPU (SYMM_DEV_ONE_GPU: PEs sharing one
 * GPU under MPS; their heaps meet in the GPU's L2). Flags only grow, so a
 * member one episode ahead is harmless. Each member keeps its own episode counter in its
 * own block; the members call the same collectives on a duplicate, so the counters agree.
 * Data moves by plain loads and stores through the CUDA IPC mappings of the peers' heaps;
 * peer data is read with ld.global.cg (L2, never a stale L1 line from an earlier round). */
#ifndef SYMM_IMPL_DEV__FUNCS_CUH
#define SYMM_IMPL_DEV__FUNCS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "symm/impl/plan__combine.h"

namespace symm_detail
{

/* ---------------------------------------------------------------- primitives */
/* 64-bit loads and stores with a memory-model qualifier ("acquire.sys", ...). */
#define SYMM_DEV_LD_(name, sem)                                                                \
    SYMM_DEV uint64_t name(const uint64_t *p)                                                  \
    {                                                                                          \
        uint64_t v;                                                                            \
        asm volatile("ld." sem ".global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");         \
        return v;                                                                              \
    }
#define SYMM_DEV_ST_(name, sem)                                                                \
    SYMM_DEV void name(uint64_t *p, uint64_t v)                                                \
    {                                                                                          \
        asm volatile("st." sem ".global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");           \
    }
SYMM_DEV_LD_(ld_acquire_sys, "acquire.sys")
SYMM_DEV_LD_(ld_acquire_gpu, "acquire.gpu")
SYMM_DEV_LD_(ld_relaxed_gpu, "relaxed.gpu")
SYMM_DEV_ST_(st_release_sys, "release.sys")
SYMM_DEV_ST_(st_release_gpu, "release.gpu")
SYMM_DEV_ST_(st_relaxed_gpu, "relaxed.gpu")
#undef SYMM_DEV_LD_
#undef SYMM_DEV_ST_
SYMM_DEV void add_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("red.release.sys.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
SYMM_DEV void add_release_gpu(uint64_t *p, uint64_t v)
{
    asm volatile("red.release.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/* The claim words are only used by this PE's own blocks: GPU scope is enough. */
SYMM_DEV uint64_t or_acquire_gpu(uint64_t *p, uint64_t v)
{
    uint64_t old;
    asm volatile("atom.acquire.gpu.global.or.b64 %0, [%1], %2;"
                 : "=l"(old)
                 : "l"(p), "l"(v)
                 : "memory");
    return old;
}
SYMM_DEV void fence_sys(void)
{
    asm volatile("fence.acq_rel.sys;" ::: "memory");
}
/* Programmatic dependent launch (sm_90): wait for the kernels before this one on the
 * stream to complete (their memory visible), and let the next one start launching. Both
 * are no-ops in a kernel launched without the attribute. */
SYMM_DEV void pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
SYMM_DEV void pdl_launch_dependents(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
SYMM_DEV uint64_t globaltimer(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
SYMM_DEV uint64_t gridid(void)
{
    uint64_t g;
    asm("mov.u64 %0, %%gridid;" : "=l"(g));
    return g;
}
SYMM_DEV uint32_t block_linear(void)
{
    return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
SYMM_DEV uint32_t thread_linear(void)
{
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
SYMM_DEV uint32_t block_threads(void)
{
    return blockDim.x * blockDim.y * blockDim.z;
}
SYMM_DEV uint32_t lane_id(void)
{
    return thread_linear() & 31u;
}

/* Who holds a duplicate: grid id (bits 33..), a bit that keeps the tag non-zero, the
 * block (bits 11..31) and the scope inside it (0: the block, 1 + w: warp w, 64 + t:
 * thread t). */
enum { SUB_BLOCK = 0, SUB_WARP = 1, SUB_THREAD = 64 };
SYMM_DEV uint64_t holder_tag(uint32_t sub)
{
    return (gridid() << 33) | (1ull << 32) | ((uint64_t)(block_linear() & 0x1fffffu) << 11) |
           (sub & 0x7ffu);
}

SYMM_DEV uint64_t *my_block(const symm_dev_team_t &t)
{
    return (uint64_t *)(t.member_base[t.me] + t.off);
}
/* My flag in member pe's block, and member pe's flag in mine. */
SYMM_DEV uint64_t *flag_at_peer(const symm_dev_team_t &t, int pe)
{
    return (uint64_t *)(t.member_base[pe] + t.off + SYMM_DEV_BLOCK_HDR) + t.me;
}
SYMM_DEV uint64_t *flag_of_peer(const symm_dev_team_t &t, int pe)
{
    return (uint64_t *)(t.member_base[t.me] + t.off + SYMM_DEV_BLOCK_HDR) + pe;
}

/* Member pe's mailbox in this duplicate (dev__types.cuh): two words. */
SYMM_DEV uint64_t *mailbox_of(const symm_dev_team_t &t, int pe)
{
    return (uint64_t *)(t.member_base[pe] + t.off + SYMM_DEV_BLOCK_MAILBOX);
}

/* Error paths are kept out of line (SYMM_DEV_COLD), so that the code a call runs when all
 * goes well stays short (inline, the claim's wait for a holder's tag alone unrolls to
 * hundreds of instructions). Static: this header is compiled into every
 * translation unit that includes symm_device.cuh. */
#define SYMM_DEV_COLD static __device__ __noinline__
SYMM_DEV_COLD void record_in(symm_dev_err_buf_t *err, int status, uint32_t what,
                             uint32_t pool_id, uint32_t dup, uint32_t other, uint64_t holder)
{
    uint32_t k = atomicAdd(&err->count, 1u);
    if (k >= SYMM_DEV_ERR_MAX) return;
    symm_dev_err_rec_t *r = &err->rec[k];
    r->status = status;
    r->what = what;
    r->pool_id = pool_id;
    r->dup = dup;
    r->block = block_linear();
    r->other = other;
    r->holder = holder;
}
SYMM_DEV void record(const symm_dev_team_t &t, int status, uint32_t what, uint32_t other,
                     uint64_t holder)
{
    if (t.err) record_in(t.err, status, what, t.pool_id, t.dup, other, holder);
}

/* The claim words of a duplicate on this member (dev__types.cuh): word 0 is
 * (episode << 1) | held, word 1 the holder's tag while held. One atomic OR both claims
 * the duplicate and returns its episode counter; on a held word it changes nothing. */

/* The tag of a held duplicate's holder (w: its claim words), which the holder writes just
 * after its claim: waited for a little. */
SYMM_DEV_COLD uint64_t held_by(const uint64_t *w)
{
    uint64_t h = ld_relaxed_gpu(w + 1);
#pragma unroll 1
    for (int i = 0; h == 0 && i < 256; i++)
        h = ld_relaxed_gpu(w + 1);
    return h;
}
/* claim() on a held duplicate: 0 if this holder has it (a call inside
 * symm_dev_team_claim_block), else SYMM_ERR_TEAM_BUSY (recorded). */
SYMM_DEV int claim_held(const symm_dev_team_t &t, uint32_t what, uint64_t tag)
{
    const uint64_t h = held_by(my_block(t));
    if (h == tag) return 0;
    record(t, SYMM_ERR_TEAM_BUSY, what, (uint32_t)((h >> 11) & 0x1fffffu), h);
    return SYMM_ERR_TEAM_BUSY;
}

/* Claims the duplicate for holder tag `tag`: 1 if claimed now (release at the end),
 * 0 if this holder already has it, or a negative status (recorded); *ep: the episode
 * counter (valid unless negative). One thread. */
SYMM_DEV int claim(const symm_dev_team_t &t, uint32_t what, uint64_t tag, uint64_t *ep)
{
    *ep = 0;
    if (t.n <= 0 || t.me < 0) {
        record(t, SYMM_ERR_TEAM_INVALID, what, 0, 0);
        return SYMM_ERR_TEAM_INVALID;
    }
    uint64_t *w = my_block(t);
    /* acquire: see the episode and everything else as the previous holder left them */
    const uint64_t old = or_acquire_gpu(w, 1);
    *ep = old >> 1;
    if (!(old & 1)) {
        st_relaxed_gpu(w + 1, tag);
        return 1;
    }
    return claim_held(t, what, tag);
}
/* The holder's episode counter, and its update (the holder only). */
SYMM_DEV uint64_t episode(const symm_dev_team_t &t)
{
    return ld_relaxed_gpu(my_block(t)) >> 1;
}
SYMM_DEV void set_episode(const symm_dev_team_t &t, uint64_t ep)
{
    st_relaxed_gpu(my_block(t), (ep << 1) | 1);
}
/* Releases the duplicate, leaving episode ep (release: after all the block did). */
SYMM_DEV void unclaim_ep(const symm_dev_team_t &t, uint64_t ep)
{
    uint64_t *w = my_block(t);
    st_relaxed_gpu(w + 1, 0);
    st_release_gpu(w, ep << 1);
}
SYMM_DEV void unclaim(const symm_dev_team_t &t)
{
    unclaim_ep(t, episode(t));
}

/* A round's flag, read and written at the team's scope (SYMM_DEV_ONE_GPU: GPU). */
SYMM_DEV uint64_t ld_flag(const symm_dev_team_t &t, const uint64_t *p)
{
    return (t.flags & SYMM_DEV_ONE_GPU) ? ld_acquire_gpu(p) : ld_acquire_sys(p);
}
SYMM_DEV void st_flag(const symm_dev_team_t &t, uint64_t *p, uint64_t v)
{
    if (t.flags & SYMM_DEV_ONE_GPU)
        st_release_gpu(p, v);
    else
        st_release_sys(p, v);
}

/* Adds v to a round's counter, a release at the team's scope. */
SYMM_DEV void add_flag(const symm_dev_team_t &t, uint64_t *p, uint64_t v)
{
    if (t.flags & SYMM_DEV_ONE_GPU)
        add_release_gpu(p, v);
    else
        add_release_sys(p, v);
}

/* Waits until ok(*flag), the flag read at the team's scope, bounded by the team's timeout
 * (a timeout is recorded naming pe). */
template <typename Ok>
SYMM_DEV int wait_until(const symm_dev_team_t &t, const uint64_t *flag, const Ok &ok,
                        uint32_t what, int pe)
{
    if (ok(ld_flag(t, flag))) return 0;
    const uint64_t start = globaltimer();
    for (uint32_t i = 1;; i++) {
        if (ok(ld_flag(t, flag))) return 0;
        if ((i & 1023u) == 0 && globaltimer() - start > t.timeout_ns) {
            record(t, SYMM_ERR_TIMEOUT, what, (uint32_t)pe, 0);
            return SYMM_ERR_TIMEOUT;
        }
    }
}

/* Waits until *flag >= ep, bounded by the team's timeout. */
SYMM_DEV int wait_ge(const symm_dev_team_t &t, const uint64_t *flag, uint64_t ep, uint32_t what,
                     int pe)
{
    return wait_until(
        t, flag, [ep](uint64_t v) { return v >= ep; }, what, pe);
}

/* One round by threads [first, first + stride ...) of a group; ep is the episode. */
SYMM_DEV int round_part(const symm_dev_team_t &t, uint64_t ep, uint32_t first, uint32_t stride,
                        uint32_t what)
{
    for (int pe = (int)first; pe < t.n; pe += (int)stride)
        if (pe != t.me) st_flag(t, flag_at_peer(t, pe), ep);
    int rc = 0;
    for (int pe = (int)first; pe < t.n; pe += (int)stride)
        if (pe != t.me && !rc) rc = wait_ge(t, flag_of_peer(t, pe), ep, what, pe);
    return rc;
}

/* ---------------------------------------------------------------- block scope */
/* Claims the duplicate for the block: 0 and *owned (thread 0 only) or an error. */
SYMM_DEV int enter_block(const symm_dev_team_t &t, uint32_t what, int *owned)
{
    __shared__ int s_rc;
    __syncthreads(); /* nobody still reads s_rc of an earlier call */
    if (thread_linear() == 0) {
        uint64_t ep;
        int rc = claim(t, what, holder_tag(SUB_BLOCK), &ep);
        *owned = rc == 1;
        s_rc = rc < 0 ? rc : 0;
    }
    __syncthreads();
    return s_rc;
}
SYMM_DEV void leave_block(const symm_dev_team_t &t, int owned)
{
    __syncthreads();
    if (thread_linear() == 0 && owned) unclaim(t);
}
/* Leaves the duplicate at episode ep, for a call that counts its episodes itself:
 * releases it if the claim was this call's (owned, in thread 0), else records ep for the
 * holder's next call. */
SYMM_DEV void leave_block_at(const symm_dev_team_t &t, int owned, uint64_t ep)
{
    __syncthreads();
    if (thread_linear() == 0) {
        if (owned)
            unclaim_ep(t, ep);
        else
            set_episode(t, ep);
    }
}
/* Round ep by every thread of the block: 0, or SYMM_ERR_TIMEOUT in every thread when a
 * member did not arrive. */
SYMM_DEV int round_block_at(const symm_dev_team_t &t, uint64_t ep, uint32_t what)
{
    const int rc = round_part(t, ep, thread_linear(), block_threads(), what);
    return __syncthreads_or(rc != 0) ? SYMM_ERR_TIMEOUT : 0;
}
/* One synchronisation round of the whole block (the block has the duplicate). */
SYMM_DEV int round_block(const symm_dev_team_t &t, uint32_t what)
{
    __shared__ uint64_t s_ep;
    if (thread_linear() == 0) {
        const uint64_t ep = episode(t) + 1;
        set_episode(t, ep);
        s_ep = ep;
    }
    __syncthreads();
    return round_block_at(t, s_ep, what);
}

/* Claim and one round in one go (barrier, sync): three block synchronisations. */
SYMM_DEV int claim_round_block(const symm_dev_team_t &t, uint32_t what)
{
    __shared__ int s_rc;
    __shared__ uint64_t s_ep2;
    __syncthreads(); /* the block's earlier writes are done; nobody reads s_* any more */
    int owned = 0;
    if (thread_linear() == 0) {
        uint64_t ep;
        int rc = claim(t, what, holder_tag(SUB_BLOCK), &ep);
        owned = rc == 1;
        if (rc >= 0) {
            s_ep2 = ep + 1;
            if (!owned) set_episode(t, ep + 1); /* owned: the release below leaves it */
        }
        s_rc = rc < 0 ? rc : 0;
    }
    __syncthreads();
    int rc = s_rc;
    if (rc) return rc;
    const uint64_t ep = s_ep2;
    rc = round_block_at(t, ep, what);
    if (owned) unclaim_ep(t, ep);
    return rc;
}

/* Copy by a group of threads; 16-byte accesses when everything is aligned. A source in
 * a peer's memory (PEER) is read at L2 (.cg): it may have been written since an earlier
 * round left a stale line in this SM's L1. A local source may be any memory (shared too). */
template <typename W, bool PEER> SYMM_DEV W load_word(const W *p)
{
    if constexpr (PEER)
        return __ldcg(p);
    else
        return *p;
}
template <bool PEER>
SYMM_DEV void copy_part(void *dst, const void *src, size_t n, uint32_t i0, uint32_t step)
{
    uintptr_t a = (uintptr_t)dst | (uintptr_t)src | (uintptr_t)n;
    if ((a & 15) == 0) {
        uint4 *d = (uint4 *)dst;
        const uint4 *s = (const uint4 *)src;
        for (size_t i = i0; i < n / 16; i += step)
            d[i] = load_word<uint4, PEER>(s + i);
    } else if ((a & 7) == 0) {
        uint2 *d = (uint2 *)dst;
        const uint2 *s = (const uint2 *)src;
        for (size_t i = i0; i < n / 8; i += step)
            d[i] = load_word<uint2, PEER>(s + i);
    } else if ((a & 3) == 0) {
        unsigned *d = (unsigned *)dst;
        const unsigned *s = (const unsigned *)src;
        for (size_t i = i0; i < n / 4; i += step)
            d[i] = load_word<unsigned, PEER>(s + i);
    } else {
        unsigned char *d = (unsigned char *)dst;
        const unsigned char *s = (const unsigned char *)src;
        for (size_t i = i0; i < n; i += step)
            d[i] = load_word<unsigned char, PEER>(s + i);
    }
}

template <typename T> SYMM_DEV T *peer(const symm_dev_team_t &t, T *addr, int pe)
{
    return (T *)((char *)addr + t.heap_delta[pe]);
}

/* ---------------------------------------------------------------- reductions */
/* The type a reduction computes in, and step(): what every combine of two values ends
 * with. fp16 / bf16 compute in float and round to the half type after every combine
 * (round to nearest even, as the CPU kernels of src/coll/reduce_ops.c do), so a running
 * result is always a half value and the device gives the CPU's bits. */
template <typename T> struct acc {
    typedef T type;
    static SYMM_DEV T in(T v) { return v; }
    static SYMM_DEV T out(T v) { return v; }
    static SYMM_DEV T step(T v) { return v; }
};
template <> struct acc<__half> {
    typedef float type;
    static SYMM_DEV float in(__half v) { return __half2float(v); }
    static SYMM_DEV __half out(float v) { return __float2half_rn(v); }
    static SYMM_DEV float step(float v) { return __half2float(__float2half_rn(v)); }
};
template <> struct acc<__nv_bfloat16> {
    typedef float type;
    static SYMM_DEV float in(__nv_bfloat16 v) { return __bfloat162float(v); }
    static SYMM_DEV __nv_bfloat16 out(float v) { return __float2bfloat16_rn(v); }
    static SYMM_DEV float step(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }
};

template <typename T> SYMM_DEV T ldcg(const T *p)
{
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "element size");
    T v;
    if constexpr (sizeof(T) == 1) {
        unsigned char b = __ldcg((const unsigned char *)p);
        memcpy(&v, &b, 1);
    } else if constexpr (sizeof(T) == 2) {
        unsigned short b = __ldcg((const unsigned short *)p);
        memcpy(&v, &b, 2);
    } else if constexpr (sizeof(T) == 4) {
        unsigned int b = __ldcg((const unsigned int *)p);
        memcpy(&v, &b, 4);
    } else {
        unsigned long long b = __ldcg((const unsigned long long *)p);
        memcpy(&v, &b, 8);
    }
    return v;
}

/* Elements [lo, hi) owned by this member: reduce over members in team order (member 0
 * first, one rounding per combine: acc::step), write to the destination of every member
 * in `to` (all members, or the root alone). Only the owner of an element touches it in
 * any buffer, so dest may equal src. */
template <typename T, int OP>
SYMM_DEV void reduce_slice(const symm_dev_team_t &t, T *dest, const T *src, size_t lo,
                           size_t hi, int root, uint32_t i0, uint32_t step)
{
    typedef acc<T> C;
    for (size_t i = lo + i0; i < hi; i += step) {
        typename C::type a = C::in(ldcg(peer(t, src, 0) + i));
        for (int j = 1; j < t.n; j++)
            a = C::step(
                symm_plan_op<OP, typename C::type>(a, C::in(ldcg(peer(t, src, j) + i))));
        T r = C::out(a);
        if (root >= 0) {
            peer(t, dest, root)[i] = r;
        } else {
            for (int j = 0; j < t.n; j++)
                peer(t, dest, j)[i] = r;
        }
    }
}

/* reduce_slice with 16-byte accesses where every member's src and dest agree modulo 16
 * (heaps 16-byte apart, src + lo and dest + lo alike): scalar head and tail around vectors
 * of 16 / sizeof(T) elements, each element combined exactly as reduce_slice does (same
 * order, same accumulator type), so the results are bitwise the same. Not inlined: one
 * copy per (type, op), each with its own registers (inlined into one switch, the kernels
 * spill). */
template <typename T, int OP>
__device__ __noinline__ void reduce_slice_vec(const symm_dev_team_t &t, T *dest, const T *src,
                                              size_t lo, size_t hi, int root, uint32_t i0,
                                              uint32_t step)
{
    typedef acc<T> C;
    constexpr uint32_t V = 16 / sizeof(T);
    bool vec =
        hi - lo >= 2 * V && ((((uintptr_t)(src + lo)) ^ ((uintptr_t)(dest + lo))) & 15) == 0;
    for (int j = 0; vec && j < t.n; j++)
        vec = (t.heap_delta[j] & 15) == 0;
    if (!vec) {
        reduce_slice<T, OP>(t, dest, src, lo, hi, root, i0, step);
        return;
    }
    const size_t head = ((16 - ((uintptr_t)(src + lo) & 15)) & 15) / sizeof(T);
    const size_t v0 = lo + head, nv = (hi - v0) / V;
    reduce_slice<T, OP>(t, dest, src, lo, v0, root, i0, step);
    for (size_t k = i0; k < nv; k += step) {
        const size_t i = v0 + k * V;
        typename C::type a[V];
        T x[V];
        uint4 w = __ldcg((const uint4 *)(peer(t, src, 0) + i));
        memcpy(x, &w, 16);
#pragma unroll
        for (uint32_t e = 0; e < V; e++)
            a[e] = C::in(x[e]);
        for (int j = 1; j < t.n; j++) {
            w = __ldcg((const uint4 *)(peer(t, src, j) + i));
            memcpy(x, &w, 16);
#pragma unroll
            for (uint32_t e = 0; e < V; e++)
                a[e] = C::step(symm_plan_op<OP, typename C::type>(a[e], C::in(x[e])));
        }
#pragma unroll
        for (uint32_t e = 0; e < V; e++)
            x[e] = C::out(a[e]);
        memcpy(&w, x, 16);
        if (root >= 0) {
            *(uint4 *)(peer(t, dest, root) + i) = w;
        } else {
            for (int j = 0; j < t.n; j++)
                *(uint4 *)(peer(t, dest, j) + i) = w;
        }
    }
    reduce_slice<T, OP>(t, dest, src, v0 + nv * V, hi, root, i0, step);
}

template <typename T> struct is_int_type {
    static constexpr bool value = T(3) / T(2) == T(1);
};
template <> struct is_int_type<__half> {
    static constexpr bool value = false;
};
template <> struct is_int_type<__nv_bfloat16> {
    static constexpr bool value = false;
};

/* The symm_op_t op as a type, for a generic lambda: decltype(o)::value is the constant. */
template <int OP> struct op_const {
    static constexpr int value = OP;
};
/* Calls f(op_const<OP>()) for the symm_op_t op, so that f instantiates one loop per op;
 * and, or, xor only for integer types (INTEGER). false, and no call, for any other op. */
template <bool INTEGER, typename F> SYMM_DEV bool op_dispatch(int op, F &&f)
{
    switch (op) {
    case SYMM_OP_SUM:
        f(op_const<SYMM_OP_SUM>());
        return true;
    case SYMM_OP_PROD:
        f(op_const<SYMM_OP_PROD>());
        return true;
    case SYMM_OP_MIN:
        f(op_const<SYMM_OP_MIN>());
        return true;
    case SYMM_OP_MAX:
        f(op_const<SYMM_OP_MAX>());
        return true;
    default:
        break;
    }
    if constexpr (INTEGER) {
        switch (op) {
        case SYMM_OP_AND:
            f(op_const<SYMM_OP_AND>());
            return true;
        case SYMM_OP_OR:
            f(op_const<SYMM_OP_OR>());
            return true;
        case SYMM_OP_XOR:
            f(op_const<SYMM_OP_XOR>());
            return true;
        default:
            break;
        }
    }
    return false;
}

template <typename T>
SYMM_DEV int reduce_dispatch(const symm_dev_team_t &t, T *dest, const T *src, size_t lo,
                             size_t hi, symm_op_t op, int root, uint32_t i0, uint32_t step)
{
    const bool known = op_dispatch<is_int_type<T>::value>(op, [&](auto o) {
        reduce_slice_vec<T, decltype(o)::value>(t, dest, src, lo, hi, root, i0, step);
    });
    return known ? 0 : SYMM_ERR_INVALID_ARG;
}

template <typename T>
SYMM_DEV int reduce_block_impl(const symm_dev_team_t &t, T *dest, const T *src, size_t count,
                               symm_op_t op, int root, uint32_t what)
{
    int owned = 0;
    int rc = enter_block(t, what, &owned);
    if (rc) return rc;
    if (root >= t.n) {
        leave_block(t, owned);
        return SYMM_ERR_INVALID_ARG;
    }
    rc = round_block(t, what); /* every member's src is ready */
    if (!rc) {
        size_t per = (count + (size_t)t.n - 1) / (size_t)t.n;
        size_t lo = per * (size_t)t.me, hi = lo + per < count ? lo + per : count;
        int bad = lo < hi ? reduce_dispatch(t, dest, src, lo, hi, op, root, thread_linear(),
                                            block_threads())
                          : (reduce_dispatch<T>(t, dest, src, 0, 0, op, root, 0, 1));
        __syncthreads();
        /* Every member must still run the second round, or its peers would wait for it. */
        int rc2 = round_block(t, what); /* my slices are written everywhere */
        rc = bad ? bad : rc2;
    }
    leave_block(t, owned);
    return rc;
}

/* Duplicate i of pool with what every duplicate shares filled in; member_base, off and n
 * left for the caller (n = 0: invalid). */
SYMM_DEV symm_dev_team_t team_common(const symm_dev_pool_t &pool, uint32_t i)
{
    symm_dev_team_t t;
    t.member_base = nullptr;
    t.off = 0;
    t.heap_delta = pool.heap_delta;
    t.err = pool.err;
    t.timeout_ns = pool.timeout_ns;
    t.n = 0;
    t.me = pool.me;
    t.dup = i;
    t.pool_id = pool.pool_id;
    t.flags = pool.flags;
    t.pad = 0;
    return t;
}

} // namespace symm_detail

/* ================================================================ public bodies */
SYMM_DEV symm_dev_team_t symm_dev_pool_team(const symm_dev_pool_t &pool, uint32_t i)
{
    symm_dev_team_t t = symm_detail::team_common(pool, i);
    if (i >= pool.size) return t;
    const symm_dev_chunk_t ch = pool.chunks[pool.dup_chunk[i]];
    t.member_base = ch.member_base;
    t.off = (uint64_t)(i - ch.first) * pool.block_size;
    t.n = pool.n;
    return t;
}

SYMM_DEV int symm_dev_team_my_pe(const symm_dev_team_t &t)
{
    return t.n > 0 ? t.me : -1;
}
SYMM_DEV int symm_dev_team_n_pes(const symm_dev_team_t &t)
{
    return t.n > 0 ? t.n : -1;
}

template <typename T> SYMM_DEV T *symm_dev_ptr(const symm_dev_team_t &t, T *addr, int pe)
{
    return symm_detail::peer(t, addr, pe);
}

SYMM_DEV int symm_dev_team_claim_block(const symm_dev_team_t &t)
{
    int owned;
    return symm_detail::enter_block(t, SYMM_DEV_WHAT_CLAIM, &owned);
}
SYMM_DEV void symm_dev_team_release_block(const symm_dev_team_t &t)
{
    symm_detail::leave_block(t, 1);
}

SYMM_DEV int symm_dev_sync_block(const symm_dev_team_t &t)
{
    return symm_detail::claim_round_block(t, SYMM_DEV_WHAT_SYNC);
}

/* The release stores of a round are cumulative over everything the block wrote before
 * its __syncthreads, which is what "completes earlier puts" means for load/store peers. */
SYMM_DEV int symm_dev_barrier_block(const symm_dev_team_t &t)
{
    return symm_detail::claim_round_block(t, SYMM_DEV_WHAT_BARRIER);
}

SYMM_DEV int symm_dev_barrier_warp(const symm_dev_team_t &t)
{
    using namespace symm_detail;
    uint32_t lane = lane_id();
    int rc = 0, owned = 0;
    uint64_t ep = 0;
    __syncwarp();
    if (lane == 0) {
        uint64_t e;
        rc = claim(t, SYMM_DEV_WHAT_BARRIER, holder_tag(SUB_WARP + thread_linear() / 32), &e);
        owned = rc == 1;
        if (rc > 0) rc = 0;
        if (!rc) {
            ep = e + 1;
            if (!owned) set_episode(t, ep);
        }
    }
    rc = __shfl_sync(0xffffffffu, rc, 0);
    if (rc) return rc;
    ep = __shfl_sync(0xffffffffu, ep, 0);
    rc = round_part(t, ep, lane, 32, SYMM_DEV_WHAT_BARRIER);
    rc = __any_sync(0xffffffffu, rc != 0) ? SYMM_ERR_TIMEOUT : 0;
    if (lane == 0 && owned) unclaim_ep(t, ep);
    __syncwarp();
    return rc;
}

SYMM_DEV int symm_dev_barrier(const symm_dev_team_t &t)
{
    using namespace symm_detail;
    uint64_t ep;
    int rc = claim(t, SYMM_DEV_WHAT_BARRIER, holder_tag(SUB_THREAD + thread_linear()), &ep);
    if (rc < 0) return rc;
    int owned = rc == 1;
    ep++;
    if (!owned) set_episode(t, ep);
    rc = round_part(t, ep, 0, 1, SYMM_DEV_WHAT_BARRIER);
    if (owned) unclaim_ep(t, ep);
    return rc;
}

SYMM_DEV int symm_dev_broadcast_block(const symm_dev_team_t &t, void *dest, const void *src,
                                      size_t nbytes, int root)
{
    using namespace symm_detail;
    const uint32_t W = SYMM_DEV_WHAT_BROADCAST;
    int owned = 0;
    int rc = enter_block(t, W, &owned);
    if (rc) return rc;
    if (root < 0 || root >= t.n) {
        leave_block(t, owned);
        return SYMM_ERR_INVALID_ARG;
    }
    rc = round_block(t, W);
    if (!rc) {
        if (!(t.me == root && dest == src))
            copy_part<true>(dest, peer(t, src, root), nbytes, thread_linear(), block_threads());
        __syncthreads();
        rc = round_block(t, W); /* root's src was read by everyone */
    }
    leave_block(t, owned);
    return rc;
}

template <typename T>
SYMM_DEV int symm_dev_reduce_block(const symm_dev_team_t &t, T *dest, const T *src,
                                   size_t count, symm_op_t op, int root)
{
    if (root < 0) root = 1 << 30; /* invalid: reported by the body */
    return symm_detail::reduce_block_impl(t, dest, src, count, op, root, SYMM_DEV_WHAT_REDUCE);
}

template <typename T>
SYMM_DEV int symm_dev_allreduce_block(const symm_dev_team_t &t, T *dest, const T *src,
                                      size_t count, symm_op_t op)
{
    return symm_detail::reduce_block_impl(t, dest, src, count, op, -1, SYMM_DEV_WHAT_ALLREDUCE);
}

namespace symm_detail
{
/* fcollect (alltoall == false: member j's src into block j of dest) and alltoall (block
 * me of member j's src into block j of dest), one block. */
SYMM_DEV int gather_block_impl(const symm_dev_team_t &t, void *dest, const void *src,
                               size_t nbytes, bool alltoall)
{
    const uint32_t W = alltoall ? SYMM_DEV_WHAT_ALLTOALL : SYMM_DEV_WHAT_FCOLLECT;
    int owned = 0;
    int rc = enter_block(t, W, &owned);
    if (rc) return rc;
    rc = round_block(t, W);
    if (!rc) {
        const size_t soff = alltoall ? (size_t)t.me * nbytes : 0;
        for (int j = 0; j < t.n; j++)
            copy_part<true>((char *)dest + (size_t)j * nbytes,
                            (const char *)peer(t, src, j) + soff, nbytes, thread_linear(),
                            block_threads());
        __syncthreads();
        rc = round_block(t, W); /* every member's src was read */
    }
    leave_block(t, owned);
    return rc;
}
} // namespace symm_detail

SYMM_DEV int symm_dev_fcollect_block(const symm_dev_team_t &t, void *dest, const void *src,
                                     size_t nbytes)
{
    return symm_detail::gather_block_impl(t, dest, src, nbytes, false);
}

SYMM_DEV int symm_dev_alltoall_block(const symm_dev_team_t &t, void *dest, const void *src,
                                     size_t nbytes)
{
    return symm_detail::gather_block_impl(t, dest, src, nbytes, true);
}

SYMM_DEV void symm_dev_put_block(const symm_dev_team_t &t, void *dest, const void *src,
                                 size_t nbytes, int pe)
{
    symm_detail::copy_part<false>(symm_detail::peer(t, dest, pe), src, nbytes,
                                  symm_detail::thread_linear(), symm_detail::block_threads());
}
SYMM_DEV void symm_dev_get_block(const symm_dev_team_t &t, void *dest, const void *src,
                                 size_t nbytes, int pe)
{
    symm_detail::copy_part<true>(dest, symm_detail::peer(t, src, pe), nbytes,
                                 symm_detail::thread_linear(), symm_detail::block_threads());
}
SYMM_DEV void symm_dev_put_warp(const symm_dev_team_t &t, void *dest, const void *src,
                                size_t nbytes, int pe)
{
    symm_detail::copy_part<false>(symm_detail::peer(t, dest, pe), src, nbytes,
                                  symm_detail::lane_id(), 32);
    __syncwarp();
}
SYMM_DEV void symm_dev_get_warp(const symm_dev_team_t &t, void *dest, const void *src,
                                size_t nbytes, int pe)
{
    symm_detail::copy_part<true>(dest, symm_detail::peer(t, src, pe), nbytes,
                                 symm_detail::lane_id(), 32);
    __syncwarp();
}
SYMM_DEV void symm_dev_put(const symm_dev_team_t &t, void *dest, const void *src, size_t nbytes,
                           int pe)
{
    symm_detail::copy_part<false>(symm_detail::peer(t, dest, pe), src, nbytes, 0, 1);
}
SYMM_DEV void symm_dev_get(const symm_dev_team_t &t, void *dest, const void *src, size_t nbytes,
                           int pe)
{
    symm_detail::copy_part<true>(dest, symm_detail::peer(t, src, pe), nbytes, 0, 1);
}

SYMM_DEV void symm_dev_signal(const symm_dev_team_t &t, uint64_t *sig, uint64_t signal,
                              symm_sigop_t sigop, int pe)
{
    uint64_t *p = symm_detail::peer(t, sig, pe);
    if (sigop == SYMM_SIGNAL_ADD)
        symm_detail::add_release_sys(p, signal);
    else
        symm_detail::st_release_sys(p, signal);
}

SYMM_DEV void symm_dev_put_signal(const symm_dev_team_t &t, void *dest, const void *src,
                                  size_t nbytes, uint64_t *sig, uint64_t signal,
                                  symm_sigop_t sigop, int pe)
{
    symm_dev_put(t, dest, src, nbytes, pe);
    symm_dev_signal(t, sig, signal, sigop, pe);
}

SYMM_DEV void symm_dev_put_signal_block(const symm_dev_team_t &t, void *dest, const void *src,
                                        size_t nbytes, uint64_t *sig, uint64_t signal,
                                        symm_sigop_t sigop, int pe)
{
    symm_dev_put_block(t, dest, src, nbytes, pe);
    __syncthreads(); /* the release below is cumulative over the block's stores */
    if (symm_detail::thread_linear() == 0) symm_dev_signal(t, sig, signal, sigop, pe);
    __syncthreads();
}

SYMM_DEV int symm_dev_signal_wait_until(const symm_dev_team_t &t, uint64_t *sig, symm_cmp_t cmp,
                                        uint64_t value, uint64_t *value_out)
{
    uint64_t start = 0;
    for (uint32_t i = 0;; i++) {
        uint64_t v = symm_detail::ld_acquire_sys(sig);
        bool ok;
        switch (cmp) {
        case SYMM_CMP_EQ:
            ok = v == value;
            break;
        case SYMM_CMP_NE:
            ok = v != value;
            break;
        case SYMM_CMP_GT:
            ok = v > value;
            break;
        case SYMM_CMP_GE:
            ok = v >= value;
            break;
        case SYMM_CMP_LT:
            ok = v < value;
            break;
        default:
            ok = v <= value;
            break;
        }
        if (ok) {
            if (value_out) *value_out = v;
            return 0;
        }
        if (i == 0)
            start = symm_detail::globaltimer();
        else if ((i & 1023u) == 0 && symm_detail::globaltimer() - start > t.timeout_ns) {
            symm_detail::record(t, SYMM_ERR_TIMEOUT, SYMM_DEV_WHAT_SIGNAL_WAIT, 0xffffffffu, v);
            return SYMM_ERR_TIMEOUT;
        }
    }
}

SYMM_DEV void symm_dev_quiet(void)
{
    symm_detail::fence_sys();
}

#endif
