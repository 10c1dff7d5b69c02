#!/usr/bin/env python3
"""Plots coll_suite.sh's results as one SVG per GPU count, with no dependencies (run it
here, on the JSON lines the device call brought back):

    python3 scripts/bench/coll_plot.py OUTDIR docs/img/coll-4gpu.svg [--gpus 4]
    python3 scripts/bench/coll_plot.py --tables SUITE_OUTPUT docs/img/coll-4gpu.svg

With --tables, the input is the joined markdown tables coll_suite.sh prints (its stdout or
tables-N.md: "### op, dtype, N GPUs (us, slowest rank; ...)" and the size, NCCL eager, best
graph anchor, kgen loop, kgen call, kgen graph columns), for runs whose JSON lines did not
come back.

One panel per operation x dtype, time (us, the slowest rank's) against size (bytes of the
larger buffer), both axes logarithmic: NCCL eager, the best graph anchor (NCCL graph or
PyTorch symmetric memory), and kgen's best algorithm in loop and in graph timing. Without
--gpus, the GPU count is the only one in the data (or the largest). An output name ending
in .png is written as .svg beside it (no matplotlib needed).
"""
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from coll_results import Results, human  # noqa: E402

SERIES = (  # label, mode, kgen?, colour, dash
    ("NCCL eager", "eager", False, "#d62728", ""),
    ("best graph anchor", "graph", False, "#ff7f0e", "6,3"),
    ("kgen loop (best)", "loop", True, "#1f77b4", ""),
    ("kgen graph (best)", "graph", True, "#2ca02c", "6,3"),
)
W, H = 360, 260  # one panel
ML, MR, MT, MB = 58, 12, 28, 44


class TableResults:
    """The Results interface over coll_suite.sh's joined tables (see --tables)."""

    COLS = {("eager", False): 1, ("graph", False): 2, ("loop", True): 3, ("graph", True): 5}

    def __init__(self, path):
        self.t = {}  # (gpus, op, dtype) -> {bytes: [columns]}
        key = None
        with open(path) as f:
            for line in f:
                line = line.strip()
                m = re.match(r"^#+ (\w+), (\w+), (\d+) GPUs \(us, slowest rank", line)
                if m:
                    key = (int(m.group(3)), m.group(1), m.group(2))
                    self.t[key] = {}
                    continue
                if line.startswith("#"):
                    key = None
                    continue
                if key is None or not line.startswith("|"):
                    continue
                cells = [c.strip() for c in line.strip("|").split("|")]
                b = parse_size(cells[0])
                if b is not None:
                    self.t[key][b] = cells

    def gpus(self):
        return sorted({g for g, _, _ in self.t})

    def groups(self, gpus):
        return [(op, dt) for g, op, dt in self.t if g == gpus]

    def sizes(self, gpus, op, dtype):
        return sorted(self.t.get((gpus, op, dtype), {}))

    def row(self, gpus, op, dtype, b):
        return self.t.get((gpus, op, dtype), {}).get(b)

    def best(self, row, mode, kgen):
        i = self.COLS.get((mode, kgen))
        if row is None or i is None or i >= len(row):
            return None
        m = re.match(r"^([0-9.]+)", row[i])
        return (float(m.group(1)),) if m else None


def parse_size(s):
    m = re.match(r"^([0-9]+) (B|KiB|MiB|GiB)$", s)
    if not m:
        return None
    return int(m.group(1)) << {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30}[m.group(2)]


