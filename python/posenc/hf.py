"""Hugging Face configs as pasted: a model's positional scheme from its ``config.json``.

``positional_scheme(config)`` takes the config as a dict or a path to a
``config.json`` and returns a :class:`PositionalScheme` whose attributes are
``posenc.nn`` modules (or None):

* ``rotary``: RotaryEmbedding, or MultimodalRotaryEmbedding for M-RoPE
  (Qwen2-VL ``mrope_section``);
* ``bias``: AlibiBias (BLOOM, MPT, Falcon with alibi) or T5Bias (encoder;
  ``for_layer("decoder")`` gives the decoder's);
* ``absolute``: LearnedEncoding (BERT, GPT-2);
* ``relative``: ShawRelative (BERT relative_key / relative_key_query);
* ``query_temperature``: QueryTemperature (Llama 4's NoPE layers scale their
  queries by position);

and ``for_layer(i)``, the scheme of layer i for models whose layer types
differ (Gemma 3: sliding-window layers at rope_local_base_freq). The config
is read and validated once, in C++ (posenc::hf, shared with the CLI's
``--hf-config``), with Hugging Face's semantics; docs/hf_configs.md says
which key is read for each family, and what is refused and why. Errors are
ValueError with the file, key path and value, e.g.
"[hf] config.json: rope_scaling.factor must be > 0, got -2".
"""

import json
import os

from ._library import load as _load

_ops = _load()

__all__ = ["PositionalScheme", "positional_scheme", "read_config"]


def read_config(config, source=None):
    """The normalized scheme as a dict (the JSON of posenc::hf::to_json)."""
    if isinstance(config, dict):
        text, name = json.dumps(config), source or "config"
    elif isinstance(config, (str, os.PathLike)):
        path = os.fspath(config)
        try:
            with open(path, "rb") as f:
                text = f.read().decode("utf-8")
        except OSError as error:
            raise ValueError(f"[hf] {path}: cannot read the file: {error.strerror}") from None
        except UnicodeDecodeError:
            raise ValueError(f"[hf] {path}: not valid UTF-8") from None
        name = source or path
    else:
        raise TypeError(f"[hf] config must be a dict or a path to config.json, got {type(config).__name__}")
    return json.loads(_ops.hf_config(text, name))


def _rotary(r):
    import posenc.nn as pnn

    if r is None:
        return None
    common = dict(rotary_dim=r["rotary_dim"], base=r["base"], layout=r["layout"], scaling=r["scaling"])
    if r["mrope_section"] is not None:
        return pnn.MultimodalRotaryEmbedding(r["head_dim"], list(r["mrope_section"]),
                                             interleaved=r["mrope_interleaved"], **common)
    return pnn.RotaryEmbedding(r["head_dim"], **common)


def _bias(b):
    import posenc.nn as pnn

    if b is None:
        return None
    if b["kind"] == "alibi":
        # HF adds m_h * j (BLOOM) or -m_h * (i - j) (MPT): per query row the same up to a constant,
        # which softmax removes; the causal mask is the model's.
        slopes = b["slopes"]
        return pnn.AlibiBias(b["num_heads"], slopes=None if slopes is None else list(slopes))
    return pnn.T5Bias(b["num_heads"], num_buckets=b["num_buckets"], max_distance=b["max_distance"],
                      bidirectional=b["bidirectional"])


def _absolute(a):
    import posenc.nn as pnn

    if a is None:
        return None
    if a["kind"] == "learned":
        return pnn.LearnedEncoding(a["max_positions"], a["dim"])
    return pnn.SinusoidalEncoding(a["dim"])


def _relative(r):
    import posenc.nn as pnn

    if r is None:
        return None
    # BERT: a table of 2M-1 rows over offsets -(M-1) .. M-1, shared by the heads, no value term.
    return pnn.ShawRelative(r["max_position_embeddings"] - 1, r["head_dim"], values=False,
                            key_logits=r["kind"] == "relative_key_query")


def _query_temperature(t):
    import posenc.nn as pnn

    if t is None:
        return None
    return pnn.QueryTemperature(t["floor_scale"], t["attn_scale"])


