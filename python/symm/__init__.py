"""symm from Python: symmetric arrays (torch.Tensor or NumPy) on symm's heap, teams and
team pools, and collectives named like torch.distributed's.

    import symm
    symm.init()                         # under symmrun, mpirun, or torchrun-style env
    x = symm.empty((1024,), "float32")  # the same object on every PE
    x[:] = symm.my_pe()
    symm.all_reduce(x)                  # in place, op="sum"
    with symm.WORLD.pool(8) as pool:    # 8 duplicates, one per concurrent worker
        symm.barrier(pool[3])
    symm.finalize()

docs/PYTHON.md in symm's source tree describes the whole API."""

import sys

from . import _boot, _cuda, _heap, _team
from ._arrays import set_default_backend, torch_module as _torch_module
from ._cuda import prepare
from ._heap import collect_garbage, empty, peer, zeros
from ._lib import LIB_PATH, SymmError, check as _check, lib as _c
from ._moe_topk import (TopkDispatch, cuda_topk_ll_workspace, cuda_topk_workspace,
                        moe_topk_combine, moe_topk_combine_ll, moe_topk_dispatch,
                        moe_topk_dispatch_ll)
from ._ops import (all_gather, all_gather_into_tensor, all_reduce, all_to_all, all_to_all_single,
                   all_to_all_vdev, all_to_all_vdev_2d, all_to_all_vdev_2d_offset, barrier,
                   broadcast, moe_combine, moe_dispatch, multi_root_tile_reduce, reduce,
                   reduce_scatter, reduce_scatter_tensor, sync, tile_all_reduce, tile_reduce)
from ._team import (NODE, WORLD, Pool, Team, get_pool, new_team, pool_create, release_pool,
                    team_from_group)

__version__ = "0.1.0"


def _dist_initialized():
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def init(group=None, store=None, rank=None, world_size=None, timeout=None, cuda=False):
    """Starts symm in this process; collective over every process of the job.

    Under symmrun or an MPI launcher, as a C program would. Started torchrun-style (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or with torch.distributed initialized, or given
    store (and rank, world_size), over that store (see symm._boot). Else a 1-PE job.
    Started through a store, every PE must be on one host. cuda=True also starts symm's CUDA transport (else the
    first symm.empty(..., device="cuda") does). Returns symm.WORLD, or with a
    torch.distributed process group, a Team of its ranks (None on PEs outside it)."""
    how = _boot.launcher()
    if store is None and rank is None and how in ("env", "none") and _dist_initialized():
        import torch.distributed as dist
        rank, world_size = dist.get_rank(), dist.get_world_size()
        how = "env"
    if store is not None or rank is not None or how == "env":
        _boot.init_exchange(store, rank, world_size, timeout)
    else:
        _check(_c.symm_init())
    if cuda:
        _cuda.init()
    if _torch_module() is not None:
        from . import torch_ops  # noqa: F401  (registers torch.ops.symm.*)
    if group is not None:
        return team_from_group(group)
    return WORLD


def finalize():
    """Ends symm in this process; collective. Arrays on symm's heap must not be used
    afterwards (their memory is gone)."""
    _check(_c.symm_finalize())
    _heap.reset()
    _team._n_pes.clear()  # handles start again at the next init


def cuda_device():
    """The CUDA device of this PE's GPU heap (-1 before the CUDA transport starts)."""
    return _cuda.device()


def cuda_check():
    """Raises SymmError for a failure that a call enqueued on a stream met on the device
    (a member's bad splits, an output that does not fit, a timeout). Waits for this PE's
    device."""
    _check(_cuda.lib().symm_cuda_check())


def cuda_workspace(n, ne):
    """A MoE workspace (workspace= of the dispatch/combine calls on CUDA tensors) for a
    team of n PEs and ne experts per PE, beyond the one symm keeps (up to the world's size
    and 1024 experts). Collective over the world, like symm.empty."""
    size = _cuda.lib().symm_cuda_a2a_workspace_bytes(int(n), int(ne))
    return empty((size,), "uint8", device="cuda")


def get_include():
    """The folder of symm's headers (symm.h, symm_cuda.h, symm_device.cuh), for building
    extensions: installed with the package, or the source tree's include/."""
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("SYMM_INCLUDE"), os.path.join(here, "include"),
              os.path.join(here, "..", "..", "include")):
        if d and os.path.exists(os.path.join(d, "symm.h")):
            return os.path.abspath(d)
    raise FileNotFoundError("symm: no symm.h beside the package (set SYMM_INCLUDE)")


def get_library_dir():
    """The folder of libsymm.so (and libsymm_cuda.so), for linking extensions."""
    import os
    return os.path.dirname(os.path.abspath(LIB_PATH))


def initialized():
    return bool(_c.symm_initialized())


def my_pe():
    """This PE's world rank (-1 before init)."""
    return _c.symm_my_pe()


def n_pes():
    """The number of PEs in the job (-1 before init)."""
    return _c.symm_n_pes()


def abort(code=1, why=""):
    """Ends the whole job from this PE: the others' waits fail naming it."""
    _c.symm_abort(int(code), str(why).encode())


def heap_info():
    """Bytes of symmetric heap in use and in all, as a dict."""
    import ctypes

    from ._lib import Info
    i = Info()
    _check(_c.symm_get_info(ctypes.byref(i)))
    return {"heap_size": i.heap_size, "heap_used": i.heap_used,
            "team_heap_size": i.team_heap_size, "team_heap_used": i.team_heap_used,
            "transport": i.transport.decode()}


__all__ = [
    "init", "finalize", "initialized", "my_pe", "n_pes", "abort", "heap_info", "SymmError",
    "empty", "zeros", "peer", "collect_garbage", "set_default_backend", "Team", "Pool", "WORLD", "NODE", "new_team",
    "team_from_group", "pool_create", "get_pool", "release_pool", "barrier", "sync",
    "broadcast", "all_reduce", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "all_gather", "all_gather_into_tensor", "all_to_all", "all_to_all_single",
    "tile_reduce", "tile_all_reduce", "multi_root_tile_reduce", "all_to_all_vdev",
    "all_to_all_vdev_2d", "all_to_all_vdev_2d_offset", "moe_dispatch", "moe_combine",
    "moe_topk_dispatch", "moe_topk_combine", "TopkDispatch", "cuda_topk_workspace",
    "moe_topk_dispatch_ll", "moe_topk_combine_ll", "cuda_topk_ll_workspace",
    "LIB_PATH", "cuda_device", "cuda_check", "cuda_workspace", "prepare", "get_include",
    "get_library_dir",
]
