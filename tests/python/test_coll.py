"""Every collective against a serial NumPy reference on random data: many sizes, every
type and op, roots, sub-teams."""
import numpy as np
import pytest

import symm
from util import data, fold, me, n

INT = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT = ["float16", "float32", "float64"]
SIZES = [1, 7, 64, 1000, 65537]


def ops_for(dtype):
    return ["sum", "prod", "min", "max"] + (["band", "bor", "bxor"] if dtype in INT else [])


@pytest.mark.parametrize("dtype", INT + FLOAT)
def test_all_reduce_every_type_and_op(dtype):
    for op in ops_for(dtype):
        for size in SIZES:
            x = symm.empty((size,), dtype)
            x[:] = data(size, dtype, 10, size, me())
            symm.all_reduce(x, op=op)
            want = fold([data(size, dtype, 10, size, p) for p in range(n())], op)
            np.testing.assert_array_equal(x, want, err_msg="%s %s %d" % (dtype, op, size))


def test_all_reduce_accepts_reduce_op_names():
    x = symm.empty((3, 33), "int32")
    for op, name in (("SUM", "sum"), ("Max", "max"), ("and", "band"), ("product", "prod")):
        x[...] = data((3, 33), "int32", 11, me()) % 1000
        symm.all_reduce(x, op)
        want = fold([data((3, 33), "int32", 11, p) % 1000 for p in range(n())], name)
        np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("size", SIZES)
def test_broadcast(size):
    x = symm.empty((size,), "float64")
    for root in range(n()):
        x[:] = data(size, "float64", 12, root, me())
        symm.broadcast(x, src=root)
        np.testing.assert_array_equal(x, data(size, "float64", 12, root, root))


@pytest.mark.parametrize("size", SIZES)
def test_reduce_only_dst_changes(size):
    x = symm.empty((size,), "int64")
    for root in range(n()):
        mine = data(size, "int64", 13, root, me())
        x[:] = mine
        symm.reduce(x, dst=root, op="sum")
        if me() == root:
            np.testing.assert_array_equal(x, fold([data(size, "int64", 13, root, p)
                                                   for p in range(n())], "sum"))
        else:
            np.testing.assert_array_equal(x, mine)
        symm.barrier()


@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
@pytest.mark.parametrize("count", [1, 5, 300])
def test_reduce_scatter(dtype, count):
    out = symm.empty((count,), dtype)
    inp = symm.empty((n() * count,), dtype)
    inp[:] = data(n() * count, dtype, 14, count, me())
    symm.reduce_scatter(out, inp, op="max")
    full = fold([data(n() * count, dtype, 14, count, p) for p in range(n())], "max")
    np.testing.assert_array_equal(out, full[me() * count:(me() + 1) * count])
    bad = symm.empty((count + 1,), dtype)
    with pytest.raises(ValueError):
        symm.reduce_scatter(bad, inp, op="sum")


@pytest.mark.parametrize("shape", [(1,), (17,), (5, 9), (4000,)])
def test_all_gather(shape):
    inp = symm.empty(shape, "uint16")
    out = symm.empty((n(),) + shape, "uint16")
    inp[...] = data(shape, "uint16", 15, me())
    symm.all_gather_into_tensor(out, inp)
    for p in range(n()):
        np.testing.assert_array_equal(out[p], data(shape, "uint16", 15, p))


@pytest.mark.parametrize("block", [1, 3, 1024])
def test_all_to_all(block):
    inp = symm.empty((n() * block,), "float32")
    out = symm.empty((n() * block,), "float32")
    inp[:] = data(n() * block, "float32", 16, block, me())
    symm.all_to_all(out, inp)
    for p in range(n()):
        src = data(n() * block, "float32", 16, block, p)
        np.testing.assert_array_equal(out[p * block:(p + 1) * block],
                                      src[me() * block:(me() + 1) * block])
    rows = symm.all_to_all_single(out, inp)
    assert rows == [block] * n()


def splits_of(pe, tag, hi=5):
    return [int(v) for v in np.random.default_rng([tag, pe]).integers(0, hi, size=n())]


@pytest.mark.parametrize("tag", range(5))
def test_all_to_all_single_with_splits(tag):
    cols = 3
    inp = symm.empty((5 * n(), cols), "int32")
    out = symm.empty((5 * n(), cols), "int32")
    out[...] = -1
    mine = splits_of(me(), tag)
    rows = sum(mine)
    inp[:rows] = data((rows, cols), "int32", 17, tag, me())
    want_in = [splits_of(p, tag)[me()] for p in range(n())]
    got = symm.all_to_all_single(out, inp, output_split_sizes=want_in, input_split_sizes=mine)
    assert got == want_in
    at = 0
    for p in range(n()):
        sp = splits_of(p, tag)
        src = data((sum(sp), cols), "int32", 17, tag, p)
        start = sum(sp[:me()])
        np.testing.assert_array_equal(out[at:at + sp[me()]], src[start:start + sp[me()]])
        at += sp[me()]
    assert (out[at:] == -1).all()
    with pytest.raises(ValueError, match="output_split_sizes"):
        symm.all_to_all_single(out, inp, output_split_sizes=[w + 1 for w in want_in],
                               input_split_sizes=mine)


def test_all_to_all_single_output_too_small_fails_everywhere():
    inp = symm.empty((4 * n(), 2), "float64")
    out = symm.empty((4 * n(), 2), "float64")
    small = out[:1] if me() == 0 else out
    with pytest.raises(symm.SymmError) as e:
        symm.all_to_all_single(small, inp, input_split_sizes=[2] * n())
    assert e.value.name == "SYMM_ERR_OVERFLOW" or me() != 0
    symm.barrier()


def test_collectives_on_sub_teams():
    even = symm.WORLD.split_strided(0, 2, (n() + 1) // 2)
    odd = symm.WORLD.split_strided(1, 2, n() // 2) if n() > 1 else None
    mine = even if me() % 2 == 0 else odd
    assert (even is None) == (me() % 2 == 1)
    x = symm.empty((333,), "float32")
    x[:] = data(333, "float32", 18, me())
    if mine is not None:
        symm.all_reduce(x, team=mine)
        members = mine.world_ranks()
        assert members == list(range(me() % 2, n(), 2))
        np.testing.assert_array_equal(x, fold([data(333, "float32", 18, p) for p in members],
                                              "sum"))
        symm.broadcast(x, src=mine.n_pes() - 1, team=mine)
        mine.barrier()
        mine.destroy()
    if odd is not None and mine is not odd:
        raise AssertionError("an even PE got the odd team")
    symm.barrier()
