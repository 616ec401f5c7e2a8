"""posenc.nn: every posenc encoding as a torch.nn.Module, plus multi-head attention into which they plug.

Every encoding module is generated from its C++ contract (include/posenc/nn/family_contract.h, one holder:
FamilyModule in _family.py): the names of its parameters, its initial draws and its messages are the C++
module's. ``import posenc.nn`` works after or instead of ``import posenc``; docs/python_modules.md documents
them.

    input point      SinusoidalEncoding, SinusoidalEncoding2d, SinusoidalEncoding3d, LearnedEncoding,
                     LearnableSinusoidalEncoding
    query/key        RotaryEmbedding, RotaryEmbeddingAxial, MultimodalRotaryEmbedding, QueryTemperature (Llama 4's
                     NoPE layers)
    logit bias       AlibiBias, T5Bias, AlibiBias2d, T5Bias2d, KerpleBias, FireBias, CopeBias, DynamicPositionBias,
                     ContinuousPositionBias2d
    relative vectors ShawRelative, SinusoidalRelative, TransformerXLRelative, Relative2d, DebertaRelative
    attention        MultiheadAttention
    functional       linear_cross_entropy (the vocabulary head fused into its loss)
"""

import posenc  # noqa: F401  (loads the op library before the modules use torch.ops.posenc)

from . import functional
from .attention import MultiheadAttention
from .registry import ENCODINGS, parse_encoding
from ._family import FamilyModule, generate as _generate

# The families on the contract (include/posenc/nn/family_contract.h): one class each, from the catalog.
globals().update(_generate(__name__))

__all__ = [
    "ENCODINGS",
    "FamilyModule",
    "AlibiBias",
    "AlibiBias2d",
    "ContinuousPositionBias2d",
    "CopeBias",
    "DebertaRelative",
    "DynamicPositionBias",
    "FireBias",
    "KerpleBias",
    "LearnableSinusoidalEncoding",
    "LearnedEncoding",
    "MultiheadAttention",
    "MultimodalRotaryEmbedding",
    "QueryTemperature",
    "Relative2d",
    "RotaryEmbedding",
    "RotaryEmbeddingAxial",
    "ShawRelative",
    "SinusoidalEncoding",
    "SinusoidalEncoding2d",
    "SinusoidalEncoding3d",
    "SinusoidalRelative",
    "T5Bias",
    "T5Bias2d",
    "TransformerXLRelative",
    "functional",
    "parse_encoding",
]
