"""pool_kernel.py — a CUDA kernel of one's own, built as a torch extension, whose every
block runs a collective on its own duplicate of a pool made in Python: block b sums row b
of a (rows, cols) tensor over every PE, on duplicate b. This is what team pools are for:
NVSHMEM and OpenSHMEM forbid two concurrent collectives on one team.

    symmrun -n 2 python examples/python/pool_kernel.py     (several PEs on one GPU: MPS)
    torchrun --nproc-per-node 2 examples/python/pool_kernel.py

How a pool reaches a kernel: the kernel takes a symm_dev_pool_t by value; the extension
gets it from the pool's handle (Pool.handle, an int64) with symm_cuda_pool_device, and
launches with symm_cuda_launch, which refuses a grid whose blocks cannot all be resident
on this PE's share of the GPU (blocks wait on their peers). Headers and libraries come
from symm.get_include() and symm.get_library_dir()."""
import sys

import torch
from torch.utils.cpp_extension import load_inline

import symm

CUDA_SOURCE = r"""
#include <stdexcept>
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

#include "symm.h"
#include "symm_cuda.h"
#include "symm_device.cuh"

// Block b: row b of x summed over every PE into row b of sum, on duplicate b of the pool.
__global__ void rows_allreduce(symm_dev_pool_t pool, float *sum, const float *x, int cols,
                               int *failed)
{
    symm_dev_team_t team = symm_dev_pool_team(pool, blockIdx.x);
    size_t row = (size_t)blockIdx.x * (size_t)cols;
    int rc = symm_dev_allreduce_block(team, sum + row, x + row, (size_t)cols, SYMM_OP_SUM);
    if (rc && threadIdx.x == 0) atomicAdd(failed, 1);
}

// One block per row of x (a CUDA tensor on symm's GPU heap), on the current stream.
void rows_allreduce_launch(int64_t pool, torch::Tensor sum, torch::Tensor x,
                           torch::Tensor failed)
{
    symm_dev_pool_t dev;
    if (symm_cuda_pool_device((symm_pool_t)pool, &dev) != SYMM_SUCCESS)
        throw std::runtime_error(symm_last_error());
    int rows = (int)x.size(0), cols = (int)x.size(1);
    float *s = sum.data_ptr<float>();
    const float *xp = x.data_ptr<float>();
    int *f = failed.data_ptr<int>();
    void *args[] = {&dev, &s, &xp, &cols, &f};
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
    if (symm_cuda_launch((const void *)rows_allreduce, dim3(rows), dim3(256), args, 0,
                         stream) != SYMM_SUCCESS)
        throw std::runtime_error(symm_last_error());
}
"""
CPP_SOURCE = ("void rows_allreduce_launch(int64_t pool, torch::Tensor sum, torch::Tensor x, "
              "torch::Tensor failed);")


def build():
    libdir = symm.get_library_dir()
    return load_inline(
        name="symm_pool_kernel", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
        functions=["rows_allreduce_launch"], extra_include_paths=[symm.get_include()],
        extra_cuda_cflags=["-arch=sm_90", "-std=c++20"],
        extra_ldflags=["-L" + libdir, "-lsymm_cuda", "-lsymm", "-Wl,-rpath," + libdir],
        verbose=False)


def main():
    symm.init(cuda=True)
    me, n = symm.my_pe(), symm.n_pes()
    # Every PE asks for the same extension: torch builds it once (a lock in its build
    # folder) and the others load it.
    ext = build()
    rows, cols = 16, 4096
    with symm.WORLD.pool(rows) as pool:
        x = symm.empty((rows, cols), torch.float32, device="cuda")
        total = symm.zeros((rows, cols), torch.float32, device="cuda")
        x.copy_(torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) % 7 + me)
        failed = torch.zeros(1, dtype=torch.int32, device="cuda")
        torch.cuda.synchronize()
        symm.barrier()  # every PE's x is in place
        ext.rows_allreduce_launch(pool.handle, total, x, failed)
        symm.cuda_check()
        want = (torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) % 7) * n \
            + sum(range(n))
        wrong = int((total.cpu() != want).sum())
        if me == 0:
            print("%d PEs, %d blocks each on its own pool duplicate: %d of %d sums wrong, %d "
                  "blocks failed" % (n, rows, wrong, rows * cols, int(failed.item())))
        del x, total
    symm.finalize()
    return 1 if wrong or int(failed.item()) else 0


if __name__ == "__main__":
    sys.exit(main())
