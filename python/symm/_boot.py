"""_boot.py — symm.init: how this process finds the others.

- Started by symmrun (SYMM_BOOT_FD) or an MPI launcher: symm_init, as a C program would.
- Started torchrun-style (RANK and WORLD_SIZE set), or given a store: symm_init_exchange,
  with an allgather over a key-value store. The store is the one passed in, else
  torch.distributed's default store when torch.distributed is initialized, else a
  torch.distributed.TCPStore at MASTER_ADDR:MASTER_PORT when torch can be imported, else
  a small TCP store of this module's own on the same address (rank 0 serves it while
  symm starts). symm hands the memory between the PEs itself, over the host's sockets.
- Otherwise a 1-PE job.
A store is any object with set(key: str, value: bytes) and get(key: str) -> bytes, get
waiting until the key is set (torch.distributed.Store is one)."""

import ctypes
import os
import socket
import socketserver
import struct
import threading
import time

from . import _arrays
from ._lib import ALLGATHER_FN, Exchange, check, lib

_MPI_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
             "MV2_COMM_WORLD_SIZE")
_generation = [0]


def _env_int(name):
    v = os.environ.get(name)
    return int(v) if v not in (None, "") else None


def launcher():
    """Which start-up symm.init() takes in this environment: "symmrun", "mpi", "env"
    (torchrun-style RANK/WORLD_SIZE) or "none"."""
    if os.environ.get("SYMM_BOOT_FD"):
        return "symmrun"
    if any(os.environ.get(v) for v in _MPI_VARS):
        return "mpi"
    tasks = _env_int("SLURM_STEP_NUM_TASKS")
    if tasks and tasks > 1 and os.environ.get("SLURM_PROCID") is not None:
        return "mpi"
    if os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE") is not None:
        return "env"
    return "none"


# ---------------------------------------------------------------- a small TCP store
# Requests: b"S" key value (set) or b"G" key (get, answered once the key is set); keys
# and values as a 4-byte length and bytes. Answers: b"+" for a set; a length and bytes
# for a get.

def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("symm store: connection closed")
        buf += chunk
    return bytes(buf)


def _recv_blob(sock):
    (n,) = struct.unpack("!I", _recv_exact(sock, 4))
    return _recv_exact(sock, n)


def _blob(b):
    return struct.pack("!I", len(b)) + b


class _StoreServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr):
        self.data = {}
        self.cond = threading.Condition()
        super().__init__(addr, _StoreHandler)


class _StoreHandler(socketserver.BaseRequestHandler):
    def handle(self):
        srv, sock = self.server, self.request
        try:
            while True:
                op = sock.recv(1)
                if not op:
                    return
                key = _recv_blob(sock)
                if op == b"S":
                    value = _recv_blob(sock)
                    with srv.cond:
                        srv.data[key] = value
                        srv.cond.notify_all()
                    sock.sendall(b"+")
                else:
                    with srv.cond:
                        while key not in srv.data:
                            srv.cond.wait()
                        value = srv.data[key]
                    sock.sendall(_blob(value))
        except (ConnectionError, OSError):
            return


class TCPStore:
    """A key-value store over TCP on host:port; the process with is_server serves it. A
    stand-in for torch.distributed.TCPStore where torch is not installed."""

    def __init__(self, host, port, is_server, timeout=60.0):
        self.timeout = timeout
        self.server = None
        if is_server:
            self.server = _StoreServer((host, port))
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.create_connection((host, port), timeout=timeout)
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    raise ConnectionError("symm store: cannot reach %s:%d within %g s: %s"
                                          % (host, port, timeout, e))
                time.sleep(0.05)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def set(self, key, value):
        if isinstance(value, str):
            value = value.encode()
        self.sock.sendall(b"S" + _blob(key.encode()) + _blob(bytes(value)))
        if _recv_exact(self.sock, 1) != b"+":
            raise ConnectionError("symm store: bad answer to a set")

    def get(self, key):
        self.sock.sendall(b"G" + _blob(key.encode()))
        return _recv_blob(self.sock)

    def close(self):
        self.sock.close()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# ---------------------------------------------------------------- the exchange
