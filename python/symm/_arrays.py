"""_arrays.py — what symm needs to know of a torch.Tensor or a NumPy array (address,
bytes, element type, shape, strides, device) and which of the two symm.empty returns:
torch when it can be imported, else NumPy. torch is imported on first use, not with
symm."""

import ctypes
import importlib.util

import numpy as np

from ._lib import TYPES

_torch = None
_torch_checked = False


# What symm.empty returns when not told: None (torch if it can be imported, else NumPy),
# "torch" or "numpy" (set_default_backend).
default_backend = [None]


def set_default_backend(backend):
    """The kind of array symm.empty, symm.zeros and symm.peer return when their backend
    argument is None: "torch", "numpy", or None (torch if it can be imported, else NumPy)."""
    if backend not in (None, "torch", "numpy"):
        raise ValueError("symm: backend must be 'torch', 'numpy' or None, not %r" % (backend,))
    default_backend[0] = backend


def torch_module():
    """torch if it can be imported, else None (looked for once)."""
    global _torch, _torch_checked
    if not _torch_checked:
        _torch_checked = True
        if importlib.util.find_spec("torch") is not None:
            import torch
            _torch = torch
    return _torch


# (symm type, item size, dtype name) by torch dtype, filled on first use; every call on a
# tensor looks its dtype up here.
_TORCH_TYPES = {}


def _torch_types(torch):
    if not _TORCH_TYPES:
        for name in TYPES:
            d = getattr(torch, name, None)
            if d is not None:
                _TORCH_TYPES[d] = (TYPES[name], torch.empty(0, dtype=d).element_size(), name)
    return _TORCH_TYPES


class ArrayInfo:
    # shape: a tuple, or a tensor's torch.Size (a tuple too; messages print tuple(shape)).
    __slots__ = ("ptr", "nbytes", "numel", "dtype", "type", "itemsize", "shape", "strides",
                 "contiguous", "device")

    def row_bytes(self):
        """Bytes of one row (everything but dimension 0) of a contiguous array."""
        shape = self.shape
        if len(shape) == 2:
            return self.itemsize * shape[1]
        n = self.itemsize
        for s in shape[1:]:
            n *= s
        return n


_CPU = ("cpu", 0)
# (symm type, item size, dtype name) by NumPy's type number: every type code that names
# one of symm's types (int64 may be a long or a long long).
_NP_NUM = {}
for _c in np.typecodes["All"]:
    _d = np.dtype(_c)
    if _d.name in TYPES:
        _NP_NUM[_d.num] = (TYPES[_d.name], _d.itemsize, _d.name)
_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def _np_ptr(a):
    try:
        return _addressof(_char_from_buffer(a))  # the fast way, for writable C-contiguous
    except (TypeError, ValueError, BufferError):
        return a.__array_interface__["data"][0]


