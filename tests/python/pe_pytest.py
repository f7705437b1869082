"""pe_pytest.py [pytest arguments] — pytest as one PE of a job: PE 0 prints as usual; the
others keep their output and print it (each line marked with the PE) only if they fail,
so a job's log reads as one run. The PE comes from SYMM_RANK (symmrun), RANK
(torchrun-style) or OMPI_COMM_WORLD_RANK / PMI_RANK (mpirun)."""
import os
import sys
import tempfile

import pytest


def launch_rank():
    for var in ("SYMM_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        if os.environ.get(var):
            return int(os.environ[var])
    return 0


def main():
    rank = launch_rank()
    args = ["-p", "no:cacheprovider"] + sys.argv[1:]
    if rank == 0:
        return pytest.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        rc = pytest.main(args)
        sys.stdout.flush()
        sys.stderr.flush()
        if rc != 0:
            log.seek(0)
            text = log.read().decode("utf-8", "replace")
            os.write(saved, "".join("PE %d | %s\n" % (rank, line)
                                    for line in text.splitlines()).encode())
    return rc


if __name__ == "__main__":
    sys.exit(main())
