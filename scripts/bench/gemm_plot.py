#!/usr/bin/env python3
"""Plots the GEMM results of docs/bench.md as one SVG, with no dependencies: gemm_sm90
beside cuBLAS (section "GEMM on sm_90a", its "Final" table: TFLOP/s per shape, same call)
and the bias+SiLU epilogue beside the plain GEMM and torch (section "OPS on one H100", its
last epilogue table: TFLOP/s from the microseconds).

    python3 scripts/bench/gemm_plot.py docs/bench.md docs/img/gemm-sm90.svg

`make plot-check` regenerates it and fails when the committed picture differs.
"""
import sys


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(lines, section, sub=None):
    """Returns the markdown tables (lists of rows of cells, header first) of the "## section"
    (and, with sub, of its "### sub..." subsection), in order."""
    out, cur, sec, inside = [], None, False, False
    for line in lines:
        if line.startswith("## "):
            sec = line[3:].startswith(section)
            inside = sec and sub is None
        elif line.startswith("### ") and sub is not None:
            inside = sec and line[4:].startswith(sub)
        if inside and line.startswith("|"):
            c = cells(line)
            if cur is None:
                cur = [c]
                out.append(cur)
            elif not c[0].startswith("---"):
                cur.append(c)
        else:
            cur = None
    return out


def num(s):
    return float(s.replace("*", "").split()[0])


def load(path):
    lines = open(path).read().splitlines()
    final = tables(lines, "GEMM on sm_90a", "Final")
    if not final:
        sys.exit("gemm_plot: no table under \"## GEMM on sm_90a\" / \"### Final\"")
    vs = []  # (label, kgen TFLOP/s, cuBLAS TFLOP/s)
    for r in final[0][1:]:
        vs.append((r[0], num(r[2]), num(r[3])))
    epi = [t for t in tables(lines, "OPS on one H100") if t[0][:2] == ["M x N x K", "epilogue"]]
    if not epi:
        sys.exit("gemm_plot: no epilogue table under \"## OPS on one H100\"")
    ep = []  # (label, plain, epilogue, torch matmul+ops) in TFLOP/s
    head = epi[-1][0]
    col = {h: i for i, h in enumerate(head)}
    for r in epi[-1][1:]:
        m, n, k = (int(x) for x in r[0].split("x"))
        tf = lambda us: 2.0 * m * n * k / (num(us) * 1e-6) / 1e12  # noqa: E731
        ep.append((f"{r[0]} {r[1]}", tf(r[col["kgen plain us"]]), tf(r[col["kgen epilogue us"]]),
                   tf(r[col["torch matmul+ops us"]])))
    return vs, ep


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def bars(out, y, title, rows, series, left, scale, bar=9, gap=8):
    """Draws one panel of grouped horizontal bars from y; returns the y below it."""
    out.append(f'<text x="{left}" y="{y + 14}" font-size="13">{esc(title)}</text>')
    y += 26
    top = max(v for r in rows for v in r[1:])
    px = scale / top
    for r in rows:
        out.append(f'<text x="{left - 6}" y="{y + bar * len(series) / 2 + 3:.1f}" text-anchor="end">{esc(r[0])}</text>')
        for (label, color), v in zip(series, r[1:]):
            out.append(f'<rect x="{left}" y="{y}" width="{v * px:.1f}" height="{bar - 1}" fill="{color}"/>')
            out.append(f'<text x="{left + v * px + 3:.1f}" y="{y + bar - 1}" font-size="9">{v:.0f}</text>')
            y += bar
        y += gap
    lx = left
    for label, color in series:
        out.append(f'<rect x="{lx}" y="{y}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{lx + 14}" y="{y + 9}">{esc(label)}</text>')
        lx += 170
    return y + 30


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    vs, ep = load(sys.argv[1])
    left, scale = 230, 420
    width = left + scale + 60
    body = []
    y = bars(body, 8, "gemm_sm90 vs cuBLAS, 1 x H100 (TFLOP/s, same call; longer is faster)", vs,
             [("kgen gemm_sm90", "#1f77b4"), ("cuBLAS", "#d62728")], left, scale)
    y = bars(body, y, "bias+SiLU epilogue at the LLM shapes, 1 x H100 (TFLOP/s from us)", ep,
             [("kgen plain", "#1f77b4"), ("kgen + bias+SiLU", "#2ca02c"), ("torch matmul+bias+silu", "#d62728")], left, scale)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y}" font-family="sans-serif" font-size="11">']
    out += body
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"gemm_plot: {sys.argv[2]}: {len(vs)} cuBLAS rows, {len(ep)} epilogue rows")


if __name__ == "__main__":
    main()
