"""cuBLAS (torch.matmul) on the inputs `gpubench gemm -dir DIR` wrote, in the same device call.

For each problem directory (MxNxK) under DIR: loads A (M x K), B (K x N) and kgen's D (M x N),
all row-major bf16 or f16; times torch.matmul(A, B) with CUDA events (3 warm-ups, median of
REPS); compares kgen's D with torch's element by element; prints both TFLOP/s and the ratio.
Exits non-zero when a check fails.

    python torch_gemm.py DIR [REPS]
"""
import json
import os
import sys

import numpy as np
import torch


def load(path, rows, cols, dtype):
    raw = np.fromfile(path, dtype=np.uint16).reshape(rows, cols)
    return torch.from_numpy(raw.view(np.int16)).view(dtype).cuda()


def main():
    root = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ok = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for name in sorted(os.listdir(root), key=lambda s: [int(x) for x in s.split("x")]):
        sub = os.path.join(root, name)
        rec = json.load(open(os.path.join(sub, "kgen.json")))
        m, n, k = rec["M"], rec["N"], rec["K"]
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[rec["DType"]]
        a = load(os.path.join(sub, "a.bin"), m, k, dt)
        b = load(os.path.join(sub, "b.bin"), k, n, dt)
        d = load(os.path.join(sub, "d.bin"), m, n, dt)
        ref = torch.matmul(a, b)
        for _ in range(3):
            torch.matmul(a, b, out=ref)
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            torch.matmul(a, b, out=ref)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3)
        t_ref = sorted(times)[len(times) // 2]
        # Both outputs are rounded to the 16-bit type from f32 sums in different orders:
        # allow two units in the last place of the larger, plus the f32 sum's order bound
        # relative to the output's scale.
        df, rf = d.float(), ref.float()
        ulp = 2.0 ** (-7 if dt == torch.bfloat16 else -10)
        tol = 2 * ulp * torch.maximum(df.abs(), rf.abs()) + (k + 4) * 2.0 ** -23 * rf.abs().mean() * 4
        bad = int((df - rf).abs().gt(tol).sum())
        worst = float(((df - rf).abs() / tol).max())
        flops = 2.0 * m * n * k
        tk, tr = rec["KgenUS"], t_ref
        print(f"gemm {m}x{n}x{k} {rec['DType']}: kgen {tk:9.1f} us {flops / tk / 1e6:7.1f} TFLOP/s | "
              f"cuBLAS {tr:9.1f} us {flops / tr / 1e6:7.1f} TFLOP/s | kgen/cuBLAS {tr / tk:.3f} | "
              f"{'match' if bad == 0 else 'MISMATCH'} ({bad} of {m * n} outside, worst {worst:.3g} of tolerance)")
        ok = ok and bad == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
