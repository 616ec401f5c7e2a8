"""Independent references for the attention-bias tests (ALiBi, T5), written
plainly and sharing no code with posenc:

* ALiBi slopes: the paper's get_slopes (Press et al., ICLR 2022, github.com/
  ofirpress/attention_with_linear_biases, models/transformer.py), verbatim;
* the ALiBi bias as naive float64 loops, and the eager constructions users
  write: BLOOM's build_alibi_tensor (Hugging Face modeling_bloom: slope times
  key position, relying on softmax's invariance to a per-row constant) and
  MPT's build_alibi_bias(full=True) with gen_slopes (llm-foundry);
* T5: Hugging Face modeling_t5's T5Attention._relative_position_bucket and
  compute_bias, transcribed in torch with the same float32 operations in the
  same order (the buckets at the boundaries depend on them);
* 2D variants (ALiBi on a grid, 2D T5) as naive loops over the flattened
  y*width + x cells.
"""

import math

import torch


# ---------------------------------------------------------------------------
# ALiBi

def get_slopes(n):
    """The paper's code, verbatim (Python floats)."""
    def get_slopes_power_of_2(n):
        start = (2 ** (-2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    else:
        closest_power_of_2 = 2 ** math.floor(math.log2(n))
        return (get_slopes_power_of_2(closest_power_of_2)
                + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])


def alibi_bias(num_heads, q_len, k_len, causal=False):
    """float64 [H, q_len, k_len]: -m_h |i + k_len - q_len - j|, -inf for j > i' when causal."""
    slopes = get_slopes(num_heads)
    offset = k_len - q_len
    out = torch.empty(num_heads, q_len, k_len, dtype=torch.float64)
    for h in range(num_heads):
        for i in range(q_len):
            for j in range(k_len):
                d = i + offset - j
                out[h, i, j] = -math.inf if causal and j > i + offset else -slopes[h] * abs(d)
    return out


def bloom_alibi(attention_mask, num_heads, dtype=torch.float32):
    """Hugging Face modeling_bloom.build_alibi_tensor: [B*H, 1, T], slope * key position."""
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


def mpt_gen_slopes(n_heads, alibi_bias_max=8):
    _n_heads = 2 ** math.ceil(math.log2(n_heads))
    m = torch.arange(1, _n_heads + 1, dtype=torch.float32)
    m = m.mul(alibi_bias_max / _n_heads)
    slopes = 1.0 / torch.pow(2, m)
    if _n_heads != n_heads:
        slopes = torch.concat([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.view(1, n_heads, 1, 1)


def mpt_alibi(n_heads, seq_len, full=True, alibi_bias_max=8, dtype=torch.float32):
    """llm-foundry's build_alibi_bias: (1, H, T, T) with full=True."""
    alibi_bias = torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, 1, seq_len)
    if full:
        alibi_bias = alibi_bias - torch.arange(1 - seq_len, 1, dtype=torch.int32).view(1, 1, seq_len, 1)
        alibi_bias = alibi_bias.abs().mul(-1)
    slopes = mpt_gen_slopes(n_heads, alibi_bias_max)
    alibi_bias = alibi_bias * slopes
    return alibi_bias.to(dtype=dtype)


def grid_alibi(num_heads, height, width, distance="euclidean"):
    """float64 [H, HW, HW]: -m_h dist((y,x), (y',x'))."""
    slopes = get_slopes(num_heads)
    cells = [(y, x) for y in range(height) for x in range(width)]
    out = torch.empty(num_heads, len(cells), len(cells), dtype=torch.float64)
    for p, (y, x) in enumerate(cells):
        for q, (y2, x2) in enumerate(cells):
            dy, dx = y2 - y, x2 - x
            d = math.sqrt(dy * dy + dx * dx) if distance == "euclidean" else abs(dy) + abs(dx)
            for h in range(num_heads):
                out[h, p, q] = -slopes[h] * d
    return out


# ---------------------------------------------------------------------------
# T5 (Hugging Face transformers, modeling_t5.py)

def hf_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5Attention._relative_position_bucket, verbatim."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    # now relative_position is in the range [0, inf)

    # half of the buckets are for exact increments in positions
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact

    # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )

    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def hf_compute_bias(table, query_length, key_length, bidirectional=True, max_distance=128):
    """T5Attention.compute_bias with relative_attention_bias.weight = table [num_buckets, H]:
    [H, query_length, key_length] (HF's leading 1 dropped)."""
    context_position = torch.arange(query_length, dtype=torch.long)[:, None]
    memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position  # shape (query_length, key_length)
    relative_position_bucket = hf_relative_position_bucket(
        relative_position, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance)
    values = torch.nn.functional.embedding(relative_position_bucket, table)  # (query_length, key_length, H)
    return values.permute([2, 0, 1])


def hf_decoding_bias(table, q_len, k_len, bidirectional=False, max_distance=128):
    """T5Attention.forward with a cache: the full (k_len, k_len) bias, last q_len query rows kept."""
    return hf_compute_bias(table, k_len, k_len, bidirectional, max_distance)[:, k_len - q_len:, :]


def t5_bias_naive(table, q_len, k_len, bidirectional=True, max_distance=128):
    """float64 loops: out[h, i, j] = table[bucket(j - i'), h], i' = i + k_len - q_len (any q_len, k_len)."""
    nb, heads = table.shape
    offset = k_len - q_len
    rel = torch.tensor([[j - (i + offset) for j in range(k_len)] for i in range(q_len)], dtype=torch.long)
    buckets = hf_relative_position_bucket(rel.reshape(q_len, k_len), bidirectional, nb, max_distance)
    t = table.double()
    out = torch.empty(heads, q_len, k_len, dtype=torch.float64)
    for h in range(heads):
        for i in range(q_len):
            for j in range(k_len):
                out[h, i, j] = t[buckets[i, j], h]
    return out


def t5_bias_backward_naive(grad, num_buckets, bidirectional=True, max_distance=128):
    """float64: grad_table[b, h] = sum of grad[h, i, j] over the (i, j) in bucket b."""
    heads, q_len, k_len = grad.shape
    offset = k_len - q_len
    out = torch.zeros(num_buckets, heads, dtype=torch.float64)
    for i in range(q_len):
        rel = torch.arange(k_len) - (i + offset)
        buckets = hf_relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
        for j in range(k_len):
            out[buckets[j]] += grad[:, i, j].double()
    return out


def t5_bias_2d_naive(table_h, table_w, height, width, bidirectional=True, max_distance=128):
    """float64 [H, HW, HW]: table_h[bucket(y'-y), h] + table_w[bucket(x'-x), h]."""
    nb, heads = table_h.shape
    th, tw = table_h.double(), table_w.double()
    cells = [(y, x) for y in range(height) for x in range(width)]

    def bucket(r):
        return int(hf_relative_position_bucket(torch.tensor(r), bidirectional, nb, max_distance))

    out = torch.empty(heads, len(cells), len(cells), dtype=torch.float64)
    for p, (y, x) in enumerate(cells):
        for q, (y2, x2) in enumerate(cells):
            out[:, p, q] = th[bucket(y2 - y)] + tw[bucket(x2 - x)]
    return out
