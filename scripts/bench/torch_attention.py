"""torch SDPA on the inputs `gpubench attention -dir DIR` wrote, in the same device call.

For each problem directory under DIR (b*_h*_hkv*_s*_d*): loads Q, K, V and kgen's O (BSHD,
bf16 or f16) and kgen.json; computes a float32 reference (chunked matmuls, TF32 off); times
torch.nn.functional.scaled_dot_product_attention with each backend the installed torch
offers (cuDNN, flash, efficient; torch.nn.attention.sdpa_kernel) with CUDA events (3
warm-ups, median of REPS) on the same tensors (BHSD views of the BSHD buffers, as
FlashAttention reads them); compares every output with the reference. Prints one table row
per problem: TFLOP/s (4*b*h*s*s*d, halved for causal) of kgen and each backend, kgen / best,
and each output's largest error against the float32 reference. kgen's O passes when its
largest error is within 2x the worst backend's plus one unit of the type at |O| (both round P
to the 16-bit type). Exits non-zero when a check fails.

    python torch_attention.py DIR [REPS]
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # torch < 2.3
    SDPBackend, sdpa_kernel = None, None


def load(path, shape, dtype):
    raw = np.fromfile(path, dtype=np.uint16).reshape(shape)
    return torch.from_numpy(raw.view(np.int16)).view(dtype).cuda()


def reference(q, k, v, scale, causal):
    """float32 attention of BHSD q, k, v (k, v already expanded to q's heads), by chunks."""
    b, h, s, d = q.shape
    sk = k.shape[2]
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    kf, vf = k.float(), v.float()
    step = 1024
    for i in range(0, s, step):
        qi = q[:, :, i:i + step].float()
        sc = torch.matmul(qi, kf.transpose(-1, -2)) * scale
        if causal:  # bottom-right aligned: query r sees keys c <= r + sk - s
            rows = torch.arange(i, i + qi.shape[2], device=q.device)[:, None]
            cols = torch.arange(sk, device=q.device)[None, :]
            sc = sc.masked_fill(cols > rows + sk - s, float("-inf"))
        out[:, :, i:i + step] = torch.matmul(torch.softmax(sc, dim=-1), vf)
    return out


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
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    root = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    torch.backends.cuda.matmul.allow_tf32 = False
    ok = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    backends = []
    if sdpa_kernel is not None:
        for name in ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"):
            if hasattr(SDPBackend, name):
                backends.append((name.split("_")[0].lower(), getattr(SDPBackend, name)))
    header = "problem | kgen us TFLOP/s | " + " | ".join(f"{n} us TFLOP/s" for n, _ in backends) + " | kgen/best | max err vs f32: kgen, " + ", ".join(n for n, _ in backends)
    print(header)
    dirs = [x for x in os.listdir(root) if os.path.exists(os.path.join(root, x, "kgen.json"))]
    for name in sorted(dirs, key=lambda x: [int(t.lstrip("bhkvsd")) for t in x.split("_")]):
        sub = os.path.join(root, name)
        rec = json.load(open(os.path.join(sub, "kgen.json")))
        b, h, hkv, sq, sk, d, causal = rec["B"], rec["H"], rec["HKV"], rec["SQ"], rec["SK"], rec["D"], rec["Causal"]
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[rec["DType"]]
        q = load(os.path.join(sub, "q.bin"), (b, sq, h, d), dt).transpose(1, 2)
        k = load(os.path.join(sub, "k.bin"), (b, sk, hkv, d), dt).transpose(1, 2)
        v = load(os.path.join(sub, "v.bin"), (b, sk, hkv, d), dt).transpose(1, 2)
        o = load(os.path.join(sub, "o.bin"), (b, sq, h, d), dt).transpose(1, 2).float()
        if hkv != h:  # GQA: torch's backends get K/V expanded (not timed)
            k = k.repeat_interleave(h // hkv, dim=1)
            v = v.repeat_interleave(h // hkv, dim=1)
        scale = 1 / math.sqrt(d)
        ref = reference(q, k, v, scale, causal)
        flops = 4.0 * b * h * sq * sk * d / (2 if causal else 1)
        if causal and sq != sk:
            print(f"{name}: torch's is_causal is aligned top-left, kgen's bottom-right; compare only sq == sk")
        kerr = float((o - ref).abs().max())
        cols, errs, best = [], [], None
        for bname, be in backends:
            try:
                with sdpa_kernel(be):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                    t = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale), reps)
                errs.append(float((out.float() - ref).abs().max()))
                cols.append(f"{t:9.1f} {flops / t / 1e6:6.1f}")
                best = t if best is None else min(best, t)
            except RuntimeError as e:  # backend not available for this shape / build
                errs.append(float("nan"))
                cols.append(f"{'n/a':>16}")
                print(f"  {bname}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        ulp = 2.0 ** (-8 if dt == torch.bfloat16 else -11)
        worst = max([e for e in errs if e == e] or [0.0])
        bound = 2 * worst + ulp * float(ref.abs().max()) + 1e-6
        good = kerr <= bound
        ok = ok and good
        tk = rec["KgenUS"]
        ratio = f"{best / tk:.3f}" if best else "n/a"
        print(f"{name}{' causal' if causal else ''} {rec['DType']} | {tk:9.1f} {flops / tk / 1e6:6.1f} | " + " | ".join(cols) +
              f" | {ratio} | {kerr:.2e}, " + ", ".join(f"{e:.2e}" for e in errs) + ("" if good else f"  MISMATCH (bound {bound:.2e})"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
