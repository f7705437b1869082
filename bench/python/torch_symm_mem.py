"""torch_symm_mem.py — symm beside PyTorch SymmMem (torch.ops.symm_mem over NVSHMEM) in the
same processes, on the same GPU, with the same MPS share, measured in the same run:

 (a) MoE dispatch and combine, 4096 tokens of 7168 bytes (hidden 3584, bf16) per PE, 8
     experts per PE, splits as even as possible, major_align 16:
     torch.ops.symm_mem.all_to_all_vdev_2d / all_to_all_vdev_2d_offset against
     symm.moe_dispatch / symm.moe_combine on the current stream, and a device copy
     (copy_) of the bytes each moves on this PE; both outputs checked equal first.
 (b) the top-k expert-parallel layer at DeepEP's shapes: hidden 7168, top-8 of 256 experts
     in all, fp8 e4m3 tokens with 56 float32 scales (one per 128 channels), bf16 combine
     with float32 router weights; 4096 tokens per PE (normal) and 128 (decode). PyTorch's
     composite: replicate each token per slot sorted by expert (scales packed into the
     row), all_to_all_vdev_2d, and back all_to_all_vdev_2d_offset, the k results gathered
     and weight-summed (bmm); against symm.moe_topk_dispatch (scales as a side payload) and
     symm.moe_topk_combine (at the decode shape also the low-latency pair,
     symm.moe_topk_dispatch_ll / symm.moe_topk_combine_ll, DeepEP's low-latency layout).
     torch's kernel takes at most 16 experts per rank, so the
     composite routes to 16 groups of consecutive experts per PE (rows sorted by expert
     inside each group's block); symm routes to every expert.
 (c) all_reduce, float32 and bf16, 1, 16 and 64 MiB per PE: symm.all_reduce (in place)
     against torch.ops.symm_mem.one_shot_all_reduce_out (every PE reads every peer's
     buffer) and two_shot_all_reduce_ (each PE reduces a 1/n share and writes it to every
     peer; in place), which need no NVLink multicast; and symm.tile_all_reduce of the same
     bytes as a 2-D tile (rows of 4096 elements, 64 elements apart) against the faster of
     the two (torch's tile_reduce needs NVLink multicast, which stays off). A device copy of
     the same bytes is the anchor. Before timing, symm's results are checked equal to the
     members' data folded in team order (rounded to the type after every member, as symm
     reduces) and torch's within rounding of it. A torch op that this torch lacks, that
     cannot reach a peer's buffer or that fails at its first call gets a row "n/a: why".
 and symm's device barrier (symm.barrier(device="cuda")), the floor of any call whose PEs
 meet on the device.

Timing: every PE times its own stream with CUDA events, after a host barrier, its calls
queued behind a kernel that holds the stream (torch.cuda._sleep), so time is the GPU's per
call, not the Python host's issue rate (host_us says that one); per batch of --iters
calls, median over --reps batches, the slowest PE's median reported with its spread
(max - min over the batches, in % of the median). Markdown on rank 0.

The run is bounded: past --time-limit seconds every rank prints where it was, the tables
already printed stay, and the run ends with status 3 (a device wait that never returns
cannot be left otherwise).

Usage (several PEs on one GPU: start CUDA MPS first):
  python3 bench/python/torch_symm_mem.py --np N [--quick] [--iters I] [--reps R]
      starts N ranks through tests/python/envrun.py --mps-share (RANK, WORLD_SIZE,
      LOCAL_RANK, MASTER_ADDR, MASTER_PORT; CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100 / N);
      or start every rank yourself, torchrun-style, without --np.
  --ar-sizes 1M,16M,64M: the sizes of (c) (multiples of 16K); --time-limit S (default
      270; 0: none).
  --cpu-check: no GPU needed: the top-k composite at a small shape on CPU tensors, with
      symm's CPU all_to_all_vdev_2d / _offset standing in for torch.ops.symm_mem, checked
      against a serial reference (run under symmrun or envrun)."""
import argparse
import faulthandler
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENVRUN = os.path.join(HERE, "..", "..", "tests", "python", "envrun.py")
# Set where the launcher did not: multicast stays off; NVSHMEM's heap holds the top-k
# composite's buffers at 4096 tokens (about 1.6 GB per PE), symm's its own.
ENV_DEFAULTS = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
                "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_SYMMETRIC_SIZE": str(4 << 30),
                "SYMM_GPU_HEAP_SIZE": "2G"}

HIDDEN_A, EXPERTS_A, ALIGN_A = 3584, 8, 16            # (a): 7168-byte bf16 rows
HIDDEN, TOPK, EXPERTS, SCALES = 7168, 8, 256, 56        # (b): DeepEP's shapes
TORCH_MAX_EXPERTS = 16  # experts per rank torch's all_to_all_vdev_2d takes (its NUM_TILES)
LL_MAX_TOKENS = 128     # (b): the shapes up to which the low-latency pair is timed too
TILE_COLS, TILE_PAD = 4096, 64                          # (c): tile rows, ld = cols + pad
DEV = "cuda"  # where the buffers live

torch = dist = symm = None


def launch(n, argv):
    env = dict(os.environ)
    for k, v in ENV_DEFAULTS.items():
        env.setdefault(k, v)
    cmd = [sys.executable, ENVRUN, "-n", str(n), "--mps-share", "--", sys.executable,
           os.path.abspath(__file__)] + argv
    return subprocess.call(cmd, env=env)


