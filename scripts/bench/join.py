#!/usr/bin/env python3
"""Joins NCCL's and kgen's all-reduce timings (JSON lines, in any order, with or without
kgen launch's "[rank R] " prefixes) into one table: per size, NCCL's time, each kgen
algorithm's time (the slowest rank's median) and the best kgen time as a ratio of NCCL's.

usage: join.py nccl.jsonl kgen.jsonl [--markdown]
"""
import json
import re
import sys
from collections import defaultdict


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = re.sub(r"^\[rank \d+\] ", "", line.strip())
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--markdown" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    t = defaultdict(dict)  # bytes -> impl -> slowest rank's time
    impls = []
    for r in load(args[0]) + load(args[1]):
        impl = r["impl"]
        if impl.startswith("kgen/auto:"):
            impl = "kgen/auto"
        if impl not in impls:
            impls.append(impl)
        t[r["bytes"]][impl] = max(t[r["bytes"]].get(impl, 0.0), r["time_us"])
    impls.sort(key=lambda s: (s != "nccl", s))
    head = ["bytes"] + [f"{i} (us)" for i in impls] + ["best kgen / nccl"]
    sep = " | " if md else "  "
    if md:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
    else:
        print(sep.join(f"{h:>16}" for h in head))
    for b in sorted(t):
        row = t[b]
        kg = [v for k, v in row.items() if k.startswith("kgen/")]
        ratio = f"{min(kg) / row['nccl']:.2f}" if kg and "nccl" in row else "-"
        cells = [human(b)] + [f"{row[i]:.1f}" if i in row else "-" for i in impls] + [ratio]
        if md:
            print("| " + " | ".join(cells) + " |")
        else:
            print(sep.join(f"{c:>16}" for c in cells))


def human(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return str(b)


if __name__ == "__main__":
    main()
