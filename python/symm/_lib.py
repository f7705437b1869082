"""_lib.py — libsymm through ctypes: where the library is, the prototypes of the calls the
package uses, and SymmError, raised with symm's own message when a call fails.

ctypes releases the GIL around every call, so a PE waiting in a collective does not stop
the process's other Python threads."""

import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int64, c_size_t,
                    c_void_p)

_HERE = os.path.dirname(os.path.abspath(__file__))


def _find_library():
    """SYMM_LIBRARY if set, else the libsymm.so installed beside this file."""
    path = os.environ.get("SYMM_LIBRARY")
    if path:
        return path
    for name in ("libsymm.so", "libsymm.so.0"):
        p = os.path.join(_HERE, name)
        if os.path.exists(p):
            return p
    raise ImportError(
        "symm: libsymm.so is not installed beside %s (install the package with "
        "`pip install .` from symm's source tree, or set SYMM_LIBRARY to a libsymm.so)"
        % _HERE)


LIB_PATH = _find_library()
lib = ctypes.CDLL(LIB_PATH)

# Status codes, as symm.h's SYMM_FOREACH_STATUS lists them.
STATUS_NAMES = {
    0: "SYMM_SUCCESS", -1: "SYMM_ERR_INVALID_ARG", -2: "SYMM_ERR_NOT_INITIALIZED",
    -3: "SYMM_ERR_ALREADY_INITIALIZED", -4: "SYMM_ERR_NO_MEMORY",
    -5: "SYMM_ERR_NOT_SYMMETRIC", -6: "SYMM_ERR_PE_OUT_OF_RANGE", -7: "SYMM_ERR_OVERFLOW",
    -8: "SYMM_ERR_DOUBLE_FREE", -9: "SYMM_ERR_TIMEOUT", -10: "SYMM_ERR_PE_FAILED",
    -11: "SYMM_ERR_TEAM_INVALID", -12: "SYMM_ERR_NOT_MEMBER", -13: "SYMM_ERR_TEAM_BUSY",
    -14: "SYMM_ERR_COLL_MISMATCH", -15: "SYMM_ERR_NAME_CONFLICT", -16: "SYMM_ERR_NOT_FOUND",
    -17: "SYMM_ERR_UNSUPPORTED", -18: "SYMM_ERR_BOOTSTRAP", -19: "SYMM_ERR_SYSTEM",
    -20: "SYMM_ERR_CUDA", -21: "SYMM_ERR_ALIGNMENT", -22: "SYMM_ERR_MISMATCH",
    -23: "SYMM_ERR_TEAM_BROKEN",
}


class SymmError(RuntimeError):
    """A failed symm call. `status` is symm's status code (negative), `name` its symbol
    (e.g. "SYMM_ERR_TEAM_BUSY"), and the message is symm_last_error(): which PE, team and
    argument."""

    def __init__(self, status, message):
        self.status = status
        self.name = STATUS_NAMES.get(status, "SYMM_ERR_%d" % status)
        super().__init__("%s: %s" % (self.name, message))


def last_error():
    return lib.symm_last_error().decode("utf-8", "replace")


def check(status):
    if status != 0:
        raise SymmError(status, last_error())


def fail_null(what):
    """For calls that return NULL or an invalid value on failure."""
    st = lib.symm_last_status()
    raise SymmError(st if st != 0 else -1, last_error() or what)


class Tile(Structure):
    _fields_ = [("base", c_void_p), ("rows", c_size_t), ("cols", c_size_t), ("ld", c_size_t)]


class MoeSide(Structure):
    """symm_moe_side_t: a side payload of the top-k dispatch."""
    _fields_ = [("in_", c_void_p), ("out", c_void_p), ("row_bytes", c_size_t)]


# symm_moe_src_t is 16 bytes (int32 pe, int32 slot, int64 token): the package keeps it as
# two int64 words per row.
MOE_SIDE_MAX = 8
MOE_TOPK_MAX = 32


class Info(Structure):
    _fields_ = [("heap_size", c_size_t), ("heap_used", c_size_t), ("team_heap_size", c_size_t),
                ("team_heap_used", c_size_t), ("transport", c_char_p)]


ALLGATHER_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p, c_size_t)


class Exchange(Structure):
    _fields_ = [("size", c_size_t), ("rank", c_int), ("npes", c_int),
                ("allgather", ALLGATHER_FN), ("ctx", c_void_p)]


