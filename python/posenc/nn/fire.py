"""FIRE (Li et al. 2023, arXiv 2310.04418): a causal logit bias that is a learned MLP of the progressively
interpolated offset,

    bias[h, i, j] = f(log(1 + c (i' - j)) / log(1 + c max(L, i')))_h   for j <= i' (-inf after the query),
    f: Linear(1, hidden), ReLU, Linear(hidden, num_heads)

with c = |c| and L = |L_multiplier * init_L| learned (the authors' parameterisation: init c = 0.1,
init_L = 512 fixed, multiplier 1; torch.nn.Linear's default draws for f). FIRE is defined for decoders:
causal must be True. The C++ module (include/posenc/nn/fire_bias.h) hands the fused attention the
parameters and the kernel computes the bias per tile; attention_kwargs passes the dense bias here, and
terms() the six tensors of the tile term "fire" (posenc.attention(..., fire=terms()), or
torch.ops.posenc.attention_fused with TermSpec().tile("fire")).
"""

import math
import operator

import torch
from torch import nn

import posenc  # noqa: F401  (loads torch.ops.posenc)

from ._common import fail, integer

__all__ = ["FireBias"]


class FireBias(nn.Module):
    """FIRE bias [H, q_len, k_len] (queries at key positions i' = i + k_len - q_len). Parameters: w1, b1
    [hidden], w2 [H, hidden], b2 [H], c and L_multiplier (0-d), as the C++ FireBias."""

    point = "logit bias"  # where MultiheadAttention plugs it in
    registry_names = ("fire",)  # the C++ registry names it builds (posenc encodings)

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults):
        """The module the C++ registry builds for `name`, at the catalog's defaults."""
        return cls(num_heads, causal=causal)

    def __init__(self, num_heads, *, hidden=32, causal=True, init_c=0.1, init_L=512.0):
        super().__init__()
        name = "FireBias"
        self.num_heads = integer(name, "num_heads", num_heads, minimum=1)
        if not causal:
            fail(name, "causal must be true: FIRE is defined for decoders (causal attention), got false")
        self.causal = True
        self.hidden = integer(name, "hidden", hidden, minimum=1)
        self.init_c, self.init_L = float(init_c), float(init_L)
        if not (math.isfinite(self.init_c) and self.init_c > 0):
            fail(name, f"init_c must be > 0, got {init_c:g}")
        if not (math.isfinite(self.init_L) and self.init_L > 0):
            fail(name, f"init_L must be > 0, got {init_L:g}")
        self.w1 = nn.Parameter(torch.empty(self.hidden))
        self.b1 = nn.Parameter(torch.empty(self.hidden))
        self.w2 = nn.Parameter(torch.empty(self.num_heads, self.hidden))
        self.b2 = nn.Parameter(torch.empty(self.num_heads))
        self.c = nn.Parameter(torch.empty(()))
        self.L_multiplier = nn.Parameter(torch.empty(()))
        self.reset_parameters()

    def reset_parameters(self):
        """torch.nn.Linear's draws for the MLP (U(-1, 1), then U(+-1/sqrt(hidden))), c = init_c, multiplier 1."""
        bound = 1.0 / math.sqrt(self.hidden)
        with torch.no_grad():
            self.w1.uniform_(-1.0, 1.0)
            self.b1.uniform_(-1.0, 1.0)
            self.w2.uniform_(-bound, bound)
            self.b2.uniform_(-bound, bound)
            self.c.fill_(self.init_c)
            self.L_multiplier.fill_(1.0)

    def threshold(self):
        """L = |L_multiplier * init_L| (0-d, differentiable)."""
        return (self.L_multiplier * self.init_L).abs()

    def terms(self, dtype=None):
        """The six tensors of torch.ops.posenc.fire_bias / attention_fused's fire_* arguments."""
        dtype = self.w1.dtype if dtype is None else dtype
        return tuple(t.to(dtype) for t in (self.w1, self.b1, self.w2, self.b2, self.c.abs(), self.threshold()))

    def _dense(self, q_len, k_len, dtype=None):
        if q_len > k_len:
            fail("FireBias", f"causal attention needs every query to see a key: q_len must be <= k_len, got "
                             f"{q_len} and {k_len}")
        if q_len == 0 or k_len == 0:
            return torch.zeros(self.num_heads, q_len, k_len, dtype=self.w1.dtype if dtype is None else dtype)
        return torch.ops.posenc.fire_bias(*self.terms(dtype), q_len, k_len)

    def forward(self, q_len, k_len):
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        bias = self._dense(q_len, k_len)
        after = torch.arange(k_len).unsqueeze(0) - torch.arange(q_len).unsqueeze(1) > k_len - q_len
        return bias.masked_fill(after, -math.inf)

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """{"fire": the six terms, "causal": True}: posenc.attention evaluates the bias per tile inside the
        kernel (no [H, q_len, k_len] tensor), differentiable wrt every parameter."""
        if operator.index(q_len) > operator.index(k_len):
            fail("FireBias", f"causal attention needs every query to see a key: q_len must be <= k_len, got "
                             f"{q_len} and {k_len}")
        return {"fire": tuple(self.terms(dtype)), "causal": True}

    def extra_repr(self):
        return f"num_heads={self.num_heads}, hidden={self.hidden}, init_c={self.init_c:g}, init_L={self.init_L:g}"