# ---------------------------------------------------------------- the two a2a backends
class TorchSymmMem:
    """torch.ops.symm_mem on symmetric tensors of torch's NVSHMEM heap."""

    def __init__(self, group_name):
        import torch.distributed._symmetric_memory as symm_mem
        self.sm, self.group = symm_mem, group_name

    def empty(self, shape, dtype):
        import torch
        # an indexed device: NVSHMEM's team manager keeps the first device it is given and
        # refuses "cuda" against "cuda:0" afterwards
        t = self.sm.empty(*shape, dtype=dtype,
                          device=torch.device("cuda", torch.cuda.current_device()))
        self.sm.rendezvous(t, self.group)
        return t

    def a2a_2d(self, inp, out, splits, so, align):
        torch.ops.symm_mem.all_to_all_vdev_2d(inp, out, splits, so, self.group,
                                              major_align=align)

    def a2a_2d_offset(self, inp, out, so_in, so_out):
        torch.ops.symm_mem.all_to_all_vdev_2d_offset(inp, out, so_in, so_out, self.group)

    def peer_ptrs(self, t):
        """Every member's address of t (rendezvoused), 0 where there is no load/store path."""
        return list(self.sm.rendezvous(t, self.group).buffer_ptrs)


class SymmCpu:
    """symm's CPU calls, which follow PyTorch's layout, standing in for torch.ops.symm_mem
    (--cpu-check)."""

    def empty(self, shape, dtype):
        return symm.empty(shape, dtype, backend="torch")

    def a2a_2d(self, inp, out, splits, so, align):
        symm.all_to_all_vdev_2d(inp, out, splits, so, major_align=align)

    def a2a_2d_offset(self, inp, out, so_in, so_out):
        symm.all_to_all_vdev_2d_offset(inp, out, so_in, so_out)


# ---------------------------------------------------------------- the top-k composite
class TopkComposite:
    """PyTorch's top-k layer out of all_to_all_vdev_2d / _offset: dispatch replicates each
    token once per slot, sorted by expert (so grouped by PE and expert group), scales
    packed after the fp8 bytes; combine brings the slots back in that order, un-sorts them
    and takes the weighted sum of each token's k results (bmm, bf16). Every slot must be
    routed (no -1), as in DeepEP's routing."""

    def __init__(self, ops, n, tokens, k, ne, row_bytes, hidden, cap, align,
                 max_groups=TORCH_MAX_EXPERTS, device=None):
        self.ops, self.T, self.k, self.align, self.hidden = ops, tokens, k, align, hidden
        device = device or DEV
        groups = max(g for g in range(1, min(ne, max_groups) + 1) if ne % g == 0)
        self.per_group = ne // groups  # consecutive experts in one group
        self.groups = groups
        slots = tokens * k
        self.inp = ops.empty((slots, row_bytes), torch.uint8)
        self.out = ops.empty((cap, row_bytes), torch.uint8)
        self.splits = ops.empty((n * groups,), torch.int64)
        self.so = ops.empty((2, n * groups), torch.int64)
        self.eo = ops.empty((cap, hidden), torch.bfloat16)  # the experts' outputs
        self.back = ops.empty((slots, hidden), torch.bfloat16)
        self.so_back = ops.empty((2, n * groups), torch.int64)
        self.ones = torch.ones(slots, dtype=torch.int64, device=device)
        self.arange = torch.arange(slots, dtype=torch.int64, device=device)
        self.inv = torch.empty(slots, dtype=torch.int64, device=device)
        self.result = torch.empty((tokens, 1, hidden), dtype=torch.bfloat16, device=device)

    def dispatch(self, x_bytes, scale_bytes, idx):
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        self.inv.index_copy_(0, order, self.arange)
        packed = torch.cat((x_bytes, scale_bytes), dim=1)
        torch.index_select(packed, 0, torch.div(order, self.k, rounding_mode="floor"),
                           out=self.inp)
        self.splits.zero_()
        self.splits.scatter_add_(0, torch.div(flat, self.per_group, rounding_mode="floor"),
                                 self.ones)
        self.ops.a2a_2d(self.inp, self.out, self.splits, self.so, self.align)

    def combine(self, weights):
        self.ops.a2a_2d_offset(self.eo, self.back, self.so, self.so_back)
        y = self.back.index_select(0, self.inv).view(self.T, self.k, self.hidden)
        torch.bmm(weights.to(torch.bfloat16).view(self.T, 1, self.k), y, out=self.result)
        return self.result.view(self.T, self.hidden)


