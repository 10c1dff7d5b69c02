"""Plots fused_bench.sh's joined tables (fused_join.py's markdown, table-NGPUgpu.md) as one
SVG, with no dependencies: per op and shape, the time of NCCL + cuBLAS in sequence, kgen's
default (kgen/comm) and the ideal overlap (max of kgen's GEMM alone and NCCL's collective
alone), as bars relative to NCCL + cuBLAS (shorter is faster). Rows of a later table replace
those of an earlier one with the same op and shape.

    python3 fused_plot.py OUT.svg TABLE.md [TABLE.md ...]
"""
import sys


def load(path, into):
    """Reads a fused_join.py markdown table into into[(op, gpus, m, n, k)] = {column: us}."""
    head = None
    for line in open(path):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4:
            continue
        if cells[0] == "op":
            head = [c.replace(" (us)", "") for c in cells]
            continue
        if head is None or cells[0].startswith("---"):
            continue
        m, n, k = (int(x) for x in cells[2].split("x"))
        row = {}
        for name, v in zip(head[3:], cells[3:]):
            try:
                row[name] = float(v)
            except ValueError:
                pass
        if row.get("kgen/comm"):
            into[(cells[0], int(cells[1]), m, n, k)] = row

BARS = [("torch/nccl+cublas", "#999999", "NCCL + cuBLAS"), ("kgen/comm", "#1f77b4", "kgen (Comm default)"),
        ("ideal", "#2ca02c", "ideal overlap")]


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rows = {}
    for p in sys.argv[2:]:
        load(p, rows)
    keys = [k for k in sorted(rows) if rows[k].get("kgen/comm") and rows[k].get("torch/nccl+cublas")]
    if not keys:
        sys.exit("fused_plot: no (op, shape) has both kgen/comm and torch/nccl+cublas")
    bar, gap, left, top = 9, 10, 260, 40
    height = top + len(keys) * (len(BARS) * bar + gap) + 40
    width = left + 420
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="16" font-size="13">Fused GEMMs: time relative to NCCL + cuBLAS (shorter is faster)</text>']
    scale = 300  # pixels for a ratio of 1
    out.append(f'<line x1="{left + scale}" y1="{top - 8}" x2="{left + scale}" y2="{height - 30}" stroke="#444" stroke-dasharray="3,3"/>')
    y = top
    for key in keys:
        d = rows[key]
        op, g, m, n, k = key
        t = d["torch/nccl+cublas"]
        vals = {"torch/nccl+cublas": t, "kgen/comm": d["kgen/comm"]}
        if d.get("kgen/gemm") and d.get("torch/nccl"):
            vals["ideal"] = max(d["kgen/gemm"], d["torch/nccl"])
        out.append(f'<text x="{left - 6}" y="{y + bar * 2}" text-anchor="end">{esc(f"{op} {g} GPUs {m}x{n}x{k}")}</text>')
        for name, color, _ in BARS:
            if name in vals:
                r = vals[name] / t
                out.append(f'<rect x="{left}" y="{y}" width="{r * scale:.1f}" height="{bar - 1}" fill="{color}"/>')
                out.append(f'<text x="{left + r * scale + 3:.1f}" y="{y + bar - 1}" font-size="9">{r:.2f}</text>')
            y += bar
        y += gap
    lx = left
    for _, color, label in BARS:
        out.append(f'<rect x="{lx}" y="{height - 22}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{height - 13}">{esc(label)}</text>')
        lx += 140
    out.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"fused_plot: {sys.argv[1]}: {len(keys)} rows")


if __name__ == "__main__":
    main()
