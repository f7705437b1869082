"""_moe_topk.py — top-k MoE dispatch and weighted combine (symm_moe_topk_dispatch /
symm_moe_topk_combine of symm.h, and their stream forms of symm_cuda.h) on arrays: every
token goes to the experts its router chose and comes back as the weighted sum of their
outputs. On CPU arrays the host calls run; on CUDA tensors the stream calls, enqueued on
the current torch stream, with every index and output on the device."""

import ctypes
from collections import namedtuple

import numpy as np

from . import _arrays, _cuda
from ._lib import MOE_SIDE_MAX, TYPES, MoeSide, check, lib
from ._ops import _moe_args, _run
from ._team import handle_of

# What a dispatch returns. counts[e], offsets[e] (ne each): rows received for local expert
# e and where its segment starts; rows: rows of the layout, padding included (an int on the
# CPU; a 1-element int64 tensor on the device); topk_rows (tokens, k): where each slot of
# this PE's tokens landed on its expert's PE, the handle the combine takes; src: the
# out_src argument (None when not given).
TopkDispatch = namedtuple("TopkDispatch", "counts offsets rows topk_rows src")

_new_dispatch = tuple.__new__  # TopkDispatch without the Python frame of its __new__

_COMBINE_TYPES = (TYPES["float32"], TYPES["float16"], TYPES["bfloat16"])
# The side argument's array type by the number of sides.
_SIDES = [MoeSide * max(n, 1) for n in range(MOE_SIDE_MAX + 1)]
_SIDE_NAMES = [("sides[%d] in" % p, "sides[%d] out" % p) for p in range(MOE_SIDE_MAX)]


def _torch():
    return _arrays._torch or _arrays.torch_module()


def _is_cuda(i):
    return i.device[0] == "cuda"


def _host_array(x, dtype, shape, what):
    """x (list, NumPy array or CPU tensor) as a contiguous NumPy array of dtype and shape
    (the caller keeps it alive while the call runs)."""
    torch = _torch()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.is_cuda:
            raise ValueError("symm: %s is a CUDA tensor but the rows are on the CPU" % what)
        x = x.detach().numpy()
    a = np.ascontiguousarray(x, dtype=dtype)
    if a.shape != shape:
        raise ValueError("symm: %s has shape %s, not %s" % (what, a.shape, shape))
    return a


def _dev_array(x, dtype, shape, ref, dev, what):
    """x as a contiguous tensor of dtype and shape on ref's device (CUDA device dev): x
    itself when it is one (no copy), else a copy there."""
    try:
        if (x.dtype is dtype and x.is_cuda and x.is_contiguous() and x.get_device() == dev and
                x.shape == shape):
            return x
    except AttributeError:
        pass
    torch = _torch()
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    t = t.to(device=ref.device, dtype=dtype).contiguous()
    _cuda.copies[0] += 1
    if t.shape != shape:
        raise ValueError("symm: %s has shape %s, not %s" % (what, tuple(t.shape), shape))
    return t


def _out(given, ref, shape, what, cuda):
    """An int64 output of shape: given (contiguous int64 on the right device, written in
    place) or new (a tensor if ref is one, else NumPy)."""
    if given is None:
        torch = _torch()
        if cuda:
            return torch.empty(shape, dtype=torch.int64, device=ref.device)
        if torch is not None and isinstance(ref, torch.Tensor):
            return torch.empty(shape, dtype=torch.int64)
        return np.empty(shape, dtype=np.int64)
    if cuda:
        try:
            if (given.dtype is _torch().int64 and given.is_cuda and given.shape == shape and
                    given.is_contiguous()):
                return given
        except AttributeError:
            pass
    i = _arrays.info(given, what)
    if i.shape != shape or i.dtype != "int64" or not i.contiguous or _is_cuda(i) != cuda:
        raise ValueError("symm: %s must be a contiguous int64 %s array of shape %s (got %s %s "
                         "on %s)" % (what, "CUDA" if cuda else "CPU", shape, i.dtype,
                                     tuple(i.shape), i.device[0]))
    return given