class _StoreExchange:
    """symm_exchange_t's allgather over a store, under keys of one start-up."""

    def __init__(self, store, rank, npes, prefix):
        self.store, self.rank, self.npes, self.prefix = store, rank, npes, prefix
        self.round = 0
        self.error = None
        self.fn = ALLGATHER_FN(self._allgather)

    def _allgather(self, ctx, mine, all_, n):
        try:
            k = "%s/%d" % (self.prefix, self.round)
            self.round += 1
            self.store.set("%s/%d" % (k, self.rank), ctypes.string_at(mine, n))
            for p in range(self.npes):
                v = self.store.get("%s/%d" % (k, p))
                if len(v) != n:
                    raise ValueError("PE %d sent %d bytes in round %s, not %d" % (p, len(v), k, n))
                ctypes.memmove(all_ + p * n, v, n)
            return 0
        except Exception as e:  # the C side reports the failure, Python keeps why
            self.error = e
            return 1

    def done(self):
        """Every PE says it is through; the PE serving the store waits for all, so that
        it does not go away while another still reads."""
        self.store.set("%s/done/%d" % (self.prefix, self.rank), b"1")
        if self.rank == 0:
            for p in range(self.npes):
                self.store.get("%s/done/%d" % (self.prefix, p))


def _torch_default_store():
    torch = _arrays.torch_module()
    if torch is None:
        return None
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:
        return None


def _make_store(rank, npes, timeout):
    """The store of a torchrun-style start, and whether this process must close it."""
    store = _torch_default_store()
    if store is not None:
        return store, False
    host = os.environ.get("MASTER_ADDR")
    port = _env_int("MASTER_PORT")
    if host is None or port is None:
        raise RuntimeError("symm.init: RANK and WORLD_SIZE are set but MASTER_ADDR and "
                           "MASTER_PORT are not (or pass store=)")
    torch = _arrays.torch_module()
    if torch is not None:
        import datetime

        import torch.distributed as dist
        agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        return dist.TCPStore(host, port, npes, is_master=(rank == 0 and not agent),
                             timeout=datetime.timedelta(seconds=timeout),
                             wait_for_workers=False), False
    return TCPStore(host, port, is_server=(rank == 0), timeout=timeout), True


def init_exchange(store=None, rank=None, world_size=None, timeout=None):
    if lib.symm_initialized():
        check(lib.symm_init())  # symm's own "already initialized" error, no store touched
    rank = _env_int("RANK") if rank is None else int(rank)
    npes = _env_int("WORLD_SIZE") if world_size is None else int(world_size)
    if rank is None or npes is None:
        raise ValueError("symm.init: give rank and world_size, or set RANK and WORLD_SIZE")
    timeout = float(os.environ.get("SYMM_TIMEOUT", 60)) if timeout is None else timeout
    own = False
    if store is None:
        store, own = _make_store(rank, npes, timeout)
    _generation[0] += 1
    prefix = "symm/init/%d" % _generation[0]
    ex = _StoreExchange(store, rank, npes, prefix)
    c = Exchange(ctypes.sizeof(Exchange), rank, npes, ex.fn, None)
    st = lib.symm_init_exchange(ctypes.byref(c))
    try:
        ex.done()
    except Exception as e:
        if st == 0:
            raise
        ex.error = ex.error or e
    finally:
        if own:
            store.close()
    if st != 0 and ex.error is not None:
        from ._lib import SymmError, last_error
        raise SymmError(st, "%s (the store: %s: %s)" % (last_error(), type(ex.error).__name__,
                                                         ex.error))
    check(st)


def init(store=None, rank=None, world_size=None, timeout=None):
    how = "env" if store is not None or rank is not None else launcher()
    if how == "env":
        init_exchange(store, rank, world_size, timeout)
    else:
        check(lib.symm_init())
