#!/usr/bin/env python3
"""Joins coll_suite.sh's JSON lines (anchors, kgen timings, soak) into markdown tables.

usage: coll_join.py OUTDIR|FILE... [--gpus N]

Per GPU count x operation x dtype: size | NCCL eager | the best graph anchor (NCCL graph or
PyTorch symmetric memory) | kgen's best algorithm in loop, call and graph timing | kgen loop
/ NCCL eager | kgen graph / best graph anchor. Ratios < 1: kgen is faster. Times are the
slowest rank's (us); sizes are bytes of the larger buffer (nccl-tests' convention). A "!"
marks a time whose correctness check failed on some rank. Then, for the all-reduce, every
algorithm (cells loop / call / graph), the soak summary, and the errors, hangs and skips.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coll_results import Results, human, short  # noqa: E402

ANCHOR_NAMES = {"nccl": "NCCL", "symm/one_shot": "symm 1-shot", "symm/two_shot": "symm 2-shot"}
ALGS = ("lamport", "oneshot", "twoshot", "push", "push8", "auto")


def fmt(t, bad=False):
    if t is None:
        return "-"
    s = f"{t:.1f}" if t < 1000 else f"{t:.0f}"
    return s + ("!" if bad else "")


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gpus_only = None
    if "--gpus" in sys.argv:
        gpus_only = int(sys.argv[sys.argv.index("--gpus") + 1])
        args = [a for a in args if a != str(gpus_only)]
    if not args:
        sys.exit(__doc__)
    res = Results(args)
    for e in res.env:
        print(f"<!-- torch {e.get('torch')}, NCCL {e.get('nccl')}, {e.get('device')} -->")
    for g in res.gpus():
        if gpus_only is not None and g != gpus_only:
            continue
        for op, dt in res.groups(g):
            print(f"\n### {op}, {dt}, {g} GPUs (us, slowest rank; ratio < 1: kgen faster)\n")
            rows = []
            for b in res.sizes(g, op, dt):
                row = res.row(g, op, dt, b)

                def cell(mode, kgen, label=True):
                    best = res.best(row, mode, kgen)
                    if not best:
                        return "-", None
                    t, impl = best
                    bad = any(k == (g, op, dt, b, mode, impl) for k in res.bad)
                    name = short(impl) if kgen else ANCHOR_NAMES.get(impl, impl)
                    return (fmt(t, bad) + (f" {name}" if label else "")), t
                eager = row.get(("eager", "nccl"))
                ganc, tg = cell("graph", False)
                ar = op == "allreduce"  # the others have one implementation: no name
                kl, tl = cell("loop", True, ar)
                kc, _ = cell("call", True, ar)
                kg, tkg = cell("graph", True, ar)
                r1 = f"{tl / eager:.2f}" if tl and eager else "-"
                r2 = f"{tkg / tg:.2f}" if tkg and tg else "-"
                rows.append([human(b), fmt(eager, (g, op, dt, b, "eager", "nccl") in res.bad), ganc, kl, kc, kg, r1, r2])
            print(table(["size", "NCCL eager", "best graph anchor", "kgen loop", "kgen call", "kgen graph",
                         "loop / NCCL eager", "graph / graph anchor"], rows))
        # Every all-reduce algorithm, loop / call / graph.
        for op, dt in res.groups(g):
            if op != "allreduce":
                continue
            print(f"\n### allreduce, {dt}, {g} GPUs: every implementation (us; loop / call / graph for kgen)\n")
            rows = []
            for b in res.sizes(g, op, dt):
                row = res.row(g, op, dt, b)
                cells = [human(b)]
                for mode, impl in (("eager", "nccl"), ("graph", "nccl"), ("graph", "symm/one_shot"), ("graph", "symm/two_shot")):
                    cells.append(fmt(row.get((mode, impl)), (g, op, dt, b, mode, impl) in res.bad))
                for alg in ALGS:
                    parts = []
                    for mode in ("loop", "call", "graph"):
                        c = [(i, v) for (m, i), v in row.items() if m == mode and
                             (i == "kgen/" + alg or (alg == "auto" and i.startswith("kgen/auto:")))]
                        parts.append(fmt(c[0][1], (g, op, dt, b, mode, c[0][0]) in res.bad) if c else "-")
                    cells.append(" / ".join(parts))
                rows.append(cells)
            print(table(["size", "NCCL eager", "NCCL graph", "symm 1-shot", "symm 2-shot"] + list(ALGS), rows))
        soak = {k: v for k, v in res.soak.items() if k[0] == g}
        if soak:
            print(f"\n### soak, {g} GPUs (back-to-back calls per size, result checked after)\n")
            cols = sorted({(k[3], k[4]) for k in soak})
            rows = []
            for op, impl in sorted({(k[1], k[2]) for k in soak}):
                cells = [op, impl]
                for dt, mode in cols:
                    s = soak.get((g, op, impl, dt, mode))
                    if not s:
                        cells.append("-")
                        continue
                    n, calls = s["steps"] // max(g, 1), s["calls"] // max(g, 1)
                    cells.append(f"ok: {n} sizes, {calls} calls" if not s["fail"] else
                                 f"FAIL {len(s['fail'])}: " + "; ".join(s["fail"][:2])[:160])
                rows.append(cells)
            print(table(["op", "impl"] + [f"{dt} {mode}" for dt, mode in cols], rows))
    problems = []
    for h in res.hangs:
        problems.append(f"{'HANG' if h.get('hang') else 'FAILED'} {h.get('step')} (exit {h.get('rc')}): last progress {h.get('last')}")
    for e in res.errors:
        problems.append(f"error {e.get('impl')} {e.get('op', '')} {e.get('dtype', '')} {e.get('bytes', '')} {e.get('mode', '')}: {e.get('error')}"[:300])
    if problems or res.skips:
        print("\n### problems\n")
        for p in problems[:40]:
            print("- " + p)
        if len(problems) > 40:
            print(f"- ... and {len(problems) - 40} more")
        for impl, mode, why in sorted(res.skips):
            print(f"- skipped {impl} {mode}: {why}")


if __name__ == "__main__":
    main()
