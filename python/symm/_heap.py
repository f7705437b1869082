"""_heap.py — arrays on symm's symmetric heap. symm_malloc and symm_free are collective:
every PE must allocate and free the same objects in the same order. An array's memory is
allocated by symm.empty on every PE; when the last array (or view) over an object dies,
the object is only marked. At the next collective heap call (symm.empty, symm.zeros,
symm.collect_garbage, symm.finalize) the PEs AND their marks together and free, in address
order, exactly the objects that every PE has let go of; the others wait for a later call.
So Python's garbage collection may run at different times on different PEs without
breaking the collective order."""

import bisect
import ctypes
import threading
import weakref

import numpy as np

from . import _arrays
from ._dlpack import KDL_CPU, Export
from ._lib import OPS, TEAM_WORLD, TYPES, check, fail_null, lib

_lock = threading.Lock()
_live = {}  # address -> (nbytes, weakref to its _Block): the same keys on every PE
_starts = []  # sorted addresses of _live
_marked = set()  # addresses whose last array died here
_scratch = [0, 0]  # [address, words] of the symmetric bitmap that the AND runs on


class _Block:
    """Owner of one symmetric object: every array over it holds a reference."""

    __slots__ = ("ptr", "nbytes", "__weakref__")

    def __init__(self, ptr, nbytes):
        self.ptr = ptr
        self.nbytes = nbytes

    def __del__(self):
        _marked.add(self.ptr)


def _scratch_words(words):
    """The symmetric bitmap, at least words long (collective: every PE has the same
    number of live objects)."""
    if _scratch[1] >= words:
        return _scratch[0]
    if _scratch[0]:
        check(lib.symm_free(_scratch[0]))
        _scratch[0] = _scratch[1] = 0
    n = max(words, 2 * _scratch[1], 64)
    p = lib.symm_malloc(n * 8)
    if not p:
        fail_null("symm_malloc of the free bitmap")
    _scratch[0], _scratch[1] = p, n
    return p


def collect_garbage():
    """Frees the objects every PE has let go of. Collective over the world. Returns how
    many objects were freed."""
    with _lock:
        if not _starts:
            return 0
        n = len(_starts)
        words = (n + 63) // 64
        base = _scratch_words(words)
        bits = (ctypes.c_uint64 * words).from_address(base)
        for w in range(words):
            bits[w] = 0
        for k, p in enumerate(_starts):
            if p in _marked:
                bits[k // 64] |= 1 << (k % 64)
        check(lib.symm_allreduce(TEAM_WORLD, base, base, words, TYPES["uint64"], OPS["band"]))
        doomed = [_starts[k] for k in range(n) if bits[k // 64] >> (k % 64) & 1]
        for p in doomed:
            check(lib.symm_free(p))
            del _live[p]
            _marked.discard(p)
        if doomed:
            gone = set(doomed)
            _starts[:] = [p for p in _starts if p not in gone]
        return len(doomed)


def reset():
    """Forgets everything (symm_finalize freed the heap)."""
    with _lock:
        _live.clear()
        _starts.clear()
        _marked.clear()
        _scratch[0] = _scratch[1] = 0


def _shape_tuple(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(s) for s in shape)


def _dtype_name(dtype):
    """"float32" from a torch dtype, a NumPy dtype or type, or a string."""
    if isinstance(dtype, str):
        name = dtype
    else:
        torch = _arrays.torch_module()
        if torch is not None and isinstance(dtype, torch.dtype):
            name = str(dtype).replace("torch.", "")
        else:
            import numpy as np
            name = np.dtype(dtype).name
    aliases = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16",
               "fp16": "float16", "int": "int32", "long": "int64"}
    name = aliases.get(name, name)
    if name not in TYPES:
        raise TypeError("symm: dtype %s is not one symm carries (%s)"
                        % (dtype, ", ".join(TYPES)))
    return name


ITEMSIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
            "uint32": 4, "uint64": 8, "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}


def empty(shape, dtype="float32", device="cpu", backend=None):
    """A new array on symm's symmetric heap, uninitialized: the same object on every PE
    (collective over the world: every PE calls with the same shape and dtype). A
    torch.Tensor when torch can be imported, else a NumPy array; backend ("torch" or
    "numpy") chooses. Only device="cpu" for now."""
    shape = _shape_tuple(shape)
    name = _dtype_name(dtype)
    dev = str(device)
    if dev != "cpu":
        raise ValueError("symm.empty: device %r: only 'cpu' arrays are supported" % (device,))
    if any(s < 0 for s in shape):
        raise ValueError("symm.empty: negative dimension in shape %s" % (shape,))
    nbytes = ITEMSIZE[name]
    for s in shape:
        nbytes *= s
    if nbytes >= 1 << 63:
        raise ValueError("symm.empty: %s x %s is %d bytes, more than any heap holds"
                         % (shape, name, nbytes))
    collect_garbage()
    # A 0-byte object is still made (1 byte), so that every array is on the heap.
    p = lib.symm_malloc(max(nbytes, 1))
    if not p:
        fail_null("symm_malloc")
    block = _Block(p, nbytes)
    with _lock:
        _live[p] = (nbytes, weakref.ref(block))
        bisect.insort(_starts, p)
    return _arrays.from_export(Export(p, shape, None, name, (KDL_CPU, 0), block), backend)


def zeros(shape, dtype="float32", device="cpu", backend=None):
    """empty() filled with zeros."""
    a = empty(shape, dtype, device, backend)
    i = _arrays.info(a)
    ctypes.memset(i.ptr, 0, i.nbytes)
    return a


def owner(ptr, nbytes):
    """The _Block of the live object that holds [ptr, ptr + nbytes), or None."""
    with _lock:
        k = bisect.bisect_right(_starts, ptr) - 1
        if k < 0:
            return None
        start = _starts[k]
        size, ref = _live[start]
        if ptr + nbytes > start + max(size, 1):
            return None
        return ref()


def peer(a, pe, team=None, backend=None):
    """PE pe's copy of the symmetric array a (pe numbered in team, the world by default),
    as an array of a's shape and strides over that PE's memory, which loads and stores
    reach directly, of a's kind (tensor or NumPy array). It keeps the object alive as a
    does."""
    i = _arrays.info(a)
    blk = owner(i.ptr, i.nbytes)
    if blk is None:
        raise ValueError("symm.peer: the array is not on symm's heap (make it with "
                         "symm.empty)")
    th = TEAM_WORLD if team is None else int(getattr(team, "handle", team))
    q = lib.symm_team_ptr(th, i.ptr, int(pe))
    if not q:
        fail_null("symm_team_ptr")
    if backend is None:
        backend = "numpy" if isinstance(a, np.ndarray) else "torch"
    return _arrays.from_export(Export(q, i.shape, i.strides, i.dtype, (KDL_CPU, 0), blk),
                               backend)
