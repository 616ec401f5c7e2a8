"""Independent float64 references for the RoPE tests, written plainly and
sharing no code with posenc:

* frequencies: Hugging Face transformers' modeling_rope_utils
  (_compute_*_parameters) transcribed in plain Python math, one scaling per
  function, with the choices docs/rope.md states (transformers v5 yarn,
  longrope's seq_len switch, ntk's static base change);
* the rotation as Hugging Face writes it: emb = cat(freqs, freqs),
  q * cos + rotate_half(q) * sin for the half layout, explicit pairs
  (2j, 2j+1) for the interleaved layout;
* M-RoPE as Qwen2-VL's apply_multimodal_rotary_pos_emb (section split over
  the doubled frequencies) and Qwen3-VL's apply_interleaved_mrope;
* xPos as torchscale's XPOS (a per-pair power of zeta on top of the rotation).
"""

import math

import torch


# ---------------------------------------------------------------------------
# Frequencies: (inv_freq as a list of floats, attention factor)

def default_inv_freq(dim, base):
    return [1.0 / (base ** (i / dim)) for i in range(0, dim, 2)]


def hf_linear(dim, base, factor):
    return [w / factor for w in default_inv_freq(dim, base)], 1.0


def hf_ntk(dim, base, factor):
    base = base * factor ** (dim / (dim - 2))
    return default_inv_freq(dim, base), 1.0


def hf_dynamic(dim, base, factor, original_max, seq_len):
    seq_len = seq_len if seq_len is not None and seq_len > original_max else original_max
    base = base * ((factor * seq_len / original_max) - (factor - 1)) ** (dim / (dim - 2))
    return default_inv_freq(dim, base), 1.0


