#!/usr/bin/env python3
"""Generate layout-algebra conformance vectors for kgen's layout package.

Usage: python3 scripts/layout_vectors.py [--out layout/testdata/conformance]
                                         [--seed 1] [--n 40] [--no-cxx]

What it does
 1. Installs (once) into the git-ignored folder .tools/pycute, with pip:
    nvidia-cutlass (it ships pycute, CuTe's Python reference, and the C++
    CuTe headers), nvidia-cuda-cccl-cu12, nvidia-cuda-runtime-cu12 and
    nvidia-cuda-nvcc-cu12 (headers that the C++ CuTe headers include; the
    C++ cases are compiled for the host with g++, no GPU is needed).
 2. Draws seeded random inputs for every operation (nested shapes of depth
    <= 3, extents 1..8; compact, row-major, permuted, padded, broadcast
    (stride 0) and arbitrary strides) and computes pycute's answer.
 3. Compiles every case against the C++ CuTe headers with g++ (static
    integers, as kgen's layout package works) and records C++'s answer; a
    case that C++ rejects at compile time becomes an "error" case. Where
    pycute and C++ disagree, the file holds C++'s answer and the
    disagreement is counted in the file's "disagreements" field (the op's
    classes are described in docs/layout.md). With --no-cxx only pycute's
    answers are written (they are NOT C++-conformant: do not commit those).

Output: one JSON file per op, in the schema of shared/testdata/layout
(README.md there): {"op", "semantics", "cases": [{"args", "result"|"error"}]}.

Known classes of pycute/C++ disagreement (C++ wins; details and examples in
docs/layout.md):
  - composition with a by-mode tiler: C++ drops the modes of A the tiler does
    not cover, pycute keeps them.
  - default (compact) strides: C++ gives extent-1 modes stride 0.
  - composition divisibility: C++ 4.2 checks weak stride/shape conditions at
    compile time; it rejects inputs pycute accepts and accepts others.
  - complement/left_inverse: C++ rejects non-injective layouts (pycute returns
    zero extents); C++'s left inverse sends unreached points to stride 0.
  - logical_product with an integer tiler: pycute calls logical_divide.
  - blocked/raked_product: C++ does not coalesce the zipped modes.
  - idx2crd with the default stride: C++'s last mode is unbounded.
  - zipped/tiled with a "_" tiler mode: C++ requires that mode to be rank 2.
  - (harness) slice_ with a lone "_": pycute gives (t); kept as pycute's.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, ".tools", "pycute")
PACKAGES = ["nvidia-cutlass", "nvidia-cuda-cccl-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvcc-cu12"]


def ensure_tools():
    if not os.path.isdir(os.path.join(TOOLS, "pycute")):
        os.makedirs(TOOLS, exist_ok=True)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                               "--target", TOOLS] + PACKAGES)
    sys.path.insert(0, TOOLS)


# ---------------------------------------------------------------- random inputs

class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def shape(self, depth=None, maxsize=512):
        r = self.r
        if depth is None:
            depth = r.choice([0, 1, 1, 2, 2, 3])
        while True:
            s = self._shape(depth, True)
            if product(s) <= maxsize:
                return s

    def _shape(self, depth, top=False):
        r = self.r
        if depth == 0 or (not top and r.random() < 0.35):
            return r.choice([1, 2, 2, 3, 4, 4, 5, 6, 7, 8, 8])
        n = r.choice([1, 2, 2, 2, 3, 3, 4])
        return tuple(self._shape(depth - 1) for _ in range(n))

    def layout(self, shape=None, kind=None):
        r = self.r
        if shape is None:
            shape = self.shape()
        flat = flatten(shape)
        if kind is None:
            kind = r.choice(["compact", "compact", "row", "perm", "perm", "padded", "broadcast", "arbitrary"])
        if kind == "compact":
            st = prefix(flat)
        elif kind == "row":
            st = list(reversed(prefix(list(reversed(flat)))))
        elif kind == "perm":
            order = list(range(len(flat)))
            r.shuffle(order)
            st = [0] * len(flat)
            cur = 1
            for i in order:
                st[i] = cur
                cur *= flat[i]
        elif kind == "padded":
            order = list(range(len(flat)))
            r.shuffle(order)
            st = [0] * len(flat)
            cur = r.choice([1, 1, 2])
            for i in order:
                st[i] = cur
                cur *= flat[i] * r.choice([1, 1, 2, 3])
        elif kind == "broadcast":
            st = prefix(flat)
            st = [0 if r.random() < 0.35 else d for d in st]
        else:
            st = [r.choice([0, 1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32]) for _ in flat]
        return {"shape": tojson(shape), "stride": tojson(unflatten(st, shape))}

    def tile_layout(self, maxsize=64):
        r = self.r
        if r.random() < 0.5:
            s = r.choice([1, 2, 2, 4, 4, 8, 3, 6])
            d = r.choice([1, 1, 1, 2, 4, 0, 3])
            return {"shape": s, "stride": d}
        return self.layout(self.shape(depth=r.choice([1, 1, 2]), maxsize=maxsize),
                           kind=r.choice(["compact", "compact", "perm", "row", "padded"]))

    def tiler(self, a_rank):
        r = self.r
        x = r.random()
        if x < 0.35:
            return self.tile_layout()
        if x < 0.5:
            return r.choice([1, 2, 4, 8, 3, 6, 16, 32])
        n = r.randint(1, max(1, a_rank))
        out = []
        for _ in range(n):
            y = r.random()
            if y < 0.2:
                out.append(None)
            elif y < 0.45:
                out.append(r.choice([1, 2, 4, 8, 3]))
            else:
                out.append(self.tile_layout(maxsize=16))
        return out

    def coord(self, shape, holes=False):
        r = self.r
        if isinstance(shape, (tuple, list)):
            if r.random() < 0.2:
                return None if holes and r.random() < 0.5 else r.randrange(product(shape))
            return [self.coord(s, holes) for s in shape]
        if holes and r.random() < 0.35:
            return None
        return r.randrange(shape)


def flatten(t):
    if isinstance(t, (tuple, list)):
        out = []
        for e in t:
            out += flatten(e)
        return out
    return [t]


def product(t):
    p = 1
    for v in flatten(t):
        p *= v
    return p


def prefix(flat):
    out, cur = [], 1
    for s in flat:
        out.append(cur)
        cur *= s
    return out


def unflatten(flat, like):
    it = iter(flat)

    def go(x):
        if isinstance(x, (tuple, list)):
            return tuple(go(e) for e in x)
        return next(it)
    return go(like)


def tojson(t):
    if isinstance(t, (tuple, list)):
        return [tojson(e) for e in t]
    return t


def totuple(j):
    if isinstance(j, list):
        return tuple(totuple(e) for e in j)
    return j


def rank(j):
    return len(j) if isinstance(j, list) else 1


# ---------------------------------------------------------------- pycute side

def py_layout(j):
    import pycute
    return pycute.Layout(totuple(j["shape"]), totuple(j["stride"]))


def py_tiler(j):
    if j is None or isinstance(j, int):
        return j
    if isinstance(j, list):
        return tuple(py_tiler(e) for e in j)
    return py_layout(j)


def lj(l):
    return {"shape": tojson(l.shape), "stride": tojson(l.stride)}


def py_eval(op, a):
    import pycute as P
    from pycute.swizzle import Swizzle, ComposedLayout
    L = py_layout
    if op == "size":
        return P.size(L(a[0]))
    if op == "cosize":
        return P.cosize(L(a[0]))
    if op == "rank":
        return rank(a[0]["shape"])
    if op == "depth":
        def depth(t):
            return 1 + max([depth(e) for e in t] + [0]) if isinstance(t, list) else 0
        return depth(a[0]["shape"])
    if op == "flatten_layout":
        l = L(a[0])
        return {"shape": tojson(P.flatten(l.shape)) if isinstance(l.shape, tuple) else l.shape,
                "stride": tojson(P.flatten(l.stride)) if isinstance(l.stride, tuple) else l.stride}
    if op == "layout_values":
        l = L(a[0])
        return [l(i) for i in range(P.size(l))]
    if op == "product":
        return P.product(totuple(a[0]))
    if op == "tuple_max":
        return P.tuple_max(totuple(a[0]))
    if op == "inner_product":
        return P.inner_product(totuple(a[0]), totuple(a[1]))
    if op == "shape_div":
        return tojson(P.shape_div(totuple(a[0]), totuple(a[1])))
    if op == "prefix_product":
        return tojson(P.prefix_product(*[totuple(x) for x in a]))
    if op == "crd2idx":
        return P.crd2idx(*[totuple(x) for x in a])
    if op == "idx2crd":
        return tojson(P.idx2crd(*[totuple(x) for x in a]))
    if op == "slice_":
        return tojson(P.slice_(totuple(a[0]), totuple(a[1])))
    if op == "slice_and_offset":
        l, off = P.slice_and_offset(totuple(a[0]), L(a[1]))
        return [lj(l), off]
    if op in ("coalesce", "filter"):
        f = getattr(P, op)
        return lj(f(L(a[0]), totuple(a[1])) if len(a) > 1 else f(L(a[0])))
    if op == "complement":
        return lj(P.complement(L(a[0]), *a[1:]))
    if op in ("right_inverse", "left_inverse"):
        return lj(getattr(P, op)(L(a[0])))
    if op in ("composition", "logical_divide", "zipped_divide", "tiled_divide",
              "logical_product", "zipped_product", "tiled_product"):
        return lj(getattr(P, op)(L(a[0]), py_tiler(a[1])))
    if op in ("blocked_product", "raked_product"):
        return lj(getattr(P, op)(L(a[0]), L(a[1])))
    if op == "swizzle":
        b, m, s = a[0]["swizzle"]
        return Swizzle(b, m, s)(a[1])
    if op == "composed_layout":
        c = a[0]
        o = c["outer"]
        outer = Swizzle(*o["swizzle"]) if "swizzle" in o else L(o)
        inner = L(c["inner"])
        v = c["offset"] + P.crd2idx(totuple(a[1]), inner.shape, inner.stride)
        return outer(v)
    raise KeyError(op)  # no pycute counterpart (C++ only)


# ---------------------------------------------------------------- C++ side

CXX_PRELUDE = r"""
#include <cute/layout.hpp>
#include <cute/layout_composed.hpp>
#include <cute/swizzle.hpp>
#include <cute/swizzle_layout.hpp>
#include <cstdio>
#include <utility>
using namespace cute;
template <class T> void pj(T const& t);
template <class T, size_t... I> void pjt(T const& t, std::index_sequence<I...>) {
  ((printf(I ? "," : ""), pj(get<I>(t))), ...);
}
template <class S, class D> void pj(Layout<S,D> const& l) {
  printf("{\"shape\":"); pj(l.shape()); printf(",\"stride\":"); pj(l.stride()); printf("}");
}
template <class T> void pj(T const& t) {
  if constexpr (is_tuple<T>::value) {
    printf("["); pjt(t, std::make_index_sequence<tuple_size<T>::value>{}); printf("]");
  } else {
    printf("%lld", (long long)t);
  }
}
"""


def cx(t):
    """IntTuple / coordinate with holes -> C++ expression."""
    if t is None:
        return "_"
    if isinstance(t, list):
        if not t:
            return "cute::tuple<>{}"
        return "cute::make_tuple(" + ",".join(cx(e) for e in t) + ")"
    return "Int<%d>{}" % t


def cl(j):
    return "make_layout(%s,%s)" % (cx(j["shape"]), cx(j["stride"]))


def ctiler(j):
    if j is None:
        return "_"
    if isinstance(j, int):
        return "Int<%d>{}" % j
    if isinstance(j, list):
        return "make_tile(" + ",".join(ctiler(e) for e in j) + ")"
    return cl(j)


def cxx_body(op, a):
    if op in ("size", "cosize", "rank", "depth"):
        return "pj(int(%s(%s)));" % (op, cl(a[0]))
    if op == "flatten_layout":
        return "pj(flatten(%s));" % cl(a[0])
    if op == "layout_values":
        return ('auto l = %s; printf("["); for (int i = 0; i < int(size(l)); ++i) '
                '{ printf(i ? ",%%d" : "%%d", int(l(i))); } printf("]");' % cl(a[0]))
    if op in ("inner_product", "shape_div"):
        return "pj(%s(%s,%s));" % (op, cx(a[0]), cx(a[1]))
    if op == "prefix_product":
        return "pj(prefix_product(%s));" % ",".join(cx(x) for x in a)
    if op in ("crd2idx", "idx2crd"):
        return "pj(%s(%s));" % (op, ",".join(cx(x) for x in a))
    if op == "slice_and_offset":
        return ('auto r = slice_and_offset(%s,%s); printf("["); pj(get<0>(r)); printf(","); '
                'pj(get<1>(r)); printf("]");' % (cx(a[0]), cl(a[1])))
    if op in ("coalesce", "filter"):
        if len(a) > 1:
            return "pj(%s(%s,%s));" % (op, cl(a[0]), cx(a[1]))
        return "pj(%s(%s));" % (op, cl(a[0]))
    if op == "complement":
        if len(a) > 1:
            return "pj(complement(%s,%s));" % (cl(a[0]), cx(a[1]))
        return "pj(complement(%s));" % cl(a[0])
    if op in ("right_inverse", "left_inverse"):
        return "pj(%s(%s));" % (op, cl(a[0]))
    if op in ("composition", "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
              "logical_product", "zipped_product", "tiled_product", "flat_product"):
        return "pj(%s(%s,%s));" % (op, cl(a[0]), ctiler(a[1]))
    if op in ("blocked_product", "raked_product"):
        return "pj(%s(%s,%s));" % (op, cl(a[0]), cl(a[1]))
    if op == "max_common_vector":
        return "pj(int(max_common_vector(%s,%s)));" % (cl(a[0]), cl(a[1]))
    if op == "tile_to_shape":
        return "pj(tile_to_shape(%s,%s));" % (cl(a[0]), cx(a[1]))
    if op == "swizzle":
        b, m, s = a[0]["swizzle"]
        return "pj(int(Swizzle<%d,%d,%d>{}(int(%d))));" % (b, m, s, a[1])
    if op == "composed_layout":
        c = a[0]
        o = c["outer"]
        outer = ("Swizzle<%d,%d,%d>{}" % tuple(o["swizzle"])) if "swizzle" in o else cl(o)
        crd = a[1]
        return ("auto c = make_composed_layout(%s,int(%d),%s); pj(int(c(%s)));"
                % (outer, c["offset"], cl(c["inner"]), cx(crd)))
    raise KeyError(op)


def cxx_includes():
    inc = [os.path.join(TOOLS, "cutlass_library", "source", "include"),
           os.path.join(TOOLS, "nvidia", "cuda_cccl", "include"),
           os.path.join(TOOLS, "nvidia", "cuda_runtime", "include"),
           os.path.join(TOOLS, "nvidia", "cuda_nvcc", "include")]
    return sum((["-I", p] for p in inc), [])


RUNTIME = "runtime failure"


def cxx_batch(op, cases, workdir, tag):
    """Compile and run cases; return {index: json-result or None (rejected)}."""
    pending = dict(enumerate(cases))
    results = {}
    for _ in range(6):
        if not pending:
            break
        src = [CXX_PRELUDE]
        line_of = []
        for i, a in pending.items():
            line_of.append((len("".join(src).splitlines()) + 1, i))
            src.append("void case_%d() {\n  printf(\"%d \"); %s printf(\"\\n\");\n}\n" % (i, i, cxx_body(op, a)))
        src.append("#include <cstdlib>\nint main(int argc, char** argv) {\n  int only = argc > 1 ? atoi(argv[1]) : -1;\n"
                   + "".join("  if (only < 0 || only == %d) { case_%d(); fflush(stdout); }\n" % (i, i) for i in pending)
                   + "}\n")
        cpp = os.path.join(workdir, "%s.cpp" % tag)
        exe = os.path.join(workdir, "%s.bin" % tag)
        with open(cpp, "w") as f:
            f.write("".join(src))
        p = subprocess.run(["g++", "-std=c++17", "-O0", "-w", "-fmax-errors=100000"] + cxx_includes()
                           + [cpp, "-o", exe], capture_output=True, text=True)
        if p.returncode == 0:
            run = subprocess.run([exe], capture_output=True, text=True, timeout=600)
            if run.returncode == 0:
                for ln in run.stdout.splitlines():
                    k, _, v = ln.partition(" ")
                    results[int(k)] = json.loads(v)
                return results
            # Some case fails at run time (e.g. a division by zero that C++
            # does not catch at compile time): run the cases one by one.
            for i in pending:
                one = subprocess.run([exe, str(i)], capture_output=True, text=True, timeout=60)
                if one.returncode != 0:
                    results[i] = RUNTIME
                    continue
                k, _, v = one.stdout.strip().partition(" ")
                results[int(k)] = json.loads(v)
            return results
        bad = set()
        for m in re.finditer(re.escape(os.path.basename(cpp)) + r":(\d+):", p.stderr):
            ln = int(m.group(1))
            owner = None
            for start, i in line_of:
                if start <= ln:
                    owner = i
            if owner is not None:
                bad.add(owner)
        if not bad:
            raise RuntimeError("g++ failed without a case to blame:\n" + p.stderr[-3000:])
        for i in bad:
            results[i] = None
            del pending[i]
    if pending:
        raise RuntimeError("could not converge compiling %s" % op)
    return results


# ---------------------------------------------------------------- case drawing

def draw(op, g, n):
    r = g.r
    cases = []
    for _ in range(n):
        if op in ("size", "cosize", "rank", "depth", "flatten_layout", "layout_values",
                  "right_inverse", "left_inverse"):
            cases.append([g.layout()])
        elif op in ("coalesce", "filter"):
            a = g.layout()
            if r.random() < 0.4:
                k = r.randint(1, rank(a["shape"]))
                cases.append([a, [1] * k])
            else:
                cases.append([a])
        elif op == "complement":
            a = g.layout(kind=r.choice(["compact", "perm", "padded", "broadcast", "arbitrary"]))
            if r.random() < 0.5:
                cases.append([a])
            else:
                cases.append([a, r.randint(1, 2 * max(1, cosize_j(a)) + 8)])
        elif op in ("composition", "logical_divide", "zipped_divide", "tiled_divide", "flat_divide",
                    "logical_product", "zipped_product", "tiled_product", "flat_product"):
            a = g.layout(g.shape(maxsize=256))
            cases.append([a, g.tiler(rank(a["shape"]))])
        elif op in ("blocked_product", "raked_product", "max_common_vector"):
            a = g.layout(g.shape(depth=r.choice([0, 1, 1, 2]), maxsize=64))
            b = g.layout(g.shape(depth=r.choice([0, 1, 1, 2]), maxsize=16),
                         kind=r.choice(["compact", "row", "perm"]))
            cases.append([a, b])
        elif op == "tile_to_shape":
            a = g.layout(g.shape(depth=r.choice([0, 1]), maxsize=16), kind=r.choice(["compact", "row"]))
            k = rank(a["shape"]) + r.choice([0, 0, 1])
            bs = [product(s) for s in (a["shape"] if isinstance(a["shape"], list) else [a["shape"]])]
            bs += [1] * (k - len(bs))
            trg = [b * r.choice([1, 2, 3, 4]) if r.random() < 0.9 else b + 1 for b in bs]
            cases.append([a, trg if k > 1 or r.random() < 0.5 else trg[0]])
        elif op == "product":
            cases.append([tojson(g.shape())])
        elif op == "tuple_max":
            cases.append([tojson(g.shape())])
        elif op == "inner_product":
            s = tojson(g.shape())
            t = tojson(unflatten([r.randint(0, 16) for _ in flatten(s)], s)) if r.random() < 0.9 else tojson(g.shape())
            cases.append([s, t])
        elif op == "shape_div":
            s = tojson(g.shape())
            d = r.choice([1, 2, 4, 8, 16, 3, 6, 64]) if r.random() < 0.7 else tojson(g.shape())
            cases.append([s, d])
        elif op == "prefix_product":
            s = tojson(g.shape())
            cases.append([s] if r.random() < 0.7 else [s, r.randint(1, 5)])
        elif op in ("crd2idx", "idx2crd"):
            a = g.layout()
            s = a["shape"]
            if op == "crd2idx":
                c = tojson(g.coord(s))
            else:
                c = r.randrange(product(s) * (2 if r.random() < 0.2 else 1))
            if r.random() < 0.5:
                cases.append([c, s])
            else:
                cases.append([c, s, a["stride"]])
        elif op == "slice_":
            s = tojson(g.shape(depth=r.choice([1, 2, 3])))
            c = tojson(g.coord(s, holes=True))
            if c is None:
                c = [None] * rank(s)
            cases.append([c, s])
        elif op == "slice_and_offset":
            a = g.layout(g.shape(depth=r.choice([1, 2, 3])))
            c = tojson(g.coord(a["shape"], holes=True))
            if c is None:
                c = [None] * rank(a["shape"])
            cases.append([c, a])
        elif op == "swizzle":
            b = r.randint(0, 3)
            m = r.randint(0, 4)
            s = r.choice([-1, 1]) * r.randint(max(b, 1), 5)
            cases.append([{"swizzle": [b, m, s]}, r.randrange(1 << 10)])
        elif op == "composed_layout":
            b = r.randint(1, 3)
            m = r.randint(0, 3)
            s = r.choice([-1, 1]) * r.randint(b, 4)
            inner = g.layout(g.shape(depth=r.choice([0, 1, 2]), maxsize=128))
            outer = {"swizzle": [b, m, s]} if r.random() < 0.8 else g.layout(g.shape(depth=1, maxsize=64))
            cases.append([{"outer": outer, "offset": r.choice([0, 0, r.randint(0, 32)]), "inner": inner},
                          tojson(g.coord(inner["shape"]))])
        else:
            raise KeyError(op)
    return cases


def cosize_j(a):
    return 1 + sum((s - 1) * abs(d) for s, d in zip(flatten(a["shape"]), flatten(a["stride"])))


OPS_CXX = ["size", "cosize", "rank", "depth", "flatten_layout", "layout_values", "inner_product",
           "shape_div", "crd2idx", "idx2crd", "slice_and_offset", "coalesce", "filter",
           "composition", "complement", "right_inverse", "left_inverse", "logical_divide",
           "zipped_divide", "tiled_divide", "flat_divide", "logical_product", "zipped_product",
           "tiled_product", "flat_product", "blocked_product", "raked_product", "max_common_vector",
           "tile_to_shape", "swizzle", "composed_layout"]
# C++ CuTe 4.2 has no prefix_product or tuple_max; slice_ is a pure tuple op.
OPS_PY = ["product", "tuple_max", "prefix_product", "slice_"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "layout", "testdata", "conformance"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--n", type=int, default=40, help="cases per op")
    ap.add_argument("--no-cxx", action="store_true")
    ap.add_argument("--ops", default="", help="comma-separated ops to regenerate (default: all)")
    args = ap.parse_args()
    ensure_tools()
    os.makedirs(args.out, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="layout_vectors_")
    jobs = {}
    drawn = {}
    summary = []
    only = set(filter(None, args.ops.split(",")))
    for k, op in enumerate(OPS_CXX + OPS_PY):
        if only and op not in only:
            continue
        g = Gen(args.seed * 1000 + k)  # seeded by position: --ops reproduces the same cases
        drawn[op] = draw(op, g, args.n)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        if not args.no_cxx:
            for op in OPS_CXX:
                if op in drawn:
                    jobs[op] = ex.submit(cxx_batch, op, drawn[op], workdir, op)
        for op in [o for o in OPS_CXX + OPS_PY if o in drawn]:
            out_cases = []
            disagree = 0
            cx_res = jobs[op].result() if op in jobs else None
            for i, a in enumerate(drawn[op]):
                try:
                    py = ("ok", py_eval(op, a))
                except KeyError:
                    py = ("none", None)
                except Exception as e:  # pycute rejects (assertion) or fails
                    py = ("err", "%s: %s" % (type(e).__name__, e))
                if cx_res is None:
                    if py[0] == "ok":
                        out_cases.append({"args": a, "result": py[1]})
                    elif py[0] == "err":
                        out_cases.append({"args": a, "error": "pycute rejects this input: " + py[1]})
                    continue
                c = cx_res.get(i)
                if c is None or c == RUNTIME:
                    why = ("C++ CuTe rejects this input (compile error)" if c is None else
                           "C++ CuTe fails on this input at run time (division by zero)")
                    if py[0] == "ok":
                        disagree += 1
                    out_cases.append({"args": a, "error": why})
                else:
                    if py[0] != "none" and (py[0] != "ok" or json.dumps(py[1]) != json.dumps(c)):
                        disagree += 1
                    out_cases.append({"args": a, "result": c})
            doc = {"op": op,
                   "semantics": "C++ CuTe (nvidia-cutlass headers), static integers" if op in jobs
                   else "pycute (no C++ check for this op)",
                   "disagreements": disagree,
                   "cases": out_cases}
            with open(os.path.join(args.out, op + ".json"), "w") as f:
                json.dump(doc, f, separators=(",", ":"))
                f.write("\n")
            summary.append("%-18s %4d cases, %3d errors, %3d pycute/C++ disagreements" % (
                op, len(out_cases), sum("error" in c for c in out_cases), disagree))
    shutil.rmtree(workdir, ignore_errors=True)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
