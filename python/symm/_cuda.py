"""_cuda.py — the GPU part: libsymm_cuda through ctypes (installed beside libsymm where
CUDA was built), symm_cuda_init, and what the operations on CUDA tensors need: the current
torch stream, a pool per team for the block-parallel stream calls, and the symmetric
workspace of the MoE calls."""

import ctypes
import os
from ctypes import c_int, c_size_t, c_void_p

from . import _lib
from ._lib import Tile, check, fail_null, pool_t, st_t, team_t

_state = {"lib": None, "pools": {}, "workspace": None}
# The MoE workspace is made at start for teams of up to the world's size and up to this
# many experts per PE; larger calls take workspace= (symm.cuda_workspace).
WORKSPACE_EXPERTS = 1024
# Duplicates of the pool that a team's block-parallel stream calls run on (the most blocks
# they may use).
STREAM_POOL_SIZE = 64

_VP = c_void_p
_PROTOS = {
    "symm_cuda_init": (st_t, []),
    "symm_cuda_initialized": (c_int, []),
    "symm_cuda_device": (c_int, []),
    "symm_cuda_check": (st_t, []),
    "symm_gpu_malloc": (_VP, [c_size_t]),
    "symm_gpu_free": (st_t, [_VP]),
    "symm_gpu_ptr": (_VP, [_VP, c_int]),
    "symm_cuda_a2a_workspace_bytes": (c_size_t, [c_int, c_int]),
    "symm_barrier_on_stream": (st_t, [team_t, _VP]),
    "symm_broadcast_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, c_int, _VP]),
    "symm_reduce_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, c_int, c_int, c_int, _VP]),
    "symm_allreduce_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, c_int, c_int, _VP]),
    "symm_reduce_scatter_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, c_int, c_int, _VP]),
    "symm_fcollect_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, _VP]),
    "symm_alltoall_on_stream": (st_t, [team_t, _VP, _VP, c_size_t, _VP]),
    "symm_tile_reduce_on_stream": (st_t, [pool_t, Tile, Tile, c_int, c_int, c_int, c_int, _VP]),
    "symm_tile_allreduce_on_stream": (st_t, [pool_t, Tile, Tile, c_int, c_int, c_int, _VP]),
    "symm_tile_reduce_multi_on_stream": (st_t, [pool_t, Tile, _VP, _VP, c_int, c_int, c_int,
                                                c_int, _VP]),
    "symm_all_to_all_v_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t, _VP,
                                           c_size_t, _VP, _VP, _VP, _VP, c_int, _VP]),
    "symm_moe_dispatch_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t, _VP, c_int,
                                           c_size_t, c_size_t, _VP, _VP, _VP, _VP, c_int,
                                           _VP]),
    "symm_moe_combine_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t, _VP, _VP,
                                          c_int, c_size_t, _VP, _VP, _VP, _VP, c_int, _VP]),
    "symm_cuda_moe_topk_workspace_bytes": (c_size_t, [c_int, c_int, c_size_t, c_int]),
    "symm_moe_topk_dispatch_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t, c_size_t,
                                                _VP, c_int, c_int, c_size_t, _VP, c_int, _VP,
                                                _VP, _VP, _VP, _VP, _VP, c_int, _VP]),
    "symm_moe_topk_combine_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t, c_size_t,
                                               c_int, _VP, _VP, _VP, c_int, c_int, _VP, c_int,
                                               _VP]),
}


def lib():
    """libsymm_cuda, loaded on first use (ImportError where symm was built without CUDA)."""
    if _state["lib"] is None:
        path = os.environ.get("SYMM_CUDA_LIBRARY")
        if not path:
            base = os.path.dirname(_lib.LIB_PATH)
            for name in ("libsymm_cuda.so", "libsymm_cuda.so.0"):
                if os.path.exists(os.path.join(base, name)):
                    path = os.path.join(base, name)
                    break
        if not path:
            raise ImportError("symm: no libsymm_cuda.so beside %s: this symm was built without "
                              "CUDA (nvcc was not found, or SYMM_CUDA=off)" % _lib.LIB_PATH)
        c = ctypes.CDLL(path)
        for name, (res, args) in _PROTOS.items():
            f = getattr(c, name)
            f.restype = res
            f.argtypes = _lib.arg_types(args)
        _state["lib"] = c
    return _state["lib"]


def initialized():
    return _state["lib"] is not None and bool(_state["lib"].symm_cuda_initialized())


def init():
    """symm_cuda_init (collective over the world) and the MoE workspace."""
    c = lib()
    check(c.symm_cuda_init())
    n = _lib.lib.symm_n_pes()
    size = c.symm_cuda_a2a_workspace_bytes(n, WORKSPACE_EXPERTS)
    p = c.symm_gpu_malloc(size)
    if not p:
        fail_null("symm_gpu_malloc of the MoE workspace")
    _state["workspace"] = (p, n, WORKSPACE_EXPERTS)


def device():
    return lib().symm_cuda_device() if _state["lib"] is not None else -1


def reset():
    _state["pools"].clear()
    _state["workspace"] = None


# torch's query of the current stream, bound on the first call: the raw handle of the
# current device's current stream, as torch.cuda.current_stream().cuda_stream gives it
# without making a Stream object (two C calls instead of several Python frames).
_raw_stream = None
_cur_device = None


def _bind_stream():
    global _raw_stream, _cur_device
    import torch
    torch.cuda.current_stream()  # torch's lazy CUDA initialisation, once
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    dev = getattr(torch._C, "_cuda_getDevice", None)
    if raw is None or dev is None:
        _raw_stream, _cur_device = (lambda d: torch.cuda.current_stream().cuda_stream), int
    else:
        _raw_stream, _cur_device = raw, dev


def stream():
    """The current torch CUDA stream's handle (of the current device)."""
    if _raw_stream is None:
        _bind_stream()
    return _raw_stream(_cur_device())


def stream_pool(team):
    """The pool that the block-parallel stream calls on team run on: made on the first
    such call (collective over the team, as the call is) and kept until finalize."""
    p = _state["pools"].get(team)
    if p is None:
        out = pool_t(-1)
        check(_lib.lib.symm_pool_create(team, STREAM_POOL_SIZE, ctypes.byref(out)))
        p = _state["pools"][team] = out.value
    return p


def workspace(n, ne):
    """The MoE workspace for a team of n PEs and ne experts per PE."""
    ws = _state["workspace"]
    if ws is None or n > ws[1] or ne > ws[2]:
        raise ValueError("symm: no MoE workspace for %d PEs x %d experts (made for up to %d x "
                         "%d): pass workspace=symm.cuda_workspace(n, ne)" % (n, ne, ws[1], ws[2]))
    return ws[0]