def even_splits(total, parts):
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# ---------------------------------------------------------------- timing
class Timer:
    def __init__(self, iters, reps):
        self.iters, self.reps = iters, reps
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        torch.cuda._sleep(1000000)
        b.record()
        b.synchronize()
        self.cycles_per_us = 1000000 / max(a.elapsed_time(b) * 1000, 1.0)
        self.host_us = 0.0

    def worst(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def __call__(self, fn):
        """(median us per call, spread %) of fn on the GPU, the slowest PE's; sets
        host_us (the slowest PE's host time to issue one call)."""
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
        # One hold for every PE (the slowest issuer's), so that all take the same decisions
        # below and their collective calls stay matched.
        hold_us = self.worst([max(500.0, 3 * host * 1e6 * self.iters)])[0]
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per, issue = [], []
        while len(per) < self.reps:
            dist.barrier()
            torch.cuda._sleep(int(hold_us * self.cycles_per_us))
            a.record()
            h0 = time.perf_counter()
            for _ in range(self.iters):
                fn()
            issued = time.perf_counter() - h0
            b.record()
            b.synchronize()
            # Every PE's calls must have been queued before its hold ran out: otherwise
            # the GPU waited for the host; hold longer and measure again.
            if self.worst([issued * 1e6 > 0.8 * hold_us])[0] and hold_us < 2e6:
                hold_us *= 2
                continue
            per.append(a.elapsed_time(b) * 1000 / self.iters)
            issue.append(issued * 1e6 / self.iters)
        med = statistics.median(per)
        med, spread, self.host_us = self.worst([med, 100 * (max(per) - min(per)) / med,
                                                statistics.median(issue)])
        return med, spread


def cell(t):
    return "%.1f ±%.0f%%" % t if t else "-"


def ratio(a, b):
    return "%.2f" % (a[0] / b[0]) if a and b else "-"


# ---------------------------------------------------------------- (a) dispatch / combine
def bench_moe(ops, timer, n, me, tokens, workers, out_lines):
    ne, H, A = EXPERTS_A, HIDDEN_A, ALIGN_A
    rb = H * 2
    splits = even_splits(tokens, n * ne)
    recv = sum(splits[me * ne:(me + 1) * ne]) * n  # every PE sends the same splits
    cap = max(sum(splits[j * ne:(j + 1) * ne]) for j in range(n)) * n + ne * A
    g = torch.Generator(device=DEV).manual_seed(100 + me)
    x = torch.randn((tokens, H), generator=g, device=DEV).to(torch.bfloat16)
    sp = torch.tensor(splits, dtype=torch.int64, device=DEV)
    t_in, t_out, t_back = (ops.empty(s, torch.bfloat16) for s in
                           ((tokens, H), (cap, H), (tokens, H)))
    t_sp = ops.empty((n * ne,), torch.int64)
    t_so, t_so2 = ops.empty((2, n * ne), torch.int64), ops.empty((2, n * ne), torch.int64)
    s_in, s_out, s_back = (symm.empty(s, torch.bfloat16, device=DEV) for s in
                           ((tokens, H), (cap, H), (tokens, H)))
    s_so = torch.empty((2, n * ne), dtype=torch.int64, device=DEV)
    s_so2 = torch.empty_like(s_so)
    t_in.copy_(x)
    s_in.copy_(x)
    t_sp.copy_(sp)
    torch.cuda.synchronize()
    dist.barrier()

    def t_dispatch():
        ops.a2a_2d(t_in, t_out, t_sp, t_so, A)

    def s_dispatch():
        symm.moe_dispatch(s_in, s_out, sp, s_so, major_align=A, workers=workers)

    def t_combine():
        ops.a2a_2d_offset(t_out, t_back, t_so, t_so2)

    def s_combine():
        symm.moe_combine(s_out, s_back, s_so, s_so2, workers=workers)

    # The same bytes first: splits, offsets, every received block and the round trip.
    t_dispatch()
    s_dispatch()
    t_combine()
    s_combine()
    torch.cuda.synchronize()
    symm.cuda_check()
    ok = torch.equal(t_so, s_so) and torch.equal(t_back, x) and torch.equal(s_back, x)
    for c, o in zip(s_so[0].tolist(), s_so[1].tolist()):
        ok = ok and torch.equal(t_out[o:o + c], s_out[o:o + c])
    ok = timer.worst([not ok])[0] == 0

    src, dst = torch.empty((cap, H), dtype=torch.bfloat16, device=DEV), \
        torch.empty((cap, H), dtype=torch.bfloat16, device=DEV)
    rows = {}
    rows["barrier"] = timer(lambda: symm.barrier(device=DEV))
    rows["barrier_host"] = timer.host_us
    res = []
    for name, tf, sf, nrows in (("dispatch (all_to_all_vdev_2d)", t_dispatch, s_dispatch, recv),
                                ("combine (all_to_all_vdev_2d_offset)", t_combine, s_combine,
                                 tokens)):
        tt = timer(tf)
        th = timer.host_us
        st = timer(sf)
        sh = timer.host_us
        ct = timer(lambda: dst[:nrows].copy_(src[:nrows]))
        res.append((name, nrows * rb, tt, st, ct, th, sh))
    if me:
        return ok
    out_lines += [
        "", "### MoE dispatch/combine: %d tokens x %d B per PE, %d experts per PE, "
        "major_align %d (%d PEs, MPS share %s%%, symm's blocks: %s)"
        % (tokens, rb, ne, A, n, mps_share(), workers or "automatic"), "",
        "| operation | bytes/PE | torch_us | symm_us | torch/symm | copy_us | symm %copy | "
        "host_us torch/symm |",
        "|---|---|---|---|---|---|---|---|"]
    for name, nb, tt, st, ct, th, sh in res:
        out_lines.append("| %s | %d | %s | %s | %s | %s | %.0f%% | %.0f / %.0f |" % (
            name, nb, cell(tt), cell(st), ratio(tt, st), cell(ct), 100 * ct[0] / st[0], th, sh))
    out_lines.append("| device barrier (symm) | 0 | - | %s | - | - | - | - / %.0f |"
                     % (cell(rows["barrier"]), rows["barrier_host"]))
    out_lines.append("")
    out_lines.append("check: torch and symm outputs %s (splits, offsets, every block, the "
                     "round trip)" % ("equal" if ok else "DIFFER"))
    return ok


# ---------------------------------------------------------------- (b) top-k layer
def routing(n, me, tokens, device, gen_seed):
    g = torch.Generator(device=device).manual_seed(gen_seed + me)
    scores = torch.rand((tokens, EXPERTS), generator=g, device=device)
    idx = scores.topk(TOPK, dim=1).indices.to(torch.int64)  # distinct experts, uniform
    w = torch.softmax(scores.gather(1, idx), dim=1).float()
    return idx, w, g


def received(idx, n, ne, reduce_sum):
    """Slots every PE receives (the team's sum of each PE's counts)."""
    cnt = torch.zeros(n * ne, dtype=torch.int64, device=idx.device)
    cnt.scatter_add_(0, idx.reshape(-1), torch.ones(idx.numel(), dtype=torch.int64,
                                                     device=idx.device))
    per_pe = cnt.view(n, ne).sum(1).cpu()
    return reduce_sum(per_pe)


def bench_topk(ops, timer, n, me, tokens, align, out_lines):
    ne, k, H = EXPERTS // n, TOPK, HIDDEN
    rb, srb = H, SCALES * 4
    idx, w, g = routing(n, me, tokens, DEV, 300)

    def allsum(t):
        t = t.clone()
        dist.all_reduce(t)
        return t

    recv = received(idx, n, ne, allsum)
    A = max(align, 1)
    cap = int(recv.max()) + ne * A
    x = torch.randn((tokens, H), generator=g, device=DEV).to(torch.float8_e4m3fn)
    scale = torch.rand((tokens, SCALES), generator=g, device=DEV)
    comp = TopkComposite(ops, n, tokens, k, ne, rb + srb, H, cap, align)
    comp.eo.normal_(generator=g)
    s_x = symm.empty((tokens, H), torch.float8_e4m3fn, device=DEV)
    s_sc = symm.empty((tokens, SCALES), torch.float32, device=DEV)
    s_eo = symm.empty((cap, H), torch.bfloat16, device=DEV)
    s_x.copy_(x)
    s_sc.copy_(scale)
    s_eo.normal_(generator=g)
    s_out = torch.empty((cap, H), dtype=torch.float8_e4m3fn, device=DEV)
    s_sout = torch.empty((cap, SCALES), dtype=torch.float32, device=DEV)
    s_back = torch.empty((tokens, H), dtype=torch.bfloat16, device=DEV)
    cnt, off = (torch.empty(ne, dtype=torch.int64, device=DEV) for _ in range(2))
    trows = torch.empty((tokens, k), dtype=torch.int64, device=DEV)
    nrows = torch.empty(1, dtype=torch.int64, device=DEV)
    ws = symm.cuda_topk_workspace(n, ne, tokens, k)
    xb, sb = x.view(torch.uint8), scale.view(torch.uint8)
    torch.cuda.synchronize()
    dist.barrier()

    def s_dispatch():
        symm.moe_topk_dispatch(s_x, s_out, idx, ne, major_align=align, sides=[(s_sc, s_sout)],
                               out_counts=cnt, out_offsets=off, topk_rows=trows,
                               out_rows=nrows, workspace=ws)

    def s_combine():
        symm.moe_topk_combine(s_eo, s_back, idx, trows, ne, topk_weights=w, workspace=ws)

    # the low-latency pair (DeepEP's layout: max_tokens rows per expert and source) at the
    # decode shape; its dispatch reads x and the scales where they are (not symmetric)
    ll = tokens <= LL_MAX_TOKENS
    if ll:
        mt, lrows = tokens, n * ne * tokens
        l_out = symm.empty((lrows, H), torch.float8_e4m3fn, device=DEV)
        l_sout = symm.empty((lrows, SCALES), torch.float32, device=DEV)
        l_cnt = symm.zeros((n * ne,), "int64", device=DEV)
        l_src = symm.zeros((lrows, 2), "int64", device=DEV)
        l_eo = symm.empty((lrows, H), torch.bfloat16, device=DEV)
        l_eo.normal_(generator=g)
        l_ws = symm.cuda_topk_ll_workspace(n, ne, mt, k, H, "bfloat16")

    def l_dispatch():
        symm.moe_topk_dispatch_ll(x, l_out, idx, ne, mt, l_cnt, l_src, l_ws,
                                  sides=[(scale, l_sout)])

    def l_combine():
        symm.moe_topk_combine_ll(l_eo, s_back, idx, ne, mt, l_cnt, l_src, l_ws, topk_weights=w)

    comp.dispatch(xb, sb, idx)
    s_dispatch()
    comp.combine(w)
    s_combine()
    if ll:
        l_dispatch()
        l_combine()
    torch.cuda.synchronize()
    symm.cuda_check()
    got_t, got_s = int(comp.so[0].sum()), int(cnt.sum())
    got_l = int(l_cnt.sum()) if ll else int(recv[me])
    ok = timer.worst([got_t != int(recv[me]) or got_s != int(recv[me]) or
                      got_l != int(recv[me])])[0] == 0

    slots = tokens * k
    db, cb = int(recv[me]) * (rb + srb), slots * H * 2
    cpy = torch.empty(2 * max(db, cb) + 64, dtype=torch.uint8, device=DEV)
    half = max(db, cb) + 32
    res = {}
    res["dispatch"] = (timer(lambda: comp.dispatch(xb, sb, idx)), timer.host_us)
    res["dispatch_a2a"] = (timer(lambda: ops.a2a_2d(comp.inp, comp.out, comp.splits, comp.so,
                                                    align)), timer.host_us)
    res["s_dispatch"] = (timer(s_dispatch), timer.host_us)
    res["combine"] = (timer(lambda: comp.combine(w)), timer.host_us)
    res["combine_a2a"] = (timer(lambda: ops.a2a_2d_offset(comp.eo, comp.back, comp.so,
                                                          comp.so_back)), timer.host_us)
    res["s_combine"] = (timer(s_combine), timer.host_us)
    if ll:
        res["l_dispatch"] = (timer(l_dispatch), timer.host_us)
        res["l_combine"] = (timer(l_combine), timer.host_us)
    res["copy_d"] = timer(lambda: cpy[half:half + db].copy_(cpy[:db]))
    res["copy_c"] = timer(lambda: cpy[half:half + cb].copy_(cpy[:cb]))
    res["barrier"] = timer(lambda: symm.barrier(device=DEV))
    if me:
        return ok
    kind = "decode" if tokens <= 128 else "normal"
    out_lines += [
        "", "### MoE top-k layer, %s shape: %d tokens per PE, hidden %d, top-%d of %d experts "
        "(%d per PE), fp8 e4m3 + %d fp32 scales, bf16 combine, major_align %d (%d PEs, MPS "
        "share %s%%)" % (kind, tokens, H, k, EXPERTS, ne, SCALES, align, n, mps_share()), "",
        "| step | bytes/PE | torch_us | symm_us | torch/symm | copy_us | host_us torch/symm |",
        "|---|---|---|---|---|---|---|"]

    def line(name, nb, t, s, c):
        out_lines.append("| %s | %d | %s | %s | %s | %s | %s |" % (
            name, nb, cell(t[0]), cell(s[0] if s else None), ratio(t[0], s[0] if s else None),
            cell(c), "%.0f / %s" % (t[1], "%.0f" % s[1] if s else "-")))

    line("dispatch: composite / moe_topk_dispatch", db, res["dispatch"], res["s_dispatch"],
         res["copy_d"])
    line("  of which all_to_all_vdev_2d", db, res["dispatch_a2a"], None, None)
    line("combine: composite / moe_topk_combine", cb, res["combine"], res["s_combine"],
         res["copy_c"])
    line("  of which all_to_all_vdev_2d_offset", cb, res["combine_a2a"], None, None)
    lt = (res["dispatch"][0][0] + res["combine"][0][0], 0)
    ls = (res["s_dispatch"][0][0] + res["s_combine"][0][0], 0)
    out_lines.append("| layer (dispatch + combine) | - | %.1f | %.1f | %s | - | - |"
                     % (lt[0], ls[0], ratio(lt, ls)))
    if ll:
        line("dispatch: composite / moe_topk_dispatch_ll", db, res["dispatch"],
             res["l_dispatch"], res["copy_d"])
        line("combine: composite / moe_topk_combine_ll", cb, res["combine"], res["l_combine"],
             res["copy_c"])
        ll_s = (res["l_dispatch"][0][0] + res["l_combine"][0][0], 0)
        out_lines.append("| layer, low-latency pair | - | %.1f | %.1f | %s | - | - |"
                         % (lt[0], ll_s[0], ratio(lt, ll_s)))
    out_lines.append("| device barrier (symm) | 0 | - | %s | - | - | - |" % cell(res["barrier"]))
    out_lines += ["", "torch's all_to_all_vdev_2d takes at most %d experts per rank: the "
                  "composite routes to %d groups of %d experts per PE. bytes/PE: dispatch, "
                  "rows received x (%d + %d); combine, slots x %d x 2 (what each moves)."
                  % (TORCH_MAX_EXPERTS, comp.groups, comp.per_group, rb, srb, H),
                  "check: slots received on PE 0: torch %d, symm %d%s, expected %d: %s"
                  % (got_t, got_s, ", low-latency %d" % got_l if ll else "", int(recv[0]),
                     "ok" if ok else "DIFFER")]
    return ok


# ---------------------------------------------------------------- (c) all_reduce, tile reduce
TORCH_AR = ("one_shot_all_reduce_out", "two_shot_all_reduce_")


def first_line(e):
    text = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, text[0][:120] if text else "")


