#!/usr/bin/env python3
"""The anchors kgen's collectives are compared with, in one torchrun job (one process per
GPU), printed by rank 0 as JSON lines (scripts/bench/coll_suite.sh runs it):

  nccl  eager  all_reduce, reduce_scatter_tensor, all_gather_into_tensor through
               torch.distributed (NCCL): --iters calls back to back between one pair of
               CUDA events, the mean per call (kgen's "loop" mode).
  nccl  graph  N such calls captured in one CUDA graph (N = --graph-calls, --graph-calls-big
               above --big-bytes), replayed --graph-reps times, each replay between an event
               pair: the median replay / N.
  symm  graph  PyTorch symmetric memory, all-reduce only: torch.ops.symm_mem.two_shot_all_reduce_
               (in place) and one_shot_all_reduce (out of place; its _out form when torch has
               it), graphs as above. Checked for at run time: an older torch prints an
               "unavailable" line and the rest goes on.

Sizes (bytes) are those of the larger buffer, as nccl-tests count them: the all-reduce
buffer, the reduce-scatter input and the all-gather output. Every (anchor, op, dtype, size)
is checked once before it is timed: rank r's input element i is (r+1)*(i%5+1) (exact in
bf16); the outputs are compared exactly. Times are the slowest rank's (an all-reduce MAX).
Every measurement sits in its own try/except: a failure prints {"error": ...} and the
next one runs (a failure on one rank only may still leave the others waiting in a
collective: the suite's timeout covers that). NVLink SHARP multicast is forced off.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

if os.environ.get("KGEN_ALLOW_NVLS") != "1":
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

T0 = time.time()

import torch  # noqa: E402  (after the environment is set)
import torch.distributed as dist  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
OPS = ("allreduce", "reducescatter", "allgather")


def parse_size(s):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower().removesuffix("ib").removesuffix("b")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def size_list(a):
    if a.sizes:
        return [parse_size(x) for x in a.sizes.split(",") if x.strip()]
    out, n = [], parse_size(a.min_bytes)
    while n <= parse_size(a.max_bytes):
        out.append(n)
        n *= 4
    return out


class Ctx:
    def __init__(self, a):
        self.a = a
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.dev = torch.device("cuda", torch.cuda.current_device())

    def out(self, **kv):
        if self.rank == 0:
            kv.setdefault("gpus", self.world)
            print(json.dumps(kv), flush=True)

    def progress(self, msg):
        if self.rank == 0:
            print(f"anchors {time.time() - T0:6.1f}s: {msg}", file=sys.stderr, flush=True)

    def slowest(self, us, ok):
        """The slowest rank's time and whether every rank's check passed."""
        t = torch.tensor([us, 0.0 if ok else 1.0], device=self.dev, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t[0].item(), t[1].item() == 0.0

    def pattern(self, n, dtype, scale):
        """scale * (i%5+1) for i < n."""
        return ((torch.arange(n, device=self.dev) % 5 + 1) * scale).to(dtype)

    def graph_calls(self, nbytes):
        return self.a.graph_calls if nbytes <= parse_size(self.a.big_bytes) else self.a.graph_calls_big


def bw(op, nbytes, us, world):
    algbw = nbytes / (us * 1e-6) / 1e9
    bus = algbw * (world - 1) / world
    return round(algbw, 2), round(bus * 2 if op == "allreduce" else bus, 2)


def time_eager(cx, call, iters, warmup):
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    dist.barrier()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        call()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1000.0 / iters


def time_graph(cx, call, calls, reps):
    """Captures `calls` calls into one CUDA graph (after a warm-up on a side stream, as
    torch.cuda.graphs recommends) and returns the median replay time per call (us)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    try:
        # thread_local: the NCCL watchdog thread's event queries stay legal while this
        # thread captures (torch 2.1 on); older torch takes no such argument.
        capture = torch.cuda.graph(g, capture_error_mode="thread_local")
    except TypeError:
        capture = torch.cuda.graph(g)
    with capture:
        for _ in range(calls):
            call()
    torch.cuda.synchronize()
    dist.barrier()
    g.replay()  # warm-up replay
    torch.cuda.synchronize()
    dist.barrier()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0 / calls)
    del g
    torch.cuda.synchronize()
    return statistics.median(ts)


