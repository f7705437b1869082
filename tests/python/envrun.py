"""envrun.py -n N [--] command ... — starts N processes of command as torchrun starts its
workers on one host: each alone, with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR and MASTER_PORT (a free port on 127.0.0.1). When one fails, the
others are stopped (as torchrun's agent does). Exits with the first failure's status, or
0. --mps-share gives each process an equal share of the GPU they share under CUDA MPS
(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / N), as NVSHMEM needs to run several PEs on one
GPU."""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, required=True)
    ap.add_argument("--grace", type=float, default=10.0,
                    help="seconds the others get after one fails")
    ap.add_argument("--mps-share", action="store_true",
                    help="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / N in every process")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    port = free_port()
    procs = []
    for r in range(a.n):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.n),
                   LOCAL_WORLD_SIZE=str(a.n), GROUP_RANK="0", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        if a.mps_share:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(max(100 // a.n, 1))
        procs.append(subprocess.Popen(cmd, env=env))
    status, deadline = 0, None
    while any(p.poll() is None for p in procs):
        for r, p in enumerate(procs):
            rc = p.poll()
            if rc not in (None, 0) and status == 0:
                status = rc if rc > 0 else 128 - rc
                print("envrun: rank %d exited with %d; stopping the others" % (r, rc),
                      file=sys.stderr)
                deadline = time.monotonic() + a.grace
        if deadline is not None and time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
        time.sleep(0.05)
    for r, p in enumerate(procs):
        if p.returncode != 0 and status == 0:
            status = p.returncode if p.returncode > 0 else 128 - p.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
