"""The MoE dispatch/combine anchor of issue 26 in torch.distributed (run under torchrun, one
process per GPU): routing as bench/moebench draws it in kind (top-k distinct experts of E at
random per token), each token sent once to every rank that holds one of its experts.

dispatch: per-destination counts exchanged with all_to_all_single (the split sizes then read on
the host), the rows gathered by destination and moved with all_to_all_single;
combine: the rows sent back with all_to_all_single and summed per token with their weights
(index_add_, identity experts). Prints one JSON line per rank: mean us over --iters calls of
each, and the bytes this GPU sent to other GPUs per call / time.

    torchrun --nproc-per-node 4 torch_moe.py [--tokens 4096 --hidden 7168 --experts 32 --topk 8]
"""
import argparse, json, os, torch, torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--tokens", type=int, default=4096)
ap.add_argument("--hidden", type=int, default=7168)
ap.add_argument("--experts", type=int, default=32)
ap.add_argument("--topk", type=int, default=8)
ap.add_argument("--iters", type=int, default=20)
a = ap.parse_args()
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
torch.cuda.set_device(dev)
g = torch.Generator(device="cpu").manual_seed(1000 + rank)
T, H, E, K = a.tokens, a.hidden, a.experts, a.topk
ids = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(dev)
w = torch.rand(T, K, generator=g).to(dev)
x = torch.randn(T, H, generator=g, dtype=torch.float32).to(dev, torch.bfloat16)
per = E // world
dest = ids // per                                   # [T, K] destination ranks
hit = torch.zeros(T, world, dtype=torch.bool, device=dev)
hit.scatter_(1, dest, True)                         # token t goes to rank r once
wsum = torch.zeros(T, world, device=dev).scatter_add_(1, dest, w)

def dispatch():
    send_counts = hit.sum(0).to(torch.int64)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    tok = hit.t().nonzero()[:, 1]                    # tokens by destination rank
    sc, rc = send_counts.tolist(), recv_counts.tolist()
    recv = torch.empty(sum(rc), H, dtype=x.dtype, device=dev)
    dist.all_to_all_single(recv, x[tok], rc, sc)
    return recv, tok, sc, rc

def combine(recv, tok, sc, rc):
    back = torch.empty(sum(sc), H, dtype=x.dtype, device=dev)
    dist.all_to_all_single(back, recv, sc, rc)      # identity experts
    r = hit.t().nonzero()[:, 0]
    out = torch.zeros(T, H, dtype=torch.float32, device=dev)
    out.index_add_(0, tok, back.float() * wsum[tok, r].unsqueeze(1))
    return out.to(torch.bfloat16)

for _ in range(3):
    combine(*dispatch())
torch.cuda.synchronize(); dist.barrier()
res = {}
for name in ("dispatch", "combine"):
    ts = []
    for _ in range(a.iters):
        d = dispatch()
        torch.cuda.synchronize(); dist.barrier()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        if name == "dispatch":
            dispatch()
        else:
            combine(*d)
        e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e3)
    ts.sort()
    res[name] = ts[len(ts) // 2]
sent = int(hit.sum().item() - hit[:, rank].sum().item()) * H * 2
print(json.dumps({"impl": "torch/all_to_all_single", "rank": rank, "gpus": world, "tokens": T, "hidden": H,
                  "experts": E, "topk": K, "dispatch_us": round(res["dispatch"], 1), "combine_us": round(res["combine"], 1),
                  "dispatch_GBps": round(sent / res["dispatch"] / 1e3, 1), "combine_GBps": round(sent / res["combine"] / 1e3, 1)}), flush=True)
dist.destroy_process_group()
