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
    "symm_cuda_moe_topk_ll_workspace_bytes": (c_size_t, [c_int, c_int, c_size_t, c_int,
                                                         c_size_t]),
    "symm_moe_topk_dispatch_ll_on_stream": (st_t, [pool_t, _VP, _VP, c_size_t, c_size_t,
                                                   c_size_t, _VP, c_int, c_int, _VP, c_int,
                                                   _VP, _VP, _VP, c_int, _VP]),
    "symm_moe_topk_combine_ll_on_stream": (st_t, [pool_t, _VP, c_size_t, _VP, c_size_t,
                                                  c_size_t, c_int, _VP, _VP, c_int, c_int,
                                                  _VP, _VP, _VP, c_int, _VP]),
}


# While symm.prepare records a call: the stream calls it made, as (function, arguments).
_record = None
# How many times an operation on CUDA tensors copied an argument to the device or took a
# scratch buffer (a copy that a prepared call would not make again).
copies = [0]


class _Recorder:
    """libsymm_cuda as a recorded call sees it: the stream calls are noted, not made."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        fn = getattr(self._real, name)
        if not name.endswith("_on_stream"):
            return fn

        def note(*args):
            _record.append((fn, args))
            return 0

        return note


def lib():
    """libsymm_cuda, loaded on first use (ImportError where symm was built without CUDA)."""
    if _record is not None:
        return _Recorder(_load())
    return _state["lib"] or _load()


def record(call):
    """The stream calls that call() makes, recorded and not made (for symm.prepare), and
    whether it copied an argument; call's result."""
    global _record
    if _record is not None:
        raise RuntimeError("symm.prepare: already recording a call (prepare is not reentrant)")
    _record, before = [], copies[0]
    try:
        result = call()
        return _record, copies[0] != before, result
    finally:
        _record = None


def _load():
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


class Prepared:
    """A stream call on CUDA tensors, made ready by symm.prepare: calling it issues the
    same call again on the current stream, on the same tensors (whose contents may
    change), and returns what the first call returned."""

    __slots__ = ("_calls", "_keep", "result")

    def __init__(self, calls, keep, result):
        self._calls, self._keep, self.result = calls, keep, result

    def __call__(self):
        s = stream()
        for fn, args in self._calls:
            rc = fn(*args, s)
            if rc:
                check(rc)
        return self.result


def prepare(op, /, *args, **kwargs):
    """op(*args, **kwargs), an operation of symm on CUDA tensors (or a function that makes
    such operations, which are all recorded), ready to be issued again:
    the returned callable makes the same call on the current stream with the Python
    layer's reading of its arguments done once, here (the call's checks, pointers,
    sizes, its team's pool). Every tensor the call reads or writes must stay as it is
    (same storage, shape and dtype; its contents may change between calls), and
    everything the call reads must already be on the device in the dtype it reads (a
    list of splits, say, is refused: the call would copy it to the device each time).
    Nothing is issued by prepare itself; while it records, no other thread may call symm
    (its stream calls would be recorded too, and not made)."""
    from ._arrays import torch_module
    torch = torch_module()
    on_gpu = torch is not None and (kwargs.get("device") == "cuda" or any(
        isinstance(a, torch.Tensor) and a.is_cuda for a in args))
    # symm's own operations are checked before anything runs; a function of one's own
    # that makes symm's stream calls is recorded as it is.
    mod = getattr(op, "__module__", None) or ""
    if not on_gpu and (torch is None or mod == "symm" or mod.startswith("symm.")):
        raise ValueError("symm.prepare takes an operation on CUDA tensors (or device='cuda'), "
                         "not one on CPU arrays")
    calls, copied, result = record(lambda: op(*args, **kwargs))
    if copied:
        raise ValueError("symm.prepare: %s copied an argument to the device (splits, indices "
                         "or weights not contiguous on the device in the dtype it reads, or "
                         "an output it writes through a scratch): pass them as such tensors"
                         % getattr(op, "__name__", op))
    if not calls:
        raise ValueError("symm.prepare: %s made no stream call" % getattr(op, "__name__", op))
    return Prepared([(fn, a[:-1]) for fn, a in calls], (args, kwargs), result)
