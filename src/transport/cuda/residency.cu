/* residency.cu — the residency probe of symm_cuda_init: do `blocks` one-block-per-SM
 * blocks of this PE fit on the GPU beside the same number from every other PE on it?
 * Under an MPS active-thread percentage a process sees P% of the SMs, but which SMs its
 * blocks get, and so how many blocks the PEs of one GPU can keep resident together, the
 * driver decides: measured rather than assumed. */
#include <stdint.h>

#include "symm_device.cuh"
#include "transport/cuda/cuda_launch.h"

namespace
{

/* Every block counts itself in *count (a word of the GPU's lead PE, shared by every PE
 * on the GPU), then waits until total blocks have arrived or spin_ns have passed; *met
 * counts my blocks that saw them all. The dynamic shared memory holds one block per SM,
 * as symm's tile, MoE and top-k kernels are held by their registers. */
__global__ void __launch_bounds__(512, 1)
    k_residency(unsigned *count, unsigned total, unsigned long long spin_ns, unsigned *met)
{
    extern __shared__ uint8_t hold[];
    if (threadIdx.x) return;
    hold[0] = 1;
    atomicAdd(count, 1u);
    const uint64_t t0 = symm_detail::globaltimer();
    for (;;) {
        unsigned seen;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                     : "=r"(seen)
                     : "l"(count)
                     : "memory");
        if (seen >= total) {
            atomicAdd(met, 1u);
            return;
        }
        if (symm_detail::globaltimer() - t0 > spin_ns) return;
        __nanosleep(200);
    }
}

} // namespace

/* 1: all my blocks saw every PE's blocks within spin_ns; 0: not; -1: a CUDA error (the
 * status says which). met: a zeroed word of my GPU memory. */
extern "C" int symm_cuda_residency_probe(const char *fn, unsigned *count, unsigned total,
                                         int blocks, unsigned long long spin_ns, unsigned *met,
                                         symm_status_t *st)
{
    int smem = 0, dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(k_residency, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem);
    if (e == cudaSuccess) {
        k_residency<<<blocks, 512, (size_t)smem>>>(count, total, spin_ns, met);
        e = cudaGetLastError();
    }
    unsigned h = 0;
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaMemcpy(&h, met, sizeof h, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        *st = symm_cuda_error(fn, e);
        return -1;
    }
    return h == (unsigned)blocks;
}
