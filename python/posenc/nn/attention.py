"""Multi-head attention into which any encoding plugs through the points of DESIGN.md section 2: a
query/key transform (RotaryEmbedding), a logit bias (AlibiBias, T5Bias, KerpleBias, FireBias,
DynamicPositionBias and the 2D ones) and relative vectors (ShawRelative, SinusoidalRelative,
TransformerXLRelative, Relative2d): each module class names its point in its `point` attribute. The
input point is the model's, before the first layer. The layer names no family: each encoding hands over its
attention_kwargs and the layer calls posenc.attention (the fused kernel by default).

    x (B, T, D) -> (B, T, D); attend: query (B, Tq, D), memory (B, Tk, D)
    q = query W_q^T + b_q, k = memory W_k^T + b_k, v = memory W_v^T + b_v, split into H heads of Dh = D/H;
    rotary(q, k) at positions Tk-Tq .. Tk-1 (queries) and 0 .. Tk-1 (keys);
    o = posenc.attention(q, k, v, scale 1/sqrt(Dh), the encodings' terms), heads merged, out = o W_o^T + b_o.

The same math as the C++ posenc::nn::MultiheadAttention (include/posenc/nn/multihead_attention.h).
"""

import math

import torch
from torch import nn

import posenc

from ._common import choice, fail, integer
from .registry import make_encodings

__all__ = ["MultiheadAttention"]

_NAME = "MultiheadAttention"
# A module's class attribute `point` names where it plugs in; the slot that holds it here.
_SLOTS = {"query/key": "rotary", "logit bias": "bias", "relative vectors": "relative"}


def _by_point(modules):
    """{"rotary": m, "bias": m, "relative": m} from a list of encoding modules, at most one per point."""
    found = {}
    for module in modules:
        point = getattr(type(module), "point", None)
        if point not in _SLOTS:
            raise TypeError(f"[{_NAME}] encoding must be a name, an encoding module or a list of them; "
                            f"{type(module).__name__} is not a query/key, logit bias or relative vectors module")
        slot = _SLOTS[point]
        if slot in found:
            fail(_NAME, f"encoding has two {point} modules ({type(found[slot]).__name__}, "
                        f"{type(module).__name__}); use at most one per point")
        found[slot] = module
    return found


def _split(x, heads):  # (B, T, D) -> (B, H, T, Dh)
    return x.view(x.shape[0], x.shape[1], heads, x.shape[2] // heads).transpose(1, 2)


def _merge(x):  # (B, H, T, Dh) -> (B, T, H*Dh)
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])


