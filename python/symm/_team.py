"""_team.py — teams and team pools as Python objects over symm's handles. Making and
destroying them is collective (over the parent's members for a split, over the listed
ranks for a rank list, over the members for a pool): do it in the same order on every
member. `with` destroys at the end of the block; nothing is destroyed behind the user's
back, since a destroy that only some members reach would wait for the others."""

import ctypes

from ._lib import TEAM_INVALID, TEAM_NODE, TEAM_WORLD, check, lib, pool_t, team_t


def handle_of(team):
    """The symm_team_t of a Team, an int handle, or None (the world)."""
    if team is None:
        return TEAM_WORLD
    h = getattr(team, "handle", team)
    if not isinstance(h, int):
        raise TypeError("symm: team must be a symm.Team, a team handle or None, not %s"
                        % type(team).__name__)
    return h


# Members by team handle, for the calls that check sizes on the host. A team's size never
# changes, and a handle names one object until finalize: its serial number comes back
# only after 2^37 creations on this PE (src/team/team.h). Sizes < 1 (an invalid handle)
# are not kept.
_n_pes = {}


def n_pes_of(h):
    """symm_team_n_pes(h), asked once per team."""
    n = _n_pes.get(h)
    if n is None:
        n = lib.symm_team_n_pes(h)
        if n > 0:
            _n_pes[h] = n
    return n


class Team:
    """An ordered set of PEs with team-relative numbering 0..n_pes()-1.
    `handle` is symm's symm_team_t, for C and CUDA code."""

    __slots__ = ("handle", "_owned")

    def __init__(self, handle, owned=False):
        self.handle = int(handle)
        self._owned = owned

    def my_pe(self):
        """This PE's number in the team; -1 if it is not a member (or the team is gone)."""
        return lib.symm_team_my_pe(self.handle)

    def n_pes(self):
        return lib.symm_team_n_pes(self.handle)

    rank = my_pe
    size = n_pes

    def world_pe(self, pe):
        """World rank of member pe; -1 if out of range."""
        return lib.symm_team_world_pe(self.handle, int(pe))

    def world_ranks(self):
        return [lib.symm_team_world_pe(self.handle, p) for p in range(self.n_pes())]

    def translate_pe(self, pe, other):
        """Member pe of this team as numbered in other; -1 if it is not in both."""
        return lib.symm_team_translate_pe(self.handle, int(pe), handle_of(other))

    def split_strided(self, start, stride, size):
        """Members start, start + stride, ... (size of them; stride may be negative).
        Collective over this team; returns None on PEs outside the new team."""
        out = team_t(TEAM_INVALID)
        check(lib.symm_team_split_strided(self.handle, int(start), int(stride), int(size),
                                          ctypes.byref(out)))
        return Team(out.value, owned=True) if out.value != TEAM_INVALID else None

    def split_2d(self, xrange):
        """The team as a grid of rows of xrange PEs: (my row, my column). Collective."""
        x, y = team_t(TEAM_INVALID), team_t(TEAM_INVALID)
        check(lib.symm_team_split_2d(self.handle, int(xrange), ctypes.byref(x), ctypes.byref(y)))
        return (Team(x.value, owned=True) if x.value != TEAM_INVALID else None,
                Team(y.value, owned=True) if y.value != TEAM_INVALID else None)

    def pool(self, n):
        """A pool of n duplicates of this team. Collective over the members; O(1) rounds."""
        out = pool_t(-1)
        check(lib.symm_pool_create(self.handle, int(n), ctypes.byref(out)))
        return Pool(out.value)

    def barrier(self):
        check(lib.symm_barrier(self.handle))

    def destroy(self):
        """Collective over the members. Not for the world, the node or a pool duplicate."""
        check(lib.symm_team_destroy(self.handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._owned:
            self.destroy()
        return False

    def __eq__(self, other):
        return isinstance(other, Team) and other.handle == self.handle

    def __hash__(self):
        return hash(self.handle)

    def __repr__(self):
        buf = ctypes.create_string_buffer(128)
        return "<symm.Team %s>" % lib.symm_team_describe(self.handle, buf, 128).decode()


WORLD = Team(TEAM_WORLD)
NODE = Team(TEAM_NODE)


def new_team(ranks):
    """A team of the given world ranks, numbered in that order. Collective over those PEs
    only (every one passes the same list); returns None on a PE not in the list, which
    takes no part."""
    ranks = [int(r) for r in ranks]
    arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    me = lib.symm_my_pe()
    if lib.symm_initialized() and me not in ranks:
        return None
    out = team_t(TEAM_INVALID)
    check(lib.symm_team_create(arr, len(ranks), ctypes.byref(out)))
    return Team(out.value, owned=True)


def team_from_group(group=None):
    """A team of a torch.distributed process group's ranks (the default group if None),
    in the group's order; None on PEs outside it. Assumes symm's PE numbers are the
    torch ranks (true under torchrun, where symm.init takes RANK)."""
    import torch.distributed as dist
    ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
    return new_team(ranks)


class Pool:
    """n duplicates of one team; pool[i] is duplicate i (a Team that is not destroyed on
    its own). `handle` is symm's symm_pool_t, for C and CUDA code."""

    __slots__ = ("handle", "name")

    def __init__(self, handle, name=None):
        self.handle = int(handle)
        self.name = name

    def __len__(self):
        return lib.symm_pool_size(self.handle)

    def __getitem__(self, i):
        n = lib.symm_pool_size(self.handle)
        if i < 0:
            i += n
        t = lib.symm_pool_team(self.handle, int(i)) if 0 <= i < n else TEAM_INVALID
        if t == TEAM_INVALID:
            raise IndexError("symm: duplicate %d of a pool of %d" % (i, n))
        return Team(t)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def grow(self, n):
        """At least n duplicates (never shrinks); collective over the members."""
        check(lib.symm_pool_grow(self.handle, int(n)))

    def auto_workers(self, work_bytes=None):
        """The worker count that workers=0 gives the parallel forms on this pool."""
        return lib.symm_pool_auto_workers(self.handle,
                                          (1 << 64) - 1 if work_bytes is None else
                                          int(work_bytes))

    def destroy(self):
        """Collective over the members (a registry pool: released by its name)."""
        if self.name is not None:
            check(lib.symm_pool_release(self.name.encode()))
        else:
            check(lib.symm_pool_destroy(self.handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False

    def __repr__(self):
        return "<symm.Pool %d of %d duplicates%s>" % (
            self.handle, len(self), "" if self.name is None else " %r" % self.name)


def pool_create(team, n):
    return Team(handle_of(team)).pool(n)


def get_pool(name, ranks, n):
    """The registry (PyTorch's get_team / get_n_teams use case): the pool called name over
    the given world ranks, with at least n duplicates. The first call makes it, later
    calls return it, growing it when n is larger; the same name with other ranks is an
    error. Collective over the ranks."""
    ranks = [int(r) for r in ranks]
    arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    out = pool_t(-1)
    check(lib.symm_pool_get(str(name).encode(), arr, len(ranks), int(n), ctypes.byref(out)))
    return Pool(out.value, name=str(name))


def release_pool(name):
    """Destroys the registry pool called name; collective over its members."""
    check(lib.symm_pool_release(str(name).encode()))

