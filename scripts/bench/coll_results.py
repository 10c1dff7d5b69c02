"""Reads the JSON lines of scripts/bench/coll_suite.sh (coll_anchors.py's and collbench's,
with or without kgen launch's "[rank R] " prefixes) for coll_join.py and coll_plot.py."""
import glob
import json
import os
import re
from collections import defaultdict

PREFIX = re.compile(r"^\[rank \d+\] ")


def lines(paths):
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                line = PREFIX.sub("", line.strip())
                if line.startswith("{"):
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        pass


def files(args):
    out = []
    for a in args:
        out += sorted(glob.glob(os.path.join(a, "*.jsonl"))) if os.path.isdir(a) else [a]
    return out


def short(impl, kernel=""):
    """kgen/auto:p2p_allreduce_2shot_graph_sum -> auto:2shot; kgen/twoshot -> twoshot."""
    s = impl.removeprefix("kgen/")
    if s.startswith("auto:"):
        k = s[5:]
        for cut in ("p2p_allreduce_", "p2p_", "mm_allreduce_", "_graph", "_sum"):
            k = k.replace(cut, "")
        s = "auto:" + k
    return s


class Results:
    """times[(gpus, op, dtype, bytes, mode, impl)] = the slowest rank's time (us);
    bad = the keys whose check failed on some rank; soak, errors, hangs as read."""

    def __init__(self, paths):
        self.times = {}
        self.bad = set()
        self.soak = defaultdict(lambda: {"ok": 0, "steps": 0, "fail": [], "calls": 0})
        self.errors = []
        self.hangs = []
        self.skips = set()
        self.env = []
        for r in lines(files(paths)):
            if "env" in r:
                self.env.append(r)
            elif r.get("soak") is True:
                impl = short(r["impl"]) if not r["impl"].startswith("kgen/auto:") else "auto"
                k = (r["gpus"], r["op"], impl, r["dtype"], r["mode"])
                s = self.soak[k]
                s["steps"] += 1
                s["calls"] += r.get("calls", 0)
                if r.get("ok"):
                    s["ok"] += 1
                else:
                    s["fail"].append(f"{r['bytes']} B rank {r.get('rank')}: {r.get('check')}")
            elif r.get("hang") or r.get("failed"):
                self.hangs.append(r)
            elif "skipped" in r:
                self.skips.add((r.get("impl"), r.get("mode"), r.get("skipped")))
            elif "error" in r:
                self.errors.append(r)
            elif "time_us" in r and "op" in r:
                impl = r["impl"]
                mode = r.get("mode") or "call"
                k = (r.get("gpus"), r["op"], r.get("dtype", "float32"), r["bytes"], mode, impl)
                self.times[k] = max(self.times.get(k, 0.0), float(r["time_us"]))
                if r.get("check", "ok") != "ok":
                    self.bad.add(k)

    def gpus(self):
        return sorted({k[0] for k in self.times} | {k[0] for k in self.soak})

    def groups(self, gpus):
        """(op, dtype) pairs measured on gpus, all-reduce first."""
        order = {"allreduce": 0, "reducescatter": 1, "allgather": 2}
        return sorted({(k[1], k[2]) for k in self.times if k[0] == gpus}, key=lambda x: (order.get(x[0], 9), x[1]))

    def sizes(self, gpus, op, dtype):
        return sorted({k[3] for k in self.times if k[:3] == (gpus, op, dtype)})

    def row(self, gpus, op, dtype, nbytes):
        """{(mode, impl): time} at one size."""
        return {(k[4], k[5]): v for k, v in self.times.items() if k[:4] == (gpus, op, dtype, nbytes)}

    def best(self, row, mode, kgen):
        """(time, impl) of the fastest kgen (or anchor) implementation in mode, or None."""
        c = [(v, i) for (m, i), v in row.items() if m == mode and i.startswith("kgen/") == kgen]
        return min(c) if c else None


def human(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"
