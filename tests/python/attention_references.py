"""An independent float64 reference for posenc.attention, written plainly from
the formula (posenc/kernels/attention.h, docs/attention.md) and sharing no
code with posenc: the full (Tq, Tk) logits built one (i, j) pair at a time.

* query i sits at key position i' = i + Tk - Tq; the offset of key j is d = j - i';
* ALiBi: -m_h |d| from the given slopes (Press et al. 2022);
* T5: Hugging Face modeling_t5's T5Attention._relative_position_bucket,
  transcribed (float32 logarithm, as the original), on relative_position = d;
* Shaw et al. (2018): row clip(d, -K, K) + K of rel_k / rel_v;
* Transformer-XL (Dai et al. 2019): (q + u).k + (q + v).R[row];
* 2D relative (BoTNet, Srinivas et al. 2021): q.(table_h[y_j - y_i + H - 1] + table_w[x_j - x_i + W - 1]);
* masks: causal (j > i'), key padding (True = padding); a row with every key
  masked has probabilities 0;
* RoPE: the "half" (GPT-NeoX) rotation of x at positions p, angle
  p * base^(-2i/D), in float64.
"""

import math

import torch

from bias_references import hf_relative_position_bucket  # noqa: F401  (HF T5 buckets, one transcription)


def rope_half(x, positions, base=10000.0):
    """x (..., T, D) rotated in the "half" layout: channel i pairs with i + D/2, angle p * base^(-2i/D)."""
    x = x.double()
    d = x.shape[-1]
    out = x.clone()
    for t, p in enumerate(positions.tolist()):
        for i in range(d // 2):
            angle = p * base ** (-2.0 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[..., t, i], x[..., t, i + d // 2]
            out[..., t, i] = a * c - b * s
            out[..., t, i + d // 2] = b * c + a * s
    return out


def clip(d, k):
    return max(-k, min(k, d))


def head_row(table, h, row):
    """Row `row` of head h's table: [rows, D] shared or [H, rows, D]."""
    return table[row] if table.dim() == 2 else table[h, row]


def attention(q, k, v, *, causal=False, key_padding_mask=None, scale=None, alibi_slopes=None, t5_table=None,
              t5_num_buckets=32, t5_max_distance=128, t5_bidirectional=None, rel_k=None, rel_v=None,
              max_distance=None, rel_2d=None, xl_u=None, xl_v=None, bias=None):
    """(out (B, H, Tq, Dv), weights (B, H, Tq, Tk)), float64."""
    q, k, v = q.double(), k.double(), v.double()
    nb, nh, tq, dh = q.shape
    tk, dv = k.shape[2], v.shape[3]
    shift = tk - tq
    if scale is None:
        scale = 1.0 / math.sqrt(dh)
    if max_distance is None and rel_k is not None:
        max_distance = (rel_k.shape[-2] - 1) // 2
    f = lambda t: None if t is None else t.double()  # noqa: E731
    rel_k, rel_v, xl_u, xl_v, alibi_slopes, t5_table = map(f, (rel_k, rel_v, xl_u, xl_v, alibi_slopes, t5_table))
    dense = None if bias is None else bias.double().expand(nb, nh, tq, tk)
    if rel_2d is not None:
        table_h, table_w, height, width = rel_2d
        table_h, table_w = table_h.double(), table_w.double()
    if t5_table is not None:
        bidirectional = (not causal) if t5_bidirectional is None else t5_bidirectional
        rel = torch.tensor([[j - (i + shift) for j in range(tk)] for i in range(tq)], dtype=torch.long)
        buckets = hf_relative_position_bucket(rel.reshape(tq, tk), bidirectional, t5_num_buckets, t5_max_distance)

    logits = torch.zeros(nb, nh, tq, tk, dtype=torch.float64)
    hidden = torch.zeros(nb, tq, tk, dtype=torch.bool)
    for h in range(nh):
        for i in range(tq):
            qi = q[:, h, i]  # (B, Dh)
            for j in range(tk):
                d = j - (i + shift)
                content_q = qi if xl_u is None else qi + xl_u[h]
                s = (content_q * k[:, h, j]).sum(-1)
                if rel_k is not None:
                    relative_q = qi if xl_v is None else qi + xl_v[h]
                    s = s + (relative_q * head_row(rel_k, h, clip(d, max_distance) + max_distance)).sum(-1)
                if rel_2d is not None:
                    yi, xi, yj, xj = i // width, i % width, j // width, j % width
                    a = head_row(table_h, h, yj - yi + height - 1) + head_row(table_w, h, xj - xi + width - 1)
                    s = s + (qi * a).sum(-1)
                s = scale * s
                if alibi_slopes is not None:
                    s = s - alibi_slopes[h] * abs(d)
                if t5_table is not None:
                    s = s + t5_table[buckets[i, j], h]
                if dense is not None:
                    s = s + dense[:, h, i, j]
                logits[:, h, i, j] = s
    for b in range(nb):
        for i in range(tq):
            for j in range(tk):
                masked = causal and j > i + shift
                if key_padding_mask is not None and bool(key_padding_mask[b, j]):
                    masked = True
                hidden[b, i, j] = masked

    weights = torch.zeros(nb, nh, tq, tk, dtype=torch.float64)
    for b in range(nb):
        for i in range(tq):
            keep = ~hidden[b, i]
            if keep.any():
                row = logits[b, :, i, :][:, keep]  # (H, kept)
                e = torch.exp(row - row.max(-1, keepdim=True).values)
                weights[b, :, i, keep] = e / e.sum(-1, keepdim=True)
    out = torch.zeros(nb, nh, tq, dv, dtype=torch.float64)
    for h in range(nh):
        for i in range(tq):
            for j in range(tk):
                d = j - (i + shift)
                value = v[:, h, j]
                if rel_v is not None:
                    value = value + head_row(rel_v, h, clip(d, max_distance) + max_distance)
                out[:, h, i] += weights[:, h, i, j, None] * value
    return out, weights


def hf_t5_attention(q, k, v, table, bidirectional=True, max_distance=128):
    """T5's own attention (no 1/sqrt(Dh), bias from compute_bias over the full key range with the
    last Tq query rows kept), float64: softmax(q k^T + position_bias) v."""
    q, k, v = q.double(), k.double(), v.double()
    tq, tk = q.shape[2], k.shape[2]
    context_position = torch.arange(tk, dtype=torch.long)[:, None]
    memory_position = torch.arange(tk, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position
    bucket = hf_relative_position_bucket(relative_position, bidirectional=bidirectional,
                                         num_buckets=table.shape[0], max_distance=max_distance)
    position_bias = torch.nn.functional.embedding(bucket, table.double()).permute([2, 0, 1]).unsqueeze(0)
    position_bias = position_bias[:, :, -tq:, :]
    scores = torch.matmul(q, k.transpose(3, 2)) + position_bias
    return torch.matmul(torch.softmax(scores, dim=-1), v)
