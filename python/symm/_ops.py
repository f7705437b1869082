"""_ops.py — collectives on arrays, named and shaped like torch.distributed's (and
torch.ops.symm_mem's for tile reduce and MoE dispatch/combine). Every one is collective
over the team's members (the world by default), which pass the same arguments; buffers
that the C call needs symmetric must come from symm.empty. PE numbers (src, dst, root,
roots) are team-relative, as torch's group_src / group_dst. A failure raises SymmError
with symm's message on every member alike."""

import ctypes

import numpy as np

from . import _arrays, _cuda
from ._lib import OPS, SymmError, Tile, check, lib
from ._team import handle_of, n_pes_of

_OP_ALIASES = {"sum": "sum", "prod": "prod", "product": "prod", "min": "min", "max": "max",
               "band": "band", "and": "band", "bor": "bor", "or": "bor", "bxor": "bxor",
               "xor": "bxor", "avg": None, "premul_sum": None}


_OP_FAST = {k: OPS[v] for k, v in _OP_ALIASES.items() if v}


def _op(op):
    """symm_op_t of "sum", "max", ... or a torch.distributed.ReduceOp."""
    try:
        return _OP_FAST[op]
    except (KeyError, TypeError):  # not a name, or unhashable
        pass
    key = op if isinstance(op, str) else getattr(op, "name", None) or str(op).rsplit(".", 1)[-1]
    name = _OP_ALIASES.get(str(key).lower(), False)
    if not name:
        raise ValueError("symm: reduction op %r is not one of sum, prod, min, max, band, bor, "
                         "bxor" % (op,))
    return OPS[name]


def barrier(team=None, device="cpu"):
    """Completes this PE's earlier puts and waits for every member. device="cuda": a
    barrier of the members' GPUs, enqueued on the current stream."""
    if device != "cpu" and str(device).startswith("cuda"):
        check(_cuda.lib().symm_barrier_on_stream(handle_of(team), _cuda.stream()))
    else:
        check(lib.symm_barrier(handle_of(team)))


def sync(team=None):
    """Waits for every member (no quiet)."""
    check(lib.symm_sync(handle_of(team)))


def broadcast(tensor, src=0, team=None):
    """Member src's tensor into every member's tensor (in place, symmetric)."""
    i = _arrays.dense(tensor)
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_broadcast_on_stream(handle_of(team), i.ptr, i.ptr, i.nbytes,
                                                   int(src), _cuda.stream()))
        return tensor
    check(lib.symm_broadcast(handle_of(team), i.ptr, i.ptr, i.nbytes, int(src)))
    return tensor


def all_reduce(tensor, op="sum", team=None):
    """tensor = op over every member's tensor, element by element, in place."""
    i = _arrays.dense(tensor)
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_allreduce_on_stream(handle_of(team), i.ptr, i.ptr, i.numel,
                                                   i.type, _op(op), _cuda.stream()))
        return tensor
    check(lib.symm_allreduce(handle_of(team), i.ptr, i.ptr, i.numel, i.type, _op(op)))
    return tensor


def reduce(tensor, dst=0, op="sum", team=None):
    """The reduction into member dst's tensor (in place); the others' are unchanged."""
    i = _arrays.dense(tensor)
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_reduce_on_stream(handle_of(team), i.ptr, i.ptr, i.numel, i.type,
                                                _op(op), int(dst), _cuda.stream()))
        return tensor
    check(lib.symm_reduce(handle_of(team), i.ptr, i.ptr, i.numel, i.type, _op(op), int(dst)))
    return tensor


def _same_type(a, b, what):
    if a.type != b.type:
        raise TypeError("symm: %s: dtypes differ (%s and %s)" % (what, a.dtype, b.dtype))


def reduce_scatter(output, input, op="sum", team=None):
    """input holds n_pes blocks of output's size; member r's output gets the reduction of
    block r (torch's reduce_scatter_tensor)."""
    h = handle_of(team)
    o, i = _arrays.dense(output, "output"), _arrays.dense(input, "input")
    _same_type(o, i, "reduce_scatter")
    n = n_pes_of(h)
    if n > 0 and i.numel != o.numel * n:
        raise ValueError("symm: reduce_scatter: input has %d elements, not %d x %d (the team's "
                         "size times output's)" % (i.numel, n, o.numel))
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_reduce_scatter_on_stream(h, o.ptr, i.ptr, o.numel, o.type,
                                                        _op(op), _cuda.stream()))
        return output
    check(lib.symm_reduce_scatter(h, o.ptr, i.ptr, o.numel, o.type, _op(op)))
    return output


