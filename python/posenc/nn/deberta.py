"""DeBERTa's disentangled attention (He et al., ICLR 2021; the v2/v3 form of Hugging Face's
modeling_deberta_v2.py) as a relative-vectors encoding:

    rel       = LayerNorm(rel_embeddings)                                  [2 span, model_dim]
    pos_key   = pos_key_proj(rel), pos_query = pos_query_proj(rel)  per head [H, 2 span, Dh]
    c2p[i, j] = q_i . pos_key[row(i' - j)],  p2c[i, j] = k_j . pos_query[row(i' - j)]
    logits    = (q . k + c2p + p2c) / sqrt(Dh * scale_factor),  scale_factor = 1 + #terms (3)

row(x) = clamp(bucket(x) + span, 0, 2 span - 1) with HF's make_log_bucket_position (256 buckets over
512 positions by default), computed by the C++ kernel (torch.ops.posenc.deberta_row_index). forward(q, k)
= logits(q, k): c2p + p2c (B, H, Tq, Tk), unscaled; attention_kwargs(q_len, k_len) -> posenc.attention's
rel_k (c2p), rel_q (p2c), rel_index, max_distance: the fused kernel reads the tables through the O(T)
index, no (Tq, Tk) tensor. MultiheadAttention reads scale_factor and scales by 1/sqrt(Dh * 3).
share_att_key=True projects rel with the layer's q_proj / k_proj (MultiheadAttention hands them over;
DeBERTa v3's setting); the default owns pos_key_proj / pos_query_proj. C++:
include/posenc/nn/deberta_relative.h.
"""

import math

import torch
from torch import nn

import posenc  # noqa: F401  (loads torch.ops.posenc)

from ._common import checked_std, compute_dtype, fail, integer

__all__ = ["DebertaRelative"]

_NAME = "DebertaRelative"


