"""dist_check.py — symm beside torch.distributed, one PE per torch rank: run it as
`python tests/python/envrun.py -n 4 -- python tests/python/dist_check.py` (or under
torchrun). torch.distributed starts first (gloo, env://); symm.init then takes its rank
and store, and makes a team of a process group's ranks. Prints "dist_check: OK" on rank
0; exits non-zero on any failure. Skips (exit 0) where torch cannot be imported."""
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError:
    print("dist_check: SKIP: torch cannot be imported")
    sys.exit(0)

import symm


def main():
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    odd = [r for r in range(size) if r % 2 == 1]
    groups = {"odd": dist.new_group(odd)}
    team = symm.init(group=groups["odd"])
    assert (symm.my_pe(), symm.n_pes()) == (rank, size)
    assert (team is None) == (rank % 2 == 0)
    x = symm.empty((100,), torch.float32)
    assert isinstance(x, torch.Tensor)
    x.fill_(rank)
    if team is not None:
        assert team.world_ranks() == odd
        symm.all_reduce(x, team=team)
        assert (x == sum(odd)).all()
        team.destroy()
    # The same data through torch.distributed and symm agree.
    y = torch.full((100,), float(rank))
    dist.all_reduce(y)
    x.fill_(rank)
    symm.all_reduce(x)
    assert torch.equal(x, y)
    del x
    symm.finalize()
    dist.destroy_process_group()
    if rank == 0:
        print("dist_check: OK (%d ranks)" % size)


if __name__ == "__main__":
    main()
