"""Top-k MoE dispatch and weighted combine on CPU arrays against a NumPy model: random
routings (distinct experts, repeats, -1 slots, tokens routed nowhere, a PE with no tokens),
k 1..8, side payloads, major_align 0/1/4, plain and on a pool's workers; errors that one PE
makes fail every PE."""
import numpy as np
import pytest

import symm
from util import me, n, rng

COLS, SIDE_COLS = 5, 3


@pytest.fixture(scope="module")
def pool():
    p = symm.WORLD.pool(4)
    yield p
    p.destroy()


def tokens_of(s, tag, maxtok):
    if s == n() - 1 and tag % 3 == 0:
        return 0  # a PE with no tokens
    return int(rng(80, tag, s).integers(0, maxtok + 1))


def routes_of(s, tag, maxtok, k, ne):
    """PE s's routes: tokens x k global experts, -1 for an empty slot."""
    r = rng(81, tag, s)
    T, E = tokens_of(s, tag, maxtok), n() * ne
    idx = np.full((T, k), -1, dtype=np.int64)
    for t in range(T):
        kind = r.integers(0, 6)
        if kind == 0:
            continue  # routed nowhere
        if kind <= 2 and E >= k:
            idx[t] = r.permutation(E)[:k]  # distinct experts
        else:
            idx[t] = r.integers(0, E, size=k)  # repeats allowed
        idx[t][r.integers(0, 4, size=k) == 0] = -1  # empty slots here and there
    return idx


def rows_of(s, tag, T, cols, dtype, p=0):
    return (rng(82, tag, s, p).integers(-1000, 1000, size=(T, cols))).astype(dtype)