def agree(timer, why, what):
    """why (this PE's reason not to run what, or None) made the same on every PE: a reason
    wherever any PE has one."""
    if not timer.worst([float(why is not None)])[0]:
        return None
    return why or "%s failed on another PE" % what


def fold_members(numel, dt, tag, n):
    """Every member's data (randn, seeded by tag and member) folded in team order and
    rounded to dt after every member, as symm reduces; and a generator of it by member."""
    def member(p):
        g = torch.Generator(device=DEV).manual_seed(1000 * tag + p)
        return torch.randn(numel, generator=g, device=DEV).to(dt)

    want = member(0)
    for p in range(1, n):
        want = (want.float() + member(p).float()).to(dt)
    return want, member


def bench_all_reduce(ops, timer, n, me, sizes, out_lines):
    top, ld = max(sizes), TILE_COLS + TILE_PAD
    t_buf = ops.empty((top,), torch.uint8)  # torch's heap: the input, in place for two-shot
    t_out = torch.empty(top, dtype=torch.uint8, device=DEV)
    s_vec = symm.empty((top,), torch.uint8, device=DEV)
    s_tile = symm.empty((top // TILE_COLS * ld,), torch.uint8, device=DEV)
    cpy = torch.empty(2 * top, dtype=torch.uint8, device=DEV)
    ptrs = ops.peer_ptrs(t_buf)
    why = None if all(ptrs) else "NVSHMEM gives no load/store address of PE %d's buffer" \
        % [bool(p) for p in ptrs].index(False)
    torch_why = {}
    for name in TORCH_AR:
        w = why or (None if hasattr(torch.ops.symm_mem, name)
                    else "this torch has no torch.ops.symm_mem.%s" % name)
        torch_why[name] = agree(timer, w, name)
    group = ops.group
    torch_fn = {
        "one_shot_all_reduce_out": lambda v, o: torch.ops.symm_mem.one_shot_all_reduce_out(
            v, "sum", group, o),
        "two_shot_all_reduce_": lambda v, o: torch.ops.symm_mem.two_shot_all_reduce_(
            v, "sum", group)}
    rows, ok, tag = [], True, 0
    for dt in (torch.float32, torch.bfloat16):
        es = torch.empty(0, dtype=dt).element_size()
        for size in sizes:
            tag += 1
            numel = size // es
            r = numel // TILE_COLS
            vs, vt, out = s_vec[:size].view(dt), t_buf[:size].view(dt), t_out[:size].view(dt)
            full = s_tile[:r * ld * es].view(dt).view(r, ld)
            tile, pad = full[:, :TILE_COLS], full[:, TILE_COLS:]
            want, member = fold_members(numel, dt, tag, n)
            mine = member(me)
            vs.copy_(mine)
            tile.copy_(mine.view(r, TILE_COLS))
            pad.fill_(7)
            torch.cuda.synchronize()
            dist.barrier()
            symm.all_reduce(vs)
            symm.tile_all_reduce(tile)
            torch.cuda.synchronize()
            symm.cuda_check()
            good = torch.equal(vs, want) and torch.equal(tile, want.view(r, TILE_COLS)) and \
                bool((pad == 7).all())
            # torch's kernels may add in another order, and bf16 once at the end: within
            # a few roundings of the terms
            tol = (1e-5, 1e-5 * n) if dt == torch.float32 else (1 / 64, n / 16)
            for name in TORCH_AR:
                if torch_why[name]:
                    continue
                vt.copy_(mine)
                torch.cuda.synchronize()
                dist.barrier()
                err = None
                try:
                    torch_fn[name](vt, out)
                    torch.cuda.synchronize()
                except Exception as e:  # torch raises RuntimeError, NotImplementedError...
                    err = first_line(e)
                torch_why[name] = agree(timer, err, name)
                if not torch_why[name]:
                    got = out if name == "one_shot_all_reduce_out" else vt
                    good = good and torch.allclose(got.float(), want.float(), rtol=tol[0],
                                                   atol=tol[1])
            ok = timer.worst([not good])[0] == 0 and ok
            # timed on the same buffers; in place, the values grow to inf, which a GPU adds
            # at full speed
            res = {"symm": (timer(lambda: symm.all_reduce(vs)), timer.host_us),
                   "tile": (timer(lambda: symm.tile_all_reduce(tile)), timer.host_us),
                   "copy": timer(lambda: cpy[top:top + size].copy_(cpy[:size]))}
            for name in TORCH_AR:
                if not torch_why[name]:
                    res[name] = (timer(lambda: torch_fn[name](vt, out)), timer.host_us)
            rows.append((dt, size, r, res, dict(torch_why)))
    if me:
        return ok
    out_lines += [
        "", "### all_reduce and tile all-reduce: float32 and bf16 (%d PEs, MPS share %s%%)"
        % (n, mps_share()), "",
        "| operation | bytes/PE | torch_us | symm_us | torch/symm | copy_us | symm %copy | "
        "host_us torch/symm |",
        "|---|---|---|---|---|---|---|---|"]

    def line(what, size, t, s, c, why):
        tcell = "n/a: %s" % why if why else cell(t[0])
        out_lines.append("| %s | %d | %s | %s | %s | %s | %.0f%% | %s / %.0f |" % (
            what, size, tcell, cell(s[0]), "-" if why else ratio(t[0], s[0]), cell(c),
            100 * c[0] / s[0][0], "-" if why else "%.0f" % t[1], s[1]))

    for dt, size, r, res, why in rows:
        tn = str(dt).replace("torch.", "")
        for name in TORCH_AR:
            line("all_reduce %s: %s / symm.all_reduce" % (tn, name), size, res.get(name),
                 res["symm"], res["copy"], why[name])
        have = [k for k in TORCH_AR if not why[k]]
        best = min(have, key=lambda k: res[k][0][0]) if have else TORCH_AR[1]
        line("tile %d x %d (ld %d) %s: %s / symm.tile_all_reduce" % (
            r, TILE_COLS, TILE_COLS + TILE_PAD, tn, best), size, res.get(best), res["tile"],
            res["copy"], why[best])
    out_lines += ["", "torch's tile_reduce needs NVLink multicast (off): symm's tile is set "
                  "beside torch's faster all-reduce of the same bytes, contiguous.",
                  "check: symm all_reduce and tile_all_reduce equal to the team-order fold, "
                  "torch's within rounding of it (every dtype and size): %s"
                  % ("ok" if ok else "DIFFER")]
    return ok


class Watchdog:
    """Ends this rank at the time limit wherever it is (a device wait that never returns
    cannot be left otherwise): rank 0 says which part of the run was cut, every rank prints
    its stack on stderr, and the rank exits with status 3. Tables already printed stay."""

    def __init__(self, limit_s, rank):
        self.part, self.limit, self.rank, self.timer = "start-up", limit_s, rank, None
        if limit_s > 0:
            self.timer = threading.Timer(limit_s, self.fire)
            self.timer.daemon = True
            self.timer.start()

    def fire(self):
        if self.rank == 0:
            print("\n%s: n/a: stopped at the time limit (--time-limit %g s)"
                  % (self.part, self.limit), flush=True)
        print("torch_symm_mem: rank %d stopped at the time limit in %s; where it was:"
              % (self.rank, self.part), file=sys.stderr, flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(3)

    def cancel(self):
        if self.timer is not None:
            self.timer.cancel()


def sizes_arg(text):
    """"1M,16M,64M" as bytes: multiples of 16 KiB (tile rows of 4096 float32)."""
    out = []
    for v in text.split(","):
        v = v.strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(v[-1:], 1)
        b = int(v[:-1] if mult > 1 else v) * mult
        if b <= 0 or b % (TILE_COLS * 4):
            raise argparse.ArgumentTypeError("%s is not a positive multiple of 16K" % v)
        out.append(b)
    return out


def mps_share():
    return os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100")


# ---------------------------------------------------------------- --cpu-check
def cpu_check(me, n):
    """The composite on CPU tensors, symm's CPU calls standing in for torch's, against a
    serial reference and against symm.moe_topk_dispatch / _combine: tokens of int8 values
    v (|v| < 16) with float32 scales, experts that return v/16 x c(g), c(g) = (g % 4 + 1)/4,
    weights in 256ths, so that every sum is exact. A second payload of (expert, source,
    token) per slot, sent through the same splits, says where every received row came
    from. Returns the number of failed checks on this PE."""
    ops = SymmCpu()
    T, k, ne, H, S = 37, 4, 6, 32, 2

    def tokens(s):
        gs = torch.Generator().manual_seed(700 + s)
        return (torch.randint(-15, 16, (T, H), generator=gs).to(torch.int8),
                torch.rand((T, S), generator=gs))

    g = torch.Generator().manual_seed(500 + me)
    idx = torch.rand((T, n * ne), generator=g).topk(k, dim=1).indices.to(torch.int64)
    w = torch.randint(1, 257, (T, k), generator=g).float() / 256
    x, scale = tokens(me)
    cnt = torch.zeros(n * ne, dtype=torch.int64)
    cnt.scatter_add_(0, idx.reshape(-1), torch.ones(T * k, dtype=torch.int64))
    allcnt = symm.empty((n * ne,), torch.int64, backend="torch")
    allcnt.copy_(cnt)
    symm.all_reduce(allcnt)
    cap = int(allcnt.view(n, ne).sum(1).max()) + ne * 4
    # At most 3 groups: 2 experts per group, as torch's 16 groups of 8 or 4 at 256 experts.
    comp = TopkComposite(ops, n, T, k, ne, H + 4 * S, H, cap, 4, max_groups=3, device="cpu")
    comp.dispatch(x.view(torch.uint8), scale.view(torch.uint8), idx)
    flat = idx.reshape(-1)
    order = torch.argsort(flat, stable=True)
    tag_in = ops.empty((T * k, 3), torch.int64)
    tag_in.copy_(torch.stack((flat[order], torch.full_like(order, me), order // k), dim=1))
    tag_out = ops.empty((cap, 3), torch.int64)
    ops.a2a_2d(tag_in, tag_out, comp.splits, ops.empty((2, comp.splits.numel()), torch.int64),
               4)
    bad = 0
    c = lambda e: (e % 4 + 1) / 4.0  # noqa: E731
    for cnt_, off in zip(comp.so[0].tolist(), comp.so[1].tolist()):
        for r in range(off, off + cnt_):
            e, s, t = tag_out[r].tolist()
            xs, ss = tokens(s)
            row = comp.out[r]
            bad += not torch.equal(row[:H].view(torch.int8), xs[t])
            bad += not torch.equal(row[H:].view(torch.float32), ss[t])
            bad += not (me * ne <= e < (me + 1) * ne)
            comp.eo[r] = (xs[t].float() / 16 * c(e)).to(torch.bfloat16)
    symm.barrier()
    got = comp.combine(w).float()
    want = sum(w[:, i:i + 1] * torch.tensor([c(int(e)) for e in idx[:, i]]).view(T, 1)
               for i in range(k)) * x.float() / 16
    bad += not torch.allclose(got, want.to(torch.bfloat16).float(), rtol=1 / 64, atol=1 / 64)
    # symm's top-k on the same tokens: its experts compute the same values.
    s_x = symm.empty((T, H), torch.int8, backend="torch")
    s_sc = symm.empty((T, S), torch.float32, backend="torch")
    s_x.copy_(x)
    s_sc.copy_(scale)
    s_out = torch.zeros((cap, H), dtype=torch.int8)
    s_sout = torch.zeros((cap, S))
    src = torch.empty((cap, 2), dtype=torch.int64)
    d = symm.moe_topk_dispatch(s_x, s_out, idx, ne, major_align=4, sides=[(s_sc, s_sout)],
                               out_src=src)
    s_eo = symm.empty((cap, H), torch.bfloat16, backend="torch")
    for e in range(ne):
        o, m = int(d.offsets[e]), int(d.counts[e])
        s_eo[o:o + m] = (s_out[o:o + m].float() / 16 * c(me * ne + e)).to(torch.bfloat16)
    s_back = torch.empty((T, H), dtype=torch.bfloat16)
    symm.barrier()
    symm.moe_topk_combine(s_eo, s_back, idx, d.topk_rows, ne, topk_weights=w)
    bad += not torch.allclose(s_back.float(), want.to(torch.bfloat16).float(), rtol=1 / 64,
                              atol=1 / 64)
    bad += int(d.counts.sum()) != int(comp.so[0].sum())
    symm.barrier()
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, default=0, help="start this many ranks (envrun.py)")
    ap.add_argument("--iters", type=int, default=10, help="calls per timed batch")
    ap.add_argument("--reps", type=int, default=15, help="timed batches")
    ap.add_argument("--tokens", type=int, default=4096, help="(a): tokens per PE")
    ap.add_argument("--topk-align", type=int, default=1,
                    help="(b): major_align of both sides (torch's must be >= 1)")
    ap.add_argument("--quick", action="store_true", help="few batches; (b) decode shape only")
    ap.add_argument("--cpu-check", action="store_true",
                    help="check the top-k composite on CPU tensors (no GPU)")
    ap.add_argument("--ar-sizes", type=sizes_arg, default=sizes_arg("1M,16M,64M"),
                    help="(c): bytes per PE, a comma list with K, M suffixes")
    ap.add_argument("--parts", default="moe,ar,topk",
                    help="what to run, a comma list of moe (a), ar (c), topk (b)")
    ap.add_argument("--workers", type=int, default=0,
                    help="(a): symm's blocks per call (0: automatic)")
    ap.add_argument("--time-limit", type=float, default=270,
                    help="seconds a rank may run (0: no limit)")
    argv = sys.argv[1:]
    a = ap.parse_args(argv)
    if a.np:
        rest, skip = [], False
        for v in argv:  # the ranks get every option but --np
            if not skip and v != "--np" and not v.startswith("--np="):
                rest.append(v)
            skip = v == "--np"
        return launch(a.np, rest)
    for k, v in ENV_DEFAULTS.items():
        os.environ.setdefault(k, v)
    global torch, dist, symm
    import torch
    import torch.distributed as dist

    import symm
    if a.cpu_check:
        symm.init()
        bad = cpu_check(symm.my_pe(), symm.n_pes())
        flag = symm.zeros((1,), "int64", backend="torch")
        flag[0] = bad
        symm.all_reduce(flag)
        if symm.my_pe() == 0:
            print("torch_symm_mem --cpu-check: %s (%d PEs)"
                  % ("OK" if flag[0] == 0 else "%d checks FAILED" % int(flag[0]), symm.n_pes()))
        failed = int(flag[0])
        symm.finalize()
        return 1 if failed else 0
    if not torch.cuda.is_available():
        print("torch_symm_mem: SKIP: no CUDA device")
        return 0
    watchdog = Watchdog(a.time_limit, int(os.environ.get("RANK", "0")))
    import torch.distributed._symmetric_memory as symm_mem
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    if hasattr(symm_mem, "is_nvshmem_available") and not symm_mem.is_nvshmem_available():
        if me == 0:
            print("torch_symm_mem: SKIP: this torch has no NVSHMEM")
        return 0
    symm_mem.set_backend("NVSHMEM")
    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        symm_mem.enable_symm_mem_for_group(group)
    symm.init(cuda=True)
    if a.quick:
        a.reps = min(a.reps, 5)
    timer = Timer(a.iters, a.reps)
    ops = TorchSymmMem(group)
    lines = ["# symm beside PyTorch SymmMem: torch %s, %d PEs on %s, MPS share %s%%; "
             "median of %d batches of %d calls, the slowest PE's"
             % (torch.__version__, n, torch.cuda.get_device_name(), mps_share(), a.reps,
                a.iters)]

    def flush():  # each table as soon as it is measured
        if me == 0 and lines:
            print("\n".join(lines), flush=True)
        del lines[:]

    flush()
    parts, ok = a.parts.split(","), True
    if "moe" in parts:
        watchdog.part = "MoE dispatch/combine"
        ok = bench_moe(ops, timer, n, me, a.tokens, a.workers, lines)
        flush()
    if "ar" in parts:
        watchdog.part = "all_reduce and tile all-reduce"
        ok = bench_all_reduce(ops, timer, n, me, a.ar_sizes, lines) and ok
        flush()
    if "topk" in parts and EXPERTS % n:
        lines.append("\ntop-k: SKIP (%d PEs do not divide %d experts)" % (n, EXPERTS))
    elif "topk" in parts:
        for tokens in ((128,) if a.quick else (4096, 128)):
            watchdog.part = "MoE top-k layer, %d tokens per PE" % tokens
            ok = bench_topk(ops, timer, n, me, tokens, a.topk_align, lines) and ok
            flush()
    flush()
    watchdog.part = "finalize"
    torch.cuda.synchronize()
    dist.barrier()
    symm.finalize()
    dist.destroy_process_group()
    watchdog.cancel()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