# Arrays of size_t and int, and buffers, travel as plain addresses (c_void_p): ctypes
# passes an int or a ctypes array there at once, where a typed pointer would need a cast.
SIZE_P = c_void_p
INT_P = c_void_p
team_t = c_int64
pool_t = c_int64
st_t = c_int

_PROTOS = {
    "symm_last_status": (c_int, []),
    "symm_last_error": (c_char_p, []),
    "symm_strerror": (c_char_p, [c_int]),
    "symm_type_name": (c_char_p, [c_int]),
    "symm_init": (st_t, []),
    "symm_init_exchange": (st_t, [POINTER(Exchange)]),
    "symm_finalize": (st_t, []),
    "symm_initialized": (c_int, []),
    "symm_my_pe": (c_int, []),
    "symm_n_pes": (c_int, []),
    "symm_abort": (None, [c_int, c_char_p]),
    "symm_get_info": (st_t, [POINTER(Info)]),
    "symm_malloc": (c_void_p, [c_size_t]),
    "symm_align": (c_void_p, [c_size_t, c_size_t]),
    "symm_free": (st_t, [c_void_p]),
    "symm_ptr": (c_void_p, [c_void_p, c_int]),
    "symm_addr_accessible": (c_int, [c_void_p, c_size_t]),
    "symm_team_my_pe": (c_int, [team_t]),
    "symm_team_n_pes": (c_int, [team_t]),
    "symm_team_translate_pe": (c_int, [team_t, c_int, team_t]),
    "symm_team_world_pe": (c_int, [team_t, c_int]),
    "symm_team_split_strided": (st_t, [team_t, c_int, c_int, c_int, POINTER(team_t)]),
    "symm_team_split_2d": (st_t, [team_t, c_int, POINTER(team_t), POINTER(team_t)]),
    "symm_team_create": (st_t, [INT_P, c_int, POINTER(team_t)]),
    "symm_team_destroy": (st_t, [team_t]),
    "symm_team_describe": (c_char_p, [team_t, c_char_p, c_size_t]),
    "symm_team_ptr": (c_void_p, [team_t, c_void_p, c_int]),
    "symm_pool_create": (st_t, [team_t, c_size_t, POINTER(pool_t)]),
    "symm_pool_grow": (st_t, [pool_t, c_size_t]),
    "symm_pool_size": (c_size_t, [pool_t]),
    "symm_pool_team": (team_t, [pool_t, c_size_t]),
    "symm_pool_destroy": (st_t, [pool_t]),
    "symm_pool_get": (st_t, [c_char_p, INT_P, c_int, c_size_t, POINTER(pool_t)]),
    "symm_pool_release": (st_t, [c_char_p]),
    "symm_pool_auto_workers": (c_int, [pool_t, c_size_t]),
    "symm_barrier": (st_t, [team_t]),
    "symm_sync": (st_t, [team_t]),
    "symm_broadcast": (st_t, [team_t, c_void_p, c_void_p, c_size_t, c_int]),
    "symm_reduce": (st_t, [team_t, c_void_p, c_void_p, c_size_t, c_int, c_int, c_int]),
    "symm_allreduce": (st_t, [team_t, c_void_p, c_void_p, c_size_t, c_int, c_int]),
    "symm_reduce_scatter": (st_t, [team_t, c_void_p, c_void_p, c_size_t, c_int, c_int]),
    "symm_fcollect": (st_t, [team_t, c_void_p, c_void_p, c_size_t]),
    "symm_collect": (st_t, [team_t, c_void_p, c_void_p, c_size_t, SIZE_P]),
    "symm_alltoall": (st_t, [team_t, c_void_p, c_void_p, c_size_t]),
    "symm_alltoallv": (st_t, [team_t, c_void_p, c_size_t, c_void_p, SIZE_P, SIZE_P, c_size_t,
                              SIZE_P, SIZE_P]),
    "symm_tile_reduce": (st_t, [team_t, Tile, Tile, c_int, c_int, c_int]),
    "symm_tile_allreduce": (st_t, [team_t, Tile, Tile, c_int, c_int]),
    "symm_tile_reduce_multi": (st_t, [team_t, Tile, POINTER(Tile), INT_P, c_int, c_int,
                                      c_int]),
    "symm_tile_reduce_parallel": (st_t, [pool_t, c_int, Tile, Tile, c_int, c_int, c_int]),
    "symm_tile_allreduce_parallel": (st_t, [pool_t, c_int, Tile, Tile, c_int, c_int]),
    "symm_tile_reduce_multi_parallel": (st_t, [pool_t, c_int, Tile, POINTER(Tile), INT_P,
                                               c_int, c_int, c_int]),
    "symm_all_to_all_v": (st_t, [team_t, c_void_p, c_size_t, c_void_p, SIZE_P, c_size_t,
                                 SIZE_P, SIZE_P, SIZE_P]),
    "symm_moe_dispatch": (st_t, [team_t, c_void_p, c_size_t, c_void_p, SIZE_P, c_int,
                                 c_size_t, c_size_t, SIZE_P, SIZE_P, SIZE_P]),
    "symm_moe_combine": (st_t, [team_t, c_void_p, c_size_t, c_void_p, SIZE_P, SIZE_P, c_int,
                                c_size_t, SIZE_P, SIZE_P, SIZE_P]),
    "symm_all_to_all_v_parallel": (st_t, [pool_t, c_int, c_void_p, c_size_t, c_void_p, SIZE_P,
                                          c_size_t, SIZE_P, SIZE_P, SIZE_P]),
    "symm_moe_dispatch_parallel": (st_t, [pool_t, c_int, c_void_p, c_size_t, c_void_p, SIZE_P,
                                          c_int, c_size_t, c_size_t, SIZE_P, SIZE_P, SIZE_P]),
    "symm_moe_combine_parallel": (st_t, [pool_t, c_int, c_void_p, c_size_t, c_void_p, SIZE_P,
                                         SIZE_P, c_int, c_size_t, SIZE_P, SIZE_P, SIZE_P]),
    # (team, out, out_capacity, in, tokens, row_bytes, topk_idx, k, ne, major_align, side,
    #  nside, out_counts, out_offsets, out_src, out_rows, topk_rows)
    "symm_moe_topk_dispatch": (st_t, [team_t, c_void_p, c_size_t, c_void_p, c_size_t, c_size_t,
                                      c_void_p, c_int, c_int, c_size_t, c_void_p, c_int, SIZE_P,
                                      SIZE_P, c_void_p, SIZE_P, c_void_p]),
    "symm_moe_topk_dispatch_parallel": (st_t, [pool_t, c_int, c_void_p, c_size_t, c_void_p,
                                               c_size_t, c_size_t, c_void_p, c_int, c_int,
                                               c_size_t, c_void_p, c_int, SIZE_P, SIZE_P,
                                               c_void_p, SIZE_P, c_void_p]),
    # (team, out, tokens, in, in_rows, hidden, type, topk_idx, topk_rows, topk_weights, k, ne)
    "symm_moe_topk_combine": (st_t, [team_t, c_void_p, c_size_t, c_void_p, c_size_t, c_size_t,
                                     c_int, c_void_p, c_void_p, c_void_p, c_int, c_int]),
    "symm_moe_topk_combine_parallel": (st_t, [pool_t, c_int, c_void_p, c_size_t, c_void_p,
                                              c_size_t, c_size_t, c_int, c_void_p, c_void_p,
                                              c_void_p, c_int, c_int]),
}


