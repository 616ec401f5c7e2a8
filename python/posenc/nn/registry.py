"""Encodings by name for MultiheadAttention: the names, points and defaults of `posenc encodings`
(the C++ catalog, include/posenc/nn/encoding_registry.h).

No op exposes that catalog to Python and posenc.nn adds no C++, so the table below restates it; the
test test_nn_attention.py::test_registry_matches_cli compares names, points and defaults with
`posenc encodings --json`, so the two cannot drift apart silently.
"""

from ._common import fail
from .bias import AlibiBias, KerpleBias, T5Bias
from .relative import ShawRelative, SinusoidalRelative, TransformerXLRelative
from .rotary import RotaryEmbedding

__all__ = ["DEFAULTS", "ENCODINGS", "make_encodings", "parse_encoding"]

# EncodingConfig's defaults (the C++ registry).
DEFAULTS = {"base": 10000.0, "xpos_scale_base": 512.0, "max_distance": 16, "t5_num_buckets": 32,
            "t5_max_distance": 128, "init_std": 0.02, "max_positions": 512, "rope_fraction": 0.25}

_D = DEFAULTS
# name -> (point, factory(num_heads, head_dim, causal) or None for the points MultiheadAttention lacks)
ENCODINGS = {
    "none": ("none", None),
    "nope": ("none", None),
    "sinusoidal": ("input", None),
    "learned": ("input", None),
    "learnable-sinusoidal": ("input", None),
    "rope": ("query/key", lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"])),
    # p-RoPE (Barbero et al. 2024) is Hugging Face's "proportional" type at factor 1.
    "p-rope": ("query/key", lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"], scaling={
        "rope_type": "proportional", "partial_rotary_factor": _D["rope_fraction"]})),
    "rope-xpos": ("query/key", lambda h, dh, causal: RotaryEmbedding(dh, base=_D["base"],
                                                                     xpos_scale_base=_D["xpos_scale_base"])),
    "alibi": ("logit bias", lambda h, dh, causal: AlibiBias(h, causal=causal)),
    "t5": ("logit bias", lambda h, dh, causal: T5Bias(h, num_buckets=_D["t5_num_buckets"],
                                                      max_distance=_D["t5_max_distance"], bidirectional=not causal,
                                                      init_std=_D["init_std"])),
    "kerple": ("logit bias", lambda h, dh, causal: KerpleBias(h, kind="log", causal=causal)),
    "kerple-power": ("logit bias", lambda h, dh, causal: KerpleBias(h, kind="power", causal=causal)),
    "shaw": ("relative vectors", lambda h, dh, causal: ShawRelative(_D["max_distance"], dh, num_heads=0, values=True,
                                                                    init_std=_D["init_std"])),
    "shaw-sinusoidal": ("relative vectors", lambda h, dh, causal: SinusoidalRelative(
        _D["max_distance"], dh, base=_D["base"], values=True, learnable=False)),
    "shaw-learnable-sinusoidal": ("relative vectors", lambda h, dh, causal: SinusoidalRelative(
        _D["max_distance"], dh, base=_D["base"], values=True, learnable=True)),
    "xl": ("relative vectors", lambda h, dh, causal: TransformerXLRelative(h, dh, base=_D["base"],
                                                                           init_std=_D["init_std"])),
}

_EVEN_HEAD_DIM = ("rope", "p-rope", "rope-xpos", "shaw-sinusoidal", "shaw-learnable-sinusoidal")


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
    parts = parse_encoding(name)
    if "nope" in parts and not causal:
        fail("encoding", "nope needs a causal model (a decoder): an encoder sees a bag of tokens; use 'none' for "
                         "that baseline")
    for part in parts:
        point, factory = ENCODINGS[part]
        if point == "input":
            fail("MultiheadAttention", f"'{part}' is an input encoding (added to the token embeddings before the "
                                       "first layer, see posenc.nn.absolute); encoding takes query/key, logit bias "
                                       "and relative vectors encodings")
        if part in _EVEN_HEAD_DIM and head_dim % 2:
            fail("encoding", f"{part} needs an even head_dim, got {head_dim}")
        if part == "xl" and (num_heads * head_dim) % 2:
            fail("encoding", f"xl needs an even dim, got {num_heads * head_dim}")
        if factory is not None:
            modules.append(factory(num_heads, head_dim, causal))
    return modules
