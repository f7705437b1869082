"""pool_kernel.py — a CUDA kernel of one's own, built as a torch extension, whose every
block runs a collective on its own duplicate of a pool made in Python: block b sums row b
of a (rows, cols) tensor over every PE, on duplicate b. This is what team pools are for:
NVSHMEM and OpenSHMEM forbid two concurrent collectives on one team. The sums of two
launches on random data are checked against a serial reference; the exit status says
whether every PE found them right.

    symmrun -n 2 python examples/python/pool_kernel.py     (several PEs on one GPU: MPS)
    torchrun --nproc-per-node 2 examples/python/pool_kernel.py

torch builds the extension at the first run (nvcc and ninja needed; the build is kept in
torch's extensions folder, TORCH_EXTENSIONS_DIR).

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


def member_data(pe, rnd, rows, cols):
    """PE pe's x in round rnd: random integers as float32, so that every sum is exact."""
    g = torch.Generator().manual_seed(1000 * rnd + pe)
    return torch.randint(-64, 65, (rows, cols), generator=g).float()


def main():
    # Every PE asks for the same extension: torch builds it once (a lock in its build
    # folder) and the others load it. Built before symm starts, so that no PE waits in a
    # symm call while another compiles.
    ext = build()
    if not torch.cuda.is_available():
        print("pool_kernel: the extension is built; no CUDA device to run it on")
        return 0
    symm.init(cuda=True)
    torch.cuda.set_device(symm.cuda_device())  # the extension launches on torch's device
    me, n = symm.my_pe(), symm.n_pes()
    rows, cols = 16, 4096
    wrong = symm.zeros((2,), torch.int64, backend="torch")  # on the CPU heap
    with symm.WORLD.pool(rows) as pool:
        x = symm.empty((rows, cols), torch.float32, device="cuda")
        total = symm.empty((rows, cols), torch.float32, device="cuda")
        failed = torch.zeros(1, dtype=torch.int32, device="cuda")
        for rnd in range(2):  # the second launch reuses the pool's duplicates
            x.copy_(member_data(me, rnd, rows, cols))
            total.fill_(-1)
            torch.cuda.synchronize()
            symm.barrier()  # every PE's x is in place
            ext.rows_allreduce_launch(pool.handle, total, x, failed)
            symm.cuda_check()
            want = member_data(0, rnd, rows, cols)
            for p in range(1, n):  # the serial reference, in team order
                want += member_data(p, rnd, rows, cols)
            wrong[0] += int((total.cpu() != want).sum())
            symm.barrier()  # no PE rewrites x while another still reads it
        wrong[1] = int(failed.item())
        del x, total
    symm.all_reduce(wrong)  # every PE's count, so that every PE exits alike
    if me == 0:
        print("pool_kernel: %d PEs, %d blocks each on its own pool duplicate, 2 launches: "
              "%d of %d sums wrong, %d blocks failed: %s"
              % (n, rows, int(wrong[0]), 2 * n * rows * cols, int(wrong[1]),
                 "ok" if not wrong.any() else "FAILED"))
    bad = bool(wrong.any())
    symm.finalize()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