def _ptr(a):
    return _arrays.info(a).ptr if a is not None else None


def _routes(topk_idx, ref, dev):
    """topk_idx as a contiguous int64 (tokens, k) array where the call reads it (dev: the
    CUDA device, None on the CPU)."""
    if dev is not None:
        t = _arrays.on_device(topk_idx, _torch().int64, dev)
        if t is not None and t.dim() == 2:
            return t
    shape = tuple(topk_idx.shape) if hasattr(topk_idx, "shape") else np.shape(topk_idx)
    if len(shape) != 2:
        raise ValueError("symm: topk_idx must be 2-D (tokens, k), not of shape %s" % (shape,))
    if dev is not None:
        return _dev_array(topk_idx, _torch().int64, shape, ref, dev, "topk_idx")
    return _host_array(topk_idx, np.int64, shape, "topk_idx")


def _side_args(sides, tokens, out_rows, cuda):
    """The (side_in, side_out) pairs as the calls' array and its length: side_in with a row
    per token, side_out with out_rows rows (out's), both on input's device (cuda)."""
    sides = list(sides)
    if len(sides) > MOE_SIDE_MAX:
        raise ValueError("symm: %d side payloads (at most %d)" % (len(sides), MOE_SIDE_MAX))
    side = _SIDES[len(sides)]()
    for p, (s_in, s_out) in enumerate(sides):
        si, so = _arrays.dense(s_in, _SIDE_NAMES[p][0]), _arrays.dense(s_out, _SIDE_NAMES[p][1])
        rb = si.row_bytes()
        if not si.shape or not so.shape or rb != so.row_bytes():
            raise ValueError("symm: sides[%d]: in and out must have rows of the same size "
                             "(%s, %s)" % (p, tuple(si.shape), tuple(so.shape)))
        if si.shape[0] < tokens or so.shape[0] < out_rows:
            raise ValueError("symm: sides[%d]: in needs a row per token (%d) and out a row per "
                             "row of out (%d), not %s and %s"
                             % (p, tokens, out_rows, tuple(si.shape), tuple(so.shape)))
        if (si.device[0] == "cuda") != cuda or (so.device[0] == "cuda") != cuda:
            raise ValueError("symm: sides[%d] must be on the same device as input" % p)
        e = side[p]
        e.in_, e.out, e.row_bytes = (si.ptr if si.nbytes else None,
                                     so.ptr if so.nbytes else None, rb)
    return side, len(sides)


