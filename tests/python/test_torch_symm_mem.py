"""symm's MoE dispatch/combine element by element against PyTorch's
torch.ops.symm_mem.all_to_all_vdev_2d / all_to_all_vdev_2d_offset (NVSHMEM) on the same
random inputs and splits: several major_align values, zero splits, a PE that sends
nothing, an expert that receives nothing, and a combine whose input offsets leave gaps.
Both are held to a serial reference (every PE regenerates every PE's inputs from their
seeds): symm must match it; where torch's op leaves it (seen with torch 2.11 and NVSHMEM
3.4.5, several ranks on one GPU: now and then a few rows of a zero-heavy case), that is
reported as a note on torch, and symm is compared with torch wherever torch matches it.
Needs a GPU and a torch with NVSHMEM; with several PEs on one GPU, CUDA MPS and an MPS
share per PE (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), as NVSHMEM refuses team calls without.

As a plain script (no pytest needed), N ranks started through envrun.py --mps-share:
    python3 tests/python/test_torch_symm_mem.py --np 2
or with each rank started torchrun-style. Under pytest (the suite's conftest has started
symm), torch.distributed starts over a file store; skipped, saying why, where it cannot
run."""
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
# (experts per PE, major_align, hidden, dtype name, how the splits are drawn)
CASES = [(1, 1, 64, "float32", "random"), (3, 16, 40, "bfloat16", "zeros"),
         (8, 8, 7, "float32", "silent_pe"), (4, 1, 256, "bfloat16", "deaf_expert"),
         (16, 4, 8, "float32", "random")]
DEV = "cuda"  # where the buffers live
ENV = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
       "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


def splits_of(me, n, ne, how, case):
    """PE me's n*ne dispatch splits (every PE can draw any PE's)."""
    import numpy as np
    r = np.random.default_rng([31, case, me])
    sp = r.integers(0, 9, size=n * ne)
    if how == "zeros":
        sp[r.integers(0, 2, size=n * ne) == 0] = 0
    elif how == "silent_pe" and me == n - 1:
        sp[:] = 0
    elif how == "deaf_expert":
        sp[1::ne] = 0  # local expert 1 of every PE gets nothing
    return sp


def reference(torch, me, n, case, cap_in, hidden, dtype):
    """What PE me receives: its expert-major splits/offsets (as a list of two lists) and,
    per (expert, source) segment, (offset, count, the rows expected there); and what the
    gapped combine of check_case returns to it ([splits, offsets, rows])."""
    ne, align = CASES[case][0], CASES[case][1]
    xs = []
    for s in range(n):
        g = torch.Generator(device=DEV).manual_seed(1000 * case + s)
        xs.append(torch.randn((cap_in, hidden), generator=g, device=DEV).to(dtype))
    sps = [splits_of(s, n, ne, CASES[case][4], case) for s in range(n)]
    counts, offs, segs, at = [], [], [], 0
    for e in range(ne):
        at = start = (at + align - 1) // align * align
        for s in range(n):
            c = int(sps[s][me * ne + e])
            o_in = int(sps[s][:me * ne + e].sum())
            counts.append(c)
            offs.append(at)
            segs.append((at, c, xs[s][o_in:o_in + c]))
            at += c
        if at == start:
            at += align  # an expert that receives nothing still holds major_align rows
    # The combine of gapped inputs: PE d's segment (e, s) sits at (e * n + s) * 9 of its
    # second draw, sp_d[e * n + s] rows long; PE me gets, packed, (d, e) for every d, e.
    gcounts, goffs, grows, at = [], [], [], 0
    for d in range(n):
        g = torch.Generator(device=DEV).manual_seed(1000 * case + d)
        torch.randn((cap_in, hidden), generator=g, device=DEV)
        gx = torch.randn((9 * n * ne, hidden), generator=g, device=DEV).to(dtype)
        for e in range(ne):
            c = int(sps[d][e * n + me])
            gcounts.append(c)
            goffs.append(at)
            grows.append(gx[(e * n + me) * 9:(e * n + me) * 9 + c])
            at += c
    return [counts, offs], segs, [gcounts, goffs, torch.cat(grows)]


