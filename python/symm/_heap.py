"""_heap.py — arrays on symm's symmetric heaps (the CPU heap, and the GPU heap of the
CUDA transport). Allocation and freeing are collective: every PE must allocate and free
the same objects in the same order. An array's memory is allocated by symm.empty on every
PE; when the last array (or view) over an object dies, the object is only marked. At the
next collective heap call (symm.empty, symm.zeros, symm.collect_garbage) the PEs AND
their marks together and free, in address order, exactly the objects that every PE has
let go of; the others wait for a later call. So Python's garbage collection may run at
different times on different PEs without breaking the collective order."""

import bisect
import ctypes
import threading
import weakref

import numpy as np

from . import _arrays, _cuda
from ._dlpack import KDL_CPU, KDL_CUDA, Export
from ._lib import OPS, TEAM_NODE, TEAM_WORLD, TYPES, check, fail_null, lib

_lock = threading.Lock()
_scratch = [0, 0]  # [address, words] of the symmetric bitmap that the AND runs on
# Counts symm_finalize calls: an array that outlives its heap must not mark the object
# at its address in a later one.
_generation = [0]


class _Space:
    """The live objects of one heap: the same addresses on every PE."""

    def __init__(self, name):
        self.name = name
        self.live = {}  # address -> (nbytes, weakref to its _Block)
        self.starts = []  # sorted addresses of live
        self.marked = set()  # addresses whose last array died here

    def malloc(self, nbytes):
        if self.name == "cpu":
            p = lib.symm_malloc(nbytes)
        else:
            p = _cuda.lib().symm_gpu_malloc(nbytes)
        if not p:
            fail_null("symm_malloc")
        return p

    def free(self, p):
        check(lib.symm_free(p) if self.name == "cpu" else _cuda.lib().symm_gpu_free(p))

    def clear(self):
        self.live.clear()
        self.starts.clear()
        self.marked.clear()


_spaces = {"cpu": _Space("cpu"), "cuda": _Space("cuda")}


class _Block:
    """Owner of one symmetric object: every array over it holds a reference."""

    __slots__ = ("ptr", "nbytes", "space", "generation", "__weakref__")

    def __init__(self, ptr, nbytes, space):
        self.ptr = ptr
        self.nbytes = nbytes
        self.space = space
        self.generation = _generation[0]

    def __del__(self):
        if self.generation == _generation[0]:
            self.space.marked.add(self.ptr)


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