def _np_info(a, what, strides):
    t = _NP_NUM.get(a.dtype.num)
    if t is None:
        raise TypeError("symm: %s has dtype %s, which symm does not carry" % (what, a.dtype))
    i = ArrayInfo()
    i.type, i.itemsize, i.dtype = t
    i.contiguous = a.flags.c_contiguous
    i.ptr = _np_ptr(a) if i.contiguous else a.__array_interface__["data"][0]
    i.nbytes = a.nbytes
    i.numel = a.size
    i.shape = a.shape
    i.device = _CPU
    i.strides = tuple(s // i.itemsize for s in a.strides) if strides else None
    return i


def _torch_info(a, what, strides):
    if not isinstance(a, _Tensor or _tensor_type()):
        raise TypeError("symm: %s must be a torch.Tensor or numpy.ndarray, not %s"
                        % (what, type(a).__name__))
    t = _TORCH_TYPES.get(a.dtype) or _torch_types(_torch).get(a.dtype)
    if t is None:
        raise TypeError("symm: %s has dtype %s, which symm does not carry" % (what, a.dtype))
    return _tensor_info(a, t, tuple(a.stride()) if strides else None, a.is_contiguous())


def _tensor_info(a, t, strides, contiguous):
    """ArrayInfo of a torch tensor a of symm type t (is_cuda, get_device() and is_cpu read
    the tensor's fields; a.device builds an object)."""
    i = ArrayInfo()
    i.type, i.itemsize, i.dtype = t
    i.ptr = a.data_ptr()
    i.numel = n = a.numel()
    i.nbytes = n * t[1]
    i.shape = a.shape
    i.strides = strides
    i.contiguous = contiguous
    if a.is_cuda:
        d = a.get_device()
        i.device = _CUDA_DEVS.get(d) or _CUDA_DEVS.setdefault(d, ("cuda", d))
    elif a.is_cpu:
        i.device = _CPU
    else:
        d = a.device
        i.device = (d.type, d.index or 0)
    return i


_Tensor = None


def _tensor_type():
    """torch.Tensor, or a class of no instance where torch cannot be imported."""
    global _Tensor
    torch = torch_module()
    _Tensor = torch.Tensor if torch is not None else type("NoTorch", (), {})
    return _Tensor


_CUDA_DEVS = {}


def on_device(x, dtype, dev):
    """x itself when it is a contiguous torch tensor of dtype on CUDA device dev, which a
    stream call reads in place (no copy, no kernel, no wait for the device); else None."""
    try:
        if x.dtype is dtype and x.is_cuda and x.is_contiguous() and x.get_device() == dev:
            return x
    except AttributeError:
        pass
    return None


def info(a, what="tensor"):
    """ArrayInfo of a torch.Tensor or NumPy array, strides included; TypeError for anything
    else and for element types symm has no type for."""
    if isinstance(a, np.ndarray):
        return _np_info(a, what, True)
    return _torch_info(a, what, True)


def dense(a, what="tensor"):
    """info() of a contiguous array (ValueError otherwise), without its strides."""
    t = _TORCH_TYPES.get(a.dtype) if isinstance(a, _Tensor or _tensor_type()) else None
    if t is not None and a.is_cuda and a.is_contiguous():
        return _tensor_info(a, t, None, True)  # the calls on CUDA tensors, in few frames
    i = _np_info(a, what, False) if isinstance(a, np.ndarray) else _torch_info(a, what, False)
    if not i.contiguous:
        raise ValueError("symm: %s must be contiguous (shape %s)" % (what, tuple(i.shape)))
    return i


def length(x):
    """len(x), reading a tensor's first dimension (torch's Tensor.__len__ is Python)."""
    if isinstance(x, _Tensor or _tensor_type()):
        s = x.shape
        if s:
            return s[0]
    return len(x)


def span(a, what="tensor"):
    """(address, bytes) of a contiguous array, with dense()'s checks: the few reads of a
    tensor that a workspace argument needs."""
    if isinstance(a, _Tensor or _tensor_type()):
        t = _TORCH_TYPES.get(a.dtype)
        if t is not None and a.is_contiguous():
            return a.data_ptr(), a.numel() * t[1]
    i = dense(a, what)
    return i.ptr, i.nbytes


def from_export(exp, backend=None):
    """The array of an export: a torch.Tensor through DLPack if torch is there (or
    backend == "torch"), else (backend == "numpy") a NumPy array over the memory, which
    holds the owner through its base."""
    if backend is None:
        backend = default_backend[0]
    torch = torch_module() if backend in (None, "torch") else None
    if backend == "torch" and torch is None:
        raise ImportError("symm: backend='torch' but torch cannot be imported")
    if torch is not None:
        return torch.from_dlpack(exp)
    if exp.dtype == "bfloat16":
        raise TypeError("symm: bfloat16 arrays need torch (NumPy has no bfloat16)")
    dt = np.dtype(exp.dtype)
    strides = None if exp.strides is None else tuple(s * dt.itemsize for s in exp.strides)
    if 0 in exp.shape:
        return np.empty(exp.shape, dtype=dt)
    # The buffer spans every element the strides reach from ptr (non-negative strides).
    if strides is None:
        span = dt.itemsize * int(np.prod(exp.shape))
    else:
        if min(strides, default=0) < 0:
            raise ValueError("symm: negative strides are not supported")
        span = dt.itemsize + sum((n - 1) * st for n, st in zip(exp.shape, strides))
    buf = (ctypes.c_char * span).from_address(exp.ptr)
    buf.owner = exp.owner
    return np.ndarray(exp.shape, dtype=dt, buffer=buf, strides=strides)