def layout(tag, maxtok, k, ne, align, j):
    """PE j's layout: counts, offsets, rows (padding included), the source (pe, slot,
    token) of every row and, per source s, where its slots routed to j land."""
    counts, offsets, src = np.zeros(ne, np.int64), np.zeros(ne, np.int64), []
    landed = {s: {} for s in range(n())}
    R = [routes_of(s, tag, maxtok, k, ne) for s in range(n())]
    pos = 0
    for e in range(ne):
        g = j * ne + e
        offsets[e] = pos
        for s in range(n()):
            for q in np.flatnonzero(R[s].reshape(-1) == g):
                landed[s][int(q)] = pos
                src.append((s, int(q) % k, int(q) // k))
                pos += 1
        counts[e] = pos - offsets[e]
        if align:
            pos = offsets[e] + max(-(-counts[e] // align) * align, align)
            src += [(-1, -1, -1)] * int(pos - offsets[e] - counts[e])
    return counts, offsets, pos, src, landed


def weight(s, t, i, tag):
    return (int(rng(83, tag, s, t).integers(1, 257, size=8)[i]) / 256.0)


def expert_value(g, s, t, tag, cols):
    """Expert g's output for token t of PE s: multiples of 1/16 in [-8, 8), so that the
    weighted sums are exact in float and round once."""
    return rng(84, tag, g, s, t).integers(-128, 128, size=cols) / 16.0


CASES = [(k, ne, align) for k, ne, align in
         [(1, 1, 0), (2, 3, 1), (3, 2, 4), (4, 5, 0), (5, 1, 1), (6, 4, 4), (7, 2, 0),
          (8, 3, 1), (8, 1, 0)]]


@pytest.mark.parametrize("k,ne,align", CASES)
@pytest.mark.parametrize("use_pool", [False, True])
def test_topk_dispatch_combine(k, ne, align, use_pool, pool):
    tag, maxtok = k * 100 + ne * 10 + align, 12
    idx = routes_of(me(), tag, maxtok, k, ne)
    T = len(idx)
    counts, offsets, total, src, _ = layout(tag, maxtok, k, ne, align, me())
    # The experts' outputs are symmetric: as many rows on every PE.
    cap = max(layout(tag, maxtok, k, ne, align, j)[2] for j in range(n())) + 3
    inp = symm.empty((maxtok, COLS), "int32")
    sin = symm.empty((maxtok, SIDE_COLS), "float32")
    sin2 = symm.empty((maxtok, 1), "uint8")
    inp[:T] = rows_of(me(), tag, T, COLS, "int32")
    sin[:T] = rows_of(me(), tag, T, SIDE_COLS, "float32", 1)
    sin2[:T] = rows_of(me(), tag, T, 1, "uint8", 2)
    out = np.full((cap, COLS), -7, np.int32)
    sout = np.full((cap, SIDE_COLS), -7, np.float32)
    sout2 = np.full((cap, 1), 7, np.uint8)
    osrc = np.full((cap, 2), -9, np.int64)
    kw = {"pool": pool, "workers": 0 if k % 2 else 3} if use_pool else {}
    symm.barrier()
    res = symm.moe_topk_dispatch(inp, out, idx, ne, major_align=align,
                                 sides=[(sin, sout), (sin2, sout2)], out_src=osrc, **kw)
    np.testing.assert_array_equal(res.counts, counts)
    np.testing.assert_array_equal(res.offsets, offsets)
    assert res.rows == total and res.src is osrc
    v = osrc.view(np.int32)
    for r, (s, slot, t) in enumerate(src):
        assert (v[r, 0], v[r, 1], osrc[r, 1]) == (s, slot, t), r
        if s < 0:  # padding: not written
            assert (out[r] == -7).all() and (sout[r] == -7).all()
            continue
        Ts = tokens_of(s, tag, maxtok)
        np.testing.assert_array_equal(out[r], rows_of(s, tag, Ts, COLS, "int32")[t])
        np.testing.assert_array_equal(sout[r], rows_of(s, tag, Ts, SIDE_COLS, "float32", 1)[t])
        np.testing.assert_array_equal(sout2[r], rows_of(s, tag, Ts, 1, "uint8", 2)[t])
    assert (out[total:] == -7).all()
    # topk_rows: where each of my slots landed on its expert's PE (-1: no expert).
    want_rows = np.full((T, k), -1, np.int64)
    for j in range(n()):
        landed = layout(tag, maxtok, k, ne, align, j)[4][me()]
        for q, row in landed.items():
            want_rows[q // k, q % k] = row
    np.testing.assert_array_equal(res.topk_rows, want_rows)

    # Combine: the experts' outputs laid out as out, weighted back to their tokens.
    for dtype in ("float32", "float16"):
        eo = symm.empty((cap, COLS), dtype)
        eo[...] = 99
        for r, (s, slot, t) in enumerate(src):
            if s >= 0:
                g = me() * ne + int(np.searchsorted(offsets, r, side="right")) - 1
                eo[r] = expert_value(g, s, t, tag, COLS)
        w = np.array([[weight(me(), t, i, tag) for i in range(k)] for t in range(T)],
                     np.float32).reshape(T, k)
        for weights in (w, None):
            back = np.full((T + 1, COLS), 5, dtype)
            symm.barrier()
            got = symm.moe_topk_combine(eo, back, idx, res.topk_rows, ne, topk_weights=weights,
                                        in_rows=total, **kw)
            assert got is back
            want = np.zeros((T, COLS), np.float32)
            for t in range(T):
                for i in range(k):
                    g = idx[t, i]
                    if g >= 0:
                        x = expert_value(g, me(), t, tag, COLS).astype(dtype).astype(np.float32)
                        want[t] += np.float32(1 if weights is None else w[t, i]) * x
            np.testing.assert_array_equal(back[:T], want.astype(dtype))
            assert (back[T:] == 5).all()
    symm.barrier()


def test_topk_torch_style_arguments():
    """Lists for topk_idx and outputs given by the caller, written in place."""
    ne, k = 2, 2
    idx = [[(me() + 1) % n() * ne, -1], [me() * ne + 1, (me() + 1) % n() * ne]]
    inp = symm.empty((2, 4), "int64")
    inp[...] = np.arange(8).reshape(2, 4) + 100 * me()
    out = np.zeros((8, 4), np.int64)
    counts, offs, rows = np.zeros(ne, np.int64), np.zeros(ne, np.int64), np.zeros((2, k), np.int64)
    res = symm.moe_topk_dispatch(inp, out, idx, ne, out_counts=counts, out_offsets=offs,
                                 topk_rows=rows)
    assert res.counts is counts and res.offsets is offs and res.topk_rows is rows
    left = (me() - 1) % n()
    # My expert 0 gets two rows from my left neighbour (or my own, with one PE).
    assert counts[0] == 2 and counts[1] == 1 and res.rows == 3
    np.testing.assert_array_equal(out[0], np.arange(4) + 100 * left)
    np.testing.assert_array_equal(out[1], np.arange(4, 8) + 100 * left)
    np.testing.assert_array_equal(out[2], np.arange(4, 8) + 100 * me())
    assert rows[0, 1] == -1
    symm.barrier()


def test_topk_errors_fail_every_pe():
    ne, k = 2, 2
    inp = symm.empty((4, 3), "float32")
    out = np.zeros((64, 3), np.float32)
    idx = np.full((4, k), -1, np.int64)
    idx[:, 0] = 0
    # A bad expert id on the last PE: every PE fails, that PE saying which token.
    bad = idx.copy()
    if me() == n() - 1:
        bad[2, 1] = n() * ne
    with pytest.raises(symm.SymmError) as e:
        symm.moe_topk_dispatch(inp, out, bad, ne)
    assert e.value.name == "SYMM_ERR_INVALID_ARG"
    assert me() != n() - 1 or "token 2" in str(e.value)
    # PE 0 receives 4 rows from every PE: an out of 1 row on PE 0 fails everyone.
    small = out[:1] if me() == 0 else out
    with pytest.raises(symm.SymmError) as e:
        symm.moe_topk_dispatch(inp, small, idx, ne)
    assert e.value.name == "SYMM_ERR_OVERFLOW"
    # Mistakes Python sees.
    with pytest.raises(ValueError, match="2-D"):
        symm.moe_topk_dispatch(inp, out, idx[:, 0], ne)
    with pytest.raises(ValueError, match="rows"):
        symm.moe_topk_dispatch(inp, out, np.zeros((5, k), np.int64), ne)
    with pytest.raises(TypeError):
        symm.moe_topk_combine(symm.empty((4, 3), "int32"), np.zeros((4, 3), np.int32), idx,
                              idx, ne)
    symm.barrier()
