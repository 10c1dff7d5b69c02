"""The table of gemm_sm90.sh: reads its logs in DIR and prints, per shape, cuBLAS's TFLOP/s
(torch_gemm.py, same call), kgen's with kernels.GemmSM90For's pick (the `table*` steps) and
the ratio, then every configuration the sweep timed and the best of them.

    python gemm_sm90_table.py DIR
"""
import glob
import os
import re
import sys

GEMM = re.compile(r"^gemm (\d+x\d+x\d+) (\w+): kgen +([\d.]+) us +([\d.]+) TFLOP/s")
KERNEL = re.compile(r"^  kernel (\S+)")
TORCH = re.compile(r"^gemm (\d+x\d+x\d+) (\w+): kgen .*\| cuBLAS +([\d.]+) us +([\d.]+) TFLOP/s \| kgen/cuBLAS ([\d.]+) \| (\w+)")


def kgen_runs(path):
    """(shape and type, kernel, TFLOP/s) of one gpubench log."""
    runs, last = [], None
    for line in open(path):
        m = GEMM.match(line)
        if m:
            last = (m.group(1) + " " + m.group(2), float(m.group(4)))
            continue
        m = KERNEL.match(line)
        if m and last:
            runs.append((last[0], m.group(1), last[1]))
            last = None
    return runs


def main():
    d = sys.argv[1]
    cublas, check = {}, {}
    for p in glob.glob(os.path.join(d, "*-torch.txt")):
        for line in open(p):
            m = TORCH.match(line)
            if m:
                key = m.group(1) + " " + m.group(2)
                cublas[key] = float(m.group(4))
                check[key] = m.group(6)
    picked = {}
    for p in glob.glob(os.path.join(d, "table*.txt")):
        if p.endswith("-torch.txt"):
            continue
        for shape, kern, tf in kgen_runs(p):
            picked[shape] = (kern, tf)
    sweep = {}
    for p in sorted(glob.glob(os.path.join(d, "sweep*-c*.txt"))):
        for shape, kern, tf in kgen_runs(p):
            sweep.setdefault(shape, []).append((tf, kern))
    shapes = sorted(set(picked) | set(sweep), key=lambda s: (s.split()[1], [int(x) for x in s.split()[0].split("x")]))
    print("| M x N x K, input | cuBLAS TFLOP/s | GemmSM90For's pick | kgen TFLOP/s | kgen/cuBLAS | D vs cuBLAS | best of the sweep | TFLOP/s | best/cuBLAS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in shapes:
        cb = cublas.get(s)
        kern, tf = picked.get(s, ("-", None))
        best = max(sweep.get(s, [(None, "-")]), key=lambda x: x[0] or 0)
        r = lambda x: f"{x / cb:.3f}" if x and cb else "-"
        f = lambda x: f"{x:.1f}" if x else "-"
        print(f"| {s} | {f(cb)} | {kern.removeprefix('gemm_sm90_')} | {f(tf)} | {r(tf)} | {check.get(s, '-')} | "
              f"{best[1].removeprefix('gemm_sm90_')} | {f(best[0])} | {r(best[0])} |")
    if sweep:
        print()
        print("sweep (TFLOP/s per configuration):")
        for s in shapes:
            print(f"  {s}: " + ", ".join(f"{k.removeprefix('gemm_sm90_')} {t:.1f}" for t, k in sweep.get(s, [])))


if __name__ == "__main__":
    main()
