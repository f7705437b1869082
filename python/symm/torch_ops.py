"""torch_ops.py — symm's operations as torch operators (torch.library), so that they go
through torch.compile and CUDA graph capture as single opaque calls: torch.ops.symm.<name>.
Registered when this module is imported (symm.init imports it where torch can be
imported). Teams are passed as their handle (Team.handle, an int; 0 is the world), pools
likewise.

    torch.ops.symm.all_reduce_(t, "sum", 0)
    torch.ops.symm.all_to_all_vdev_2d(inp, out, in_splits, out_splits_offsets, team, 1)
    torch.ops.symm.moe_topk_dispatch(inp, out, topk_idx, ne, 0, [], [], counts, offsets,
                                     rows, topk_rows, team)

Every op mutates its output arguments in place and returns nothing, as the
torch.distributed and torch.ops.symm_mem ops they mirror.

The ops are defined by schema on a torch.library.Library, with the functions below as
their kernel for every device and a fake kernel that does nothing (what torch.compile
traces): a call through the dispatcher costs about 3 us more than the function, where
torch.library.custom_op's Python wrappers cost about 12 us. Eager code that wants neither
calls symm.all_reduce (or these functions) directly."""

from typing import List, Optional

import torch

from . import _moe_topk, _ops
from ._team import Pool

_NS = "symm"


def _team(team: int, pool: int):
    """(team, pool) keyword arguments of the _ops calls: a pool handle >= 0 wins."""
    return (None, Pool(pool)) if pool >= 0 else (team, None)


def barrier(team: int) -> None:
    _ops.barrier(team)


def broadcast_(tensor: torch.Tensor, src: int, team: int) -> None:
    _ops.broadcast(tensor, src, team)


def all_reduce_(tensor: torch.Tensor, op: str, team: int) -> None:
    _ops.all_reduce(tensor, op, team)


def reduce_(tensor: torch.Tensor, dst: int, op: str, team: int) -> None:
    _ops.reduce(tensor, dst, op, team)


def reduce_scatter(output: torch.Tensor, input: torch.Tensor, op: str, team: int) -> None:
    _ops.reduce_scatter(output, input, op, team)


def all_gather(output: torch.Tensor, input: torch.Tensor, team: int) -> None:
    _ops.all_gather(output, input, team)


def all_to_all(output: torch.Tensor, input: torch.Tensor, team: int) -> None:
    _ops.all_to_all(output, input, team)