def check_case(torch, sm, group, me, n, case):
    """One case: both dispatches and combines on the same data; returns the failures."""
    import symm
    ne, align, hidden, dt, how = CASES[case]
    dtype = getattr(torch, dt)
    sp = splits_of(me, n, ne, how, case)
    rows = int(sp.sum())
    cap_in = 8 * n * ne
    cap = 8 * n * ne * n + ne * align

    def tsym(shape, d):
        # an indexed device: NVSHMEM's team manager keeps the first device it is given and
        # refuses "cuda" against "cuda:0" afterwards
        t = sm.empty(*shape, dtype=d, device=torch.device("cuda", torch.cuda.current_device()))
        sm.rendezvous(t, group)
        return t

    g = torch.Generator(device=DEV).manual_seed(1000 * case + me)
    x = torch.randn((cap_in, hidden), generator=g, device=DEV).to(dtype)
    t_in, t_out, t_back = tsym((cap_in, hidden), dtype), tsym((cap, hidden), dtype), \
        tsym((cap_in, hidden), dtype)
    t_sp, t_so, t_so2 = tsym((n * ne,), torch.int64), tsym((2, n * ne), torch.int64), \
        tsym((2, n * ne), torch.int64)
    s_in, s_out, s_back = (symm.empty(s, dtype, device=DEV, backend="torch")
                           for s in ((cap_in, hidden), (cap, hidden), (cap_in, hidden)))
    for t in (t_out, t_back, s_out, s_back):
        t.fill_(-3)
    t_in.copy_(x)
    s_in.copy_(x)
    t_sp.copy_(torch.from_numpy(sp))
    torch.cuda.synchronize()
    symm.barrier()

    fails, torch_off = [], []  # symm's failures; where torch's op left the reference

    def judge(who, ok, what):
        if not ok:
            (fails if who == "symm" else torch_off).append("%s %s" % (who, what))
        return ok

    torch.ops.symm_mem.all_to_all_vdev_2d(t_in, t_out, t_sp, t_so, group, major_align=align)
    s_so = symm.moe_dispatch(s_in, s_out, t_sp.clone(), major_align=align)
    torch.cuda.synchronize()
    symm.cuda_check()
    # The serial reference: every source PE's rows, regenerated here from its seed; symm
    # is held to it, and to torch's output wherever torch's output matches it too.
    ref_so, segs, ref_gap = reference(torch, me, n, case, cap_in, hidden, dtype)
    for who, so, out in (("torch", t_so, t_out), ("symm", s_so, s_out)):
        if judge(who, so.tolist() == ref_so, "dispatch splits/offsets %s, expected %s"
                 % (so.tolist(), ref_so)):
            for o, c, want in segs:
                judge(who, torch.equal(out[o:o + c], want),
                      "dispatch rows %d..%d differ from the reference" % (o, o + c))
    if not torch_off and not torch.equal(t_so, s_so):
        fails.append("dispatch splits/offsets: torch %s, symm %s" % (t_so.tolist(),
                                                                     s_so.tolist()))
    # The round trip.
    torch.ops.symm_mem.all_to_all_vdev_2d_offset(t_out, t_back, t_so, t_so2, group)
    s_so2 = symm.moe_combine(s_out, s_back, s_so)
    torch.cuda.synchronize()
    symm.cuda_check()
    if not torch.equal(t_so2, s_so2):
        fails.append("combine splits/offsets: torch %s, symm %s" % (t_so2.tolist(),
                                                                    s_so2.tolist()))
    for who, back in (("torch", t_back), ("symm", s_back)):
        bad = (back[:rows] != x[:rows]).any(dim=1).nonzero().flatten().tolist()
        judge(who, not bad, "combine: rows %s of %d differ from the input" % (bad[:8], rows))
    # A combine whose input segments sit at offsets with gaps (not a prefix sum).
    stride = 9
    gap = torch.stack((torch.from_numpy(sp), torch.arange(n * ne) * stride)).to(DEV)
    t_gin, t_so3 = tsym((stride * n * ne, hidden), dtype), tsym((2, n * ne), torch.int64)
    s_gin = symm.empty((stride * n * ne, hidden), dtype, device=DEV, backend="torch")
    gx = torch.randn((stride * n * ne, hidden), generator=g, device=DEV).to(dtype)
    t_gin.copy_(gx)
    s_gin.copy_(gx)
    t_so4 = tsym((2, n * ne), torch.int64)
    t_so4.copy_(gap)
    t_back.fill_(-3)
    s_back.fill_(-3)
    torch.cuda.synchronize()
    symm.barrier()
    torch.ops.symm_mem.all_to_all_vdev_2d_offset(t_gin, t_back, t_so4, t_so3, group)
    s_so3 = symm.moe_combine(s_gin, s_back, gap)
    torch.cuda.synchronize()
    symm.cuda_check()
    got_rows = int(sum(ref_gap[0]))
    for who, so, back in (("torch", t_so3, t_back), ("symm", s_so3, s_back)):
        if judge(who, so.tolist() == ref_gap[0:2], "gapped combine splits/offsets %s, "
                 "expected %s" % (so.tolist(), ref_gap[0:2])):
            judge(who, torch.equal(back[:got_rows], ref_gap[2]),
                  "gapped combine rows differ from the reference")
    torch.cuda.synchronize()
    symm.barrier()
    tag = "case %d (ne %d, major_align %d, %s, %s): " % (case, ne, align, dt, how)
    return [tag + f for f in fails], [tag + f for f in torch_off]


