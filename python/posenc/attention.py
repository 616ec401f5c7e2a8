"""Scaled dot-product attention with any positional encoding applied inside.

Conventions:

* q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv), all of one dtype
  (float32, float64, bfloat16, float16); the result is (B, H, Tq, Dv) in that
  dtype, computed in float32 (float64 for float64) and rounded once;
* the queries are the last Tq of the Tk keys: query i sits at key position
  i' = i + Tk - Tq (as when decoding with a cache), and the offset of key j
  is d = j - i';
* a bad argument raises ValueError (a tensor of the wrong dtype TypeError)
  with the library's message, e.g.
  "[attention] key_padding_mask must be (B, Tk) = (2, 16), got (2, 15)".

Formulas and sources: docs/attention.md.
"""

import operator

import torch

from ._library import load as _load
from .rope import apply_rope

_ops = _load()

__all__ = ["attention"]

_ROPE_POSITION_KEYS = ("positions", "q_positions", "k_positions")

# The rate the work bound assumes (the CLI's: posenc eval / analyze), and the default bound.
_ASSUMED_MULTIPLY_ADDS_PER_SECOND = 1e10
_DEFAULT_MAX_TIME = 3600.0


def _duration(seconds):
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        s = round(seconds)
        return f"{s // 60} min {s % 60} s"
    m = round(seconds / 60)
    return f"{m // 60} h {m % 60} min"


def _check_work(q, k, v, causal, max_time):
    """Refuses a call whose estimated time exceeds max_time seconds (None: no bound).

    The work is B*H*Tq*Tk*(Dh + Dv) multiply-adds (q.k and p.v; half the pairs
    when causal), at the rate the CLI assumes. Attention at T = 2^20 would
    otherwise run for hours without a word."""
    if max_time is None:
        return
    if isinstance(max_time, bool) or not isinstance(max_time, (int, float)):
        raise TypeError(f"[attention] max_time must be a number of seconds or None, got {type(max_time).__name__}")
    if not max_time > 0:
        raise ValueError(f"[attention] max_time must be > 0 seconds (None: no bound), got {max_time}")
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)):
        return  # the op reports the shapes
    b, h, q_len, head_dim = q.shape
    k_len, v_dim = k.shape[2], v.shape[3]
    pairs = b * h * q_len * k_len
    if causal:
        pairs //= 2
    work = float(pairs) * (head_dim + v_dim)
    seconds = work / _ASSUMED_MULTIPLY_ADDS_PER_SECOND
    if seconds > max_time:
        raise ValueError(
            f"[attention] this call needs about {work:.1e} multiply-adds (B {b} x H {h} x Tq {q_len} x Tk {k_len}"
            f"{' / 2 causal' if causal else ''} x (Dh {head_dim} + Dv {v_dim})), about {_duration(seconds)} at an "
            f"assumed {_ASSUMED_MULTIPLY_ADDS_PER_SECOND:.0e} per second, beyond max_time {max_time:g} s: pass a "
            "larger max_time, or max_time=None to run it anyway")


def _rotate(q, k, rope):
    """q and k rotated by apply_rope with the options in the dict rope."""
    if not isinstance(rope, dict):
        raise TypeError(f"[attention] rope must be a dict of apply_rope options, got {type(rope).__name__}")
    if q.dim() != 4 or k.dim() != 4:
        return q, k  # the op reports the shapes
    q_len, k_len = q.shape[2], k.shape[2]
    options = {key: value for key, value in rope.items() if key not in _ROPE_POSITION_KEYS}
    if "positions" in rope:
        if "q_positions" in rope or "k_positions" in rope:
            raise ValueError("[attention] rope takes positions or q_positions/k_positions, got both")
        if q_len != k_len:
            raise ValueError("[attention] rope positions are shared by q and k only when q_len = k_len; "
                             f"give q_positions and k_positions, got q_len {q_len} and k_len {k_len}")
        q_positions = k_positions = rope["positions"]
    else:
        q_positions = rope.get("q_positions", torch.arange(k_len - q_len, k_len))
        k_positions = rope.get("k_positions", torch.arange(k_len))
    return apply_rope(q, q_positions, **options), apply_rope(k, k_positions, **options)


