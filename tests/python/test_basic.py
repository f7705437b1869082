"""Start-up, symmetric arrays on the heap, peers' copies, the heap's collective freeing,
errors as exceptions."""
import gc
import os

import numpy as np
import pytest

import symm
from util import data, me, n

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "float32", "float64"]


def test_world():
    assert symm.initialized()
    # The launcher's numbering: symmrun's, torchrun-style, or mpirun's.
    for rank, size in (("SYMM_RANK", "SYMM_NPES"), ("RANK", "WORLD_SIZE"),
                       ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if os.environ.get(rank):
            assert (me(), n()) == (int(os.environ[rank]), int(os.environ[size]))
            break
    else:
        assert (me(), n()) == (0, 1)
    assert symm.WORLD.my_pe() == me() and symm.WORLD.n_pes() == n()
    # NODE: the PEs of this host (all of them, unless SYMM_HOSTS splits the job).
    node = symm.NODE.world_ranks()
    assert me() in node and 1 <= len(node) <= n()
    assert len(node) == n() or os.environ.get("SYMM_HOSTS", "1") != "1"
    assert symm.WORLD.world_ranks() == list(range(n()))


def test_init_twice_raises():
    with pytest.raises(symm.SymmError) as e:
        symm.init()
    assert e.value.name == "SYMM_ERR_ALREADY_INITIALIZED"
    assert "twice" in str(e.value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (2, 3, 4), (1000,)])
def test_empty_and_peer(dtype, shape):
    x = symm.empty(shape, dtype)
    assert isinstance(x, np.ndarray) and x.shape == shape and x.dtype == np.dtype(dtype)
    x[...] = data(shape, dtype, 1, me())
    symm.barrier()
    node = symm.NODE.world_ranks()
    for p in range(n()):
        if p not in node:  # another host (SYMM_HOSTS): no load or store reaches it
            with pytest.raises(ValueError, match="another host"):
                symm.peer(x, p)
            continue
        y = symm.peer(x, p)
        assert y.shape == shape
        np.testing.assert_array_equal(y, data(shape, dtype, 1, p))
    symm.barrier()
    # Stores through a peer's copy land in its array: each PE writes its right neighbour
    # on this host.
    k, m = symm.NODE.my_pe(), symm.NODE.n_pes()
    right = symm.peer(x, (k + 1) % m, team=symm.NODE)
    right[...] = data(shape, dtype, 2, me())
    symm.barrier()
    np.testing.assert_array_equal(x, data(shape, dtype, 2, node[(k - 1) % m]))
    symm.barrier()


def test_peer_of_a_view_and_team_numbering():
    x = symm.zeros((6, 8), "int32")
    assert not x.any()
    x[...] = data((6, 8), "int32", 3, me())
    symm.barrier()
    v = x[1:5, 2:7]
    node = symm.NODE.world_ranks()
    for p in node:
        np.testing.assert_array_equal(symm.peer(v, p), data((6, 8), "int32", 3, p)[1:5, 2:7])
    rev = symm.new_team(list(reversed(range(n()))))
    for p in range(n()):
        if n() - 1 - p in node:
            np.testing.assert_array_equal(symm.peer(x, p, team=rev),
                                          data((6, 8), "int32", 3, n() - 1 - p))
    symm.barrier()
    rev.destroy()


def test_peer_of_foreign_array_raises():
    with pytest.raises(ValueError, match="not on symm's heap"):
        symm.peer(np.zeros(4), 0)
    x = symm.empty(4, "float32")
    with pytest.raises(symm.SymmError) as e:
        symm.peer(x, n())
    assert e.value.status < 0


def test_heap_frees_what_every_pe_dropped():
    gc.collect()
    symm.collect_garbage()
    base = symm.heap_info()["heap_used"]
    keep = []
    for i in range(200):
        a = symm.empty((100 + i,), "float64")
        a[:] = i
        if i % 3 == 0:
            keep.append(a)
    del a
    gc.collect()
    symm.collect_garbage()
    kept = symm.heap_info()["heap_used"]
    assert kept > base
    # PEs drop different arrays (PE p the p-th kept one): only what every PE let go of is
    # freed, the rest waits.
    assert len(keep) == 67
    del keep[me() % len(keep)]
    gc.collect()
    freed = symm.collect_garbage()
    assert freed == (1 if n() == 1 else 0)
    assert (symm.heap_info()["heap_used"] < kept) == (n() == 1)
    for a in keep:
        assert a[0] == a[-1]
    del keep, a
    gc.collect()
    assert symm.collect_garbage() == 67 - (1 if n() == 1 else 0)
    assert symm.heap_info()["heap_used"] == base


def test_heap_many_cycles_flat():
    gc.collect()
    symm.collect_garbage()
    base = symm.heap_info()["heap_used"]
    for i in range(2000):
        a = symm.empty((i % 97 + 1, 3), "float32")
        a[0, 0] = i
        del a
    gc.collect()
    symm.collect_garbage()
    assert symm.heap_info()["heap_used"] == base