def moe_topk_dispatch(input, out, topk_idx, ne, major_align=0, sides=(), out_counts=None,
                      out_offsets=None, out_src=None, topk_rows=None, out_rows=None, team=None,
                      pool=None, workers=0, workspace=None):
    """Top-k MoE dispatch: token t (row t of input, symmetric) goes to every PE holding one
    of its experts topk_idx[t] (tokens x k global expert ids, PE j's local expert e being
    j*ne + e; -1: none), and lands there once per slot in that expert's segment of out
    (expert-major; within a segment by source PE, token, slot; segments start at multiples
    of major_align, 0: packed). sides: (side_in, side_out) pairs of per-token rows carried
    along (fp8 scales, ...): side_in symmetric with a row per token, side_out with out's
    rows. out_src: an int64 (out rows, 2) array that gets each row's source (viewed as
    int32, columns 0 and 1 are the PE and the slot; column 1 of the int64 view the
    token; -1 for padding). Outputs given (out_counts, out_offsets, topk_rows, out_rows:
    contiguous int64 on input's device) are written in place, else made. Returns
    TopkDispatch(counts, offsets, rows, topk_rows, src). CUDA tensors need
    workspace=symm.cuda_topk_workspace(...)."""
    n, i, o = _moe_args(input, out, team, pool)
    cuda = _is_cuda(i)
    idx = _routes(topk_idx, input, i.device[1] if cuda else None)
    tokens, k = idx.shape
    ne = int(ne)
    if tokens > i.shape[0]:
        raise ValueError("symm: topk_idx routes %d tokens but input has %d rows"
                         % (tokens, i.shape[0]))
    side, nside = _side_args(sides, tokens, o.shape[0], cuda)
    counts = _out(out_counts, input, (ne,), "out_counts", cuda)
    offsets = _out(out_offsets, input, (ne,), "out_offsets", cuda)
    rows_of = _out(topk_rows, input, (tokens, k), "topk_rows", cuda)
    src = None if out_src is None else _out(out_src, input, (o.shape[0], 2), "out_src", cuda)
    in_ptr = i.ptr if i.nbytes else None
    nrows_out = None if out_rows is None else _out(out_rows, input, (1,), "out_rows", cuda)
    if cuda:
        nrows = nrows_out if nrows_out is not None else _out(None, input, (1,), "", True)
        ws = _topk_ws(workspace, n, ne, tokens, k)
        p = pool.handle if pool is not None else _cuda.stream_pool(handle_of(team))
        check(_cuda.lib().symm_moe_topk_dispatch_on_stream(
            p, o.ptr, o.shape[0], in_ptr, tokens, i.row_bytes(), idx.data_ptr(), k, ne,
            int(major_align), side, nside, counts.data_ptr(), offsets.data_ptr(),
            None if src is None else src.data_ptr(), nrows.data_ptr(), rows_of.data_ptr(), ws,
            int(workers), _cuda.stream()))
        return _new_dispatch(TopkDispatch, (counts, offsets, nrows, rows_of, src))
    nrows = ctypes.c_size_t(0)
    _run(team, pool, workers, lib.symm_moe_topk_dispatch, lib.symm_moe_topk_dispatch_parallel,
         o.ptr, o.shape[0], in_ptr, tokens, i.row_bytes(), idx.ctypes.data if idx.size else None,
         k, ne, int(major_align), side, nside, _ptr(counts), _ptr(offsets), _ptr(src),
         ctypes.addressof(nrows), _ptr(rows_of))
    if nrows_out is not None:
        nrows_out[0] = nrows.value
    return TopkDispatch(counts, offsets, nrows.value, rows_of, src)


