"""The whole MoE layer of issue 26 in PyTorch (run under torchrun, one process per GPU), the
anchor of bench/moelayer (dist.MoELayer): the same shapes, routing of the same kind (top-k
distinct experts of E at random per token, random weights), bf16.

  dispatch: per (destination rank, local expert) pair counts exchanged with
            all_to_all_single (the split sizes then read on the host), the pairs' rows sorted
            by expert and moved with all_to_all_single (one row per (token, expert) pair),
            regrouped expert-major on the receiver;
  gate_up:  torch._grouped_mm(rows, W13 [E/G, H, 2F], offs) (a loop of torch.matmul where
            this torch has no _grouped_mm);
  swiglu:   F.silu(gu[:, :F]) * gu[:, F:];
  down:     torch._grouped_mm(h, W2 [E/G, F, H], offs);
  combine:  the rows put back in send order, all_to_all_single back, the weighted sum per
            token (index_add_ in f32), bf16.

It checks --check sampled tokens of its own against an f32 recomputation of the layer from
the same bf16 weights (max |out - ref| <= 5% of the tokens' rms: a consistency check; the
roundings differ), then times --iters layers back to back between two CUDA events
(layer_us, what bench/moelayer's layer_us measures), then --iters layers each after a
barrier with an event between every two steps (the per-step medians). One JSON line per
rank.

    torchrun --nproc-per-node 4 torch_moe_layer.py [--tokens 4096 --hidden 7168 --ffn 2048 --experts 32 --topk 8]
"""
import argparse, json, math, os, torch, torch.distributed as dist
import torch.nn.functional as Fn

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", type=int, default=4096)
ap.add_argument("--hidden", type=int, default=7168)
ap.add_argument("--ffn", type=int, default=2048)
ap.add_argument("--experts", type=int, default=32)
ap.add_argument("--topk", type=int, default=8)
ap.add_argument("--iters", type=int, default=20)
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--check", type=int, default=2)
a = ap.parse_args()
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
torch.cuda.set_device(dev)
T, H, F, E, K = a.tokens, a.hidden, a.ffn, a.experts, a.topk
assert E % world == 0 and K <= E
per = E // world
bf = torch.bfloat16


def expert_weights(e):
    """Expert e's W13 [H, 2F] (gate columns, then up) and W2 [F, H]: k/(4*sqrt(n)), k in [-4, 4]."""
    g = torch.Generator(device=dev).manual_seed(10_000 + e)
    w13 = (torch.randint(-4, 5, (H, 2 * F), generator=g, device=dev).float() / (4 * math.sqrt(H))).to(bf)
    w2 = (torch.randint(-4, 5, (F, H), generator=g, device=dev).float() / (4 * math.sqrt(F))).to(bf)
    return w13, w2


local = [expert_weights(rank * per + j) for j in range(per)]
W13 = torch.stack([w for w, _ in local])            # [per, H, 2F]
W2 = torch.stack([w for _, w in local])             # [per, F, H]
del local
g = torch.Generator(device=dev).manual_seed(1000 + rank)
ids = torch.rand(T, E, generator=g, device=dev).argsort(dim=1)[:, :K].contiguous()   # distinct experts
w = torch.rand(T, K, generator=g, device=dev)
x = (torch.randint(-16, 17, (T, H), generator=g, device=dev).float() / 16).to(bf)
grouped = hasattr(torch, "_grouped_mm")


def gmm(a_, b_, offs, counts):
    if grouped:
        return torch._grouped_mm(a_, b_, offs=offs)
    out = torch.empty(a_.shape[0], b_.shape[2], dtype=bf, device=dev)
    start = 0
    for j, c in enumerate(counts):
        out[start:start + c] = a_[start:start + c] @ b_[j]
        start += c
    return out


