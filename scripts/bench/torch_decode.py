"""torch decode attention on the inputs `gpubench decode -dir DIR` wrote, in the same device call.

For each problem directory under DIR (b*_q*_h*_hkv*_d*_p*_ctx*): loads Q [b, q, h, d], the
paged caches K and V [pages, page, hkv, d], the block table [b, pages a sequence] (int32),
kgen's O and kgen.json (every sequence has the same context, ctx keys; query i sees keys
j < ctx - q + i + 1). Gathers each sequence's K and V into contiguous [b, hkv, ctx, d]
tensors (outside the timing: torch has no paged SDPA), computes a float32 reference, and
times with CUDA events (3 warm-ups, median of REPS):
  - torch.nn.functional.scaled_dot_product_attention on the gathered K/V (BHSD; GQA by
    enable_gqa when torch has it, else K/V repeated to the query heads outside the timing;
    an explicit bottom-right causal mask when q > 1), with each backend the installed torch
    offers (cuDNN, flash, efficient, math; torch.nn.attention.sdpa_kernel);
  - flash_attn.flash_attn_with_kvcache when flash_attn imports: paged (block_table) when
    the page size is a multiple of 256 (its requirement), else on the gathered caches
    [b, ctx, hkv, d] with cache_seqlens.
Prints one row per problem: µs and K/V GB/s of kgen and each path, kgen / best, and each
output's largest error against the float32 reference. kgen passes when its largest error
is within 2x the worst torch path's plus one unit of the type at |O|. Exits non-zero when a
check fails.

    python torch_decode.py DIR [REPS]
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

try:
    from flash_attn import flash_attn_with_kvcache
except Exception:  # not installed, or built for another torch
    flash_attn_with_kvcache = None


def load16(path, shape, dtype):
    raw = np.fromfile(path, dtype=np.uint16).reshape(shape)
    return torch.from_numpy(raw.view(np.int16)).view(dtype).cuda()


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


def causal_mask(q, ctx, device):
    """[q, ctx] bool, True where query i may see key j (j < ctx - q + i + 1); None for q = 1."""
    if q == 1:
        return None
    rows = torch.arange(q, device=device)[:, None]
    cols = torch.arange(ctx, device=device)[None, :]
    return cols < rows + ctx - q + 1


def reference(qb, kb, vb, scale, mask):
    """float32 attention of BHSD qb [b, h, q, d] over kb, vb [b, hkv, ctx, d], a sequence at a
    time (each kv head repeated to its h / hkv query heads)."""
    group = qb.shape[1] // kb.shape[1]
    out = torch.empty(qb.shape, dtype=torch.float32, device=qb.device)
    for i in range(qb.shape[0]):
        k = kb[i].float().repeat_interleave(group, dim=0)
        v = vb[i].float().repeat_interleave(group, dim=0)
        sc = torch.matmul(qb[i].float(), k.transpose(-1, -2)) * scale
        if mask is not None:
            sc = sc.masked_fill(~mask, float("-inf"))
        out[i] = torch.matmul(torch.softmax(sc, dim=-1), v)
    return out


def run(sub, reps):
    meta = json.load(open(os.path.join(sub, "kgen.json")))
    b, q, h, hkv, d = meta["B"], meta["Q"], meta["H"], meta["HKV"], meta["D"]
    page, ctx, per = meta["Page"], meta["Ctx"], meta["Pages"]
    dtype = torch.bfloat16 if meta["DType"] == "bf16" else torch.float16
    pages = b * per
    qt = load16(os.path.join(sub, "q.bin"), (b, q, h, d), dtype)
    kc = load16(os.path.join(sub, "k.bin"), (pages, page, hkv, d), dtype)
    vc = load16(os.path.join(sub, "v.bin"), (pages, page, hkv, d), dtype)
    ko = load16(os.path.join(sub, "o.bin"), (b, q, h, d), dtype)
    table = torch.from_numpy(np.fromfile(os.path.join(sub, "table.bin"), dtype=np.int32).reshape(b, per)).cuda()
    scale = 1 / math.sqrt(d)
    kvbytes = 2 * 2 * pages * page * hkv * d

    # Gathered caches: [b, ctx, hkv, d] (flash_attn's layout) and BHSD views for SDPA.
    kg = kc[table.long()].reshape(b, per * page, hkv, d)[:, :ctx].contiguous()
    vg = vc[table.long()].reshape(b, per * page, hkv, d)[:, :ctx].contiguous()
    qb = qt.transpose(1, 2)  # [b, h, q, d]
    kb, vb = kg.transpose(1, 2), vg.transpose(1, 2)  # [b, hkv, ctx, d]
    group = h // hkv
    mask = causal_mask(q, ctx, qt.device)
    ref = reference(qb, kb, vb, scale, mask).transpose(1, 2)  # [b, q, h, d]

    def err(o):
        return (o.float() - ref).abs().max().item()

    results = {}  # name -> (us, error)
    gqa_kw = {}
    try:
        F.scaled_dot_product_attention(qb[:1, :, :1], kb[:1, :, :1], vb[:1, :, :1], enable_gqa=True)
        gqa_kw = {"enable_gqa": True}
        kk, vv = kb, vb
    except (TypeError, RuntimeError):  # torch < 2.5: repeat the K/V heads, outside the timing
        kk, vv = kb.repeat_interleave(group, dim=1), vb.repeat_interleave(group, dim=1)
    backends = [("sdpa", None)]
    if sdpa_kernel is not None:
        backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)]
    for name, be in backends:
        def call(be=be):
            if be is None:
                return F.scaled_dot_product_attention(qb, kk, vv, attn_mask=mask, scale=scale, **gqa_kw)
            with sdpa_kernel([be]):
                return F.scaled_dot_product_attention(qb, kk, vv, attn_mask=mask, scale=scale, **gqa_kw)
        try:
            o = call().transpose(1, 2)
            results["sdpa-" + name] = (timed(call, reps), err(o))
        except RuntimeError as e:  # this backend does not take the problem
            print(f"  sdpa {name}: not run ({str(e).splitlines()[0][:80]})")
    if flash_attn_with_kvcache is not None:
        try:
            if page % 256 == 0:
                lens = torch.full((b,), ctx, dtype=torch.int32, device=qt.device)
                def fa():
                    return flash_attn_with_kvcache(qt, kc, vc, cache_seqlens=lens, block_table=table,
                                                   softmax_scale=scale, causal=True)
                name = "flash_attn-paged"
            else:
                lens = torch.full((b,), ctx, dtype=torch.int32, device=qt.device)
                def fa():
                    return flash_attn_with_kvcache(qt, kg, vg, cache_seqlens=lens, softmax_scale=scale, causal=True)
                name = "flash_attn-contig"
            results[name] = (timed(fa, reps), err(fa()))
        except Exception as e:
            print(f"  flash_attn_with_kvcache: not run ({str(e).splitlines()[0][:80]})")

    kerr = err(ko)
    best = min((us for us, _ in results.values()), default=float("nan"))
    worst_err = max((e for _, e in results.values()), default=0.0)
    unit = 2.0 ** (-8 if dtype == torch.bfloat16 else -11)
    ok = kerr <= 2 * worst_err + unit * ref.abs().max().item()
    row = [f"b {b} q {q} h {h}/{hkv} d {d} page {page} ctx {ctx}",
           f"kgen {meta['KgenUS']:.1f} us {kvbytes / meta['KgenUS'] / 1e3:.0f} GB/s (splits {meta['Splits']}) err {kerr:.3g}"]
    for name, (us, e) in sorted(results.items()):
        row.append(f"{name} {us:.1f} us {kvbytes / us / 1e3:.0f} GB/s err {e:.3g}")
    row.append(f"kgen/best {meta['KgenUS'] / best:.3f}" if results else "kgen/best -")
    print(" | ".join(row) + ("" if ok else "  FAIL: kgen's error"))
    return ok


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; flash_attn "
          f"{'available' if flash_attn_with_kvcache else 'not importable'}")
    ok = True
    for sub in sorted(os.listdir(root)):
        path = os.path.join(root, sub)
        if os.path.isfile(os.path.join(path, "kgen.json")):
            ok = run(path, reps) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