def all_gather(output, input, team=None):
    """output = every member's input, concatenated in team order (torch's
    all_gather_into_tensor)."""
    h = handle_of(team)
    o, i = _arrays.dense(output, "output"), _arrays.dense(input, "input")
    _same_type(o, i, "all_gather")
    n = n_pes_of(h)
    if n > 0 and o.numel != i.numel * n:
        raise ValueError("symm: all_gather: output has %d elements, not %d x %d (the team's "
                         "size times input's)" % (o.numel, n, i.numel))
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_fcollect_on_stream(h, o.ptr, i.ptr, i.nbytes, _cuda.stream()))
        return output
    check(lib.symm_fcollect(h, o.ptr, i.ptr, i.nbytes))
    return output


def all_to_all(output, input, team=None):
    """Block j of input goes to member j's output, at block (my PE); blocks are equal."""
    h = handle_of(team)
    o, i = _arrays.dense(output, "output"), _arrays.dense(input, "input")
    _same_type(o, i, "all_to_all")
    n = n_pes_of(h)
    if n > 0 and (i.nbytes % n or o.nbytes != i.nbytes):
        raise ValueError("symm: all_to_all: input and output must have the same size, a "
                         "multiple of the team's size %d (%d and %d bytes)"
                         % (n, i.nbytes, o.nbytes))
    if i.device[0] == "cuda":
        check(_cuda.lib().symm_alltoall_on_stream(h, o.ptr, i.ptr, i.nbytes // n, _cuda.stream()))
        return output
    check(lib.symm_alltoall(h, o.ptr, i.ptr, i.nbytes // n if n > 0 else 0))
    return output


def _sizes(x, n, what):
    """x (a list, NumPy array or CPU tensor of n non-negative integers) as an int64 array
    (which the caller keeps alive) and its address, for a size_t[n] argument."""
    if not isinstance(x, np.ndarray):
        torch = _arrays.torch_module()
        if torch is not None and isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
    a = np.ascontiguousarray(x, dtype=np.int64)
    if a.size != n:
        raise ValueError("symm: %s has %d entries, not %d" % (what, a.size, n))
    return a, _arrays._np_ptr(a)


def _run_sizes(sizes, *call):
    """_run(*call); a failure on a PE that passed a negative count says so (the C call
    reads it as a huge size_t and fails on every member alike, as it should: counts differ
    between PEs, so a check here would fail this PE alone)."""
    try:
        _run(*call)
    except SymmError as e:
        bad = [what for what, a in sizes if a.size and a.min() < 0]
        if bad:
            raise SymmError(e.status, "%s (this PE's %s has a negative entry)"
                            % (e.args[0].split(": ", 1)[-1], " and ".join(bad))) from None
        raise


def _like_int64(ref, shape):
    """A new int64 array: a tensor if ref is one, else NumPy."""
    torch = _arrays.torch_module()
    if torch is not None and isinstance(ref, torch.Tensor):
        return torch.empty(shape, dtype=torch.int64)
    return np.empty(shape, dtype=np.int64)


class _OutSizes:
    """Where a call writes n splits and n offsets (rows): straight into a contiguous
    int64 (2, n) CPU array the caller gave, else a scratch copied into it afterwards."""

    def __init__(self, given, ref, n, what):
        self.given = given if given is not None else _like_int64(ref, (2, n))
        i = _arrays.info(self.given, what)
        if i.shape != (2, n):
            raise ValueError("symm: %s must have shape (2, %d), not %s"
                             % (what, n, tuple(i.shape)))
        if i.dtype == "int64" and i.contiguous and i.device[0] == "cpu":
            self.scratch = None
            self.ptr = i.ptr
        else:
            self.scratch = np.empty((2, n), dtype=np.int64)
            self.ptr = self.scratch.__array_interface__["data"][0]
        self.splits = self.ptr
        self.offsets = self.ptr + 8 * n

    def done(self):
        if self.scratch is not None:
            if isinstance(self.given, np.ndarray):
                self.given[...] = self.scratch
            else:
                torch = _arrays.torch_module()
                self.given.copy_(torch.from_numpy(self.scratch))
        return self.given


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None,
                      team=None):
    """torch's all_to_all_single: rows (dimension 0) of input, input_split_sizes[j] of them
    for member j (equal blocks when None), go to member j; output receives them packed
    in team order. Returns the rows received from each member (a list); where
    output_split_sizes is given, it must match. output and input need not be symmetric
    with splits; output's rows must hold what arrives (else SymmError, nothing written)."""
    h = handle_of(team)
    o, i = _arrays.dense(output, "output"), _arrays.dense(input, "input")
    _same_type(o, i, "all_to_all_single")
    if input_split_sizes is None and output_split_sizes is None:
        all_to_all(output, input, team)
        n = n_pes_of(h)
        return [i.shape[0] // n if i.shape else 0] * n
    n = n_pes_of(h)
    if n < 1:
        check(lib.symm_barrier(h))  # raises symm's error for the team
    if i.device[0] == "cuda":
        raise ValueError("symm: all_to_all_single with splits on CUDA tensors would wait for "
                         "the host: use all_to_all_vdev, whose splits stay on the device")
    rb = i.row_bytes()
    if o.row_bytes() != rb or not i.shape or not o.shape:
        raise ValueError("symm: all_to_all_single: output and input rows differ (%s, %s)"
                         % (tuple(o.shape), tuple(i.shape)))
    if input_split_sizes is None:
        input_split_sizes = [i.shape[0] // n] * n
    send_keep, send = _sizes(input_split_sizes, n, "input_split_sizes")
    recv = (ctypes.c_size_t * n)()
    _run_sizes([("input_split_sizes", send_keep)], h, None, 0, lib.symm_alltoallv, None, o.ptr,
               o.shape[0], i.ptr if i.nbytes else None, send, None, rb, recv, None)
    del send_keep
    got = list(recv)
    if output_split_sizes is not None:
        want = [int(v) for v in np.asarray(_sizes(output_split_sizes, n, "output_split_sizes")[0])]
        if want != got:
            raise ValueError("symm: all_to_all_single: output_split_sizes %s, but %s arrived"
                             % (want, got))
    return got


def _tile(a, what):
    """(symm_tile_t, symm type, dtype name, on CUDA) of a 2-D view whose rows are
    contiguous (stride (ld, 1))."""
    t = (_arrays._TORCH_TYPES.get(a.dtype)
         if isinstance(a, _arrays._Tensor or _arrays._tensor_type()) else None)
    if t is not None:  # a tensor of a type symm carries: the few reads a tile needs
        shape = a.shape
        if len(shape) == 2:
            rows, cols = shape
            st = a.stride()
            if cols <= 1 or st[1] == 1:
                return (Tile(a.data_ptr(), rows, cols, st[0] if rows > 1 else max(cols, 1)),
                        t[0], t[2], a.is_cuda)
    i = _arrays.info(a, what)
    if len(i.shape) != 2:
        raise ValueError("symm: %s must be 2-D, not of shape %s" % (what, tuple(i.shape)))
    rows, cols = i.shape
    ld = i.strides[0] if rows > 1 else max(cols, 1)
    if cols > 1 and i.strides[1] != 1:
        raise ValueError("symm: %s must have contiguous rows (strides %s)" % (what, i.strides))
    return Tile(i.ptr, rows, cols, ld), i.type, i.dtype, i.device[0] == "cuda"


def _same_tile_type(a, b, what):
    if a[1] != b[1]:
        raise TypeError("symm: %s: dtypes differ (%s and %s)" % (what, a[2], b[2]))


def _run(team, pool, workers, plain, parallel, *args):
    if pool is not None:
        if team is not None:
            raise ValueError("symm: pass a team or a pool, not both")
        check(parallel(pool.handle, int(workers), *args))
    else:
        check(plain(handle_of(team), *args))


def _run_tile(cuda, team, pool, workers, plain, parallel, on_stream, *args):
    """A tile call: on the CPU as _run; on CUDA tensors on the current stream, run by
    `workers` blocks (0: chosen) on the pool's duplicates (the team's stream pool when
    none is given)."""
    if not cuda:
        return _run(team, pool, workers, plain, parallel, *args)
    check(getattr(_cuda.lib(), on_stream)(_stream_pool(team, pool), *args, int(workers),
                                          _cuda.stream()))


def _stream_pool(team, pool):
    """The pool a stream call runs on: pool's, else the team's stream pool."""
    if pool is None:
        return _cuda.stream_pool(handle_of(team))
    if team is not None:
        raise ValueError("symm: pass a team or a pool, not both")
    return pool.handle


def _tile_pair(in_tile, out_tile, fn, in_place):
    """The in and out tiles of a tile call; out_tile None: in_tile itself (in_place) or
    no tile (a non-root's)."""
    ti = _tile(in_tile, "in_tile")
    if out_tile is None:
        return ti, (ti if in_place else (Tile(None, 0, 0, 0),))
    to = _tile(out_tile, "out_tile")
    if ti[1] != to[1]:
        _same_tile_type(ti, to, fn)
    return ti, to


def tile_reduce(in_tile, out_tile, root=0, op="sum", team=None, pool=None, workers=0):
    """Every member's 2-D in_tile (the same symmetric tile) reduced into member root's
    out_tile (torch.ops.symm_mem.tile_reduce). out_tile may be None on non-roots. With
    pool, the work is split over `workers` threads on the pool's duplicates (0: chosen
    automatically)."""
    ti, to = _tile_pair(in_tile, out_tile, "tile_reduce", None)
    if ti[3]:
        p = _cuda.stream_pool(handle_of(team)) if pool is None else _stream_pool(team, pool)
        st = _cuda.lib().symm_tile_reduce_on_stream(p, to[0], ti[0], ti[1],
                                                    _op(op), int(root),
                                                    int(workers), _cuda.stream())
        if st:
            check(st)
    else:
        _run(team, pool, workers, lib.symm_tile_reduce, lib.symm_tile_reduce_parallel, to[0],
             ti[0], ti[1], _op(op), int(root))
    return out_tile


def tile_all_reduce(in_tile, out_tile=None, op="sum", team=None, pool=None, workers=0):
    """The reduction into every member's out_tile (symmetric; in place when None)."""
    ti, to = _tile_pair(in_tile, out_tile, "tile_all_reduce", True)
    if ti[3]:
        p = _cuda.stream_pool(handle_of(team)) if pool is None else _stream_pool(team, pool)
        st = _cuda.lib().symm_tile_allreduce_on_stream(p, to[0], ti[0], ti[1],
                                                       _op(op),
                                                       int(workers), _cuda.stream())
        if st:
            check(st)
    else:
        _run(team, pool, workers, lib.symm_tile_allreduce, lib.symm_tile_allreduce_parallel,
             to[0], ti[0], ti[1], _op(op))
    return in_tile if out_tile is None else out_tile


def multi_root_tile_reduce(in_tiles, out_tile, roots, op="sum", team=None, pool=None,
                           workers=0):
    """torch.ops.symm_mem.multi_root_tile_reduce: member roots[k] receives in its out_tile
    the reduction over all members of in_tiles[k]."""
    k = len(in_tiles)
    if len(roots) != k:
        raise ValueError("symm: multi_root_tile_reduce: %d tiles but %d roots"
                         % (k, len(roots)))
    tiles = (Tile * max(k, 1))()
    typ, cuda = None, False
    for j, t in enumerate(in_tiles):
        tiles[j], ityp, _, cuda = _tile(t, "in_tiles[%d]" % j)
        if typ is not None and ityp != typ:
            raise TypeError("symm: multi_root_tile_reduce: in_tiles differ in dtype")
        typ = ityp
    if out_tile is None:
        to = Tile(None, 0, 0, 0)
    else:
        to, otyp, _, _ = _tile(out_tile, "out_tile")
        typ = otyp if typ is None else typ
        if otyp != typ:
            raise TypeError("symm: multi_root_tile_reduce: out_tile's dtype differs")
    r = (ctypes.c_int * max(k, 1))(*[int(x) for x in roots])
    _run_tile(cuda, team, pool, workers, lib.symm_tile_reduce_multi,
              lib.symm_tile_reduce_multi_parallel, "symm_tile_reduce_multi_on_stream", to,
              tiles, r, k, 0 if typ is None else typ, _op(op))
    return out_tile


def _moe_args(input, out, team, pool):
    h = pool[0].handle if pool is not None else handle_of(team)
    n = n_pes_of(h)
    if n < 1:
        check(lib.symm_barrier(h))
    i, o = _arrays.dense(input, "input"), _arrays.dense(out, "out")
    _same_type(i, o, "dispatch/combine")
    if not i.shape or not o.shape or i.row_bytes() != o.row_bytes():
        raise ValueError("symm: input and out must have rows of the same size (%s, %s)"
                         % (tuple(i.shape), tuple(o.shape)))
    return n, i, o


def _dev_int64(x, ref, dev, n, what):
    """x as a contiguous int64 tensor of n entries on ref's device (CUDA device dev), for
    the stream calls, which read their splits on the device: x itself when it is one (no
    copy), else a copy there."""
    torch = _arrays.torch_module()
    t = _arrays.on_device(x, torch.int64, dev)
    if t is None:
        t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x),
                                                                  dtype=torch.int64)
        t = t.to(device=ref.device, dtype=torch.int64).contiguous()
        _cuda.copies[0] += 1
    if t.numel() != n:
        raise ValueError("symm: %s has %d entries, not %d" % (what, t.numel(), n))
    return t


def _dev_out_sizes(given, ref, dev, n, what):
    """out_splits_offsets of a stream call, an int64 (2, n) tensor on ref's device (CUDA
    device dev), written in place: (given, where the call writes). A new tensor when given
    is None; a scratch, which _dev_done copies back, when given is not contiguous int64 on
    that device."""
    torch = _arrays.torch_module()
    if given is None:
        given = torch.empty((2, n), dtype=torch.int64, device=ref.device)
    elif given.shape != (2, n):
        raise ValueError("symm: %s must have shape (2, %d), not %s"
                         % (what, n, tuple(given.shape)))
    buf = _arrays.on_device(given, torch.int64, dev)
    if buf is None:
        buf = torch.empty((2, n), dtype=torch.int64, device=ref.device)
        _cuda.copies[0] += 1
    return given, buf


def _dev_done(given, buf):
    if buf is not given:
        given.copy_(buf)
    return given


def _ws(workspace, n, ne):
    """The MoE workspace: the caller's (symm.cuda_workspace), else symm's own."""
    if workspace is None:
        return _cuda.workspace(n, ne)
    return _arrays.span(workspace, "workspace")[0]


def _moe_stream(fn, team, pool, workers, *args):
    p = pool.handle if pool is not None else _cuda.stream_pool(handle_of(team))
    check(getattr(_cuda.lib(), fn)(p, *args, int(workers), _cuda.stream()))


def all_to_all_vdev(input, out, in_splits, out_splits_offsets=None, team=None, pool=None,
                    workers=0, workspace=None):
    """torch.ops.symm_mem.all_to_all_vdev: input (symmetric) holds rows packed in member
    order, in_splits[j] for member j; out receives rows packed in source order.
    out_splits_offsets (int64, shape (2, n)) gets the rows from each member and where
    they start; returned (a new array when None)."""
    n, i, o = _moe_args(input, out, team, pool)
    if i.device[0] == "cuda":
        sp = _dev_int64(in_splits, input, i.device[1], n, "in_splits")
        res, buf = _dev_out_sizes(out_splits_offsets, input, i.device[1], n,
                                  "out_splits_offsets")
        sp_out = buf.data_ptr()
        _moe_stream("symm_all_to_all_v_on_stream", team, pool, workers, o.ptr, o.shape[0],
                    i.ptr, i.shape[0], sp.data_ptr(), i.row_bytes(), sp_out, sp_out + 8 * n,
                    None, _ws(workspace, n, 1))
        return _dev_done(res, buf)
    send_keep, send = _sizes(in_splits, n, "in_splits")
    res = _OutSizes(out_splits_offsets, input, n, "out_splits_offsets")
    _run_sizes([("in_splits", send_keep)], team, pool, workers, lib.symm_all_to_all_v,
               lib.symm_all_to_all_v_parallel, o.ptr, o.shape[0], i.ptr if i.nbytes else None,
               send, i.row_bytes(), res.splits, res.offsets, None)
    del send_keep
    return res.done()


def all_to_all_vdev_2d(input, out, in_splits, out_splits_offsets=None, team=None,
                       major_align=None, pool=None, workers=0, workspace=None):
    """MoE dispatch (torch.ops.symm_mem.all_to_all_vdev_2d): input (symmetric) holds rows
    rank-major, in_splits[j*ne + e] for expert e of member j; out receives them
    expert-major, each expert's segment aligned to major_align rows (1 when None).
    out_splits_offsets (int64, shape (2, ne*n)): [0][e*n + s] rows from source s for my
    expert e, [1][e*n + s] where they start. Returned (a new array when None)."""
    n, i, o = _moe_args(input, out, team, pool)
    k = _arrays.length(in_splits)
    if k % n:
        raise ValueError("symm: in_splits has %d entries, not a multiple of the team's %d "
                         "PEs" % (k, n))
    align = 1 if major_align is None else int(major_align)
    if i.device[0] == "cuda":
        sp = _dev_int64(in_splits, input, i.device[1], k, "in_splits")
        res, buf = _dev_out_sizes(out_splits_offsets, input, i.device[1], k,
                                  "out_splits_offsets")
        sp_out = buf.data_ptr()
        _moe_stream("symm_moe_dispatch_on_stream", team, pool, workers, o.ptr, o.shape[0],
                    i.ptr, i.shape[0], sp.data_ptr(), k // n, i.row_bytes(), align,
                    sp_out, sp_out + 8 * k, None, _ws(workspace, n, k // n))
        return _dev_done(res, buf)
    send_keep, send = _sizes(in_splits, k, "in_splits")
    res = _OutSizes(out_splits_offsets, input, k, "out_splits_offsets")
    _run_sizes([("in_splits", send_keep)], team, pool, workers, lib.symm_moe_dispatch,
               lib.symm_moe_dispatch_parallel, o.ptr, o.shape[0], i.ptr if i.nbytes else None,
               send, k // n, i.row_bytes(), align, res.splits, res.offsets, None)
    del send_keep
    return res.done()


def all_to_all_vdev_2d_offset(input, out, in_splits_offsets, out_splits_offsets=None,
                              team=None, pool=None, workers=0, workspace=None):
    """MoE combine (torch.ops.symm_mem.all_to_all_vdev_2d_offset), the inverse: input
    (symmetric) is expert-major, in_splits_offsets[0][e*n + j] rows for member j at row
    in_splits_offsets[1][e*n + j]; out receives rows rank-major in the original dispatch
    order, out_splits_offsets (int64, shape (2, n*ne)) their counts and offsets."""
    n, i, o = _moe_args(input, out, team, pool)
    a = in_splits_offsets
    torch = _arrays.torch_module()
    if i.device[0] == "cuda":
        shape = a.shape
        k = int(shape[1]) if len(shape) == 2 else -1
        if len(shape) != 2 or shape[0] != 2 or k % n:
            raise ValueError("symm: in_splits_offsets must have shape (2, ne*%d), not %s"
                             % (n, tuple(shape)))
        both = _dev_int64(a, input, i.device[1], 2 * k, "in_splits_offsets")
        res, buf = _dev_out_sizes(out_splits_offsets, input, i.device[1], k,
                                  "out_splits_offsets")
        sp_in, sp_out = both.data_ptr(), buf.data_ptr()
        _moe_stream("symm_moe_combine_on_stream", team, pool, workers, o.ptr, o.shape[0],
                    i.ptr, i.shape[0], sp_in, sp_in + 8 * k, k // n, i.row_bytes(), sp_out,
                    sp_out + 8 * k, None, _ws(workspace, n, k // n))
        return _dev_done(res, buf)
    if torch is not None and isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != 2 or a.shape[1] % n:
        raise ValueError("symm: in_splits_offsets must have shape (2, ne*%d), not %s"
                         % (n, a.shape))
    k = a.shape[1]
    splits_keep, splits = _sizes(a[0], k, "in_splits_offsets[0]")
    offs_keep, offs = _sizes(a[1], k, "in_splits_offsets[1]")
    res = _OutSizes(out_splits_offsets, input, k, "out_splits_offsets")
    _run_sizes([("in_splits_offsets", splits_keep), ("in_splits_offsets", offs_keep)], team,
               pool, workers, lib.symm_moe_combine, lib.symm_moe_combine_parallel, o.ptr,
               o.shape[0], i.ptr if i.nbytes else None, splits, offs, k // n, i.row_bytes(),
               res.splits, res.offsets, None)
    del splits_keep, offs_keep
    return res.done()


moe_dispatch = all_to_all_vdev_2d
moe_combine = all_to_all_vdev_2d_offset
all_gather_into_tensor = all_gather
reduce_scatter_tensor = reduce_scatter
