"""_dlpack.py — arrays over symm's memory without copies: a DLPack producer in ctypes
(DLManagedTensor in a "dltensor" capsule) that torch.from_dlpack and numpy.from_dlpack
consume. The tensor keeps an owner object alive until the consumer calls the deleter,
which is how the heap knows when an object's last array is gone."""

import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8,
                    c_uint16, c_uint64, c_void_p, py_object)

KDL_CPU = 1
KDL_CUDA = 2

# DLDataType (code, bits) by dtype name: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4.
DL_TYPES = {"int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
            "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
            "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16)}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


DELETER = CFUNCTYPE(None, c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", DELETER)]

# What a capsule's DLManagedTensor needs alive until its deleter runs, by its address.
_exports = {}


@DELETER
def _deleter(addr):
    _exports.pop(addr, None)


_CAPSULE_NAME = b"dltensor"
_capi = ctypes.pythonapi
_capi.PyCapsule_New.restype = py_object
_capi.PyCapsule_New.argtypes = [c_void_p, c_char_p, c_void_p]
_capi.PyCapsule_IsValid.restype = c_int
_capi.PyCapsule_IsValid.argtypes = [c_void_p, c_char_p]
_capi.PyCapsule_GetPointer.restype = c_void_p
_capi.PyCapsule_GetPointer.argtypes = [c_void_p, c_char_p]

CAPSULE_DESTRUCTOR = CFUNCTYPE(None, c_void_p)


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule never consumed still holds its name: nobody else will call the deleter.
    if _capi.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
        _exports.pop(_capi.PyCapsule_GetPointer(capsule, _CAPSULE_NAME), None)


_DESTRUCTOR_ADDR = ctypes.cast(_capsule_destructor, c_void_p).value


class Export:
    """One array to hand out: data pointer, shape, strides (elements; None: row-major),
    dtype name, device, and the owner kept alive as long as the array lives."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "device", "owner")

    def __init__(self, ptr, shape, strides, dtype, device, owner):
        self.ptr = ptr
        self.shape = tuple(int(s) for s in shape)
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        self.dtype = dtype
        self.device = device  # (device_type, device_id)
        self.owner = owner

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        ndim = len(self.shape)
        mt = DLManagedTensor()
        shape = (c_int64 * max(ndim, 1))(*self.shape)
        strides = None
        if self.strides is not None:
            strides = (c_int64 * max(ndim, 1))(*self.strides)
        t = mt.dl_tensor
        t.data = self.ptr
        t.device = DLDevice(*self.device)
        t.ndim = ndim
        code, bits = DL_TYPES[self.dtype]
        t.dtype = DLDataType(code, bits, 1)
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        addr = ctypes.addressof(mt)
        mt.manager_ctx = addr
        mt.deleter = _deleter
        _exports[addr] = (mt, shape, strides, self.owner)
        return _capi.PyCapsule_New(addr, _CAPSULE_NAME, _DESTRUCTOR_ADDR)
