"""Relative position vectors inside attention, as PyTorch ops.

Shaw et al. (2018) add a learned vector per clipped offset to the keys (and
values); NEZHA uses fixed sinusoids of the offset, Wang et al. (ICLR 2021)
sinusoids with learnable frequencies, Transformer-XL a projection W_R R of a
sinusoid over every offset; BoTNet separate row and column tables on an image
grid. Conventions:

* a table has 2k+1 rows, k = max_distance; row r holds offset r - k, and query
  i / key j use row clip(j - (i + query_offset), -k, k) + k;
* a table is [2k+1, Dh] (shared by the heads) or [H, 2k+1, Dh];
* q is (B, H, Tq, Dh), probabilities (B, H, Tq, Tk); float32, float64,
  bfloat16 or float16, computed in float32 (float64 for float64) and rounded
  once to the input's dtype;
* nothing of size (Tq, Tk, Dh) is ever formed;
* a bad argument raises ValueError with the library's message, e.g.
  "[relative_logits] table must have 2*max_distance+1 = 9 rows, got 8".

Formulas and sources: docs/relative.md.
"""

from ._library import load as _load

_ops = _load()

__all__ = [
    "relative_logits",
    "relative_logits_2d",
    "relative_values",
    "sinusoidal_relative_table",
]


def relative_logits(q, table, max_distance, *, k_len=None, query_offset=0):
    """out[b,h,i,j] = q[b,h,i] . table[clip(j - i - query_offset, -k, k) + k]: [B, H, Tq, Tk].

    k_len None means Tq. Differentiable with respect to q and table.
    """
    return _ops.relative_logits(q, table, max_distance, k_len, query_offset)


def relative_values(probs, table, max_distance, *, query_offset=0):
    """out[b,h,i] = sum_j probs[b,h,i,j] table[clip(j - i - query_offset, -k, k) + k]: [B, H, Tq, Dh].

    Differentiable with respect to probs and table.
    """
    return _ops.relative_values(probs, table, max_distance, query_offset)


def relative_logits_2d(q, table_h, table_w, height, width):
    """2D relative logits (BoTNet): q [B, H, height*width, Dh] -> [B, H, HW, HW].

    The term q_(y,x) . (table_h[y'-y+height-1] + table_w[x'-x+width-1]) with
    table_h [2*height-1, Dh] and table_w [2*width-1, Dh] (or one per head,
    [H, ., Dh]); rows are flattened as y*width + x. Differentiable.
    """
    return _ops.relative_logits_2d(q, table_h, table_w, height, width)


def sinusoidal_relative_table(max_distance, dim, *, base=10000.0, omega=None, layout="interleaved", dtype=None):
    """[2k+1, dim]: row r is the sinusoid of offset r - k (NEZHA).

    omega [dim/2] replaces the fixed frequencies base^(-2i/dim) with learnable
    ones (Wang et al. 2021) and is differentiable. dtype None means omega's
    dtype, else float32.
    """
    return _ops.sinusoidal_relative_table(max_distance, dim, base, omega, layout, dtype)