class DebertaRelative(nn.Module):
    """Parameters rel_embeddings [2 span, model_dim] ~ N(0, init_std^2), norm_rel_ebd (LayerNorm, eps
    1e-7), pos_key_proj / pos_query_proj (Linear model_dim -> H*Dh) unless share_att_key; as the C++
    DebertaRelative. pos_att_type: a subset of ("c2p", "p2c")."""

    point = "relative vectors"  # where MultiheadAttention plugs it in
    registry_names = ("deberta",)  # the C++ registry names it builds (posenc encodings)
    name = _NAME

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, head_dim, position_buckets=defaults["deberta_position_buckets"],
                   max_relative_positions=defaults["deberta_max_relative_positions"], init_std=defaults["init_std"])

    def __init__(self, num_heads, head_dim, *, model_dim=0, position_buckets=256, max_relative_positions=512,
                 pos_att_type=("p2c", "c2p"), share_att_key=False, norm_rel_ebd=True, layer_norm_eps=1e-7,
                 init_std=0.02):
        super().__init__()
        self.num_heads = integer(_NAME, "num_heads", num_heads, minimum=1)
        self.head_dim = integer(_NAME, "head_dim", head_dim, minimum=1)
        self.position_buckets = int(position_buckets)
        self.max_relative_positions = int(max_relative_positions)
        # The kernel's checks and messages ("[deberta_row_index] position_buckets must be <= ...").
        torch.ops.posenc.deberta_row_index(0, self.position_buckets, self.max_relative_positions)
        types = tuple(pos_att_type)
        for t in types:
            if t not in ("c2p", "p2c"):
                fail(_NAME, f"pos_att_type must hold only 'c2p' and 'p2c', got '{t}'")
        self.c2p, self.p2c = "c2p" in types, "p2c" in types
        if not (self.c2p or self.p2c):
            fail(_NAME, "pos_att_type must hold c2p or p2c, got neither")
        inner = self.num_heads * self.head_dim
        self.model_dim = integer(_NAME, "model_dim", model_dim, minimum=0) or inner
        self.share_att_key = bool(share_att_key)
        if self.share_att_key and self.model_dim != inner:
            fail(_NAME, f"share_att_key needs model_dim = num_heads * head_dim = {inner}, got {self.model_dim}")
        self.init_std = checked_std(_NAME, init_std)
        self.span = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
        self.rel_embeddings = nn.Parameter(torch.empty(2 * self.span, self.model_dim))
        self.norm_rel_ebd = nn.LayerNorm(self.model_dim, eps=layer_norm_eps) if norm_rel_ebd else None
        own = not self.share_att_key
        self.pos_key_proj = nn.Linear(self.model_dim, inner) if own and self.c2p else None
        self.pos_query_proj = nn.Linear(self.model_dim, inner) if own and self.p2c else None
        self._shared = None  # (q_proj, k_proj) of the layer, not registered here (the layer owns them)
        self.reset_parameters()

    @property
    def scale_factor(self):
        """1 + (c2p) + (p2c): the logits are divided by sqrt(Dh * scale_factor)."""
        return 1.0 + self.c2p + self.p2c

    def reset_parameters(self):
        with torch.no_grad():
            self.rel_embeddings.normal_(0.0, self.init_std)
        for m in (self.norm_rel_ebd, self.pos_key_proj, self.pos_query_proj):
            if m is not None:
                m.reset_parameters()

    def share_projections(self, q_proj, k_proj):
        """The attention layer's projections, for share_att_key (ignored otherwise)."""
        if self.share_att_key:
            self._shared = (q_proj, k_proj)

    def tables(self, dtype=None):
        """(pos_key, pos_query) [H, 2 span, Dh] (None where the term is off), differentiable."""
        dtype = compute_dtype(self.rel_embeddings) if dtype is None else dtype
        rel = self.rel_embeddings.to(dtype)
        if self.norm_rel_ebd is not None:
            n = self.norm_rel_ebd
            rel = nn.functional.layer_norm(rel, (self.model_dim,), n.weight.to(dtype), n.bias.to(dtype), n.eps)
        if self.share_att_key:
            if self._shared is None:
                fail(_NAME, "share_att_key needs the attention layer's q/k projections (MultiheadAttention hands "
                            "them over), got none")
            q_proj, k_proj = self._shared
        else:
            q_proj, k_proj = self.pos_query_proj, self.pos_key_proj

        def project(proj):
            bias = None if proj.bias is None else proj.bias.to(dtype)
            out = nn.functional.linear(rel, proj.weight.to(dtype), bias)
            return out.view(2 * self.span, self.num_heads, self.head_dim).permute(1, 0, 2)

        return (project(k_proj) if self.c2p else None, project(q_proj) if self.p2c else None)

    def _index(self, q_len, k_len):
        k = max(q_len - 1, k_len - 1, 0)
        return k, torch.ops.posenc.deberta_row_index(k, self.position_buckets, self.max_relative_positions)

    def logits(self, q, k):
        """c2p + p2c (B, H, Tq, Tk), unscaled: HF's gathers of the (B, H, T, 2 span) products."""
        for argument, t in (("q", q), ("k", k)):
            if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[3] != self.head_dim:
                fail(_NAME, f"{argument} must be 4-D (B, H, T, Dh) with Dh = {self.head_dim}")
        dtype = compute_dtype(q, self.rel_embeddings)
        b, h, q_len, k_len = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
        kd, index = self._index(q_len, k_len)
        d = torch.arange(k_len).view(1, -1) - torch.arange(q_len).view(-1, 1) - (k_len - q_len)
        rows = index[(d.clamp(-kd, kd) + kd)]  # (Tq, Tk)
        pos_key, pos_query = self.tables(dtype)
        out = torch.zeros(b, h, q_len, k_len, dtype=dtype)
        if q_len == 0 or k_len == 0:
            return out.to(q.dtype)
        if pos_key is not None:
            out = out + torch.matmul(q.to(dtype), pos_key.transpose(-1, -2)).gather(-1, rows.expand(b, h, -1, -1))
        if pos_query is not None:
            p2c = torch.matmul(k.to(dtype), pos_query.transpose(-1, -2))  # (B, H, Tk, 2 span)
            out = out + p2c.gather(-1, rows.t().expand(b, h, -1, -1)).transpose(-1, -2)
        return out.to(q.dtype)

    def forward(self, q, k):
        return self.logits(q, k)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """posenc.attention's rel_k (c2p), rel_q (p2c), rel_index and max_distance (the caller's scale
        must be 1/sqrt(Dh * scale_factor), as MultiheadAttention's)."""
        kd, index = self._index(int(q_len), int(k_len))
        pos_key, pos_query = self.tables(dtype)
        out = {"rel_index": index, "max_distance": kd}
        if pos_key is not None:
            out["rel_k"] = pos_key
        if pos_query is not None:
            out["rel_q"] = pos_query
        return out

    def extra_repr(self):
        types = "|".join(t for t, on in (("p2c", self.p2c), ("c2p", self.c2p)) if on)
        return (f"num_heads={self.num_heads}, head_dim={self.head_dim}, model_dim={self.model_dim}, "
                f"position_buckets={self.position_buckets}, max_relative_positions={self.max_relative_positions}, "
                f"pos_att_type={types}, share_att_key={self.share_att_key}")
