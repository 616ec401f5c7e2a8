"""Fixed attention calls whose outputs and gradients are saved once from a known-good build.

test_attention_golden.py recomputes them and asks for equality bit for bit: a refactor of the
attention op, its terms or the modules must not change a single value. Two kinds of case:

* every term keyword of posenc.attention on the fused path (float32 and float64), gradients of q, k, v
  and of every term tensor;
* posenc.nn.MultiheadAttention with every registry family (its own parameters, seeded), output and the
  gradients of the input and of every parameter.

Run as a script to write the values (only from the build the comparison is meant to hold against):
    POSENC_LIBRARY=... /usr/bin/python3 tests/python/golden/attention_cases.py DIR
writes DIR/attention_golden.<machine key>.pt. The last bits depend on the machine the kernels were compiled
for (-march=native) and on OpenBLAS's kernel set (the projections' GEMMs), so a saved set holds for one
such key only (machine_key()).
"""

import ctypes
import pathlib
import re
import subprocess
import sys

import torch

import posenc
import posenc.nn as pnn
from posenc.nn.registry import CATALOG


def _gen(seed):
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def _randn(shape, dtype, seed):
    return torch.randn(*shape, generator=_gen(seed), dtype=torch.float64).to(dtype)


def _term_calls(dtype):
    """name -> (q, k, v, keywords): each term of posenc.attention alone and a few together."""
    b, h, t, d = 2, 3, 9, 4

    def r(*shape, seed):
        return _randn(shape, dtype, seed)

    q, k, v = r(b, h, t, d, seed=1), r(b, h, t, d, seed=2), r(b, h, t, d, seed=3)
    padding = torch.zeros(b, t, dtype=torch.bool)
    padding[1, -2:] = True
    fire = (r(5, seed=10), r(5, seed=11), r(h, 5, seed=12), r(h, seed=13), torch.tensor(0.7, dtype=dtype),
            torch.tensor(6.0, dtype=dtype))
    index = torch.tensor([0, 1, 1, 2, 3, 3, 4], dtype=torch.int64)  # 2K+1 = 7 rows into a 5-row table
    calls = {
        "none": {},
        "causal+padding": {"causal": True, "key_padding_mask": padding},
        "alibi": {"alibi_slopes": r(h, seed=20).abs()},
        "t5": {"t5_table": r(32, h, seed=21)},
        "t5-causal": {"t5_table": r(32, h, seed=21), "causal": True},
        "offset_bias": {"offset_bias": r(h, 2 * t - 1, seed=22)},
        "bias": {"bias": r(h, t, t, seed=23)},
        "bias-broadcast": {"bias": r(b, 1, 1, t, seed=24)},
        "shaw": {"rel_k": r(7, d, seed=25), "rel_v": r(7, d, seed=26)},
        "shaw-per-head": {"rel_k": r(h, 5, d, seed=27), "rel_v": r(5, d, seed=28), "max_distance": 2},
        "xl": {"rel_k": r(2 * t - 1, d, seed=29), "xl_u": r(h, d, seed=30), "xl_v": r(h, d, seed=31)},
        "deberta-like": {"rel_k": r(5, d, seed=32), "rel_q": r(5, d, seed=33), "rel_index": index},
        "fire": {"fire": fire, "causal": True},
        "cope": {"cope": r(6, d, seed=34), "causal": True, "key_padding_mask": padding},
        "combined": {"alibi_slopes": r(h, seed=35).abs(), "rel_k": r(7, d, seed=36), "rel_v": r(7, d, seed=37),
                     "bias": r(h, t, t, seed=38), "causal": True, "key_padding_mask": padding},
        "fire+shaw": {"fire": fire, "rel_k": r(7, d, seed=39), "causal": True},
    }
    out = {name: (q, k, v, kw) for name, kw in calls.items()}
    # 2D terms: a 3 x 3 grid (Tq = Tk = 9).
    grid = {"rel_2d": (r(5, d, seed=40), r(5, d, seed=41), 3, 3), "grid_bias": r(h, 5, 5, seed=42)}
    out["grid"] = (q, k, v, grid)
    return out


def _leaves(keywords):
    """The floating tensors of the keywords (and inside fire / rel_2d), made leaves that require grad."""
    def leaf(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.clone().requires_grad_()
        if isinstance(x, tuple):
            return tuple(leaf(y) for y in x)
        return x
    return {key: leaf(value) for key, value in keywords.items()}


def _flat_tensors(keywords):
    found = []
    for key in sorted(keywords):
        value = keywords[key]
        items = value if isinstance(value, tuple) else (value,)
        found += [x for x in items if isinstance(x, torch.Tensor) and x.requires_grad]
    return found


def term_results():
    results = {}
    for dtype in (torch.float32, torch.float64):
        for name, (q, k, v, keywords) in _term_calls(dtype).items():
            q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
            kw = _leaves(keywords)
            out = posenc.attention(q, k, v, path="fused", **kw)
            weight = _randn(out.shape, dtype, 99)
            (out * weight).sum().backward()
            tensors = [q, k, v] + _flat_tensors(kw)
            results[f"terms/{name}/{dtype}"] = [out.detach()] + [x.grad for x in tensors]
    return results


def _module(name, causal, dtype):
    torch.manual_seed(1234)
    return pnn.MultiheadAttention(32, 4, encoding=name, causal=causal).to(dtype)


def module_results():
    results = {}
    for family in CATALOG:
        name = family["name"]
        if family["point"] in ("none", "input"):
            continue
        causal = bool(family["needs"]["causal"])
        for dtype in (torch.float32, torch.float64):
            try:
                m = _module(name, causal, dtype)
            except ValueError as error:  # a family without a Python module, or that needs other sizes
                results[f"module/{name}/{dtype}/error"] = str(error)
                continue
            t = 12
            x = _randn((2, t, 32), dtype, 7).requires_grad_()
            try:
                out = m(x)
            except ValueError as error:
                found = re.search(r"height\*width = (\d+)", str(error)) or re.search(r"= (\d+) positions", str(error))
                if not found:
                    raise
                t = int(found.group(1))
                x = _randn((2, t, 32), dtype, 7).requires_grad_()
                out = m(x)
            (out * _randn(out.shape, dtype, 8)).sum().backward()
            grads = [x.grad] + [p.grad if p.grad is not None else torch.zeros(0) for _, p in
                                sorted(m.named_parameters())]
            results[f"module/{name}/{dtype}"] = [out.detach()] + grads
    return results


def machine_key():
    """"<gcc's -march=native target>.<OpenBLAS core>", e.g. "cooperlake.SkylakeX": what the values' last bits
    depend on besides the code ("unknown" parts when the compiler or OpenBLAS does not say)."""
    try:
        text = subprocess.run(["c++", "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                              timeout=60).stdout
        march = re.search(r"^\s+-march=\s+(\S+)", text, re.MULTILINE).group(1)
    except (OSError, subprocess.SubprocessError, AttributeError):
        march = "unknown"
    try:
        corename = ctypes.CDLL("libblas.so.3").openblas_get_corename
        corename.restype = ctypes.c_char_p
        core = corename().decode()
    except (OSError, AttributeError):
        core = "unknown"
    return f"{march}.{core}"


def golden_path(directory):
    return pathlib.Path(directory) / f"attention_golden.{machine_key()}.pt"


def all_results():
    torch.set_num_threads(1)
    return {**term_results(), **module_results()}


if __name__ == "__main__":
    torch.save(all_results(), golden_path(sys.argv[1]))
    print(golden_path(sys.argv[1]))