def moe_topk_combine(input, out, topk_idx, topk_rows, ne, topk_weights=None, in_rows=None,
                     team=None, pool=None, workers=0, workspace=None):
    """Weighted combine, the way back: input (symmetric, laid out as the dispatch's out:
    row r the expert's result for the token that landed at row r; float32, float16 or
    bfloat16) is read by the tokens' home PEs; out[t] = sum over the slots i with
    topk_idx[t, i] >= 0, in slot order, of topk_weights[t, i] x that row, accumulated in
    float and rounded once (weights None: a plain sum; a token with no expert: zeros).
    topk_idx and topk_rows are the dispatch's; in_rows (default: input's rows) bounds
    the rows other PEs may read. CUDA tensors need workspace=."""
    n, i, o = _moe_args(input, out, team, pool)  # input and out of one dtype
    if i.type not in _COMBINE_TYPES:
        raise TypeError("symm: moe_topk_combine: rows of %s (float32, float16 or bfloat16)"
                        % i.dtype)
    cuda = i.device[0] == "cuda"
    idx = _routes(topk_idx, input, i.device[1] if cuda else None)
    tokens, k = idx.shape
    ne = int(ne)
    if o.shape[0] < tokens:
        raise ValueError("symm: out has %d rows for %d tokens" % (o.shape[0], tokens))
    hidden = i.row_bytes() // i.itemsize
    in_rows = i.shape[0] if in_rows is None else int(in_rows)
    if in_rows > i.shape[0]:
        raise ValueError("symm: in_rows %d but input has %d rows" % (in_rows, i.shape[0]))
    in_ptr = i.ptr if i.nbytes and in_rows else None
    if cuda:
        torch = _torch()
        dev = i.device[1]
        rows_of = _dev_array(topk_rows, torch.int64, (tokens, k), input, dev, "topk_rows")
        w = None if topk_weights is None else _dev_array(topk_weights, torch.float32,
                                                         (tokens, k), input, dev,
                                                         "topk_weights")
        ws = _topk_ws(workspace, n, ne, tokens, k)
        p = pool.handle if pool is not None else _cuda.stream_pool(handle_of(team))
        check(_cuda.lib().symm_moe_topk_combine_on_stream(
            p, o.ptr, tokens, in_ptr, in_rows, hidden, i.type, idx.data_ptr(),
            rows_of.data_ptr(), None if w is None else w.data_ptr(), k, ne, ws, int(workers),
            _cuda.stream()))
        return out
    rows_of = _host_array(topk_rows, np.int64, (tokens, k), "topk_rows")
    w = None if topk_weights is None else _host_array(topk_weights, np.float32, (tokens, k),
                                                      "topk_weights")
    slots = tokens * k
    _run(team, pool, workers, lib.symm_moe_topk_combine, lib.symm_moe_topk_combine_parallel,
         o.ptr if o.nbytes else None, tokens, in_ptr, in_rows, hidden, i.type,
         idx.ctypes.data if slots else None, rows_of.ctypes.data if slots else None,
         None if w is None or not slots else w.ctypes.data, k, ne)
    return out


_WS_BYTES = {}  # symm_cuda_moe_topk_workspace_bytes by its arguments


def _topk_ws(workspace, n, ne, tokens, k):
    if workspace is None:
        raise ValueError("symm: the top-k calls on CUDA tensors take workspace="
                         "symm.cuda_topk_workspace(%d, %d, tokens, %d) (tokens: the most any "
                         "PE routes)" % (n, ne, k))
    ptr, nbytes = _arrays.span(workspace, "workspace")
    need = _WS_BYTES.get((n, ne, tokens, k))
    if need is None:
        need = _WS_BYTES[n, ne, tokens, k] = _cuda.lib().symm_cuda_moe_topk_workspace_bytes(
            n, ne, tokens, k)
    if nbytes < need:
        raise ValueError("symm: workspace has %d bytes; %d PEs x %d experts with %d tokens x "
                         "top-%d need %d" % (nbytes, n, ne, tokens, k, need))
    return ptr


def cuda_topk_workspace(n, ne, tokens, k):
    """The workspace of the top-k calls on CUDA tensors (workspace=) for a team of n PEs,
    ne experts per PE, up to `tokens` tokens per PE and top-k routing: a zeroed uint8
    tensor on the GPU heap. Collective over the world, like symm.empty. One call at a time
    uses it (calls on one stream may share it; dispatch and combine included)."""
    size = _cuda.lib().symm_cuda_moe_topk_workspace_bytes(int(n), int(ne), int(tokens), int(k))
    if size == 0:
        raise ValueError("symm: no top-k workspace for %d PEs x %d experts, %d tokens, k = %d "
                         "(k must be 1..32, ne >= 1)" % (n, ne, tokens, k))
    return _zeroed_workspace(size)


def _zeroed_workspace(size):
    """size zero bytes on the GPU heap, zeroed on every PE before any PE goes on (peers
    write into this PE's workspace from their first call on)."""
    from ._heap import zeros
    ws = zeros((size,), "uint8", device="cuda")
    _torch().cuda.current_stream().synchronize()
    check(lib.symm_barrier(0))
    return ws


# ---------------------------------------------------------------- low-latency forms
# DeepEP's low-latency layout: every (local expert e, source PE s) pair of a receiver owns
# max_tokens rows of out, from row (e*n + s)*max_tokens on. One kernel a call, no host
# synchronisation: for decode-sized calls, and capturable in CUDA graphs.


