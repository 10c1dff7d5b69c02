"""torch's grouped GEMM on the shape `gpubench grouped -dir DIR` timed, in the same device call.

Reads DIR/kgen.json (the experts' row counts, N, K, dtype, kgen's median µs) and builds
random inputs of the same shape. bf16: A [rows, K] (the experts' rows stacked), B [experts, K, N], offs
the int32 cumulative row ends (torch._grouped_mm's convention: no leading 0). Times with
CUDA events (3 warm-ups, median of REPS):
  - torch._grouped_mm(A, B, offs=offs) with B row-major [E, K, N] (kgen's layout), and with
    B stored column-major (B = Bt.transpose(-2, -1), Bt [E, N, K] contiguous), each where the
    installed torch accepts it;
  - a loop of torch.matmul over the experts (cuBLAS per expert; the unfused anchor).
e4m3 (kgen's -dtype e4m3: B each expert's N x K, row scales of A, per-expert column scales
of B, bf16 out):
  - torch._scaled_grouped_mm(A8, B8 (column-major), scale_a [rows], scale_b [E, N],
    offs=offs, out_dtype=bf16), where the installed torch has it;
  - a loop of torch._scaled_mm over the experts (its row-wise scales).
Checks each path against the loop (max |diff| / max |ref|) and prints µs, TFLOP/s
(2*rows*N*K) and kgen / path (a ratio below 1 means kgen is faster); then each of kgen's
variants (`gpubench grouped -variants`, and the dense gemm of `-dense`) against the best
torch path.

    python torch_grouped.py DIR [REPS]
"""
import json
import os
import sys

import torch


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: torch_grouped.py DIR [REPS]")
    d = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with open(os.path.join(d, "kgen.json")) as f:
        rec = json.load(f)
    counts, n, k = rec["Counts"], rec["N"], rec["K"]
    e, rows = len(counts), sum(counts)
    flops = 2.0 * rows * n * k
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; {e} experts, {rows} rows {counts}, N {n}, K {k}, {rec.get('DType', 'bf16')}")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = (torch.rand(rows, k, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    b = (torch.rand(e, k, n, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
    ends = torch.tensor(counts, device="cuda", dtype=torch.int64).cumsum(0).to(torch.int32)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    kus = rec["KgenUS"]
    print(f"{'kgen ' + rec['Kernel']:56s} {kus:10.1f} us {flops / kus / 1e6:8.1f} TFLOP/s  (sampled error {rec['SampleErr']:.3g} of tolerance)")
    if rec.get("DType") == "e4m3":
        paths = fp8_paths(a, b, counts, starts, ends, out)
    else:
        paths = bf16_paths(a, b, counts, starts, ends, out)
    ref = None
    best = None
    for name, fn in paths:
        try:
            got = fn()
            if got is None:
                got = out
            got = got.float().clone()
            if ref is None:  # the first path (the loop) is the reference
                ref, scale = got, got.abs().max().item() or 1.0
            err = (got - ref).abs().max().item() / scale
            us = timed(fn, reps)
        except Exception as x:  # a layout or dtype this torch's kernel refuses
            print(f"{name:56s} not run: {str(x).splitlines()[0][:120]}")
            continue
        best = us if best is None else min(best, us)
        print(f"{name:56s} {us:10.1f} us {flops / us / 1e6:8.1f} TFLOP/s  kgen/path {kus / us:6.3f}  max|diff|/max|ref| {err:.2e}")
    if best is not None:
        print(f"kgen / best torch path: {kus / best:.3f}")
        for v in rec.get("Variants") or []:
            print(f"  variant {v['Variant']:26s} {v['Kernel']:58s} {v['US']:10.1f} us {flops / v['US'] / 1e6:8.1f} TFLOP/s"
                  f"  kgen/torch {v['US'] / best:6.3f}  (sampled error {v['SampleErr']:.3g})")


def bf16_paths(a, b, counts, starts, ends, out):
    e = len(counts)

    def loop():
        for i in range(e):
            if counts[i]:
                torch.matmul(a[starts[i]:starts[i + 1]], b[i], out=out[starts[i]:starts[i + 1]])

    paths = [("loop of torch.matmul", loop)]
    if hasattr(torch, "_grouped_mm"):
        b_col = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # same values, column-major
        paths.append(("torch._grouped_mm (B row-major)", lambda: torch._grouped_mm(a, b, offs=ends)))
        paths.append(("torch._grouped_mm (B column-major)", lambda: torch._grouped_mm(a, b_col, offs=ends)))
    else:
        print("torch._grouped_mm: not in this torch")
    return paths


def fp8_paths(a, b, counts, starts, ends, out):
    e, rows, n = len(counts), a.shape[0], b.shape[2]
    g = torch.Generator(device="cuda").manual_seed(1)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.transpose(-2, -1).contiguous().to(torch.float8_e4m3fn).transpose(-2, -1)  # [E, K, N], K-major
    sa = torch.rand(rows, device="cuda", generator=g, dtype=torch.float32) * 1.5 + 0.5
    sb = torch.rand(e, n, device="cuda", generator=g, dtype=torch.float32) * 1.5 + 0.5

    def loop():
        for i in range(e):
            if counts[i]:
                r0, r1 = starts[i], starts[i + 1]
                out[r0:r1] = torch._scaled_mm(a8[r0:r1], b8[i], scale_a=sa[r0:r1, None], scale_b=sb[i][None, :],
                                              out_dtype=torch.bfloat16)

    paths = [("loop of torch._scaled_mm (row-wise scales)", loop)]
    if hasattr(torch, "_scaled_grouped_mm"):
        paths.append(("torch._scaled_grouped_mm", lambda: torch._scaled_grouped_mm(
            a8, b8, sa, sb, offs=ends, out_dtype=torch.bfloat16)))
    else:
        print("torch._scaled_grouped_mm: not in this torch")
    return paths


if __name__ == "__main__":
    main()
