"""torch_ops.py — symm's operations as torch custom ops (torch.library), so that they go
through torch.compile as single opaque calls: torch.ops.symm.<name>. Registered when this
module is imported (symm.init imports it where torch can be imported). Teams are passed
as their handle (Team.handle, an int; 0 is the world), pools likewise.

    torch.ops.symm.all_reduce_(t, "sum", 0)
    torch.ops.symm.all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, team, 1)
    torch.ops.symm.moe_topk_dispatch(inp, out, topk_idx, ne, 0, [], [], counts, offsets,
                                     rows, topk_rows, team)

Every op mutates its output arguments in place and returns nothing, as the
torch.distributed and torch.ops.symm_mem ops they mirror."""

from typing import List, Optional

import torch

from . import _moe_topk, _ops
from ._team import Pool

_NS = "symm"


def _team(team: int, pool: int):
    """(team, pool) keyword arguments of the _ops calls: a pool handle >= 0 wins."""
    return (None, Pool(pool)) if pool >= 0 else (team, None)


@torch.library.custom_op(_NS + "::barrier", mutates_args=())
def barrier(team: int) -> None:
    _ops.barrier(team)


@torch.library.custom_op(_NS + "::broadcast_", mutates_args=("tensor",))
def broadcast_(tensor: torch.Tensor, src: int, team: int) -> None:
    _ops.broadcast(tensor, src, team)


@torch.library.custom_op(_NS + "::all_reduce_", mutates_args=("tensor",))
def all_reduce_(tensor: torch.Tensor, op: str, team: int) -> None:
    _ops.all_reduce(tensor, op, team)


@torch.library.custom_op(_NS + "::reduce_", mutates_args=("tensor",))
def reduce_(tensor: torch.Tensor, dst: int, op: str, team: int) -> None:
    _ops.reduce(tensor, dst, op, team)


@torch.library.custom_op(_NS + "::reduce_scatter", mutates_args=("output",))
def reduce_scatter(output: torch.Tensor, input: torch.Tensor, op: str, team: int) -> None:
    _ops.reduce_scatter(output, input, op, team)


@torch.library.custom_op(_NS + "::all_gather", mutates_args=("output",))
def all_gather(output: torch.Tensor, input: torch.Tensor, team: int) -> None:
    _ops.all_gather(output, input, team)


@torch.library.custom_op(_NS + "::all_to_all", mutates_args=("output",))
def all_to_all(output: torch.Tensor, input: torch.Tensor, team: int) -> None:
    _ops.all_to_all(output, input, team)


@torch.library.custom_op(_NS + "::tile_reduce", mutates_args=("out_tile",))
def tile_reduce(in_tile: torch.Tensor, out_tile: torch.Tensor, root: int, op: str, team: int,
                pool: int = -1, workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.tile_reduce(in_tile, out_tile, root, op, team=t, pool=p, workers=workers)


@torch.library.custom_op(_NS + "::tile_all_reduce", mutates_args=("out_tile",))
def tile_all_reduce(in_tile: torch.Tensor, out_tile: torch.Tensor, op: str, team: int,
                    pool: int = -1, workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.tile_all_reduce(in_tile, out_tile, op, team=t, pool=p, workers=workers)


@torch.library.custom_op(_NS + "::multi_root_tile_reduce", mutates_args=("out_tile",))
def multi_root_tile_reduce(in_tiles: List[torch.Tensor], out_tile: torch.Tensor,
                           roots: List[int], op: str, team: int, pool: int = -1,
                           workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.multi_root_tile_reduce(in_tiles, out_tile, roots, op, team=t, pool=p,
                                workers=workers)


@torch.library.custom_op(_NS + "::all_to_all_vdev", mutates_args=("out", "out_splits_offsets"))
def all_to_all_vdev(input: torch.Tensor, out: torch.Tensor, in_splits: torch.Tensor,
                    out_splits_offsets: torch.Tensor, team: int, pool: int = -1,
                    workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev(input, out, in_splits, out_splits_offsets, team=t, pool=p,
                         workers=workers)


@torch.library.custom_op(_NS + "::all_to_all_vdev_2d", mutates_args=("out", "out_splits_offsets"))
def all_to_all_vdev_2d(input: torch.Tensor, out: torch.Tensor, in_splits: torch.Tensor,
                       out_splits_offsets: torch.Tensor, team: int,
                       major_align: Optional[int] = None, pool: int = -1,
                       workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev_2d(input, out, in_splits, out_splits_offsets, team=t,
                            major_align=major_align, pool=p, workers=workers)


@torch.library.custom_op(_NS + "::all_to_all_vdev_2d_offset",
                         mutates_args=("out", "out_splits_offsets"))
def all_to_all_vdev_2d_offset(input: torch.Tensor, out: torch.Tensor,
                              in_splits_offsets: torch.Tensor,
                              out_splits_offsets: torch.Tensor, team: int, pool: int = -1,
                              workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev_2d_offset(input, out, in_splits_offsets, out_splits_offsets, team=t,
                                   pool=p, workers=workers)


@torch.library.custom_op(_NS + "::moe_topk_dispatch",
                         mutates_args=("out", "side_outs", "out_counts", "out_offsets",
                                       "out_rows", "topk_rows"))
def moe_topk_dispatch(input: torch.Tensor, out: torch.Tensor, topk_idx: torch.Tensor, ne: int,
                      major_align: int, side_ins: List[torch.Tensor],
                      side_outs: List[torch.Tensor], out_counts: torch.Tensor,
                      out_offsets: torch.Tensor, out_rows: torch.Tensor,
                      topk_rows: torch.Tensor, team: int, pool: int = -1, workers: int = 0,
                      workspace: Optional[torch.Tensor] = None) -> None:
    t, p = _team(team, pool)
    _moe_topk.moe_topk_dispatch(input, out, topk_idx, ne, major_align,
                                list(zip(side_ins, side_outs)), out_counts, out_offsets,
                                None, topk_rows, out_rows, team=t, pool=p, workers=workers,
                                workspace=workspace)


@torch.library.custom_op(_NS + "::moe_topk_combine", mutates_args=("out",))
def moe_topk_combine(input: torch.Tensor, out: torch.Tensor, topk_idx: torch.Tensor,
                     topk_rows: torch.Tensor, topk_weights: Optional[torch.Tensor], ne: int,
                     in_rows: int, team: int, pool: int = -1, workers: int = 0,
                     workspace: Optional[torch.Tensor] = None) -> None:
    t, p = _team(team, pool)
    _moe_topk.moe_topk_combine(input, out, topk_idx, topk_rows, ne, topk_weights,
                               None if in_rows < 0 else in_rows, team=t, pool=p,
                               workers=workers, workspace=workspace)
