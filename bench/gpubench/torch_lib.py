#!/usr/bin/env python3
"""PyTorch's equivalents of `gpubench lib`'s cases, timed the same way, and the joined table.

    python3 torch_lib.py KGEN_TSV [--reps 30]

KGEN_TSV holds gpubench lib's lines (see bench/gpubench/lib.go). For every `kgen` line this
times PyTorch's equivalent on GPU 0 with the same shape and dtype: CUDA events around each
call, the median of --reps calls after 3 warm-ups (the upper median, as gpubench). It prints
a Markdown table: both times, the speed ratio (PyTorch time / kgen time: above 1, kgen is
faster), kgen's bandwidth (bytes the kernel must read plus write, per second) and its share
of the device-to-device copy's bandwidth (the last `memcpy` line: the largest copy); then the
`sweep` lines. At the long-row shapes both kernels of a row family have a line
(softmax and softmax_split, row_sum and row_sum_split) against the same PyTorch time; the
"host's choice" column marks the one kernels.ChooseRowKernel picks (gpubench's CHOICE field).

Equivalents: tiled_copy dst.copy_(src); transpose out.copy_(x.t()); vector_add
torch.add(a, b, out=c); axpy y.add_(x, alpha=1.5); softmax and softmax_split
torch.softmax(x, -1) (f16/bf16 computed in f32, as kgen); row_sum and row_sum_split
torch.sum(x, 1, dtype=float32, out=o); memcpy dst.copy_(src) of the same bytes.
"""
import argparse
import sys

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "u8": torch.uint8}


# The split-row kernels compute what their families do.
EQUIV = {"softmax_split": "softmax", "row_sum_split": "row_sum"}


def time_us(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1000.0)
    ts.sort()
    return ts[len(ts) // 2]


def dims(shape):
    return [int(x) for x in shape.split("x")]


def torch_case(kernel, dt, shape):
    """Returns a no-argument function running PyTorch's equivalent of one case."""
    t = DTYPES[dt]
    d = dims(shape)
    kernel = EQUIV.get(kernel, kernel)
    dev = "cuda"
    if kernel in ("tiled_copy", "copy"):
        src = torch.empty(d[0], dtype=t, device=dev).random_(0, 100)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    if kernel == "transpose":
        x = torch.randn(d[0], d[1], dtype=t, device=dev)
        out = torch.empty(d[1], d[0], dtype=t, device=dev)
        return lambda: out.copy_(x.t())
    if kernel == "vector_add":
        a, b = torch.randn(d[0], dtype=t, device=dev), torch.randn(d[0], dtype=t, device=dev)
        c = torch.empty_like(a)
        return lambda: torch.add(a, b, out=c)
    if kernel == "axpy":
        x, y = torch.randn(d[0], dtype=t, device=dev), torch.randn(d[0], dtype=t, device=dev)
        return lambda: y.add_(x, alpha=1.5)
    if kernel == "softmax":
        x = torch.randn(d[0], d[1], dtype=t, device=dev) * 3
        return lambda: torch.softmax(x, -1)
    if kernel == "row_sum":
        x = torch.randn(d[0], d[1], dtype=t, device=dev)
        o = torch.empty(d[0], dtype=torch.float32, device=dev)
        return lambda: torch.sum(x, 1, dtype=torch.float32, out=o)
    raise SystemExit(f"torch_lib.py: no PyTorch equivalent for kernel {kernel}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kgen_tsv")
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    rows, sweeps, copy_gbs, torch_times = [], [], None, {}
    for line in open(a.kgen_tsv):
        if line.startswith("#"):
            print(line.rstrip())
            continue
        f = line.rstrip("\n").split("\t")
        if len(f) not in (7, 8):
            continue
        kind, kernel, dt, shape, launch, us, nbytes = f[:7]
        choice = {"chosen": "yes", "other": "no"}.get(f[7], "-") if len(f) == 8 else "-"
        us, nbytes = float(us), int(nbytes)
        if kind == "memcpy":
            copy_gbs = nbytes / us / 1e3  # the last (largest) copy is the reference
            torch_us = time_us(torch_case("copy", "u8", shape), a.reps)
            print(f"# cuMemcpyDtoD {shape} bytes: {us:.1f} us, {copy_gbs:.1f} GB/s; "
                  f"torch copy_: {torch_us:.1f} us, {nbytes / torch_us / 1e3:.1f} GB/s")
        elif kind == "kgen":
            key = (EQUIV.get(kernel, kernel), dt, shape)
            if key not in torch_times:  # one PyTorch time for both kernels of a family
                torch_times[key] = time_us(torch_case(kernel, dt, shape), a.reps)
                torch.cuda.empty_cache()
            rows.append((kernel, dt, shape, launch, us, torch_times[key], nbytes, choice))
        elif kind == "sweep":
            sweeps.append((kernel, dt, shape, launch, us))
    if copy_gbs is None:
        raise SystemExit("torch_lib.py: no memcpy line in " + a.kgen_tsv)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print()
    print("| kernel | dtype | shape | launch | host's choice | kgen (us) | PyTorch (us) | speed vs PyTorch | kgen GB/s | % of copy |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    best = {}
    for kernel, dt, shape, launch, us, torch_us, nbytes, choice in rows:
        gbs = nbytes / us / 1e3
        best[(kernel, dt, shape)] = us
        print(f"| {kernel} | {dt} | {shape} | {launch} | {choice} | {us:.1f} | {torch_us:.1f} | {torch_us / us:.2f} "
              f"| {gbs:.0f} | {100 * gbs / copy_gbs:.1f}% |")
    if sweeps:
        print()
        print("| kernel | dtype | shape | other launch | kgen (us) | vs default launch |")
        print("|---|---|---|---|---|---|")
        for kernel, dt, shape, launch, us in sweeps:
            d = best.get((kernel, dt, shape))
            print(f"| {kernel} | {dt} | {shape} | {launch} | {us:.1f} | {d / us:.2f} |" if d else
                  f"| {kernel} | {dt} | {shape} | {launch} | {us:.1f} | - |")


if __name__ == "__main__":
    sys.exit(main())