def attention(q, k, v, *, causal=False, key_padding_mask=None, scale=None, rope=None, alibi_slopes=None,
              t5_table=None, t5_num_buckets=32, t5_max_distance=128, rel_k=None, rel_v=None, max_distance=None,
              rel_2d=None, return_weights=False, t5_bidirectional=None, xl_u=None, xl_v=None, bias=None,
              path="auto", max_time=_DEFAULT_MAX_TIME, offset_bias=None, grid_bias=None, fire=None, cope=None,
              rel_q=None, rel_index=None):
    """Attention with positional terms: returns out (B, H, Tq, Dv), or (out, weights) with return_weights.

    With i' = i + Tk - Tq and r(d) = clip(d, -K, K) + K for d = j - i':

        s[i, j] = scale * ( (q_i + xl_u) . k_j
                          + (q_i + xl_v) . rel_k[r(d)]
                          + k_j . rel_q[r(d)]                (DeBERTa's p2c)
                          + q_i . (table_h[y_j - y_i + height - 1] + table_w[x_j - x_i + width - 1]) )
                  - m_h |d|                          (ALiBi, alibi_slopes [H])
                  + t5_table[bucket(d), h]           (T5, t5_table [t5_num_buckets, H])
                  + offset_bias[h, d + Tk - 1]       (any bias of the offset alone)
                  + grid_bias[h, y_j - y_i + Hg - 1, x_j - x_i + Wg - 1]
                  + fire(i', j)_h                    (FIRE, computed per tile)
                  + cope(q_i, k, e)_j                (CoPE, computed per query row)
                  + bias[b, h, i, j]
        s[i, j] = -inf where j > i' (causal) or key_padding_mask[b, j] (True = padding)
        p = softmax(s) over j;  a row whose keys are all masked gives p = 0 (output 0, no NaN)
        out[i] = sum_j p[i, j] (v_j + rel_v[r(d)])

    Every term is optional and they combine freely. The terms by point are
    offset_bias, grid_bias, fire, rel_k / rel_v, rope and bias; alibi_slopes,
    t5_table, rel_2d and xl_u / xl_v are sugar that the op turns into them.

    * scale: default 1/sqrt(Dh); it multiplies q.k and the relative terms,
      not the biases. T5 is unscaled in the original (its attention has no
      1/sqrt(Dh)): pass scale=1.0 to match it.
    * rope: a dict of posenc.apply_rope options (base, layout, rotary_dim,
      scaling, ...); q is rotated at positions Tk-Tq .. Tk-1 and k at
      0 .. Tk-1, unless the dict holds "positions" (used for both, when
      Tq = Tk) or "q_positions" / "k_positions".
    * T5: buckets of d = key - query as in Hugging Face's T5;
      t5_bidirectional None means not causal (the encoder's buckets unless
      causal). rel_k / rel_v: Shaw et al. tables [2K+1, D] shared by the
      heads or [H, 2K+1, D], row r holding offset r - K; max_distance K None
      is read from rel_k's rows (rel_v alone needs it). xl_u, xl_v [H, Dh]:
      Transformer-XL's content and position biases (xl_v needs rel_k, the
      position vectors, e.g. a sinusoidal_relative_table with K = Tk - 1).
    * rel_2d: (table_h, table_w, height, width), tables [2*height-1, Dh] and
      [2*width-1, Dh] (or per head) on a height x width grid flattened as
      y*width + x; needs Tq = Tk = height*width (BoTNet).
    * offset_bias [H, Tq + Tk - 1]: a bias of the offset alone, element
      d + Tk - 1 for d = j - i' (KERPLE, DPB, ... rows; added to ALiBi's and
      T5's); O(H T) memory where a dense bias is O(H T^2).
    * grid_bias [H, 2*Hg-1, 2*Wg-1]: a bias of the 2D offset on an Hg x Wg
      grid flattened as y*Wg + x; needs Tq = Tk = Hg*Wg (Swin V2's CPB, 2D
      ALiBi and T5 rows).
    * fire: FIRE's (w1, b1, w2, b2, c, threshold) (posenc.nn.FireBias.terms()),
      evaluated per tile inside the kernel, forward and backward; needs causal.
    * cope: CoPE's table e [npos, Dh] shared by the heads (posenc.nn.CopeBias.e):
      gates sigmoid(scale q_i . k_t) over the keys up to the query (padded keys
      count 0), positions p_ij = sum_{t=j}^{i'} g_it clamped at npos - 1, and
      q_i . e interpolated at p_ij added to the logits unscaled; computed per
      query row inside the kernel, differentiable wrt q, k and e; needs causal.
    * rel_q [2K+1, Dh] | [H, 2K+1, Dh]: a relative query table, k_j . rel_q[r(d)]
      scaled like rel_k (DeBERTa's position-to-content term). rel_index int64
      [2K+1]: rows of rel_k and rel_q read at rel_index[r(d)] instead of r(d)
      (the tables then have any row count; DeBERTa's log buckets:
      torch.ops.posenc.deberta_row_index); max_distance None is read from it;
      not with rel_v.
    * bias: any dense bias broadcastable to (B, H, Tq, Tk).
    * path: "auto" takes the fused streaming kernel, forward and backward
      (no (Tq, Tk) buffer), unless return_weights needs a gradient;
      "composed" (the same formula from differentiable torch ops, which also
      has higher derivatives) and "fused" force one. The fused weights carry
      no gradient. Differentiable with respect to q, k, v and every table.
    * weights: the probabilities p (B, H, Tq, Tk).
    * max_time: seconds the call may take, estimated from the shapes before
      it starts (B*H*Tq*Tk*(Dh + Dv) multiply-adds, half when causal, at an
      assumed 1e10 per second); beyond it ValueError names the estimate.
      Default one hour; None: no bound.
    """
    _check_work(q, k, v, causal, max_time)
    if rope is not None:
        q, k = _rotate(q, k, rope)
    rel_2d_h = rel_2d_w = None
    height = width = 0
    if rel_2d is not None:
        if not isinstance(rel_2d, (tuple, list)) or len(rel_2d) != 4:
            got = f"{len(rel_2d)} items" if isinstance(rel_2d, (tuple, list)) else type(rel_2d).__name__
            raise ValueError(f"[attention] rel_2d must be a tuple (table_h, table_w, height, width), got {got}")
        rel_2d_h, rel_2d_w, height, width = rel_2d
        height, width = operator.index(height), operator.index(width)
    fire_terms = [None] * 6
    if fire is not None:
        if not isinstance(fire, (tuple, list)) or len(fire) != 6:
            got = f"{len(fire)} items" if isinstance(fire, (tuple, list)) else type(fire).__name__
            raise ValueError(f"[attention] fire must be a tuple (w1, b1, w2, b2, c, threshold), got {got}")
        fire_terms = list(fire)
    out, weights = _ops.attention(q, k, v, causal, key_padding_mask, scale, alibi_slopes, t5_table, t5_num_buckets,
                                  t5_max_distance, t5_bidirectional, rel_k, rel_v, max_distance, rel_2d_h, rel_2d_w,
                                  height, width, xl_u, xl_v, bias, return_weights, path, offset_bias, grid_bias,
                                  *fire_terms, cope_e=cope, rel_q=rel_q, rel_index=rel_index)
    return (out, weights) if return_weights else out