def _collect(space):
    starts = space.starts
    if not starts:
        return 0
    n = len(starts)
    words = (n + 63) // 64
    base = _scratch_words(words)
    bits = (ctypes.c_uint64 * words).from_address(base)
    for w in range(words):
        bits[w] = 0
    for k, p in enumerate(starts):
        if p in space.marked:
            bits[k // 64] |= 1 << (k % 64)
    check(lib.symm_allreduce(TEAM_WORLD, base, base, words, TYPES["uint64"], OPS["band"]))
    doomed = [starts[k] for k in range(n) if bits[k // 64] >> (k % 64) & 1]
    for p in doomed:
        space.free(p)
        del space.live[p]
        space.marked.discard(p)
    if doomed:
        gone = set(doomed)
        starts[:] = [p for p in starts if p not in gone]
    return len(doomed)


def collect_garbage():
    """Frees the objects every PE has let go of. Collective over the world. Returns how
    many objects were freed."""
    with _lock:
        freed = _collect(_spaces["cpu"])
        if _cuda.initialized():
            freed += _collect(_spaces["cuda"])
        return freed


def reset():
    """Forgets everything (symm_finalize freed the heaps)."""
    with _lock:
        for s in _spaces.values():
            s.clear()
        _scratch[0] = _scratch[1] = 0
        _generation[0] += 1
    _cuda.reset()


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
            name = np.dtype(dtype).name
    aliases = {"float": "float32", "double": "float64", "half": "float16", "bf16": "bfloat16",
               "fp16": "float16", "int": "int32", "long": "int64"}
    name = aliases.get(name, name)
    if name not in TYPES:
        raise TypeError("symm: dtype %s is not one symm carries (%s)"
                        % (dtype, ", ".join(TYPES)))
    return name


ITEMSIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint8": 1, "uint16": 2,
            "uint32": 4, "uint64": 8, "float32": 4, "float64": 8, "float16": 2, "bfloat16": 2,
            "float8_e4m3fn": 1, "float8_e5m2": 1}
# Types that travel through DLPack as bytes, then viewed as themselves (torch only).
_AS_BYTES = ("float8_e4m3fn", "float8_e5m2")


def _device(device):
    """("cpu", 0) or ("cuda", index or None) of "cpu", "cuda", "cuda:1", a torch.device."""
    d = str(device)
    if d == "cpu":
        return "cpu", 0
    if d == "cuda" or d.startswith("cuda:"):
        return "cuda", int(d[5:]) if d.startswith("cuda:") else None
    raise ValueError("symm.empty: device %r: 'cpu' or 'cuda' only" % (device,))


def empty(shape, dtype="float32", device="cpu", backend=None):
    """A new array on symm's symmetric heap, uninitialized: the same object on every PE
    (collective over the world: every PE calls with the same shape and dtype). A
    torch.Tensor when torch can be imported, else a NumPy array; backend ("torch" or
    "numpy") chooses. device="cuda" puts it on the GPU heap (a CUDA tensor; the first
    such call starts symm's CUDA transport, collectively)."""
    shape = _shape_tuple(shape)
    name = _dtype_name(dtype)
    kind, index = _device(device)
    if any(s < 0 for s in shape):
        raise ValueError("symm.empty: negative dimension in shape %s" % (shape,))
    nbytes = ITEMSIZE[name]
    for s in shape:
        nbytes *= s
    if nbytes >= 1 << 63:
        raise ValueError("symm.empty: %s x %s is %d bytes, more than any heap holds"
                         % (shape, name, nbytes))
    if kind == "cuda":
        if backend == "numpy" or _arrays.torch_module() is None:
            raise ValueError("symm.empty: CUDA arrays are torch tensors (torch is needed)")
        backend = "torch"
        if not _cuda.initialized():
            _cuda.init()
        dev = _cuda.device()
        if index is not None and index != dev:
            raise ValueError("symm.empty: device cuda:%d, but this PE's GPU is cuda:%d "
                             "(SYMM_GPU_DEVICE chooses it)" % (index, dev))
        dl_device = (KDL_CUDA, dev)
    else:
        dl_device = (KDL_CPU, 0)
    collect_garbage()
    space = _spaces[kind]
    # A 0-byte object is still made (1 byte), so that every array is on the heap.
    p = space.malloc(max(nbytes, 1))
    block = _Block(p, nbytes, space)
    with _lock:
        space.live[p] = (nbytes, weakref.ref(block))
        bisect.insort(space.starts, p)
    if name in _AS_BYTES:
        if backend == "numpy" or _arrays.torch_module() is None:
            raise TypeError("symm: %s arrays need torch (NumPy has no fp8)" % name)
        a = _arrays.from_export(Export(p, shape, None, "uint8", dl_device, block), "torch")
        return a.view(getattr(_arrays.torch_module(), name))
    return _arrays.from_export(Export(p, shape, None, name, dl_device, block), backend)


def zeros(shape, dtype="float32", device="cpu", backend=None):
    """empty() filled with zeros (on the current stream for a CUDA tensor)."""
    a = empty(shape, dtype, device, backend)
    i = _arrays.info(a)
    if i.device[0] == "cpu":
        ctypes.memset(i.ptr, 0, i.nbytes)
    else:
        a.zero_()
    return a


def owner(ptr, nbytes, kind="cpu"):
    """The _Block of the live object of heap kind that holds [ptr, ptr + nbytes), or None."""
    space = _spaces.get(kind)
    if space is None:
        return None
    with _lock:
        k = bisect.bisect_right(space.starts, ptr) - 1
        if k < 0:
            return None
        start = space.starts[k]
        size, ref = space.live[start]
        if ptr + nbytes > start + max(size, 1):
            return None
        return ref()


def peer(a, pe, team=None, backend=None):
    """PE pe's copy of the symmetric array a (pe numbered in team, the world by default;
    a PE of symm.NODE: on this host), as an array of a's shape and strides over that PE's
    memory, which loads and stores reach directly (for a CUDA tensor: this PE's kernels and copies), of a's kind (tensor
    or NumPy array). It keeps the object alive as a does."""
    i = _arrays.info(a)
    blk = owner(i.ptr, i.nbytes, i.device[0])
    if blk is None:
        raise ValueError("symm.peer: the array is not on symm's heap (make it with "
                         "symm.empty)")
    th = TEAM_WORLD if team is None else int(getattr(team, "handle", team))
    if i.device[0] == "cpu":
        q = lib.symm_team_ptr(th, i.ptr, int(pe))
        dl_device = (KDL_CPU, 0)
        if not q and lib.symm_team_world_pe(th, int(pe)) >= 0 and \
                lib.symm_team_translate_pe(th, int(pe), TEAM_NODE) < 0:
            raise ValueError("symm.peer: PE %d is on another host (not in symm.NODE): no "
                             "load or store reaches its memory; the collectives do" % pe)
    else:
        w = lib.symm_team_world_pe(th, int(pe))
        q = _cuda.lib().symm_gpu_ptr(i.ptr, w) if w >= 0 else None
        dl_device = (KDL_CUDA, i.device[1])
        if not q:
            raise ValueError("symm.peer: PE %d of the team has no copy here" % pe)
    if not q:
        fail_null("symm_team_ptr")
    if backend is None:
        backend = "numpy" if isinstance(a, np.ndarray) else "torch"
    return _arrays.from_export(Export(q, i.shape, i.strides, i.dtype, dl_device, blk), backend)
