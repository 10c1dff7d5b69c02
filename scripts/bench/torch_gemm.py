"""cuBLAS on the inputs `gpubench gemm -dir DIR` wrote, in the same device call.

For each problem directory (MxNxK) under DIR: loads A (M x K), B and kgen's D (M x N), all
row-major; 16-bit inputs (bf16, f16): B is K x N, cuBLAS is torch.matmul(A, B), and kgen's
D is compared with cuBLAS's element by element; e4m3 inputs: B is N x K, D bf16, cuBLAS is
torch._scaled_mm(A, B.t(), scales 1, bf16 out), timed with use_fast_accum False (the
default) and True, and both kgen's D and cuBLAS's are compared with the exact product
(float64 on the GPU) within 2 bf16 ulps plus 2^-10 * sum|a*b| per element: wgmma's fp8
accumulation keeps fewer bits than f32 (docs/facts.md), so two fp8 results differ by more
than the 16-bit rule allows. Times with CUDA events (3 warm-ups, median of REPS; GPUBENCH_TIMING
as gpubench's: queued runs back to back); prints
both TFLOP/s and the ratio. Exits non-zero when a check fails.

With `gpubench gemm -epilogue OPTS` a problem directory also holds epi.json, bias.bin (f32
values of the input type), res.bin and depi.bin (kgen's D with the epilogue): the torch
anchor is the same epilogue in eager torch on the same inputs, `act(torch.matmul(a, b) +
bias)` (+ res), bias in the input type as nn.Linear keeps it, timed in this call beside
`act(torch.addmm(bias, a, b))` (cuBLASLt's fused bias); kgen's D and the anchor's are
compared with the float64 epilogue of the exact product (GELU is the tanh approximation on
both sides). A table of the epilogue rows ends the output.

    python torch_gemm.py DIR [REPS]
"""
import json
import os
import sys

import numpy as np
import torch


def load(path, rows, cols, dtype):
    if dtype == torch.float8_e4m3fn:
        raw = np.fromfile(path, dtype=np.uint8).reshape(rows, cols)
        return torch.from_numpy(raw).cuda().view(dtype)
    raw = np.fromfile(path, dtype=np.uint16).reshape(rows, cols)
    return torch.from_numpy(raw.view(np.int16)).view(dtype).cuda()