def nccl_case(cx, op, dtype, nbytes, modes):
    """NCCL op at nbytes: check, then each of modes ("eager", "graph")."""
    a, r, w = cx.a, cx.rank, cx.world
    esize = torch.tensor([], dtype=dtype).element_size()
    n = nbytes // esize // w * w
    m = n // w
    S = w * (w + 1) // 2
    if op == "allreduce":
        x = cx.pattern(n, dtype, r + 1)
        want = cx.pattern(n, dtype, S)
        src, dst = x, x

        def call():
            dist.all_reduce(x)
        # in place: the check must come from a fresh copy of the input
        call()
        ok = bool(torch.equal(x, want))
    elif op == "reducescatter":
        src = cx.pattern(n, dtype, r + 1)
        dst = torch.empty(m, dtype=dtype, device=cx.dev)
        want = ((torch.arange(r * m, (r + 1) * m, device=cx.dev) % 5 + 1) * S).to(dtype)

        def call():
            dist.reduce_scatter_tensor(dst, src)
        call()
        ok = bool(torch.equal(dst, want))
    else:
        src = cx.pattern(m, dtype, r + 1)
        dst = torch.empty(n, dtype=dtype, device=cx.dev)
        i = torch.arange(n, device=cx.dev)
        want = ((i // m + 1) * (i % m % 5 + 1)).to(dtype)

        def call():
            dist.all_gather_into_tensor(dst, src)
        call()
        ok = bool(torch.equal(dst, want))
    del want
    for mode in modes:
        try:
            if mode == "eager":
                calls = a.iters
                us = time_eager(cx, call, calls, a.warmup)
            else:
                calls = cx.graph_calls(n * esize)
                us = time_graph(cx, call, calls, a.graph_reps)
            us, allok = cx.slowest(us, ok)
            algbw, busbw = bw(op, n * esize, us, w)
            cx.out(impl="nccl", op=op, dtype=NAMES[dtype], bytes=n * esize, mode=mode, time_us=round(us, 3),
                   algbw_gbps=algbw, busbw_gbps=busbw, calls=calls, check="ok" if allok else "FAIL")
        except Exception as e:  # noqa: BLE001
            cx.out(impl="nccl", op=op, dtype=NAMES[dtype], bytes=nbytes, mode=mode, error=f"{type(e).__name__}: {e}"[:500])
            traceback.print_exc()


class Symm:
    """PyTorch symmetric memory, written for torch 2.5 through 2.11: symm_mem.empty +
    rendezvous(t, group=name) (2.6 on), else _SymmetricMemory.empty_strided_p2p (2.5);
    enable_symm_mem_for_group where it exists (needed before 2.8, a no-op or warning later)."""

    def __init__(self, cx):
        self.cx = cx
        import torch.distributed._symmetric_memory as sm  # raises on a torch without it
        self.sm = sm
        self.group = dist.group.WORLD.group_name
        if hasattr(sm, "enable_symm_mem_for_group"):
            try:
                sm.enable_symm_mem_for_group(self.group)
            except Exception:  # noqa: BLE001  (deprecated or already enabled)
                pass
        ops = torch.ops.symm_mem
        self.ops = {}
        for name in ("one_shot_all_reduce", "one_shot_all_reduce_out", "two_shot_all_reduce_"):
            try:
                self.ops[name] = getattr(ops, name)
            except (AttributeError, RuntimeError):
                pass
        self.bufs = {}

    def empty(self, n, dtype):
        key = (n, dtype)
        if key in self.bufs:
            return self.bufs[key]
        sm, dev = self.sm, self.cx.dev
        if hasattr(sm, "empty"):
            t = sm.empty(n, dtype=dtype, device=dev)
            if hasattr(sm, "rendezvous"):
                try:
                    sm.rendezvous(t, group=self.group)
                except TypeError:
                    sm.rendezvous(t, self.group)
        else:  # torch 2.5
            from torch._C._distributed_c10d import _SymmetricMemory
            t = _SymmetricMemory.empty_strided_p2p((n,), (1,), dtype, dev, self.group)
            _SymmetricMemory.rendezvous(t)
        self.bufs[key] = t
        return t

    def case(self, alg, dtype, nbytes):
        cx, a, r, w = self.cx, self.cx.a, self.cx.rank, self.cx.world
        esize = torch.tensor([], dtype=dtype).element_size()
        n = nbytes // esize
        S = w * (w + 1) // 2
        impl = "symm/" + alg
        try:
            t = self.empty(n, dtype)
            want = cx.pattern(n, dtype, S)
            t.copy_(cx.pattern(n, dtype, r + 1))
            torch.cuda.synchronize()
            dist.barrier()
            if alg == "two_shot":
                op = self.ops["two_shot_all_reduce_"]

                def call():
                    op(t, "sum", self.group)
                call()
                torch.cuda.synchronize()
                ok = bool(torch.equal(t, want))
            else:
                res, call = None, None
                if "one_shot_all_reduce_out" in self.ops:
                    out_op = self.ops["one_shot_all_reduce_out"]
                    res = torch.empty(n, dtype=dtype, device=cx.dev)

                    def call():
                        out_op(t, "sum", self.group, res)
                    try:
                        call()
                    except Exception as e:  # noqa: BLE001  (another schema: use the plain op)
                        cx.progress(f"one_shot_all_reduce_out failed ({type(e).__name__}: {e}); using one_shot_all_reduce")
                        del self.ops["one_shot_all_reduce_out"]
                        res, call = None, None
                if call is None:
                    op = self.ops["one_shot_all_reduce"]

                    def call():
                        return op(t, "sum", self.group)
                    res = call()
                torch.cuda.synchronize()
                ok = bool(torch.equal(res, want))
            del want
            calls = cx.graph_calls(n * esize)
            us = time_graph(cx, call, calls, a.graph_reps)
            us, allok = cx.slowest(us, ok)
            algbw, busbw = bw("allreduce", n * esize, us, w)
            cx.out(impl=impl, op="allreduce", dtype=NAMES[dtype], bytes=n * esize, mode="graph", time_us=round(us, 3),
                   algbw_gbps=algbw, busbw_gbps=busbw, calls=calls, check="ok" if allok else "FAIL")
        except Exception as e:  # noqa: BLE001
            cx.out(impl=impl, op="allreduce", dtype=NAMES[dtype], bytes=nbytes, mode="graph", error=f"{type(e).__name__}: {e}"[:500])
            traceback.print_exc()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--ops", default=",".join(OPS), help="allreduce, reducescatter, allgather")
    ap.add_argument("--anchors", default="nccl_eager,nccl_graph,symm", help="nccl_eager, nccl_graph, symm")
    ap.add_argument("--sizes", default="", help="comma-separated sizes (4K, 1M, ...); overrides --min/--max-bytes")
    ap.add_argument("--min-bytes", default="4K")
    ap.add_argument("--max-bytes", default="256M")
    ap.add_argument("--symm-max-bytes", default="256M", help="largest symmetric-memory all-reduce")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50, help="eager calls timed back to back")
    ap.add_argument("--graph-calls", type=int, default=50, help="calls per graph up to --big-bytes")
    ap.add_argument("--graph-calls-big", type=int, default=10, help="calls per graph above --big-bytes")
    ap.add_argument("--big-bytes", default="4M")
    ap.add_argument("--graph-reps", type=int, default=5, help="timed replays (median)")
    a = ap.parse_args()

    local = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    torch.cuda.set_device(local)
    try:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    except TypeError:  # torch before 2.3 has no device_id
        dist.init_process_group("nccl")
    cx = Ctx(a)
    anchors = set(x.strip() for x in a.anchors.split(",") if x.strip())
    dtypes = [DTYPES[x.strip()] for x in a.dtypes.split(",") if x.strip()]
    ops = [x.strip() for x in a.ops.split(",") if x.strip() in OPS]
    sizes = size_list(a)
    try:
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001
        nccl = "?"
    cx.progress(f"torch {torch.__version__}, {cx.world} x {torch.cuda.get_device_name(local)}, NCCL {nccl}; "
                f"started in {time.time() - T0:.1f}s")
    cx.out(env="torch", torch=torch.__version__, nccl=nccl, device=torch.cuda.get_device_name(local))
    modes = [m for m in ("eager", "graph") if "nccl_" + m in anchors]
    if modes:
        for op in ops:
            for dt in dtypes:
                cx.progress(f"nccl {op} {NAMES[dt]} {'+'.join(modes)}")
                for nb in sizes:
                    try:
                        nccl_case(cx, op, dt, nb, modes)
                    except Exception as e:  # noqa: BLE001
                        cx.out(impl="nccl", op=op, dtype=NAMES[dt], bytes=nb, error=f"{type(e).__name__}: {e}"[:500])
                        traceback.print_exc()
                    torch.cuda.empty_cache()
    if "symm" in anchors and "allreduce" in ops:
        try:
            sy = Symm(cx)
            algs = [alg for alg, op in (("two_shot", "two_shot_all_reduce_"), ("one_shot", "one_shot_all_reduce"))
                    if op in sy.ops]
            missing = [op for op in ("two_shot_all_reduce_", "one_shot_all_reduce") if op not in sy.ops]
            if missing:
                cx.out(impl="symm", op="allreduce", error=f"unavailable in torch {torch.__version__}: torch.ops.symm_mem." + ", ".join(missing))
        except Exception as e:  # noqa: BLE001
            algs = []
            cx.out(impl="symm", op="allreduce", error=f"unavailable in torch {torch.__version__}: {type(e).__name__}: {e}"[:500])
        smax = parse_size(a.symm_max_bytes)
        # Two-shot first at every size: a one-shot hang at a large size (the suite's timeout
        # ends the job) then costs the one-shot results only.
        for alg in algs:
            for dt in dtypes:
                cx.progress(f"symm {alg} {NAMES[dt]}")
                for nb in sizes:
                    if nb <= smax:
                        sy.case(alg, dt, nb)
    cx.progress("done")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
