"""Query/key-point encodings as modules: rotate q and k by position before q.k.

    RotaryEmbedding            RoPE (Su et al. 2021), half (GPT-NeoX, HF Llama) or interleaved (GPT-J)
                               layout, partial rotary, HF rope_scaling, learned frequencies, xPos
    RotaryEmbeddingAxial       axial 2D/3D RoPE for images and video (Heo et al. 2024)
    MultimodalRotaryEmbedding  M-RoPE (Qwen2-VL) and its interleaved form (Qwen3-VL)

forward(q, k, positions) -> (q', k'): q, k (B, H, T, D) or any (..., T, D), shapes and dtypes kept,
math in float32 (float64 for float64 input). The results are those of posenc.apply_rope /
apply_xpos / apply_rope_axial / apply_mrope, bit for bit. Formulas: docs/rope.md.
"""

import math
import operator

import torch
from torch import nn

import posenc

from ._common import as_int, compute_dtype, fail

__all__ = ["MultimodalRotaryEmbedding", "RotaryEmbedding", "RotaryEmbeddingAxial"]

_ops = torch.ops.posenc


def _shape(t):
    return "(" + ", ".join(str(s) for s in t.shape) + ")"


def _rotary_dim(name, head_dim, rotary_dim, layout):
    """R checked as the C++ modules check it (kernels/rope_apply.cpp), under the module's name."""
    head_dim = as_int(name, "head_dim", head_dim)
    if head_dim < 1:
        fail(name, f"head_dim must be positive, got {head_dim}")
    r = head_dim if rotary_dim is None else operator.index(rotary_dim)
    if r % 2:
        fail(name, f"rotary_dim must be even, got {r}")
    if r < 2:
        fail(name, f"rotary_dim must be at least 2, got {r}")
    if r > head_dim:
        fail(name, f"rotary_dim must be at most head_dim ({head_dim}), got {r}")
    if layout not in ("half", "interleaved"):
        fail(name, f"layout must be 'half' or 'interleaved', got '{layout}'")
    return head_dim, r