def _cuda_only(i, what):
    if i.device[0] != "cuda":
        raise ValueError("symm: %s runs on CUDA tensors only (input is on the CPU)" % what)
    return i.device[1]


def _ll_rows(name, a, rows, dtype, cols, dev):
    """a, a contiguous CUDA tensor of dtype with at least rows rows (of cols entries where
    cols is given), on CUDA device dev."""
    try:
        ok = (a.dtype is dtype and a.is_cuda and a.get_device() == dev and a.is_contiguous() and
              a.dim() == (1 if cols is None else 2) and a.shape[0] >= rows and
              (cols is None or a.shape[1] == cols))
    except AttributeError:
        ok = False
    if not ok:
        raise ValueError("symm: %s must be a contiguous %s CUDA tensor on device %d of at least "
                         "%d rows%s (got %s %s on %s)"
                         % (name, dtype, dev, rows, "" if cols is None else " x %d" % cols,
                            getattr(a, "dtype", type(a).__name__),
                            tuple(getattr(a, "shape", ())), getattr(a, "device", "?")))
    return a


def moe_topk_dispatch_ll(input, out, topk_idx, ne, max_tokens, out_counts, out_src, workspace,
                         sides=(), team=None, pool=None, blocks=0):
    """Low-latency top-k dispatch (DeepEP's low_latency_dispatch), CUDA tensors only: token t
    (row t of input) lands on every PE holding one of its experts topk_idx[t] (global ids,
    -1: none), at row (e*n + s)*max_tokens + r of that PE's out, e its local expert, s this
    PE, r the token's rank among this PE's tokens for that expert. out (at least
    n*ne*max_tokens rows), out_counts (int64, n*ne: out_counts[e*n + s], the rows from s
    for local expert e), out_src (int64, (out rows, 2), viewed as int32 its columns 0 and
    1 are the source PE and slot, column 1 of the int64 view the token) and the sides' outs
    are symmetric (symm.empty / symm.zeros on device="cuda"). max_tokens: at least the
    most tokens any PE has, and the most it routes to one expert; the same on every PE.
    workspace: symm.cuda_topk_ll_workspace(...), the same for the combine that follows
    (calls on it alternate: dispatch, combine, dispatch, ...). blocks: 0 for automatic.
    Returns (out_counts, out_src)."""
    n, i, o = _moe_args(input, out, team, pool)
    dev = _cuda_only(i, "moe_topk_dispatch_ll")
    torch = _torch()
    idx = _routes(topk_idx, input, dev)
    tokens, k = idx.shape
    ne, mt = int(ne), int(max_tokens)
    if tokens > i.shape[0]:
        raise ValueError("symm: topk_idx routes %d tokens but input has %d rows"
                         % (tokens, i.shape[0]))
    rows = n * ne * mt
    if o.shape[0] < rows:
        raise ValueError("symm: out has %d rows; %d PEs x %d experts x max_tokens %d need %d"
                         % (o.shape[0], n, ne, mt, rows))
    _ll_rows("out_counts", out_counts, n * ne, torch.int64, None, dev)
    _ll_rows("out_src", out_src, rows, torch.int64, 2, dev)
    side, nside = _side_args(sides, tokens, rows, True)
    ws = _arrays.span(workspace, "workspace")[0]
    p = pool.handle if pool is not None else _cuda.stream_pool(handle_of(team))
    check(_cuda.lib().symm_moe_topk_dispatch_ll_on_stream(
        p, o.ptr, i.ptr if i.nbytes else None, tokens, mt, i.row_bytes(), idx.data_ptr(), k,
        ne, side, nside, out_counts.data_ptr(), out_src.data_ptr(), ws, int(blocks),
        _cuda.stream()))
    return out_counts, out_src