def esc(s):
    return str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def panel(res, g, op, dt, ox, oy):
    out = []
    sizes = res.sizes(g, op, dt)
    pts = {}
    for label, mode, kgen, _, _ in SERIES:
        p = []
        for b in sizes:
            row = res.row(g, op, dt, b)
            best = res.best(row, mode, kgen)
            if best:
                p.append((b, best[0]))
        pts[label] = p
    allt = [t for p in pts.values() for _, t in p if t > 0]
    if not sizes or not allt:
        return out
    x0, x1 = math.log2(min(sizes)), math.log2(max(sizes))
    if x1 == x0:
        x1 = x0 + 1
    y0, y1 = math.floor(math.log10(min(allt))), math.ceil(math.log10(max(allt)))
    if y1 == y0:
        y1 = y0 + 1
    pw, ph = W - ML - MR, H - MT - MB

    def X(b):
        return ox + ML + (math.log2(b) - x0) / (x1 - x0) * pw

    def Y(t):
        return oy + MT + (1 - (math.log10(t) - y0) / (y1 - y0)) * ph
    out.append(f'<rect x="{ox + ML}" y="{oy + MT}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
    out.append(f'<text x="{ox + ML + pw / 2}" y="{oy + 18}" text-anchor="middle" font-size="13" font-weight="bold">{esc(op)}, {esc(dt)}, {g} GPUs</text>')
    for e in range(y0, y1 + 1):
        y = Y(10 ** e)
        out.append(f'<line x1="{ox + ML}" x2="{ox + ML + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{ox + ML - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10">{10 ** e:g}</text>')
    step = max(1, (len(sizes) + 4) // 5)
    for b in sizes[::step]:
        x = X(b)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{oy + MT}" y2="{oy + MT + ph}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{oy + MT + ph + 14}" text-anchor="middle" font-size="10">{esc(human(b))}</text>')
    out.append(f'<text x="{ox + ML + pw / 2}" y="{oy + H - 8}" text-anchor="middle" font-size="10">size (larger buffer)</text>')
    out.append(f'<text x="{ox + 12}" y="{oy + MT + ph / 2}" text-anchor="middle" font-size="10" '
               f'transform="rotate(-90 {ox + 12} {oy + MT + ph / 2})">time (us)</text>')
    for label, _, _, colour, dash in SERIES:
        p = pts[label]
        if not p:
            continue
        d = " ".join(f"{X(b):.1f},{Y(t):.1f}" for b, t in p)
        da = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.8"{da}/>')
        for b, t in p:
            out.append(f'<circle cx="{X(b):.1f}" cy="{Y(t):.1f}" r="2.2" fill="{colour}"/>')
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gpus = None
    if "--gpus" in sys.argv:
        gpus = int(sys.argv[sys.argv.index("--gpus") + 1])
        args = [a for a in args if a != str(gpus)]
    if len(args) < 2:
        sys.exit(__doc__)
    dst = args[-1]
    if dst.endswith(".png"):
        dst = dst[:-4] + ".svg"
        print(f"coll_plot: writing SVG: {dst}", file=sys.stderr)
    if "--tables" in sys.argv:
        if len(args) != 2:
            sys.exit("coll_plot: --tables takes one tables file and the output name")
        res = TableResults(args[0])
    else:
        res = Results(args[:-1])
    if gpus is None:
        gs = res.gpus()
        if not gs:
            sys.exit("coll_plot: no timings in " + " ".join(args[:-1]))
        gpus = gs[-1]
    groups = res.groups(gpus)
    if not groups:
        sys.exit(f"coll_plot: no timings for {gpus} GPUs")
    cols = 2
    rows = (len(groups) + cols - 1) // cols
    legend_h = 30
    tw, th = cols * W, rows * H + legend_h
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{tw}" height="{th}" viewBox="0 0 {tw} {th}" '
            f'font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>']
    x = 10
    for label, _, _, colour, dash in SERIES:
        da = f' stroke-dasharray="{dash}"' if dash else ""
        body.append(f'<line x1="{x}" x2="{x + 26}" y1="16" y2="16" stroke="{colour}" stroke-width="2"{da}/>')
        body.append(f'<text x="{x + 31}" y="20" font-size="11">{esc(label)}</text>')
        x += 40 + 7 * len(label)
    for i, (op, dt) in enumerate(groups):
        body += panel(res, gpus, op, dt, (i % cols) * W, legend_h + (i // cols) * H)
    body.append("</svg>")
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    with open(dst, "w") as f:
        f.write("\n".join(body) + "\n")
    print(f"coll_plot: {dst}: {len(groups)} panels, {gpus} GPUs", file=sys.stderr)


if __name__ == "__main__":
    main()