def _check_qk(name, head_dim, q, k):
    for argument, t in (("q", q), ("k", k)):
        if not isinstance(t, torch.Tensor):
            fail(name, f"{argument} must be a tensor, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"[{name}] {argument} must be float32, float64, bfloat16 or float16, got {t.dtype}")
        if t.dim() < 2 or t.shape[-1] != head_dim:
            fail(name, f"{argument} must have shape (..., T, head_dim = {head_dim}), got {_shape(t)}")


def _untraced(fn, *args, **kwargs):
    """fn run with torch.jit.trace's recording paused: the frequencies and the cache are metadata of the
    module (ops returning a float cannot be traced), only the gather and the rotation are traced."""
    state = torch._C._get_tracing_state()
    if state is None:
        return fn(*args, **kwargs)
    torch._C._set_tracing_state(None)
    try:
        return fn(*args, **kwargs)
    finally:
        torch._C._set_tracing_state(state)


def _rope_type(scaling):
    if scaling is None:
        return "default"
    return scaling.get("rope_type", scaling.get("type", "default"))


def _seq_len(name, seq_len):
    if seq_len is None:
        return None
    value = operator.index(seq_len)
    if value < 1:
        fail(name, f"seq_len must be at least 1, got {value}")
    return value


class RotaryEmbedding(nn.Module):
    """RoPE with a cos/sin cache: forward(q, k, positions=None) -> (q', k').

    positions: int64 (T) or (B, T) (q, k then (B, ..., T, D)); None means arange(T) for q and k of one
    length. Pair (a, b) of the first rotary_dim channels becomes (a cos - b sin, b cos + a sin) at angle
    position x inv_freq, cos and sin multiplied by the attention factor.

    * scaling: a Hugging Face rope_scaling dict as posenc.apply_rope takes it; seq_len fixes the length
      that selects the regime of dynamic / longrope (None: max position + 1, as HF);
    * attention_scaling, when given, replaces the scaling's attention factor (HF configs may set it);
    * learned_frequencies: parameter omega [rotary_dim/2], initialised to base^(-2i/R), no scaling;
    * xpos_scale_base > 0: xPos (Sun et al. 2022), q scaled by zeta^((p - xpos_center)/scale_base) and
      k by its inverse, zeta_j = (2j/R + xpos_gamma)/(1 + xpos_gamma).

    The cache holds cos and sin of positions [0, L) in the compute dtype (non-persistent buffers
    cos_cached / sin_cached); it grows on demand and is rebuilt whenever the frequencies it was built
    with differ from those the current call selects (dynamic / longrope) or its dtype differs, so it is
    never stale. Negative positions and positions >= a fixed seq_len bypass it.
    """

    point = "query/key"  # where MultiheadAttention plugs it in
    registry_names = ("rope", "p-rope", "rope-xpos")  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        if name == "p-rope":  # p-RoPE (Barbero et al. 2024) is Hugging Face's "proportional" type at factor 1
            return cls(head_dim, base=defaults["base"], scaling={"rope_type": "proportional",
                                                                  "partial_rotary_factor": defaults["rope_fraction"]})
        if name == "rope-xpos":
            return cls(head_dim, base=defaults["base"], xpos_scale_base=defaults["xpos_scale_base"])
        return cls(head_dim, base=defaults["base"])

    def __init__(self, head_dim, *, rotary_dim=None, base=10000.0, layout="half", scaling=None, seq_len=None,
                 precision="exact", learned_frequencies=False, xpos_scale_base=0.0, xpos_gamma=0.4, xpos_center=0.0,
                 attention_scaling=None):
        super().__init__()
        name = "RotaryEmbedding"
        self.head_dim, self.rotary_dim = _rotary_dim(name, head_dim, rotary_dim, layout)
        self.base, self.layout, self.precision = float(base), layout, precision
        self.scaling = None if scaling is None else dict(scaling)
        self.seq_len = _seq_len(name, seq_len)
        self.learned_frequencies = bool(learned_frequencies)
        self.xpos_scale_base, self.xpos_gamma = float(xpos_scale_base), float(xpos_gamma)
        self.xpos_center = float(xpos_center)
        rope_type = _rope_type(self.scaling)
        scaled = rope_type != "default"
        xpos = self.xpos_scale_base != 0.0
        if self.learned_frequencies and scaled:
            fail(name, f"learned_frequencies start from base^(-2i/R) and take no scaling, got rope_type '{rope_type}'")
        if xpos and scaled:
            fail(name, f"xPos uses the unscaled frequencies, got rope_type '{rope_type}'")
        if xpos and self.learned_frequencies:
            fail(name, "xPos and learned_frequencies cannot be combined")
        self.attention_scaling = None if attention_scaling is None else float(attention_scaling)
        if self.attention_scaling is not None:
            if not (math.isfinite(self.attention_scaling) and self.attention_scaling > 0):
                fail(name, f"attention_scaling must be finite and > 0, got {self.attention_scaling:g}")
            if xpos or self.learned_frequencies:
                fail(name, "attention_scaling applies to the cached tables; it cannot be combined with "
                           "learned_frequencies or xPos")
        # The ops check base, scaling and precision now, with their own messages.
        inv_freq, self._factor = posenc.rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling,
                                                      seq_len=self.seq_len)
        posenc.rope_cos_sin(1, self.rotary_dim, base=self.base, precision=self.precision)
        if self.learned_frequencies:
            self.omega = nn.Parameter(inv_freq.to(torch.float32))
        half = self.rotary_dim // 2
        self.register_buffer("cos_cached", torch.empty(0, half), persistent=False)
        self.register_buffer("sin_cached", torch.empty(0, half), persistent=False)
        self._cache_dtype = None  # the dtype the tables were computed in (not just cast to)
        self._cache_freq = None   # the float64 frequencies they were computed with

    def reset_parameters(self):
        """Learned frequencies back to base^(-2i/R); nothing to do otherwise."""
        if self.learned_frequencies:
            with torch.no_grad():
                self.omega.copy_(posenc.rope_inv_freq(self.rotary_dim, base=self.base)[0])

    @property
    def inv_freq(self):
        """float64 [R/2]: omega when learned, else posenc.rope_inv_freq's frequencies (at the fixed seq_len;
        None: the original-length regime of dynamic / longrope)."""
        if self.learned_frequencies:
            return self.omega.detach().to(torch.float64)
        return posenc.rope_inv_freq(self.rotary_dim, base=self.base, scaling=self.scaling, seq_len=self.seq_len)[0]

    @property
    def attention_factor(self):
        """The factor multiplying cos and sin: attention_scaling when given, else the scaling's."""
        return self.attention_scaling if self.attention_scaling is not None else self._factor

    def _override(self, cos, sin, factor, dtype):
        # The tables are float64 here; the ratio is applied before the one rounding to dtype.
        ratio = self.attention_scaling / factor
        return (cos * ratio).to(dtype), (sin * ratio).to(dtype)

    def _direct(self, p, dtype):
        """Tables straight from the op (positions the cache does not hold)."""
        wanted = torch.float64 if self.attention_scaling is not None else dtype
        cos, sin = posenc.rope_cos_sin(p, self.rotary_dim, base=self.base, scaling=self.scaling,
                                       seq_len=self.seq_len, precision=self.precision, dtype=wanted)
        if self.attention_scaling is None:
            return cos, sin
        seq_len = self.seq_len if self.seq_len is not None else max(int(p.max()) + 1 if p.numel() else 1, 1)
        factor = _untraced(posenc.rope_inv_freq, self.rotary_dim, base=self.base, scaling=self.scaling,
                           seq_len=seq_len)[1]
        return self._override(cos, sin, factor, dtype)

    def cos_sin(self, positions, dtype=torch.float32):
        """(cos, sin), positions.shape + [R/2] in dtype (float32 or float64), attention factor included:
        the tables forward rotates by (when the frequencies are neither learned nor xPos)."""
        p = positions.to(torch.int64)
        if p.numel() == 0:
            return self._direct(p, dtype)
        first, last = int(p.min()), int(p.max())
        if first < 0 or (self.seq_len is not None and last >= self.seq_len):
            return self._direct(p, dtype)
        seq_len = self.seq_len if self.seq_len is not None else last + 1
        inv_freq, factor = _untraced(posenc.rope_inv_freq, self.rotary_dim, base=self.base, scaling=self.scaling,
                                     seq_len=seq_len)
        same = (self._cache_dtype == dtype and self.cos_cached.dtype == dtype and self._cache_freq is not None
                and torch.equal(self._cache_freq, inv_freq))
        length = self.cos_cached.shape[0] if same else 0
        if last >= length:
            length = max(last + 1, 2 * length)  # doubling: O(log T) rebuilds while a sequence grows
            wanted = torch.float64 if self.attention_scaling is not None else dtype
            cos, sin = _untraced(posenc.rope_cos_sin, length, self.rotary_dim, base=self.base,
                                 scaling=self.scaling, seq_len=seq_len, precision=self.precision, dtype=wanted)
            if self.attention_scaling is not None:
                cos, sin = _untraced(self._override, cos, sin, factor, dtype)
            self.cos_cached, self.sin_cached = cos, sin
            self._cache_dtype, self._cache_freq = dtype, inv_freq
        return self.cos_cached[p], self.sin_cached[p]

    def forward(self, q, k, positions=None):
        name = "RotaryEmbedding"
        _check_qk(name, self.head_dim, q, k)
        if positions is None:
            if q.shape[-2] != k.shape[-2]:
                fail(name, f"positions None means arange(T) for q and k of one length, got {q.shape[-2]} and "
                           f"{k.shape[-2]}; pass positions")
            positions = torch.arange(q.shape[-2], dtype=torch.int64)
        elif not isinstance(positions, torch.Tensor) or positions.dtype != torch.int64:
            got = positions.dtype if isinstance(positions, torch.Tensor) else type(positions).__name__
            raise TypeError(f"[{name}] positions must be an int64 tensor, got {got}")
        if self.learned_frequencies:
            options = dict(layout=self.layout, rotary_dim=self.rotary_dim, precision=self.precision)
            return (posenc.apply_rope(q, positions, omega=self.omega.to(compute_dtype(q)), **options),
                    posenc.apply_rope(k, positions, omega=self.omega.to(compute_dtype(k)), **options))
        if self.xpos_scale_base != 0.0:
            return posenc.apply_xpos(q, k, positions, scale_base=self.xpos_scale_base, gamma=self.xpos_gamma,
                                     base=self.base, layout=self.layout, rotary_dim=self.rotary_dim,
                                     precision=self.precision, center=self.xpos_center)
        q_dtype, k_dtype = compute_dtype(q), compute_dtype(k)
        cos, sin = self.cos_sin(positions, q_dtype)
        q_out = _ops.rope_rotate(q, cos, sin, self.layout)
        if k_dtype != q_dtype:
            cos, sin = self.cos_sin(positions, k_dtype)
        return q_out, _ops.rope_rotate(k, cos, sin, self.layout)

    def extra_repr(self):
        text = f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base:g}, layout={self.layout}, " \
               f"rope_type={_rope_type(self.scaling)}, precision={self.precision}"
        if self.learned_frequencies:
            text += ", learned_frequencies=True"
        if self.xpos_scale_base != 0.0:
            text += f", xpos_scale_base={self.xpos_scale_base:g}"
        return text