def test_heap_mismatch_raises_on_every_pe():
    # One PE asks for another size: symm_malloc's agreement fails everywhere, nothing is
    # allocated, and the next allocation works.
    used = symm.heap_info()["heap_used"]
    with pytest.raises(symm.SymmError) as e:
        symm.empty((10 + (me() == n() - 1),), "float32") if n() > 1 else symm.empty(1 << 40)
    assert e.value.name in ("SYMM_ERR_MISMATCH", "SYMM_ERR_NO_MEMORY")
    assert symm.heap_info()["heap_used"] == used
    x = symm.empty(5, "float32")
    assert x.shape == (5,)


def test_bad_arguments_raise():
    with pytest.raises(TypeError):
        symm.empty(3, "complex64")
    with pytest.raises(ValueError):
        symm.empty((-1,), "float32")
    with pytest.raises(ValueError):
        symm.empty((1 << 62,), "float32")
    with pytest.raises(ValueError):
        symm.empty(3, "float32", device="tpu")
    torch = symm._arrays.torch_module()
    if torch is None or not torch.cuda.is_available():
        # Without torch, a GPU or symm's CUDA part, a CUDA array is refused with the reason.
        with pytest.raises((ValueError, ImportError, symm.SymmError)):
            symm.empty(3, "float32", device="cuda")
    with pytest.raises(TypeError):
        symm.all_reduce([1, 2, 3])
    x = symm.empty((4, 4), "float32")
    with pytest.raises(ValueError, match="contiguous"):
        symm.all_reduce(x[:, 1])
    with pytest.raises(ValueError):
        symm.all_reduce(x, op="avg")


def test_symm_errors_carry_the_message():
    local = np.ones(8, dtype=np.float32)
    with pytest.raises(symm.SymmError) as e:
        symm.all_reduce(local)
    assert e.value.name == "SYMM_ERR_NOT_SYMMETRIC"
    assert "symmetric heap" in str(e.value) and "PE %d" % me() in str(e.value)
    # The team stays in step: the next call works.
    x = symm.empty(8, "float32")
    x[:] = 1
    symm.all_reduce(x)
    assert (x == n()).all()
    # A root out of range fails on every member alike.
    with pytest.raises(symm.SymmError) as e:
        symm.broadcast(x, src=n())
    assert e.value.status < 0
    symm.barrier()


def test_init_finalize_init_in_a_fresh_process():
    # A 1-PE job of its own: arrays that outlive symm.finalize never free the objects at
    # their addresses in the next symm.init's heap.
    import subprocess
    import sys
    keep = ("PATH", "PYTHONPATH", "SYMM_LIBRARY", "HOME", "LD_LIBRARY_PATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    code = (
        "import gc, symm\n"
        "symm.set_default_backend('numpy')\n"
        "symm.init(); a = symm.empty(100, 'float64'); symm.finalize()\n"
        "symm.init(); b = symm.empty(100, 'float64'); b[:] = 5\n"
        "del a; gc.collect()\n"
        "assert symm.collect_garbage() == 0 and symm.heap_info()['heap_used'] > 0\n"
        "assert (b == 5).all(); del b; gc.collect(); assert symm.collect_garbage() == 1\n"
        "symm.finalize(); print('ok', symm.n_pes())\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["ok", "-1"], r.stdout + r.stderr


def test_init_with_a_store_in_fresh_processes():
    # Two processes of a job of their own start through symm.init(store=..., rank=...,
    # world_size=...) on the package's TCP store, reduce, and finish; a third process in
    # another network namespace would be refused (the C tests cover that).
    if me() != 0:
        pytest.skip("PE 0 runs the fresh job")
    import socket
    import subprocess
    import sys
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    keep = ("PATH", "PYTHONPATH", "SYMM_LIBRARY", "HOME", "LD_LIBRARY_PATH")
    env = {k: v for k, v in os.environ.items() if k in keep}
    code = (
        "import sys, symm\n"
        "from symm._boot import TCPStore\n"
        "r = int(sys.argv[1])\n"
        "store = TCPStore('127.0.0.1', %d, is_server=(r == 0))\n"
        "symm.set_default_backend('numpy')\n"
        "symm.init(store=store, rank=r, world_size=2)\n"
        "x = symm.empty(5, 'int64'); x[:] = r + 1; symm.all_reduce(x)\n"
        "assert (x == 3).all() and symm.my_pe() == r and symm.n_pes() == 2\n"
        "del x; symm.finalize(); store.close(); print('ok', r)\n" % port)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0 and out.split()[-2:] == ["ok", str(r)], out


def test_prepare_refuses_cpu_arrays_and_runs_nothing():
    x = symm.empty((5,), "float64")
    x[:] = data(5, "float64", 91, me())
    with pytest.raises(ValueError, match="CUDA tensors"):
        symm.prepare(symm.all_reduce, x)
    with pytest.raises(ValueError, match="CUDA tensors"):
        symm.prepare(symm.barrier)
    # nothing ran: x is this PE's own data still, and every PE is still in step
    np.testing.assert_array_equal(x, data(5, "float64", 91, me()))
    symm.barrier()
