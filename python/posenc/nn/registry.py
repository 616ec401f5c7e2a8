"""Encodings by name for MultiheadAttention, read from the C++ families' descriptors.

`torch.ops.posenc.encoding_catalog()` returns what include/posenc/nn/encoding_family.h defines for
every family (name, point, needs, parameters with defaults and ranges); this module keeps only what
Python adds: which posenc.nn module builds each family (FACTORIES). A family in the catalog without
a factory here is listed but cannot be built by MultiheadAttention (the test suite refuses that).
"""

import json

import torch

from ._common import fail
from .bias import AlibiBias, KerpleBias, T5Bias
from .relative import ShawRelative, SinusoidalRelative, TransformerXLRelative
from .rotary import RotaryEmbedding

__all__ = ["CATALOG", "DEFAULTS", "ENCODINGS", "FACTORIES", "make_encodings", "parse_encoding"]

# The descriptors, in `posenc encodings` order.
CATALOG = json.loads(torch.ops.posenc.encoding_catalog())

# Every family's settings at their defaults (max_positions included).
DEFAULTS = {p["name"]: p["default"] for family in CATALOG for p in family["parameters"]}

_D = DEFAULTS
# name -> factory(num_heads, head_dim, causal) for the inner points MultiheadAttention builds.
FACTORIES = {
    "rope": lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"]),
    # p-RoPE (Barbero et al. 2024) is Hugging Face's "proportional" type at factor 1.
    "p-rope": lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"], scaling={
        "rope_type": "proportional", "partial_rotary_factor": _D["rope_fraction"]}),
    "rope-xpos": lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"], xpos_scale_base=_D["xpos_scale_base"]),
    "alibi": lambda h, dh, causal: AlibiBias(h, causal=causal),
    "t5": lambda h, dh, causal: T5Bias(h, num_buckets=_D["t5_num_buckets"], max_distance=_D["t5_max_distance"],
                                       bidirectional=not causal, init_std=_D["init_std"]),
    "kerple": lambda h, dh, causal: KerpleBias(h, kind="log", causal=causal),
    "kerple-power": lambda h, dh, causal: KerpleBias(h, kind="power", causal=causal),
    "shaw": lambda h, dh, causal: ShawRelative(_D["max_distance"], dh, num_heads=0, values=True,
                                               init_std=_D["init_std"]),
    "shaw-sinusoidal": lambda h, dh, causal: SinusoidalRelative(_D["max_distance"], dh, base=_D["base"], values=True,
                                                                learnable=False),
    "shaw-learnable-sinusoidal": lambda h, dh, causal: SinusoidalRelative(_D["max_distance"], dh, base=_D["base"],
                                                                          values=True, learnable=True),
    "xl": lambda h, dh, causal: TransformerXLRelative(h, dh, base=_D["base"], init_std=_D["init_std"]),
}

# name -> (point, factory or None): None for the points MultiheadAttention does not hold (none, input).
ENCODINGS = {family["name"]: (family["point"], FACTORIES.get(family["name"])) for family in CATALOG}
_FAMILIES = {family["name"]: family for family in CATALOG}


def parse_encoding(name):
    """The parts of "A+B", checked with the C++ parser's messages ("[encoding] unknown encoding 'foo'; ...")."""
    parts = name.split("+")
    for part in parts:
        if not part:
            fail("encoding", f"empty part in '{name}'")
        if part not in ENCODINGS:
            fail("encoding", f"unknown encoding '{part}'; known: {', '.join(ENCODINGS)} (combine with '+')")
    for part in parts:
        if len(parts) > 1 and ENCODINGS[part][0] == "none":
            fail("encoding", f"'{part}' cannot be combined, got '{name}'")
    for a in range(len(parts)):
        for b in range(a + 1, len(parts)):
            point = ENCODINGS[parts[a]][0]
            if point == ENCODINGS[parts[b]][0]:
                fail("encoding", f"'{name}' has two {point} encodings ({parts[a]}, {parts[b]}); use at most one "
                                 "per point")
    return parts


def make_encodings(name, num_heads, head_dim, causal):
    """Fresh modules for the inner points of the plan `name`, as the C++ make_attention_encodings builds them."""
    modules = []
    for part in parse_encoding(name):
        family = _FAMILIES[part]
        point, factory = ENCODINGS[part]
        needs = family["needs"]
        if needs["causal"] and not causal:
            fail("encoding", f"{part} needs a causal model (a decoder): {needs['causal_hint']}")
        if point == "input":
            fail("MultiheadAttention", f"'{part}' is an input encoding (added to the token embeddings before the "
                                       "first layer, see posenc.nn.absolute); encoding takes query/key, logit bias "
                                       "and relative vectors encodings")
        if needs["even_head_dim"] and head_dim % 2:
            fail("encoding", f"{part} needs an even head_dim, got {head_dim}")
        if needs["even_dim"] and (num_heads * head_dim) % 2:
            fail("encoding", f"{part} needs an even dim, got {num_heads * head_dim}")
        if factory is None and point != "none":
            fail("MultiheadAttention", f"'{part}' has no posenc.nn module yet; use the C++ MultiheadAttention")
        if factory is not None:
            modules.append(factory(num_heads, head_dim, causal))
    return modules
