#!/usr/bin/env python3
"""NCCL all-reduce timings through torch.distributed: the reference the kgen collectives are
compared with (see scripts/bench/README.md).

Run one process per GPU with torchrun, e.g. on a 2-GPU machine:

    torchrun --nproc-per-node=2 scripts/bench/nccl_allreduce.py --dtype float32

(scripts/bench/run_nccl.sh does that with every GPU of the machine.) For each message size
(4 KiB .. 256 MiB by default, powers of 4) every rank runs warm-up iterations, then times
each of N iterations with CUDA events on the current stream; the result is the median over
the iterations of the slowest rank's time. algbw = bytes / time; busbw = algbw * 2(n-1)/n
(NCCL's convention for all-reduce). Each size is checked once: every rank contributes
rank+1, so every element must equal n(n+1)/2.

NVLink SHARP multicast is forced off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1) because creating multicast objects can take a shared
host's GPUs down; set KGEN_ALLOW_NVLS=1 only on a machine where that is known to be safe.
"""
import argparse
import json
import os
import statistics
import sys

if os.environ.get("KGEN_ALLOW_NVLS") != "1":
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import torch  # noqa: E402  (after the environment is set)
import torch.distributed as dist  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32}


def parse_size(s):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    s = s.strip().lower().removesuffix("ib").removesuffix("b")
    if s and s[-1] in units:
        return int(float(s[:-1]) * units[s[-1]])
    return int(s)


def sizes(lo, hi, factor):
    n = lo
    while n <= hi:
        yield n
        n *= factor


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--min-bytes", default="4K", help="smallest message (default 4K)")
    ap.add_argument("--max-bytes", default="256M", help="largest message (default 256M)")
    ap.add_argument("--factor", type=int, default=4, help="size step (default 4)")
    ap.add_argument("--warmup", type=int, default=5, help="untimed iterations per size")
    ap.add_argument("--iters", type=int, default=20, help="timed iterations per size (median)")
    ap.add_argument("--json", action="store_true", help="print one JSON object per size")
    ap.add_argument("--loop", action="store_true",
                    help="time the iterations back to back between one pair of events and report the mean "
                         "(nccl-tests' method; launch latency overlaps) instead of the median of single calls")
    a = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    try:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    except TypeError:  # torch before 2.3 has no device_id
        dist.init_process_group("nccl")
    dt = DTYPES[a.dtype]
    esize = torch.tensor([], dtype=dt).element_size()
    stream = torch.cuda.current_stream()

    if rank == 0 and not a.json:
        print(f"# NCCL all-reduce, {world} GPUs ({torch.cuda.get_device_name(local)}), {a.dtype}, "
              f"median of {a.iters} after {a.warmup} warm-up, NVLS {'allowed' if os.environ.get('KGEN_ALLOW_NVLS') == '1' else 'off'}")
        print(f"{'bytes':>12} {'time_us':>10} {'algbw_GB/s':>11} {'busbw_GB/s':>11}")
    for nbytes in sizes(parse_size(a.min_bytes), parse_size(a.max_bytes), a.factor):
        n = max(nbytes // esize, 1)
        x = torch.full((n,), rank + 1, dtype=dt, device="cuda")
        dist.all_reduce(x)
        torch.cuda.synchronize()
        want = world * (world + 1) / 2
        if not bool((x.float() == want).all()):
            print(f"rank {rank}: wrong all-reduce result at {nbytes} bytes", file=sys.stderr)
            sys.exit(1)
        for _ in range(a.warmup):
            dist.all_reduce(x)
        times = []
        if a.loop:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(a.iters):
                dist.all_reduce(x)
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0 / a.iters)  # us per call
        for _ in range(0 if a.loop else a.iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            dist.all_reduce(x)
            end.record(stream)
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)  # us
        med = torch.tensor([statistics.median(times)], device="cuda")
        dist.all_reduce(med, op=dist.ReduceOp.MAX)  # the slowest rank's median
        us = med.item()
        algbw = n * esize / (us * 1e-6) / 1e9
        busbw = algbw * 2 * (world - 1) / world
        if rank == 0:
            if a.json:
                print(json.dumps({"impl": "nccl", "op": "allreduce", "dtype": a.dtype, "gpus": world, "bytes": n * esize,
                                  "time_us": round(us, 2), "algbw_gbps": round(algbw, 2), "busbw_gbps": round(busbw, 2)}))
            else:
                print(f"{n * esize:>12} {us:>10.1f} {algbw:>11.1f} {busbw:>11.1f}")
            sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
