"""Joins `gpubench fused -json` (every rank's lines) and torch_fused.py's into one table.

Per (op, gpus, M, N, K): the slowest rank's median of each implementation, in us, and the
ratios fused/gemm (the fusion's cost with nothing to overlap, at 1 GPU), fused/unfused (kgen's
own collective + gemm in sequence) and fused/torch (NCCL + cuBLAS in sequence); < 1 means
the fused kernel is faster. kgen/comm is the Comm's default choice (fused kernel, or
collective + GEMM); comm/torch is what a caller gets against NCCL + cuBLAS; kgen/overlap
is MatmulOverlap (AllGatherMatmul on the copy engines); overlap/ideal is its time over
max(kgen's GEMM alone, NCCL's collective alone), and "ideal speedup" 1 + shorter/longer, the
best any overlap can do over the sequence. kgen/overlap-signal (gpubench fused -rs-signal,
gemm_rs only) is MatmulReduceScatter with one piece-signalling GEMM and stream waits
(Options.OverlapSignals); signal/ideal is its time over the same ideal.

    python3 fused_join.py KGEN.jsonl [TORCH.jsonl] [--markdown]
"""
import json
import sys


def load(path, into):
    for line in open(path):
        line = line.strip()
        if line.startswith("[rank "):  # kgen launch prefixes every rank's output line
            line = line.split("] ", 1)[-1]
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["op"], r["gpus"], r["m"], r["n"], r["k"])
        d = into.setdefault(key, {})
        d[r["impl"]] = max(d.get(r["impl"], 0.0), r["time_us"])


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    rows = {}
    for p in args:
        load(p, rows)
    cols = ["kgen/fused", "kgen/comm", "kgen/overlap", "kgen/overlap-signal", "kgen/unfused", "kgen/gemm", "torch/nccl+cublas", "torch/cublas", "torch/nccl"]
    head = (["op", "gpus", "MxNxK"] + [c + " (us)" for c in cols] +
            ["fused/gemm", "fused/unfused", "fused/torch", "comm/torch", "overlap/torch", "overlap/ideal", "signal/ideal", "ideal speedup"])
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for key in sorted(rows):
        d = rows[key]
        op, g, m, n, k = key
        f = d.get("kgen/fused")

        def ratio(c):
            return f"{f / d[c]:.3f}" if f and d.get(c) else "-"

        cells = [op, str(g), f"{m}x{n}x{k}"] + [f"{d[c]:.1f}" if c in d else "-" for c in cols]
        cells += [ratio("kgen/gemm"), ratio("kgen/unfused"), ratio("torch/nccl+cublas")]
        t = d.get("torch/nccl+cublas")
        for c in (d.get("kgen/comm"), d.get("kgen/overlap")):
            cells.append(f"{c / t:.3f}" if c and t else "-")
        # The ideal overlapped time: max(kgen's GEMM alone, NCCL's collective alone); the
        # ideal speedup over the sequence: 1 + shorter/longer.
        gm, nc, ov = d.get("kgen/gemm"), d.get("torch/nccl"), d.get("kgen/overlap")
        ideal = max(gm, nc) if gm and nc else None
        cells.append(f"{ov / ideal:.3f}" if ov and ideal else "-")
        sg = d.get("kgen/overlap-signal")  # gpubench fused -rs-signal (gemm_rs only)
        cells.append(f"{sg / ideal:.3f}" if sg and ideal else "-")
        cells.append(f"{1 + min(gm, nc) / max(gm, nc):.2f}" if ideal else "-")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