class RotaryEmbeddingAxial(nn.Module):
    """Axial 2D/3D RoPE: forward(q, k, coords) with coords int64 (T, n_axes) or (B, T, n_axes).

    The rotary frequencies split into one block per axis (dims_per_axis, default an even split of
    rotary_dim), block a with its own spectrum base^(-2i/dims_per_axis[a]), rotated by coordinate a.
    scaling: one dict shared by the axes or a list with one per axis; seq_len None or one per axis.
    """

    def __init__(self, head_dim, *, rotary_dim=None, dims_per_axis=None, base=10000.0, layout="half", scaling=None,
                 seq_len=None, precision="exact"):
        super().__init__()
        self.head_dim, self.rotary_dim = _rotary_dim("RotaryEmbeddingAxial", head_dim, rotary_dim, layout)
        self.dims_per_axis = None if dims_per_axis is None else [operator.index(d) for d in dims_per_axis]
        self.base, self.layout, self.precision = float(base), layout, precision
        self.scaling = scaling if scaling is None or isinstance(scaling, dict) else list(scaling)
        self.seq_len = None if seq_len is None else [operator.index(s) for s in seq_len]
        if self.dims_per_axis is not None:
            # One call of the op checks the axes, the scaling and the precision now.
            x = torch.zeros(1, self.head_dim)
            self.forward(x, x, torch.zeros(1, len(self.dims_per_axis), dtype=torch.int64))

    def forward(self, q, k, coords):
        _check_qk("RotaryEmbeddingAxial", self.head_dim, q, k)
        options = dict(dims_per_axis=self.dims_per_axis, base=self.base, layout=self.layout,
                       rotary_dim=self.rotary_dim, scaling=self.scaling, seq_len=self.seq_len,
                       precision=self.precision)
        return posenc.apply_rope_axial(q, coords, **options), posenc.apply_rope_axial(k, coords, **options)

    def extra_repr(self):
        return f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, dims_per_axis={self.dims_per_axis}, " \
               f"base={self.base:g}, layout={self.layout}"