def tile_reduce(in_tile: torch.Tensor, out_tile: torch.Tensor, root: int, op: str, team: int,
                pool: int = -1, workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.tile_reduce(in_tile, out_tile, root, op, team=t, pool=p, workers=workers)


def tile_all_reduce(in_tile: torch.Tensor, out_tile: torch.Tensor, op: str, team: int,
                    pool: int = -1, workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.tile_all_reduce(in_tile, out_tile, op, team=t, pool=p, workers=workers)


def multi_root_tile_reduce(in_tiles: List[torch.Tensor], out_tile: torch.Tensor,
                           roots: List[int], op: str, team: int, pool: int = -1,
                           workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.multi_root_tile_reduce(in_tiles, out_tile, roots, op, team=t, pool=p,
                                workers=workers)


def all_to_all_vdev(input: torch.Tensor, out: torch.Tensor, in_splits: torch.Tensor,
                    out_splits_offsets: torch.Tensor, team: int, pool: int = -1,
                    workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev(input, out, in_splits, out_splits_offsets, team=t, pool=p,
                         workers=workers)


def all_to_all_vdev_2d(input: torch.Tensor, out: torch.Tensor, in_splits: torch.Tensor,
                       out_splits_offsets: torch.Tensor, team: int,
                       major_align: Optional[int] = None, pool: int = -1,
                       workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev_2d(input, out, in_splits, out_splits_offsets, team=t,
                            major_align=major_align, pool=p, workers=workers)


def all_to_all_vdev_2d_offset(input: torch.Tensor, out: torch.Tensor,
                              in_splits_offsets: torch.Tensor,
                              out_splits_offsets: torch.Tensor, team: int, pool: int = -1,
                              workers: int = 0) -> None:
    t, p = _team(team, pool)
    _ops.all_to_all_vdev_2d_offset(input, out, in_splits_offsets, out_splits_offsets, team=t,
                                   pool=p, workers=workers)


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


def moe_topk_combine(input: torch.Tensor, out: torch.Tensor, topk_idx: torch.Tensor,
                     topk_rows: torch.Tensor, topk_weights: Optional[torch.Tensor], ne: int,
                     in_rows: int, team: int, pool: int = -1, workers: int = 0,
                     workspace: Optional[torch.Tensor] = None) -> None:
    t, p = _team(team, pool)
    _moe_topk.moe_topk_combine(input, out, topk_idx, topk_rows, ne, topk_weights,
                               None if in_rows < 0 else in_rows, team=t, pool=p,
                               workers=workers, workspace=workspace)


def moe_topk_dispatch_ll(input: torch.Tensor, out: torch.Tensor, topk_idx: torch.Tensor,
                         ne: int, max_tokens: int, side_ins: List[torch.Tensor],
                         side_outs: List[torch.Tensor], out_counts: torch.Tensor,
                         out_src: torch.Tensor, workspace: torch.Tensor, team: int,
                         pool: int = -1, blocks: int = 0) -> None:
    t, p = _team(team, pool)
    _moe_topk.moe_topk_dispatch_ll(input, out, topk_idx, ne, max_tokens, out_counts, out_src,
                                   workspace, list(zip(side_ins, side_outs)), team=t, pool=p,
                                   blocks=blocks)


def moe_topk_combine_ll(input: torch.Tensor, out: torch.Tensor, topk_idx: torch.Tensor,
                        topk_weights: Optional[torch.Tensor], ne: int, max_tokens: int,
                        counts: torch.Tensor, src: torch.Tensor, workspace: torch.Tensor,
                        team: int, pool: int = -1, blocks: int = 0) -> None:
    t, p = _team(team, pool)
    _moe_topk.moe_topk_combine_ll(input, out, topk_idx, ne, max_tokens, counts, src, workspace,
                                  topk_weights, team=t, pool=p, blocks=blocks)


# Schemas as torch.library.custom_op wrote them for these functions' annotations.
_SCHEMAS = {
    barrier: "(SymInt team) -> ()",
    broadcast_: "(Tensor(a0!) tensor, SymInt src, SymInt team) -> ()",
    all_reduce_: "(Tensor(a0!) tensor, str op, SymInt team) -> ()",
    reduce_: "(Tensor(a0!) tensor, SymInt dst, str op, SymInt team) -> ()",
    reduce_scatter: "(Tensor(a0!) output, Tensor input, str op, SymInt team) -> ()",
    all_gather: "(Tensor(a0!) output, Tensor input, SymInt team) -> ()",
    all_to_all: "(Tensor(a0!) output, Tensor input, SymInt team) -> ()",
    tile_reduce: "(Tensor in_tile, Tensor(a1!) out_tile, SymInt root, str op, SymInt team, "
                 "SymInt pool=-1, SymInt workers=0) -> ()",
    tile_all_reduce: "(Tensor in_tile, Tensor(a1!) out_tile, str op, SymInt team, "
                     "SymInt pool=-1, SymInt workers=0) -> ()",
    multi_root_tile_reduce: "(Tensor[] in_tiles, Tensor(a1!) out_tile, SymInt[] roots, str op, "
                            "SymInt team, SymInt pool=-1, SymInt workers=0) -> ()",
    all_to_all_vdev: "(Tensor input, Tensor(a1!) out, Tensor in_splits, "
                     "Tensor(a3!) out_splits_offsets, SymInt team, SymInt pool=-1, "
                     "SymInt workers=0) -> ()",
    all_to_all_vdev_2d: "(Tensor input, Tensor(a1!) out, Tensor in_splits, "
                        "Tensor(a3!) out_splits_offsets, SymInt team, "
                        "SymInt? major_align=None, SymInt pool=-1, SymInt workers=0) -> ()",
    all_to_all_vdev_2d_offset: "(Tensor input, Tensor(a1!) out, Tensor in_splits_offsets, "
                               "Tensor(a3!) out_splits_offsets, SymInt team, SymInt pool=-1, "
                               "SymInt workers=0) -> ()",
    moe_topk_dispatch: "(Tensor input, Tensor(a1!) out, Tensor topk_idx, SymInt ne, "
                       "SymInt major_align, Tensor[] side_ins, Tensor(a6!)[] side_outs, "
                       "Tensor(a7!) out_counts, Tensor(a8!) out_offsets, Tensor(a9!) out_rows, "
                       "Tensor(a10!) topk_rows, SymInt team, SymInt pool=-1, SymInt workers=0, "
                       "Tensor? workspace=None) -> ()",
    moe_topk_combine: "(Tensor input, Tensor(a1!) out, Tensor topk_idx, Tensor topk_rows, "
                      "Tensor? topk_weights, SymInt ne, SymInt in_rows, SymInt team, "
                      "SymInt pool=-1, SymInt workers=0, Tensor? workspace=None) -> ()",
    moe_topk_dispatch_ll: "(Tensor input, Tensor(a1!) out, Tensor topk_idx, SymInt ne, "
                          "SymInt max_tokens, Tensor[] side_ins, Tensor(a6!)[] side_outs, "
                          "Tensor(a7!) out_counts, Tensor(a8!) out_src, Tensor(a9!) workspace, "
                          "SymInt team, SymInt pool=-1, SymInt blocks=0) -> ()",
    moe_topk_combine_ll: "(Tensor input, Tensor(a1!) out, Tensor topk_idx, "
                         "Tensor? topk_weights, SymInt ne, SymInt max_tokens, Tensor counts, "
                         "Tensor src, Tensor(a8!) workspace, SymInt team, SymInt pool=-1, "
                         "SymInt blocks=0) -> ()",
}


def _fake(*args, **kwargs):
    """What torch.compile runs on fake tensors: the outputs keep their shapes."""
    return None


_LIB = torch.library.Library(_NS, "DEF")  # kept: the ops live as long as this object
for _fn, _schema in _SCHEMAS.items():
    _LIB.define(_fn.__name__ + _schema)
    _LIB.impl(_fn.__name__, _fn, "CompositeExplicitAutograd")
    torch.library.register_fake(_NS + "::" + _fn.__name__, _fake, lib=_LIB)