def median_us(fn, reps):
    """Median of reps runs after 3 warm-ups. GPUBENCH_TIMING=queued (gpubench's mode of the
    same name) enqueues the runs back to back with an event between each two and
    synchronizes once: the GPU's time, without the host's launch latency; the default times
    each run alone between two events and waits for it."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    mode = os.environ.get("GPUBENCH_TIMING", "sync") or "sync"
    if mode == "queued":
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
        ev[0].record()
        for i in range(reps):
            fn()
            ev[i + 1].record()
        ev[-1].synchronize()
        times = [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(reps)]
        return sorted(times)[len(times) // 2]
    if mode != "sync":
        sys.exit(f"GPUBENCH_TIMING={mode!r}: want sync (the default) or queued")
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3)
    return sorted(times)[len(times) // 2]


ACTS = {
    "relu": torch.relu,
    "silu": torch.nn.functional.silu,
    "gelu": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
}


def epilogue(sub, rec, a, b, dt, reps, rows):
    """Times and checks the epilogue of epi.json in sub against torch; appends a table row."""
    epi = json.load(open(os.path.join(sub, "epi.json")))
    m, n, k = rec["M"], rec["N"], rec["K"]
    opts = epi["Epilogue"].split("+")
    act = next((ACTS[o] for o in opts if o in ACTS), None)
    bias32 = torch.from_numpy(np.fromfile(os.path.join(sub, "bias.bin"), dtype=np.float32)).cuda()
    bias = bias32.to(dt)
    res = load(os.path.join(sub, "res.bin"), m, n, dt)
    d = load(os.path.join(sub, "depi.bin"), m, n, dt)
    use_bias, use_res = "bias" in opts, "residual" in opts

    def finish(v):
        if act is not None:
            v = act(v)
        if use_res:
            v = v + res
        return v

    def anchor():
        v = torch.matmul(a, b)
        if use_bias:
            v = v + bias
        return finish(v)

    def fused():
        v = torch.addmm(bias, a, b) if use_bias else torch.matmul(a, b)
        return finish(v)

    t_anchor = median_us(anchor, reps)
    t_fused = median_us(fused, reps)
    # float64 reference on the GPU
    a64, b64 = a.double(), b.double()
    v = a64 @ b64
    if use_bias:
        v = v + bias32.double()
    # kgen's SiLU and GELU use tanh.approx.f32 (error 2^-11): up to 2^-12 * |v| (kernels.SiLU)
    slack = 2.0 ** -12 * v.abs() if act is not None and act is not torch.relu else 0.0
    if act is not None:
        v = {"relu": lambda x: x.clamp_min(0), "silu": lambda x: x * torch.sigmoid(x),
             "gelu": lambda x: 0.5 * x * (1 + torch.tanh((2 / np.pi) ** 0.5 * (x + 0.044715 * x ** 3)))}[
            next(o for o in opts if o in ACTS)](v)
    if use_res:
        v = v + res.double()
    ulp = 2.0 ** (-7 if dt == torch.bfloat16 else -10)
    absprod = a64.abs() @ b64.abs()
    bound = 2 * ulp * v.abs() + 1.2 * (k + 6) * 2.0 ** -23 * absprod + slack + 2.0 ** -20
    err = lambda x: (x.double() - v).abs() / bound
    ek, ea = err(d), err(anchor())
    bad = int(ek.gt(1).sum())
    worst_k, worst_a = float(ek.max()), float(ea.max())
    del a64, b64, v, absprod, bound, ek, ea, slack
    fl = 2.0 * m * n * k
    tk, tp = epi["EpiUS"], epi["PlainUS"]
    print(f"gemm {m}x{n}x{k} {rec['DType']} +{epi['Epilogue']}: kgen {tk:9.1f} us {fl / tk / 1e6:7.1f} TFLOP/s "
          f"(plain {tp:9.1f} us, plain/epilogue {tp / tk:.3f}) | torch matmul+ops {t_anchor:9.1f} us, addmm+ops {t_fused:9.1f} us | "
          f"kgen/torch {t_anchor / tk:.3f} | {'match' if bad == 0 else 'MISMATCH'} ({bad} of {m * n} outside, "
          f"worst {worst_k:.3g} of the bound; torch's {worst_a:.3g})")
    rows.append(f"| {m}x{n}x{k} | {epi['Epilogue']} | {tp:.1f} | {tk:.1f} | {tp / tk:.3f} | {t_anchor:.1f} | {t_fused:.1f} | "
                f"{t_anchor / tk:.3f} | {'match' if bad == 0 else 'MISMATCH'} |")
    return bad == 0


def main():
    root = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    ok = True
    rows = []
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for name in sorted(os.listdir(root), key=lambda s: [int(x) for x in s.split("x")]):
        sub = os.path.join(root, name)
        rec = json.load(open(os.path.join(sub, "kgen.json")))
        m, n, k = rec["M"], rec["N"], rec["K"]
        if rec["DType"] == "e4m3":
            f8 = torch.float8_e4m3fn
            a = load(os.path.join(sub, "a.bin"), m, k, f8)
            b = load(os.path.join(sub, "b.bin"), n, k, f8)
            d = load(os.path.join(sub, "d.bin"), m, n, torch.bfloat16)
            one = torch.ones((), device="cuda", dtype=torch.float32)
            mm = lambda fast: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
            ref = mm(False)
            t_ref = median_us(lambda: mm(False), reps)
            t_fast = median_us(lambda: mm(True), reps)
            fl = 2.0 * m * n * k
            a64, b64 = a.float().double(), b.float().double()
            exact = a64 @ b64.t()
            bound = 2 * 2.0 ** -7 * exact.abs() + 2.0 ** -10 * (a64.abs() @ b64.abs().t())
            err = lambda x: float(((x.double() - exact).abs() / bound).max())
            worst_k, worst_c, worst_f = err(d), err(ref), err(mm(True))
            bad = int((d.double() - exact).abs().gt(bound).sum())
            del exact, bound, a64, b64
            print(f"gemm {m}x{n}x{k} e4m3: kgen {rec['KgenUS']:9.1f} us {fl / rec['KgenUS'] / 1e6:7.1f} TFLOP/s | "
                  f"cuBLAS {t_ref:9.1f} us {fl / t_ref / 1e6:7.1f} TFLOP/s | kgen/cuBLAS {t_ref / rec['KgenUS']:.3f} | "
                  f"{'match' if bad == 0 else 'MISMATCH'} ({bad} of {m * n} outside, worst {worst_k:.3g} of the fp8 bound vs exact; "
                  f"cuBLAS {worst_c:.3g}, fast-accum {worst_f:.3g}) | "
                  f"fast-accum {t_fast:9.1f} us {fl / t_fast / 1e6:7.1f} TFLOP/s kgen/fast {t_fast / rec['KgenUS']:.3f}")
            ok = ok and bad == 0
            continue
        dt = {"bf16": torch.bfloat16, "f16": torch.float16}[rec["DType"]]
        a = load(os.path.join(sub, "a.bin"), m, k, dt)
        b = load(os.path.join(sub, "b.bin"), k, n, dt)
        d = load(os.path.join(sub, "d.bin"), m, n, dt)
        ref = torch.matmul(a, b)
        t_ref = median_us(lambda: torch.matmul(a, b, out=ref), reps)
        ulp = 2.0 ** (-7 if dt == torch.bfloat16 else -10)
        # Both outputs are rounded to the 16-bit type from f32 sums in different orders:
        # allow two units in the last place of the larger, plus the f32 sum's order bound
        # relative to the output's scale.
        df, rf = d.float(), ref.float()
        tol = 2 * ulp * torch.maximum(df.abs(), rf.abs()) + (k + 4) * 2.0 ** -23 * rf.abs().mean() * 4
        bad = int((df - rf).abs().gt(tol).sum())
        worst = float(((df - rf).abs() / tol).max())
        flops = 2.0 * m * n * k
        tk, tr = rec["KgenUS"], t_ref
        print(f"gemm {m}x{n}x{k} {rec['DType']}: kgen {tk:9.1f} us {flops / tk / 1e6:7.1f} TFLOP/s | "
              f"cuBLAS {tr:9.1f} us {flops / tr / 1e6:7.1f} TFLOP/s | kgen/cuBLAS {tr / tk:.3f} | "
              f"{'match' if bad == 0 else 'MISMATCH'} ({bad} of {m * n} outside, worst {worst:.3g} of tolerance)")
        ok = ok and bad == 0
        if os.path.exists(os.path.join(sub, "epi.json")):
            ok = epilogue(sub, rec, a, b, dt, reps, rows) and ok
    if rows:
        print()
        print("| M x N x K | epilogue | kgen plain us | kgen epilogue us | plain/epilogue | torch matmul+ops us | torch addmm+ops us | kgen vs torch matmul+ops | check |")
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(rows))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