class MultimodalRotaryEmbedding(nn.Module):
    """M-RoPE (Qwen2-VL): forward(q, k, positions3) with positions3 int64 (3, T) or (3, B, T), the t, h, w
    positions. mrope_section (three sizes summing to rotary_dim/2) gives the first section[0] frequencies
    to t, the next section[1] to h, the last to w; interleaved=True is Qwen3-VL's assignment."""

    def __init__(self, head_dim, mrope_section, *, interleaved=False, rotary_dim=None, base=10000.0, layout="half",
                 scaling=None, seq_len=None, precision="exact"):
        super().__init__()
        self.head_dim, self.rotary_dim = _rotary_dim("MultimodalRotaryEmbedding", head_dim, rotary_dim, layout)
        self.mrope_section = [operator.index(s) for s in mrope_section]
        self.interleaved = bool(interleaved)
        self.base, self.layout, self.precision = float(base), layout, precision
        self.scaling = None if scaling is None else dict(scaling)
        self.seq_len = _seq_len("MultimodalRotaryEmbedding", seq_len)
        x = torch.zeros(1, self.head_dim)
        self.forward(x, x, torch.zeros(3, 1, dtype=torch.int64))  # the op checks the sections now

    def forward(self, q, k, positions3):
        _check_qk("MultimodalRotaryEmbedding", self.head_dim, q, k)
        options = dict(interleaved=self.interleaved, base=self.base, layout=self.layout, rotary_dim=self.rotary_dim,
                       scaling=self.scaling, seq_len=self.seq_len, precision=self.precision)
        return (posenc.apply_mrope(q, positions3, self.mrope_section, **options),
                posenc.apply_mrope(k, positions3, self.mrope_section, **options))

    def extra_repr(self):
        return f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, mrope_section={self.mrope_section}, " \
               f"interleaved={self.interleaved}, base={self.base:g}, layout={self.layout}"
