"""Encodings by name for MultiheadAttention, read from the C++ families' descriptors.

`torch.ops.posenc.encoding_catalog()` returns what include/posenc/nn/encoding_family.h defines for
every family (name, point, needs, parameters with defaults and ranges). The module that builds a
family is the posenc.nn class that names it in `registry_names` (its `from_registry` classmethod);
no list here restates either.
"""

import json

import torch

from ._common import fail

__all__ = ["CATALOG", "DEFAULTS", "ENCODINGS", "make_encodings", "module_class", "parse_encoding"]

# The descriptors, in `posenc encodings` order.
CATALOG = json.loads(torch.ops.posenc.encoding_catalog())

# Every family's settings at their defaults (max_positions included).
DEFAULTS = {p["name"]: p["default"] for family in CATALOG for p in family["parameters"]}


def module_class(name):
    """The posenc.nn class whose registry_names holds `name` (its from_registry builds it), or None."""
    import posenc.nn as package  # read when called: every module class is exported by then

    for obj in vars(package).values():
        if name in getattr(obj, "registry_names", ()):
            return obj
    return None


def _factory(name):
    return lambda num_heads, head_dim, causal: module_class(name).from_registry(name, num_heads, head_dim, causal,
                                                                                DEFAULTS)


# name -> (point, factory(num_heads, head_dim, causal)): None for the points MultiheadAttention does not hold.
ENCODINGS = {family["name"]: (family["point"], None if family["point"] in ("none", "input") else _factory(family["name"]))
             for family in CATALOG}
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
                                       "first layer, as posenc.nn.LearnedEncoding); encoding takes query/key, "
                                       "logit bias and relative vectors encodings")
        if needs["even_head_dim"] and head_dim % 2:
            fail("encoding", f"{part} needs an even head_dim, got {head_dim}")
        if needs["even_dim"] and (num_heads * head_dim) % 2:
            fail("encoding", f"{part} needs an even dim, got {num_heads * head_dim}")
        if factory is None:
            continue
        if module_class(part) is None:
            fail("MultiheadAttention", f"'{part}' has no posenc.nn module yet; use the C++ MultiheadAttention")
        modules.append(factory(num_heads, head_dim, causal))
    return modules
