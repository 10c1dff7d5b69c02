"""NCCL + cuBLAS in sequence, the reference for `gpubench fused` (one process per GPU, torchrun).

For each problem MxNxK (every rank's GEMM, as gpubench fused reads it) and op:
  ag_gemm: all_gather_into_tensor(A, A_r) then torch.matmul(A, B)   (A_r: M/N x K)
  gemm_rs: torch.matmul(A, B) then reduce_scatter_tensor             (A: M x K slice of K)
  gemm_ar: torch.matmul(A, B) then all_reduce
the plain torch.matmul of the same M x N x K, and the collective alone (NCCL). bf16, CUDA events on the current stream,
3 warm-ups, median of --reps; the first call's result is checked against a float32 matmul of
the gathered / summed inputs on a few rows. Rank 0 prints one JSON object per
measurement, the slowest rank's median (all-reduce MAX), for fused_join.py.

    torchrun --nproc-per-node N torch_fused.py [--sizes 4096,8192,8192x4096x14336] [--reps 20]
"""
import argparse
import json
import os

import torch
import torch.distributed as dist


def size(s):
    v = [int(x) for x in s.split("x")]
    return (v[0],) * 3 if len(v) == 1 else tuple(v)


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    t = torch.tensor([sorted(ts)[len(ts) // 2]], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="4096,8192,8192x4096x14336")
    ap.add_argument("--ops", default="ag_gemm,gemm_rs,gemm_ar")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, g = dist.get_rank(), dist.get_world_size()
    gen = torch.Generator(device="cuda")
    bad = False
    for s in args.sizes.split(","):
        m, n, k = size(s)
        rows = m // g
        for op in args.ops.split(","):
            gen.manual_seed(1000 * rank + 7)
            b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
            out = torch.empty(m if op != "gemm_rs" else rows, n, device="cuda", dtype=torch.bfloat16)
            tmp = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            if op == "ag_gemm":
                a = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=gen)
                full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)

                def seq():
                    dist.all_gather_into_tensor(full, a)
                    torch.matmul(full, b, out=out)

                def coll():
                    dist.all_gather_into_tensor(full, a)

                seq()
                want = (full[:: max(1, m // 8)].float() @ b.float())
                got = out[:: max(1, m // 8)].float()
                gemm_a = full
            else:
                a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
                if op == "gemm_rs":
                    def seq():
                        torch.matmul(a, b, out=tmp)
                        dist.reduce_scatter_tensor(out, tmp)

                    def coll():
                        dist.reduce_scatter_tensor(out, tmp)
                else:
                    def seq():
                        torch.matmul(a, b, out=out)
                        dist.all_reduce(out)

                    def coll():
                        dist.all_reduce(tmp)

                seq()
                p = (a.float() @ b.float())
                dist.all_reduce(p)
                if op == "gemm_rs":
                    p = p[rank * rows:(rank + 1) * rows]
                want, got = p[:: max(1, p.shape[0] // 8)], out[:: max(1, p.shape[0] // 8)].float()
                del p
                gemm_a = a
            tol = (g + 1) * 2.0 ** -7 * want.abs() + 2.0 ** -7 * want.abs().mean() * (k ** 0.5) / 8 + 1e-3
            ok = bool(((got - want).abs() <= tol).all())
            bad = bad or not ok
            t_seq = timed(seq, args.reps)
            t_mm = timed(lambda: torch.matmul(gemm_a, b, out=tmp), args.reps)
            t_coll = timed(coll, args.reps)
            if rank == 0:
                for impl, t in (("torch/nccl+cublas", t_seq), ("torch/cublas", t_mm), ("torch/nccl", t_coll)):
                    print(json.dumps({"impl": impl, "op": op, "gpus": g, "rank": 0, "m": m, "n": n, "k": k,
                                      "time_us": t, "ok": ok}), flush=True)
            del a, b, out, tmp
            torch.cuda.empty_cache()
    dist.destroy_process_group()
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
