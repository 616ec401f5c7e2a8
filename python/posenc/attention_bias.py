"""Attention biases added to the logits: ALiBi and T5, in 1D and on image grids; KERPLE offset rows.

Conventions:

* a bias is [H, q_len, k_len], the queries being the last q_len of the k_len
  keys (query i at key position i + k_len - q_len), as when decoding with a
  cache; add it to logits of shape (B, H, q_len, k_len);
* T5 buckets take relative_position = key position - query position, the
  convention of the T5 code (Hugging Face ``_relative_position_bucket``), with
  the same float32 logarithm so buckets agree with it exactly;
* 2D forms act on a height x width grid flattened as y*width + x;
* a bad argument raises ValueError with the library's message, e.g.
  "[t5_bucket] num_buckets must be even when bidirectional (half per direction), got 31".

Formulas and sources: docs/relative.md.
"""

import torch

from ._errors import _checked
from ._library import load as _load

_ops = _load()
_alibi_bias_out = _checked(torch.ops.posenc.alibi_bias.out, "alibi_bias")

__all__ = [
    "alibi_bias",
    "alibi_bias_2d",
    "alibi_slopes",
    "kerple_offset_bias",
    "t5_bias",
    "t5_bias_2d",
    "t5_bucket",
]


def alibi_slopes(num_heads, *, dtype=torch.float32):
    """ALiBi slopes [num_heads] (Press et al. 2022): 2^(-8h/n) for n a power of two, else the paper's rule."""
    return _ops.alibi_slopes(num_heads, dtype)


def alibi_bias(num_heads, q_len, k_len, *, causal=False, dtype=torch.float32, out=None):
    """ALiBi bias [num_heads, q_len, k_len]: -m_h * |i + k_len - q_len - j|.

    causal puts -inf on keys after the query (and needs q_len <= k_len). out, a
    contiguous float32/float64 tensor of that shape, is filled and returned
    instead of a new tensor (dtype is then out's).
    """
    if out is not None:
        return _alibi_bias_out(num_heads, q_len, k_len, causal, out=out)
    return _ops.alibi_bias(num_heads, q_len, k_len, causal, dtype)


def alibi_bias_2d(num_heads, height, width, *, distance="euclidean", dtype=torch.float32):
    """2D ALiBi bias [num_heads, HW, HW]: -m_h * dist((y,x), (y',x')), distance "euclidean" or "manhattan"."""
    return _ops.alibi_bias_2d(num_heads, height, width, distance, dtype)


def t5_bucket(relative_position, *, bidirectional=True, num_buckets=32, max_distance=128):
    """T5 bucket of each relative position (key - query): int64, same shape."""
    return _ops.t5_bucket(relative_position, bidirectional, num_buckets, max_distance)


def t5_bias(table, q_len, k_len, *, bidirectional=True, max_distance=128):
    """T5 bias [H, q_len, k_len] = table[bucket(j - i'), h] for table [num_buckets, H]; differentiable wrt table."""
    return _ops.t5_bias(table, q_len, k_len, bidirectional, max_distance)


def t5_bias_2d(table_h, table_w, height, width, *, bidirectional=True, max_distance=128):
    """2D T5 bias [H, HW, HW] = table_h[bucket(y'-y), h] + table_w[bucket(x'-x), h]; differentiable."""
    return _ops.t5_bias_2d(table_h, table_w, height, width, bidirectional, max_distance)


def kerple_offset_bias(r1, r2, q_len, k_len, *, kind="log"):
    """KERPLE offset rows [H, q_len + k_len - 1] (Chi et al. 2022), element d + k_len - 1 for d = j - i':
    kind "log" -r1_h log(1 + r2_h |d|), "power" -r1_h |d|^r2_h (r2 <= 2), from r1, r2 [H] > 0; no columns when a
    length is 0. Differentiable wrt r1 and r2 (first derivatives)."""
    return _ops.kerple_offset_bias(r1, r2, q_len, k_len, kind)