class LayerScheme:
    """One layer's modules (each None when the layer does not use that point)."""

    def __init__(self, description):
        self.description = description
        self.rotary = _rotary(description["rotary"])
        self.bias = _bias(description["bias"])
        self.absolute = _absolute(description["absolute"])
        self.relative = _relative(description["relative"])
        self.query_temperature = _query_temperature(description.get("query_temperature"))

    def _parts(self):
        d = self.description
        parts = []
        if d["rotary"] is not None:
            r = d["rotary"]
            text = f"rotary(head_dim={r['head_dim']}, rotary_dim={r['rotary_dim']}, base={r['base']:g}, " \
                   f"layout={r['layout']}"
            if r["scaling"] is not None:
                text += f", scaling={r['scaling']['rope_type']}"
                if "factor" in r["scaling"]:
                    text += f" x{r['scaling']['factor']:g}"
            if r["mrope_section"] is not None:
                text += f", mrope_section={r['mrope_section']}" + (" interleaved" if r["mrope_interleaved"] else "")
            parts.append(text + ")")
        if d["bias"] is not None:
            b = d["bias"]
            if b["kind"] == "alibi":
                parts.append(f"alibi(num_heads={b['num_heads']}" +
                             ("" if b["slopes"] is None else f", alibi_bias_max={b['alibi_bias_max']:g}") + ")")
            else:
                parts.append(f"t5(num_heads={b['num_heads']}, num_buckets={b['num_buckets']}, "
                             f"max_distance={b['max_distance']}, bidirectional={b['bidirectional']})")
        if d["absolute"] is not None:
            a = d["absolute"]
            parts.append(f"{a['kind']}(max_positions={a['max_positions']}, dim={a['dim']})")
        if d["relative"] is not None:
            r = d["relative"]
            parts.append(f"{r['kind']}(max_position_embeddings={r['max_position_embeddings']}, "
                         f"head_dim={r['head_dim']})")
        if d.get("query_temperature") is not None:
            t = d["query_temperature"]
            parts.append(f"query temperature(floor_scale={t['floor_scale']:g}, attn_scale={t['attn_scale']:g})")
        return parts or ["no positional encoding"]

    def __repr__(self):
        return ", ".join(self._parts())


class PositionalScheme(LayerScheme):
    """A model's positional scheme: the first layer's modules, plus for_layer(i)."""

    def __init__(self, description):
        super().__init__(description["scheme"])
        self.model_type = description["model_type"]
        self.source = description["source"]
        self.layer_types = list(description["layer_types"])
        self._by_type = description["by_layer_type"]
        self._layers = {}

    def for_layer(self, layer):
        """Layer `layer`'s scheme: an int index (into layer_types when the config has them), or a layer
        type name ("sliding_attention", "full_attention"; T5: "encoder", "decoder")."""
        if isinstance(layer, str):
            if layer not in self._by_type:
                names = ", ".join(sorted(self._by_type)) or "one scheme for every layer"
                raise ValueError(f"[hf] {self.source}: no layer type '{layer}'; the config has {names}")
            key = layer
        else:
            index = int(layer)
            if not self.layer_types:
                if index < 0:
                    raise ValueError(f"[hf] {self.source}: layer must be >= 0, got {index}")
                return self
            if not 0 <= index < len(self.layer_types):
                raise ValueError(f"[hf] {self.source}: layer {index} is out of range: the config has "
                                 f"{len(self.layer_types)} layers (layer_types)")
            key = self.layer_types[index]
        if key not in self._layers:
            self._layers[key] = LayerScheme(self._by_type[key])
        return self._layers[key]

    def __repr__(self):
        lines = [f"PositionalScheme({self.model_type}: {LayerScheme.__repr__(self)}"]
        if self.layer_types:
            counts = {}
            for t in self.layer_types:
                counts[t] = counts.get(t, 0) + 1
            for t, n in counts.items():
                lines.append(f"  {t} ({n} layers): {LayerScheme(self._by_type[t])!r}"
                             if t not in self._layers else f"  {t} ({n} layers): {self._layers[t]!r}")
        elif self._by_type:
            for t in sorted(self._by_type):
                lines.append(f"  {t}: {self.for_layer(t)!r}")
        return "\n".join(lines) + ")"


def positional_scheme(config):
    """The positional scheme of a Hugging Face model: config is a dict or a path to its config.json."""
    return PositionalScheme(read_config(config))