def _yarn_get_mscale(scale, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def hf_yarn(dim, base, factor, original_max, beta_fast=None, beta_slow=None, mscale=None, mscale_all_dim=None,
            truncate=None, attention_factor=None, max_position_embeddings=None):
    if factor is None:
        factor = max_position_embeddings / original_max
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_get_mscale(factor, mscale) / _yarn_get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_get_mscale(factor)
    beta_fast = beta_fast or 32
    beta_slow = beta_slow or 1
    truncate = True if truncate is None else truncate

    def correction_dim(num_rotations):
        return (dim * math.log(original_max / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    inv_freq = []
    for i in range(dim // 2):
        pos_freq = base ** (2 * i / dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        extrapolation = 1.0 - ramp
        inv_freq.append((1.0 / (factor * pos_freq)) * (1 - extrapolation) + (1.0 / pos_freq) * extrapolation)
    return inv_freq, attention_factor


def hf_longrope(dim, base, original_max, short_factor, long_factor, seq_len=None, factor=None,
                max_position_embeddings=None, attention_factor=None):
    ext = long_factor if seq_len is not None and seq_len > original_max else short_factor
    inv_freq = [1.0 / (ext[k] * base ** (2 * k / dim)) for k in range(dim // 2)]
    if factor is None:
        factor = max_position_embeddings / original_max
    if attention_factor is None:
        attention_factor = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original_max))
    return inv_freq, attention_factor


def hf_llama3(dim, base, factor, low_freq_factor, high_freq_factor, original_max):
    low_freq_wavelen = original_max / low_freq_factor
    high_freq_wavelen = original_max / high_freq_factor
    out = []
    for w in default_inv_freq(dim, base):
        wavelen = 2 * math.pi / w
        if wavelen > low_freq_wavelen:
            out.append(w / factor)
        elif wavelen < high_freq_wavelen:
            out.append(w)
        else:
            smooth = (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            out.append((1 - smooth) * w / factor + smooth * w)
    return out, 1.0


def hf_proportional(head_dim, base, factor=1.0, partial_rotary_factor=1.0):
    """Gemma 4: int(p * D // 2) pairs at base^(-2i/D), the rest 0, all / factor."""
    angles = int(partial_rotary_factor * head_dim // 2)
    values = [base ** (-2.0 * i / head_dim) if i < angles else 0.0 for i in range(head_dim // 2)]
    return [w / factor for w in values], 1.0


def reference_frequencies(dim, base=10000.0, scaling=None, seq_len=None):
    """The HF frequencies of a rope_scaling dict: (float64 tensor [dim/2], attention factor)."""
    s = dict(scaling or {})
    kind = s.pop("rope_type", s.pop("type", "default"))
    if kind == "default":
        values, factor = default_inv_freq(dim, base), 1.0
    elif kind == "linear":
        values, factor = hf_linear(dim, base, s["factor"])
    elif kind == "ntk":
        values, factor = hf_ntk(dim, base, s["factor"])
    elif kind == "dynamic":
        values, factor = hf_dynamic(dim, base, s["factor"], s["original_max_position_embeddings"], seq_len)
    elif kind == "yarn":
        values, factor = hf_yarn(dim, base, s.pop("factor", None), s.pop("original_max_position_embeddings"), **s)
    elif kind == "longrope":
        values, factor = hf_longrope(dim, base, s.pop("original_max_position_embeddings"), s.pop("short_factor"),
                                     s.pop("long_factor"), seq_len=seq_len, **s)
    elif kind == "llama3":
        values, factor = hf_llama3(dim, base, s["factor"], s["low_freq_factor"], s["high_freq_factor"],
                                   s["original_max_position_embeddings"])
    elif kind == "proportional":
        values, factor = hf_proportional(dim, base, **s)
    else:
        raise AssertionError(kind)
    return torch.tensor(values, dtype=torch.float64), factor


# ---------------------------------------------------------------------------
# Rotation

def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_with_angles(x, theta, scale, layout, inverse=False):
    """x (..., T, D) float64 rotated by theta (T, R/2) or (B, T, R/2) (broadcast like HF's unsqueeze(1)),
    cos and sin multiplied by scale (a number, or a tensor like theta)."""
    x = x.to(torch.float64)
    half = theta.shape[-1]
    rot = 2 * half
    if theta.dim() == 3:  # (B, T, R/2) against (B, H..., T, D)
        theta = theta.reshape(theta.shape[0], *([1] * (x.dim() - 3)), *theta.shape[1:])
        if torch.is_tensor(scale):
            scale = scale.reshape(theta.shape)
    sign = -1.0 if inverse else 1.0
    cos = torch.cos(theta) * scale
    sin = torch.sin(theta) * scale * sign
    head, tail = x[..., :rot], x[..., rot:]
    if layout == "half":
        emb_cos = torch.cat((cos, cos), dim=-1)
        emb_sin = torch.cat((sin, sin), dim=-1)
        out = head * emb_cos + rotate_half(head) * emb_sin
    else:
        a, b = head[..., 0::2], head[..., 1::2]
        out = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((out, tail), dim=-1)


def reference_rope(x, positions, dim=None, base=10000.0, layout="half", scaling=None, seq_len=None, inverse=False,
                   inv_freq=None):
    """float64 reference of posenc.apply_rope: angles p * omega in float64."""
    rot = dim or x.shape[-1]
    if inv_freq is None:
        if seq_len is None and positions.numel() > 0:
            seq_len = max(int(positions.max()), 0) + 1
        inv_freq, factor = reference_frequencies(rot, base, scaling, seq_len)
    else:
        factor = 1.0
    theta = positions.to(torch.float64)[..., None] * inv_freq.to(torch.float64)
    return rotate_with_angles(x, theta, factor, layout, inverse)


# ---------------------------------------------------------------------------
# M-RoPE (Qwen2-VL, Qwen3-VL) and axial RoPE

def qwen2vl_mrope(q, position_ids, mrope_section, inv_freq):
    """Qwen2-VL: position_ids (3, B, T); q (B, H, T, R) in the half layout."""
    freqs = (inv_freq[None, None, :, None] * position_ids[:, :, None, :].to(torch.float64)).transpose(2, 3)
    emb = torch.cat((freqs, freqs), dim=-1)  # (3, B, T, R)
    cos, sin = emb.cos(), emb.sin()
    sections = list(mrope_section) * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(sections, dim=-1))], dim=-1).unsqueeze(1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(sections, dim=-1))], dim=-1).unsqueeze(1)
    q = q.to(torch.float64)
    return q * cos + rotate_half(q) * sin


def qwen3vl_mrope(q, position_ids, mrope_section, inv_freq):
    """Qwen3-VL: the interleaved frequency assignment (t h w t h w ...), then as Qwen2-VL."""
    freqs = (inv_freq[None, None, :, None] * position_ids[:, :, None, :].to(torch.float64)).transpose(2, 3)
    freqs_t = freqs[0].clone()
    for axis, offset in ((1, 1), (2, 2)):
        length = mrope_section[axis] * 3
        idx = slice(offset, length, 3)
        freqs_t[..., idx] = freqs[axis, ..., idx]
    emb = torch.cat((freqs_t, freqs_t), dim=-1).unsqueeze(1)
    q = q.to(torch.float64)
    return q * emb.cos() + rotate_half(q) * emb.sin()


def axial_angles(coords, dims_per_axis, base=10000.0, inv_freqs=None):
    """theta (..., R/2): block a holds coords[..., a] * base^(-2i/dims_per_axis[a])."""
    blocks = []
    for a, d in enumerate(dims_per_axis):
        omega = default_inv_freq(d, base) if inv_freqs is None else inv_freqs[a]
        omega = torch.as_tensor(omega, dtype=torch.float64)
        blocks.append(coords[..., a:a + 1].to(torch.float64) * omega)
    return torch.cat(blocks, dim=-1)


# ---------------------------------------------------------------------------
# xPos (torchscale)

def xpos_zeta(rot, gamma=0.4):
    return (torch.arange(0, rot, 2, dtype=torch.float64) + gamma * rot) / ((1 + gamma) * rot)


def reference_xpos(x, positions, scale_base, keys, gamma=0.4, base=10000.0, layout="half", center=0.0):
    rot = x.shape[-1]
    p = positions.to(torch.float64)
    power = ((p - center) / scale_base)[..., None]
    scale = xpos_zeta(rot, gamma) ** (-power if keys else power)
    theta = p[..., None] * torch.tensor(default_inv_freq(rot, base), dtype=torch.float64)
    return rotate_with_angles(x, theta, scale, layout)


# ---------------------------------------------------------------------------
# Tolerance: "rounded once"

SIGNIFICAND_BITS = {torch.float64: 52, torch.float32: 23, torch.bfloat16: 7, torch.float16: 10}


def assert_rounded_once(out, exact, slack):
    """out is exact rounded once to out's dtype: within half an ulp of each value plus `slack`
    (what happens before that rounding). A second rounding shows up as a whole ulp."""
    bits = SIGNIFICAND_BITS[out.dtype]
    magnitude = exact.abs().clamp_min(2.0 ** -14)
    half_ulp = torch.exp2(torch.floor(torch.log2(magnitude)) - bits) * 0.5
    excess = (out.to(torch.float64) - exact).abs() - half_ulp - slack
    worst = int(excess.flatten().argmax()) if excess.numel() else 0
    assert excess.numel() == 0 or excess.max() <= 0, (
        f"{out.dtype}: value {exact.flatten()[worst].item()} came out as {out.flatten()[worst].item()}")