def run_checks(torch, sm, group, me, n):
    """Every case on every PE; returns (cases failed on this PE, their failures, where
    torch's ops left the serial reference)."""
    failed, fails, torch_off = 0, [], []
    for case in range(len(CASES)):
        f, t = check_case(torch, sm, group, me, n, case)
        failed += bool(f)
        fails += f
        torch_off += t
    return failed, fails, torch_off


def say_torch_off(me, torch_off):
    """torch's own deviations from the reference: reported, not symm's failures."""
    for t in torch_off:
        print("PE %d: note: torch.ops.symm_mem left the serial reference (symm did not): %s"
              % (me, t), flush=True)


def why_not(torch):
    """Why this process cannot run the comparison (None: it can)."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    try:
        import torch.distributed._symmetric_memory as sm
    except ImportError as e:
        return "no torch symmetric memory (%s)" % e
    if hasattr(sm, "is_nvshmem_available") and not sm.is_nvshmem_available():
        return "this torch has no NVSHMEM"
    return None


# ---------------------------------------------------------------- under pytest
def test_dispatch_combine_match_torch_symm_mem():
    import pytest

    import symm
    torch = pytest.importorskip("torch")
    why = why_not(torch)
    if why:
        pytest.skip("torch symm_mem comparison: " + why)
    try:
        symm._cuda.lib()
    except ImportError as e:
        pytest.skip(str(e))
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as sm
    me, n = symm.my_pe(), symm.n_pes()
    if n > torch.cuda.device_count() and not os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"):
        pytest.skip("torch symm_mem comparison: %d PEs share a GPU without an MPS share "
                    "(CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), which NVSHMEM needs: run python3 "
                    "tests/python/test_torch_symm_mem.py --np %d" % (n, n))
    symm.empty((1,), "uint8", device="cuda", backend="torch")  # starts symm's CUDA part
    torch.cuda.set_device(symm.cuda_device())
    if not dist.is_initialized():
        # A file store on a path PE 0 draws: no port to clash with the launcher's.
        tag = symm.zeros((1,), "int64", backend="numpy")
        if me == 0:
            tag[0] = uuid.uuid4().int & ((1 << 62) - 1)
        symm.broadcast(tag, 0)
        store = dist.FileStore("/tmp/symm-torch-cmp-%x" % int(tag[0]), n)
        dist.init_process_group("gloo", store=store, rank=me, world_size=n)
    sm.set_backend("NVSHMEM")
    group = dist.group.WORLD.group_name
    if hasattr(sm, "enable_symm_mem_for_group"):
        sm.enable_symm_mem_for_group(group)
    _, fails, torch_off = run_checks(torch, sm, group, me, n)
    say_torch_off(me, torch_off)
    assert not fails, "\n".join(fails)


# ---------------------------------------------------------------- as a plain script
def main(argv):
    if argv[:1] == ["--np"] and len(argv) > 1:
        import subprocess
        env = dict(os.environ)
        for k, v in ENV.items():
            env.setdefault(k, v)
        return subprocess.call([sys.executable, os.path.join(HERE, "envrun.py"), "-n", argv[1],
                                "--mps-share", "--", sys.executable, os.path.abspath(__file__)],
                               env=env)
    for k, v in ENV.items():
        os.environ.setdefault(k, v)
    try:
        import torch
    except ImportError:
        torch = None
        why = "torch cannot be imported"
    else:
        why = why_not(torch)
    if why:
        if os.environ.get("RANK", "0") == "0":
            print("test_torch_symm_mem: SKIP: " + why)
        return 0
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as sm

    import symm
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    sm.set_backend("NVSHMEM")
    group = dist.group.WORLD.group_name
    if hasattr(sm, "enable_symm_mem_for_group"):
        sm.enable_symm_mem_for_group(group)
    symm.init(cuda=True)
    failed, fails, torch_off = run_checks(torch, sm, group, me, n)
    for f in fails:
        print("PE %d: FAILED %s" % (me, f), flush=True)
    say_torch_off(me, torch_off)
    bad = torch.tensor([failed, len(torch_off)])
    dist.all_reduce(bad)
    if me == 0:
        print("test_torch_symm_mem (%d PEs, torch %s): %d cases on every PE, counted per PE"
              % (n, torch.__version__, len(CASES)))
        print("torch.ops.symm_mem off the serial reference: %d times" % int(bad[1]))
        print("%d passed, %d failed" % (len(CASES) * n - int(bad[0]), int(bad[0])), flush=True)
    torch.cuda.synchronize()
    dist.barrier()
    symm.finalize()
    dist.destroy_process_group()
    return 1 if int(bad[0]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
