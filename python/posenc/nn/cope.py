"""CoPE (Golovneva et al. 2024, arXiv 2405.18719, "Contextual Position Encoding: Learning to Count What's
Important"): positions counted by the content. For query i at key position i' = i + Tk - Tq and keys j <= i',

    g[i, j] = sigmoid(scale q_i . k_j)           (a padded key counts 0)
    p[i, j] = sum_{t=j}^{i'} g[i, t],  P = min(p, npos_max - 1),  w = P - floor(P)
    term[i, j] = (1 - w) q_i . e[floor P] + w q_i . e[ceil P]     added to the scaled logits

as the authors' code: one table e [npos_max, head_dim] shared by the heads, zero at the start; the gates use
the attention's scale (1/sqrt(head_dim)). The term depends on q and k, so the module hands posenc.attention
its table (cope=e) and the kernel computes the term per query row (no [Tq, Tk] tensor); forward(q, k) gives
the dense term through torch.ops.posenc.cope_bias. CoPE is defined for decoders: causal must be True.
"""

import math

import torch
from torch import nn

import posenc  # noqa: F401  (loads torch.ops.posenc)

from ._common import fail, integer

__all__ = ["CopeBias"]


class CopeBias(nn.Module):
    """CoPE's term; parameter e [npos_max, head_dim], as the C++ CopeBias."""

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("cope",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, head_dim, npos_max=defaults["cope_npos"], causal=causal)

    def __init__(self, num_heads, head_dim, *, npos_max=64, causal=True):
        super().__init__()
        name = "CopeBias"
        self.num_heads = integer(name, "num_heads", num_heads, minimum=1)
        if not causal:
            fail(name, "causal must be true: CoPE is defined for decoders (causal attention), got false")
        self.causal = True
        self.npos_max = integer(name, "npos_max", npos_max, minimum=1)
        self.head_dim = integer(name, "head_dim", head_dim, minimum=1)
        self.e = nn.Parameter(torch.zeros(self.npos_max, self.head_dim))

    def reset_parameters(self):
        """e = 0 (the authors' torch.zeros(1, head_dim, npos_max))."""
        with torch.no_grad():
            self.e.zero_()

    def forward(self, q, k, scale=None, key_padding_mask=None):
        """q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the term (B, H, Tq, Tk), -inf after the query."""
        scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
        term = torch.ops.posenc.cope_bias(q, k, self.e.to(q.dtype), scale, key_padding_mask)
        q_len, k_len = q.shape[2], k.shape[2]
        after = torch.arange(k_len).unsqueeze(0) - torch.arange(q_len).unsqueeze(1) > k_len - q_len
        return term.masked_fill(after, -math.inf)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"cope": e, "causal": True}: posenc.attention computes the term from q and k inside the kernel,
        differentiable wrt q, k and e."""
        if q_len > k_len:
            fail("CopeBias", f"causal attention needs every query to see a key: q_len must be <= k_len, got "
                             f"{q_len} and {k_len}")
        return {"cope": self.e if dtype is None else self.e.to(dtype), "causal": True}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}, npos_max={self.npos_max}"