def moe_topk_combine_ll(input, out, topk_idx, ne, max_tokens, counts, src, workspace,
                        topk_weights=None, team=None, pool=None, blocks=0):
    """Low-latency weighted combine (DeepEP's low_latency_combine), CUDA tensors only: input
    holds the experts' outputs laid out as the dispatch's out (float32, float16 or
    bfloat16, at least n*ne*max_tokens rows); out[t] = the sum over the slots i with
    topk_idx[t, i] >= 0, in slot order, of topk_weights[t, i] (float32; None: 1) x the row
    the token's expert produced, accumulated in float and rounded once. Where input is
    symmetric the token's home PE reads its rows in place (each row moves once); else
    every PE first pushes its rows to their tokens' homes. topk_idx, counts, src,
    max_tokens and workspace are the dispatch's. Returns out."""
    n, i, o = _moe_args(input, out, team, pool)  # input and out of one dtype
    if i.type not in _COMBINE_TYPES:
        raise TypeError("symm: moe_topk_combine_ll: rows of %s (float32, float16 or bfloat16)"
                        % i.dtype)
    dev = _cuda_only(i, "moe_topk_combine_ll")
    torch = _torch()
    idx = _routes(topk_idx, input, dev)
    tokens, k = idx.shape
    ne, mt = int(ne), int(max_tokens)
    rows = n * ne * mt
    if o.shape[0] < tokens:
        raise ValueError("symm: out has %d rows for %d tokens" % (o.shape[0], tokens))
    if i.shape[0] < rows:
        raise ValueError("symm: input has %d rows; %d PEs x %d experts x max_tokens %d need %d"
                         % (i.shape[0], n, ne, mt, rows))
    _ll_rows("counts", counts, n * ne, torch.int64, None, dev)
    _ll_rows("src", src, rows, torch.int64, 2, dev)
    w = None if topk_weights is None else _dev_array(topk_weights, torch.float32, (tokens, k),
                                                     input, dev, "topk_weights")
    ws = _arrays.span(workspace, "workspace")[0]
    p = pool.handle if pool is not None else _cuda.stream_pool(handle_of(team))
    check(_cuda.lib().symm_moe_topk_combine_ll_on_stream(
        p, o.ptr, tokens, i.ptr, mt, i.row_bytes() // i.itemsize, i.type, idx.data_ptr(),
        None if w is None else w.data_ptr(), k, ne, counts.data_ptr(), src.data_ptr(), ws,
        int(blocks), _cuda.stream()))
    return out


def cuda_topk_ll_workspace(n, ne, max_tokens, k, hidden=0, dtype="bfloat16"):
    """The workspace of the low-latency top-k calls (workspace=) for a team of n PEs, ne
    experts per PE, max_tokens and top-k routing, whose combine reduces rows of hidden
    entries of dtype (float32, float16 or bfloat16; hidden 0: no combine): a zeroed uint8
    tensor on the GPU heap. Collective over the world, like symm.empty. Its layout follows
    (n, ne, max_tokens, k): to serve another shape it is zeroed again on every PE before
    any PE's next call."""
    from ._heap import ITEMSIZE, _dtype_name
    name = _dtype_name(dtype)
    if TYPES[name] not in _COMBINE_TYPES:
        raise TypeError("symm: cuda_topk_ll_workspace: dtype %s (float32, float16 or bfloat16)"
                        % dtype)
    size = _cuda.lib().symm_cuda_moe_topk_ll_workspace_bytes(
        int(n), int(ne), int(max_tokens), int(k), int(hidden) * ITEMSIZE[name])
    if size == 0:
        raise ValueError("symm: no low-latency top-k workspace for %d PEs x %d experts, "
                         "max_tokens %d, k = %d (k must be 1..32, ne >= 1, max_tokens >= 1)"
                         % (n, ne, max_tokens, k))
    return _zeroed_workspace(size)