def dispatch():
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)        # pairs by expert, so by destination rank
    send = torch.bincount(flat, minlength=E).view(world, per)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)              # recv[s, j]: rows from rank s for local expert j
    sc, rc = send.sum(1).tolist(), recv.sum(1).tolist()
    rows = torch.empty(sum(rc), H, dtype=bf, device=dev)
    dist.all_to_all_single(rows, x[order // K], rc, sc)
    le = torch.repeat_interleave(torch.arange(per, device=dev).repeat(world), recv.reshape(-1))
    perm = torch.argsort(le, stable=True)           # by source then expert -> expert-major
    counts = recv.sum(0)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    return rows[perm], perm, offs, counts.tolist() if not grouped else None, order, sc, rc


def gate_up(st):
    xs, perm, offs, counts = st[:4]
    return gmm(xs, W13, offs, counts)


def swiglu(gu):
    return Fn.silu(gu[:, :F]) * gu[:, F:]


def down(st, h):
    return gmm(h, W2, st[2], st[3])


def combine(st, y):
    _, perm, _, _, order, sc, rc = st
    yb = torch.empty_like(y)
    yb[perm] = y                                    # back to source-then-expert order
    back = torch.empty(sum(sc), H, dtype=bf, device=dev)
    dist.all_to_all_single(back, yb, sc, rc)
    out = torch.zeros(T, H, dtype=torch.float32, device=dev)
    out.index_add_(0, order // K, back.float() * w.reshape(-1)[order].unsqueeze(1))
    return out.to(bf)


def layer():
    st = dispatch()
    return combine(st, down(st, swiglu(gate_up(st))))


# Check.
out = layer()
torch.cuda.synchronize()
check = "ok"
worst = 0.0
for i in range(min(a.check, T)):
    t = (2 * i + 1) * T // (2 * a.check)
    ref = torch.zeros(H, dtype=torch.float32, device=dev)
    for k in range(K):
        w13, w2 = expert_weights(int(ids[t, k]))
        gu = x[t].float() @ w13.float()
        ref += float(w[t, k]) * ((Fn.silu(gu[:F]) * gu[F:]) @ w2.float())
    rms = ref.pow(2).mean().sqrt().item()
    err = (out[t].float() - ref).abs().max().item()
    worst = max(worst, err / rms)
    if not err <= 0.05 * rms:
        check = f"token {t}: max |out - ref| {err:.4g} over 5% of its rms {rms:.4g}"

for _ in range(a.warmup):
    layer()
torch.cuda.synchronize(); dist.barrier()
e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
e0.record()
for _ in range(a.iters):
    layer()
e1.record(); torch.cuda.synchronize()
layer_us = e0.elapsed_time(e1) * 1e3 / a.iters

names = ("dispatch", "gateup", "swiglu", "down", "combine")
ts = {n: [] for n in names}
tot = []
rows = 0
for _ in range(a.iters):
    torch.cuda.synchronize(); dist.barrier()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
    ev[0].record()
    st = dispatch(); ev[1].record()
    gu = gate_up(st); ev[2].record()
    h = swiglu(gu); ev[3].record()
    y = down(st, h); ev[4].record()
    combine(st, y); ev[5].record()
    torch.cuda.synchronize()
    for j, n in enumerate(names):
        ts[n].append(ev[j].elapsed_time(ev[j + 1]) * 1e3)
    tot.append(ev[0].elapsed_time(ev[5]) * 1e3)
    rows = st[0].shape[0]
med = lambda v: sorted(v)[len(v) // 2]
res = {"impl": "torch/all_to_all_single+" + ("_grouped_mm" if grouped else "matmul loop"), "rank": rank, "gpus": world,
       "tokens": T, "hidden": H, "ffn": F, "experts": E, "topk": K, "rows": rows, "layer_us": round(layer_us, 1)}
for n in names:
    res[n + "_us"] = round(med(ts[n]), 1)
res["steps_us"] = round(med(tot), 1)
res["expert_TFLOPs"] = round(6 * rows * H * F / layer_us / 1e6, 1)
res["check"] = check
res["check_max_err_over_rms"] = round(worst, 4)
print(json.dumps(res), flush=True)
dist.destroy_process_group()