def arg_types(args):
    """argtypes of a prototype: 64-bit integers passed by value (handles, sizes) travel as
    c_void_p, which ctypes converts from a Python int in half the time of c_int64 or
    c_size_t (same width: the register or stack slot holds the same bits). c_void_p takes
    Python ints only (not NumPy's): callers pass int(x) of what users give."""
    return [c_void_p if a in (team_t, c_size_t) else a for a in args]


for _name, (_res, _args) in _PROTOS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = arg_types(_args)

TEAM_WORLD = 0
TEAM_NODE = 1 << 25
TEAM_INVALID = -1

# symm_type_t (SYMM_FOREACH_TYPE order) by dtype name (NumPy's and torch's names), and
# symm_op_t by op name.
TYPES = {"int8": 0, "int16": 1, "int32": 2, "int64": 3, "uint8": 4, "uint16": 5,
         "uint32": 6, "uint64": 7, "float32": 8, "float64": 9, "float16": 10, "bfloat16": 11,
         "float8_e4m3fn": 12, "float8_e5m2": 13}
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "band": 4, "bor": 5, "bxor": 6}

# The library must number its types as this table does (symm_type_name says).
_C_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "fp16", "bfloat16": "bf16",
                 "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}
for _name, _t in TYPES.items():
    _c = (lib.symm_type_name(_t) or b"").decode()
    if _c != _C_TYPE_NAMES.get(_name, _name):
        raise ImportError("symm: %s numbers its types otherwise than this package (type %d "
                          "is %r, not %s): install the package and the library together"
                          % (LIB_PATH, _t, _c, _name))