class MultiheadAttention(nn.Module):
    """Multi-head attention with pluggable encodings.

    encoding: None; a registry name for the inner points ("rope", "rope-xpos", "alibi", "t5", "shaw",
    "shaw-sinusoidal", "shaw-learnable-sinusoidal", "xl", combined with "+", e.g. "rope+alibi"; the
    defaults of `posenc encodings`); an encoding module; or a list of modules, at most one per point.
    Submodules q_proj, k_proj, v_proj, out_proj (nn.Linear D -> D, Xavier-uniform weights, zero biases)
    and the encodings as rotary, bias, relative. dropout acts on the attention weights in training only.
    causal hides key j from query i when j > i + Tk - Tq. path: posenc.attention's "auto" (fused unless
    a gradient needs the composed path), "fused" or "composed".
    """

    def __init__(self, dim, num_heads, *, encoding=None, dropout=0.0, bias=True, causal=False, path="auto"):
        super().__init__()
        self.dim = integer(_NAME, "dim", dim, minimum=1)
        self.num_heads = integer(_NAME, "num_heads", num_heads, minimum=1)
        if self.dim % self.num_heads:
            fail(_NAME, f"dim must be divisible by num_heads, got dim {self.dim} and num_heads {self.num_heads}")
        self.dropout = float(dropout)
        if not 0.0 <= self.dropout < 1.0:
            fail(_NAME, f"dropout must be in [0, 1), got {self.dropout:g}")
        self.causal = bool(causal)
        self.path = choice(_NAME, "path", path, ("auto", "composed", "fused"))
        self.head_dim = self.dim // self.num_heads
        if encoding is None:
            modules = []
        elif isinstance(encoding, str):
            modules = make_encodings(encoding, self.num_heads, self.head_dim, self.causal)
        elif isinstance(encoding, nn.Module):
            modules = [encoding]
        else:
            modules = list(encoding)
        found = _by_point(modules)
        self._check_encodings(found)
        self.q_proj = nn.Linear(self.dim, self.dim, bias=bias)
        self.k_proj = nn.Linear(self.dim, self.dim, bias=bias)
        self.v_proj = nn.Linear(self.dim, self.dim, bias=bias)
        self.out_proj = nn.Linear(self.dim, self.dim, bias=bias)
        self.rotary = found.get("rotary")
        self.bias = found.get("bias")
        self.relative = found.get("relative")
        if hasattr(self.relative, "share_projections"):  # DeBERTa's share_att_key reads them
            self.relative.share_projections(self.q_proj, self.k_proj)
        self.reset_parameters()

    def _check_encodings(self, found):
        heads, head_dim = self.num_heads, self.head_dim
        if "rotary" in found and found["rotary"].head_dim != head_dim:
            fail(_NAME, f"rotary head_dim must be {head_dim} (dim / num_heads), got {found['rotary'].head_dim}")
        if "bias" in found and found["bias"].num_heads != heads:
            fail(_NAME, f"bias must have num_heads = {heads} heads, got {found['bias'].num_heads}")
        if "relative" in found:
            relative = found["relative"]
            if relative.head_dim != head_dim:
                fail(_NAME, f"relative head_dim must be {head_dim} (dim / num_heads), got {relative.head_dim}")
            if relative.num_heads not in (0, heads):
                fail(_NAME, f"relative must have num_heads = {heads} heads, got {relative.num_heads}")

    def reset_parameters(self):
        """As torch.nn.MultiheadAttention and the C++ layer: Xavier-uniform weights, zero biases."""
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            nn.init.xavier_uniform_(proj.weight)
            if proj.bias is not None:
                nn.init.zeros_(proj.bias)

    def _check_sequence(self, argument, t):
        if not isinstance(t, torch.Tensor):
            fail(_NAME, f"{argument} must be a tensor, got {type(t).__name__}")
        if t.dim() != 3 or t.shape[2] != self.dim:
            fail(_NAME, f"{argument} must be (B, T, D) with D = {self.dim}, got {tuple(t.shape)}")
        want = self.q_proj.weight.dtype
        if t.dtype != want:
            raise TypeError(f"[{_NAME}] {argument} must have the parameters' dtype ({want}), got {t.dtype}")

    def forward(self, x, key_padding_mask=None):
        """Self-attention: x (B, T, D), key_padding_mask (B, T) bool (True = padding) -> (B, T, D)."""
        self._check_sequence("x", x)
        return self.attend(x, x, key_padding_mask)[0]

    def attend(self, query, memory, key_padding_mask=None, return_weights=False):
        """Cross / cached attention: query (B, Tq, D), memory (B, Tk, D) -> (out (B, Tq, D), weights
        (B, H, Tq, Tk) or None)."""
        self._check_sequence("query", query)
        self._check_sequence("memory", memory)
        if memory.shape[0] != query.shape[0]:
            fail(_NAME, f"memory must have query's batch size {query.shape[0]}, got {memory.shape[0]}")
        q_len, k_len = query.shape[1], memory.shape[1]
        heads = self.num_heads
        q = _split(self.q_proj(query), heads)
        k = _split(self.k_proj(memory), heads)
        v = _split(self.v_proj(memory), heads)
        if self.rotary is not None:
            # The queries are the last q_len of the k_len positions (decoding with a cache).
            keys = torch.arange(k_len, dtype=torch.int64)
            if q_len == k_len:
                q, k = self.rotary(q, k, keys)
            else:
                q = self.rotary(q, q, keys[k_len - q_len:])[0]
                k = self.rotary(k, k, keys)[1]
        dtype = torch.float64 if query.dtype == torch.float64 else torch.float32
        # A family may widen the scale (DeBERTa: 1/sqrt(Dh * (1 + its position terms))).
        scale = 1.0 / math.sqrt(self.head_dim * getattr(self.relative, "scale_factor", 1.0))
        kwargs = {}
        if self.bias is not None:
            kwargs.update(self.bias.attention_kwargs(q_len, k_len, dtype=dtype))
        if self.relative is not None:
            kwargs.update(self.relative.attention_kwargs(q_len, k_len, dtype=dtype))
        causal = kwargs.pop("causal", False) or self.causal  # pop first: the term may ask for the mask
        dropout = self.dropout if self.training else 0.0
        if dropout > 0.0:
            out, weights = self._dropped(q, k, v, causal, key_padding_mask, scale, dropout, kwargs)
        else:
            result = posenc.attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask, scale=scale,
                                      return_weights=return_weights, path=self.path, **kwargs)
            out, weights = result if return_weights else (result, None)
        return self.out_proj(_merge(out)), (weights if return_weights else None)

    def _dropped(self, q, k, v, causal, key_padding_mask, scale, dropout, kwargs):
        """Dropout on the weights: posenc.attention has none, so the weights come from its composed path
        and the output (values and relative value vectors) is formed again from the dropped weights."""
        _, weights = posenc.attention(q, k, v, causal=causal, key_padding_mask=key_padding_mask, scale=scale,
                                      return_weights=True, path="composed", **kwargs)
        dropped = nn.functional.dropout(weights, dropout, training=True)
        out = torch.matmul(dropped, v)
        if kwargs.get("rel_v") is not None:
            out = out + posenc.relative_values(dropped, kwargs["rel_v"].to(out.dtype), kwargs["max_distance"],
                                               query_offset=k.shape[2] - q.shape[2])
        return out, weights

    def extra_repr(self):
        return f"dim={self.dim}, num_heads={self.num_heads}, dropout={self.dropout:g}, " \
               f"bias={self.q_proj.bias is not None}, causal={self.causal}, path={self.path}"
