"""The one holder of every family on the contract, and the classes generated from the catalog.

A family's contract lives once, in C++ (include/posenc/nn/family_contract.h): its settings with their
types, defaults and meaning, the tensors it owns, its initial draws and its functions at its point (the
logit bias's terms, the query/key point's rotation, the input point's table). ``FamilyModule`` keeps those
tensors as this module's parameters and buffers, under the contract's names, and hands them to the family ops
(torch.ops.posenc.family_*) on every call, so autograd, ``.to(dtype)``, ``deepcopy``, ``state_dict`` and
``torch.jit.trace`` treat it as any module. ``generate()`` makes one class per contract (KerpleBias,
RotaryEmbedding, LearnedEncoding, ...) with its signature and docstring from the catalog; no family has
Python code of its own.
"""

import functools
import inspect
import json
import math
import operator

import torch
from torch import nn

import posenc  # noqa: F401  (loads torch.ops.posenc)

__all__ = ["FamilyModule", "generate"]

_ops = torch.ops.posenc
# How posenc.attention's keywords name each term of a spec (a tile kind is its own keyword; the relative
# entries' K is max_distance, grid_tables' tensors and grid travel as rel_2d).
_KEYWORDS = {"offset_rows": "offset_bias", "grid_rows": "grid_bias", "dense_bias": "bias", "relative_keys": "rel_k",
             "relative_values": "rel_v", "relative_queries": "rel_q", "relative_index": "rel_index",
             "content_shift": "xl_u", "relative_shift": "xl_v"}
_TABLES = ("relative_keys", "relative_values", "relative_queries", "relative_index")  # they share K


def _json(settings):
    """The settings as JSON, a non-finite number as "nan" / "inf" / "-inf" (JSON has none)."""
    def value(v):
        if isinstance(v, float) and not math.isfinite(v):
            return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"
        return v
    return json.dumps({key: value(v) for key, v in settings.items()})


def _loads(text):
    """JSON settings back, "nan" / "inf" / "-inf" of a real setting as floats."""
    return {key: float(v) if v in ("nan", "inf", "-inf") else v for key, v in json.loads(text).items()}


def _typed(name, setting, value):
    """value in the setting's Python type, with the library's TypeError when it has another."""
    if value is None:
        return None
    kind = setting["type"]
    if kind == "int":
        try:
            return operator.index(value)
        except TypeError:
            raise TypeError(f"[{name}] {setting['name']} must be an int, got {type(value).__name__}") from None
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"[{name}] {setting['name']} must be a number, got {type(value).__name__}")
        return float(value)
    if kind == "bool":
        return bool(value)
    if kind == "tensor":
        return value
    if kind == "ints":
        try:
            return [operator.index(v) for v in value]
        except TypeError:
            raise TypeError(f"[{name}] {setting['name']} must be a list of ints, got {value!r}") from None
    if kind == "words":
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise TypeError(f"[{name}] {setting['name']} must be a list of strings, got {value!r}")
    if kind == "mapping":
        if isinstance(value, dict):
            return dict(value)
        if isinstance(value, (list, tuple)) and all(v is None or isinstance(v, dict) for v in value):
            return [None if v is None else dict(v) for v in value]
        raise TypeError(f"[{name}] {setting['name']} must be a dict or a list of dicts, got {type(value).__name__}")
    if not isinstance(value, str):
        raise TypeError(f"[{name}] {setting['name']} must be a str, got {type(value).__name__}")
    return value


class FamilyModule(nn.Module):
    """A module whose contract is the C++ family's; subclasses set ``_contract`` (a catalog entry)."""

    _contract = None
    point = None
    registry_names = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        contract = self._contract
        # An instance attribute as well: torch.compile reads a class attribute holding a dict only through one
        self._contract = contract
        name = contract["module"]
        bound = self.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        given = {s["name"]: _typed(name, s, bound.arguments[s["name"]]) for s in contract["settings"]}
        # A tensor argument (ALiBi's slopes) travels as "given or not"; the tensor itself after the draws.
        adopted = {key: given[key] for key in contract["adopted"] if given[key] is not None}
        for key in contract["adopted"]:
            given[key] = key in adopted
            setattr(self, "custom_" + key, key in adopted)
        # Completed and checked once, by the contract; the JSON is what every call hands back.
        self._settings = _ops.family_settings(name, _json(given))
        self.settings = _loads(self._settings)
        state = {entry["name"] for entry in contract["state"]}
        layout = json.loads(_ops.family_layout(name, self._settings))
        self._layout = [(e["name"], e["borrowed"], e["shape"]) for e in layout if e["present"]]
        self._borrowed = None  # the layer's projections, once handed over (share_projections)
        owned = [e for e in layout if e["present"] and not e["borrowed"]]
        # Submodules first: their constructors draw before the contract does, as in C++.
        submodules = {}
        for sub in contract["submodules"]:
            entries = [e for e in owned if e["name"].startswith(sub["name"] + ".")]
            if not entries:
                setattr(self, sub["name"], None)
            elif sub["kind"] == "Linear":
                out_features, in_features = entries[0]["shape"]
                submodules[sub["name"]] = nn.Linear(in_features, out_features, bias=len(entries) > 1)
            else:
                submodules[sub["name"]] = nn.LayerNorm(entries[0]["shape"], eps=self.settings[sub["eps"]])
        for entry in layout:
            if not entry["present"] and "." not in entry["name"]:
                setattr(self, entry["name"], None)  # absent for these settings (DPB's norm without norm)
        for entry, tensor in zip(owned, _ops.family_init(name, self._settings)):
            head, _, tail = entry["name"].partition(".")
            if tail:
                with torch.no_grad():
                    getattr(submodules[head], tail).copy_(tensor)
            elif entry["parameter"]:
                self.register_parameter(entry["name"], nn.Parameter(tensor))
            else:
                self.register_buffer(entry["name"], tensor)
        for key, module in submodules.items():
            setattr(self, key, module)
        if contract["point"] == "input" and not owned:
            # A fixed table's dtype follows .to() through this empty buffer (float64 stays float64).
            self.register_buffer("_anchor", torch.empty(0), persistent=False)
        attributes = {s["name"]: s["python_name"] for s in contract["settings"]}
        for key, value in self.settings.items():
            if key not in state:
                setattr(self, attributes[key], value)
        if contract["point"] == "relative vectors" and "num_heads" not in self.settings:
            self.num_heads = 0  # one table shared by the heads
        # The family's own posenc.attention keywords, fixed by the settings: read once, outside any trace.
        self._keywords = json.loads(_ops.family_keyword_names(name, self._settings)) if contract["keywords"] else None
        for key, tensor in adopted.items():
            if not isinstance(tensor, torch.Tensor):
                tensor = torch.as_tensor(tensor)
            setattr(self, key, _ops.family_adopt(name, self._settings, key, tensor))
        for method in contract["methods"]:
            if method["constant"]:  # of the settings alone: a plain attribute (DeBERTa's scale_factor)
                setattr(self, method["name"], float(_ops.family_call(name, self._settings, self._state(),
                                                                     method["name"])))

    @classmethod
    def from_registry(cls, name, num_heads, head_dim, causal, defaults=None):
        """The module the C++ registry builds for `name` (posenc encodings), at the catalog's defaults."""
        settings = _loads(_ops.family_preset(name, num_heads, head_dim, causal))
        return cls(**{k: v for k, v in settings.items() if k not in cls._contract["adopted"]})

    def _state(self):
        """The present tensors, in the contract's order (what the family ops take); the borrowed ones once the
        layer handed them over (a projection without bias lends zeros)."""
        out = []
        for name, borrowed, shape in self._layout:
            head, _, tail = name.partition(".")
            if not borrowed:
                out.append(getattr(getattr(self, head), tail) if tail else getattr(self, name))
            elif self._borrowed is not None:
                module = self._borrowed[head]
                tensor = getattr(module, tail)
                out.append(torch.zeros(shape, dtype=module.weight.dtype) if tensor is None else tensor)
        return out

    def share_projections(self, q_proj, k_proj):
        """The attention layer's q_proj and k_proj, for a contract that borrows them (DeBERTa's
        share_att_key: MultiheadAttention hands them over); kept by reference, not registered here."""
        if any(borrowed for _, borrowed, _ in self._layout):
            self._borrowed = {"q_proj": q_proj, "k_proj": k_proj}

    def _dtype(self, dtype):
        if dtype is not None:
            return dtype
        state = self._state()
        if state:
            return state[0].dtype
        return torch.float64 if self._anchor.dtype == torch.float64 else torch.float32

    def reset_parameters(self):
        """The authors' initial draws again (torch's default generator)."""
        with torch.no_grad():
            _ops.family_reset(self._contract["module"], self._settings, self._state())

    def attention_terms(self, q_len, k_len, *, dtype=None):
        """(tensors, TermSpec): the term as torch.ops.posenc.attention_fused takes it, differentiable wrt the
        module's parameters; dtype of the tensors (None: the parameters')."""
        return _ops.family_terms(self._contract["module"], self._settings, self._state(), operator.index(q_len),
                                 operator.index(k_len), self._dtype(dtype))

    def terms(self, q_len=1, k_len=1, *, dtype=None):
        """The term list's tensors alone (FIRE: w1, b1, w2, b2, |c|, L, the tile kind "fire"'s)."""
        return tuple(self.attention_terms(q_len, k_len, dtype=dtype)[0])

    def attention_kwargs(self, q_len, k_len, *, dtype=None):
        """The same term as posenc.attention's keywords ({"offset_bias": rows}, {"fire": six tensors,
        "causal": True}, ...): attention stays fused, with no (q_len, k_len) tensor."""
        if self._contract["keywords"]:
            tensors = _ops.family_keywords(self._contract["module"], self._settings, self._state(),
                                           operator.index(q_len), operator.index(k_len), self._dtype(dtype))
            return {**dict(zip(self._keywords["tensors"], tensors)), **self._keywords["values"]}
        q_len, k_len = operator.index(q_len), operator.index(k_len)
        tensors = _ops.family_term_tensors(self._contract["module"], self._settings, self._state(), q_len, k_len,
                                           self._dtype(dtype))
        kwargs, at = {}, 0
        shapes = tuple(tuple(shape) for _, borrowed, shape in self._layout if not borrowed or self._borrowed)
        for entry, count, (max_distance, height, width) in _term_layout(self._contract["module"], self._settings,
                                                                        shapes, q_len, k_len):
            taken = tuple(tensors[at:at + count])
            at += count
            kind = entry.split("(")[0]
            if entry == "causal":
                kwargs["causal"] = True
            elif kind == "tile":
                kwargs[entry[5:-1]] = taken if count > 1 else taken[0]
            elif kind == "grid_tables":
                kwargs["rel_2d"] = (*taken, height, width)
            else:
                kwargs[_KEYWORDS.get(kind, entry)] = taken[0]
                if kind in _TABLES:
                    kwargs["max_distance"] = max_distance
        return kwargs

    def extra_repr(self):
        return _ops.family_describe(self._contract["module"], self._settings)


def _from_pretrained(cls, weight, *, freeze=False, **settings):
    """The module holding a copy of a checkpoint's tensor (as its contract converts it), its sizes read
    from the tensor's shape; freeze stops its gradient; settings as the constructor's, and the loader's
    own keywords."""
    contract = cls._contract
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"[{contract['module']}] weight must be a tensor, got {type(weight).__name__}")
    known = contract["settings"] + contract["pretrained_arguments"]
    given = {key: _typed(contract["module"], s, settings[key]) for s in known
             for key in [s["name"]] if key in settings}
    text, value = _ops.family_pretrained(contract["module"], weight, _json(given))
    settings = _loads(text)
    module = cls(**{k: v for k, v in settings.items() if k not in contract["adopted"]})
    entry = next(e for e in contract["state"] if e["name"] == contract["pretrained"])
    setattr(module, entry["python_name"], nn.Parameter(value.detach().clone(), requires_grad=not freeze))
    return module


def _loader(contract):
    """The contract's pretrained loader as a classmethod, named and documented from the catalog."""
    def loader(cls, weight, *, freeze=False, **settings):
        return _from_pretrained(cls, weight, freeze=freeze, **settings)
    loader.__name__ = contract["pretrained_loader"]
    own = contract["pretrained_arguments"]
    lines = [f"The module holding a copy of a checkpoint's tensor as its {contract['pretrained']}, its sizes read "
             "from the tensor's shape; freeze stops its gradient; settings as the constructor's" + (", and:" if own
                                                                                                     else ".")]
    lines += [f"    {a['name']} ({a['type']} = {a['default']!r}): {a['meaning']}" for a in own]
    loader.__doc__ = "\n".join(lines)
    return classmethod(loader)


def _entries(spec):
    """(name, tensor count, sizes) of each entry of a TermSpec, read outside any trace: they are fixed by
    the module's settings and the lengths (constants of a trace), and the tracer records no strings."""
    state = torch._C._get_tracing_state()
    torch._C._set_tracing_state(None)
    try:
        return list(zip(spec.entry_names(), spec.entry_tensors(), spec.entry_sizes()))
    finally:
        torch._C._set_tracing_state(state)


def _constant(function):
    """function, which torch.compile runs while tracing and records as its result (torch.compiler's
    assume_constant_result); as it is where there is no tracer (torch 1.13)."""
    mark = getattr(getattr(torch, "compiler", None), "assume_constant_result", None)
    return mark(function) if mark else function


@_constant
def _term_layout(module, settings, shapes, q_len, k_len):
    """(name, tensor count, sizes) of each entry of a family's terms at these lengths: fixed by the settings and
    the lengths (constants of a trace), read from the terms of tensors of ones in the state's shapes."""
    return _layout_of(module, settings, shapes, q_len, k_len)


@functools.lru_cache(maxsize=4096)  # bounded: a decoding loop asks at every length
def _layout_of(module, settings, shapes, q_len, k_len):
    state = [torch.ones(shape) for shape in shapes]
    return tuple(_entries(_ops.family_terms(module, settings, state, q_len, k_len, torch.float32)[1]))


def _forward_lengths(self, q_len, k_len):
    """The dense term [num_heads, q_len, k_len] (queries at key positions i' = i + k_len - q_len), -inf where
    masked; differentiable wrt the parameters."""
    return _ops.family_dense(self._contract["module"], self._settings, self._state(), operator.index(q_len),
                             operator.index(k_len))


def _forward_queries_keys(self, q, k, scale=None, key_padding_mask=None):
    """q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the term (B, H, Tq, Tk), -inf after the query; scale None is
    1/sqrt(Dh)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _ops.family_dense_qk(self._contract["module"], self._settings, self._state(), q, k, scale,
                                key_padding_mask)


def _relative_logits(self, q, k):
    """q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> the extra logit terms (B, H, Tq, Tk): not q . k and not scaled
    (queries at key positions i' = i + Tk - Tq)."""
    return _ops.family_relative_logits(self._contract["module"], self._settings, self._state(), q, k)


def _relative_values(self, probs):
    """probs (B, H, Tq, Tk) -> the value vectors (B, H, Tq, Dh) added to the attention output."""
    return _ops.family_relative_values(self._contract["module"], self._settings, self._state(), probs)


def _parameters(signature):
    """((name, default), ...) of a signature, read once: what _bind walks."""
    return tuple((p.name, p.default) for p in signature.parameters.values())


def _bind(self, args, kwargs):
    """{parameter: value} of a call of the point's forward, defaults applied, as inspect.Signature.bind gives
    it; in plain Python, which torch.compile traces (it cannot trace inspect). A call that does not bind gets
    inspect's own TypeError."""
    parameters = self._forward_parameters
    names = tuple(name for name, _ in parameters)
    bound = dict(zip(names, args))
    fits = len(args) <= len(parameters) and all(key in names and key not in bound for key in kwargs)
    bound.update(kwargs)
    for name, default in parameters:
        if name not in bound:
            fits = fits and default is not inspect.Parameter.empty
            bound[name] = default
    if not fits:
        self._forward_signature.bind(*args, **kwargs)  # raises
    return bound


def _positions(self, value):
    """A positions argument as the family ops take it: a tensor, None, or an int N as 0 .. N-1 where the
    contract says so."""
    contract = self._contract
    if value is None or isinstance(value, torch.Tensor):
        return value
    if contract["positions"]["count"]:
        return torch.arange(operator.index(value), dtype=torch.int64)
    raise TypeError(f"[{contract['module']}] {contract['positions']['name']} must be an int64 tensor, got "
                    f"{type(value).__name__}")


def _rotate(self, *args, **kwargs):
    """The query/key point: the contract's rotate_inputs transformed at their positions."""
    contract = self._contract
    arguments = _bind(self, args, kwargs)
    inputs = [arguments[name] for name in contract["rotate_inputs"]]
    for name, value in zip(contract["rotate_inputs"], inputs):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"[{contract['module']}] {name} must be a tensor, got {type(value).__name__}")
    positions = _positions(self, arguments[contract["positions"]["name"]])
    out = _ops.family_rotate(contract["module"], self._settings, self._state(), inputs, positions)
    return tuple(out) if len(out) > 1 else out[0]


def _rotate_signature(contract):
    parameters = [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in contract["rotate_inputs"]]
    positions = contract["positions"]
    default = None if positions["optional"] else inspect.Parameter.empty
    parameters.append(inspect.Parameter(positions["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    return inspect.Signature(parameters)


def _embed(self, *args, **kwargs):
    """The input point: the table at the positions (an int N: 0 .. N-1), or a grid family's every cell."""
    contract = self._contract
    arguments = _bind(self, args, kwargs)
    sizes = [operator.index(arguments[name]) for name in contract["embed_sizes"]]
    positions, count = None, None
    if not sizes:
        value = arguments[contract["positions"]["name"]]
        if isinstance(value, torch.Tensor):
            positions = value
        else:
            count = operator.index(value)
    return _ops.family_embed(contract["module"], self._settings, self._state(), sizes, positions, 0, count,
                             self._dtype(None))


def _embed_signature(contract):
    names = contract["embed_sizes"] or [contract["positions"]["name"]]
    return inspect.Signature([inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names])


def _point_forward(call, signature, doc):
    def forward(self, *args, **kwargs):
        return call(self, *args, **kwargs)
    forward.__signature__ = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                               *signature.parameters.values()])
    forward.__doc__ = doc
    return forward


def _term_view(entry):
    """A method reading the named entries of the module's attention terms, None where absent."""
    def view(self, dtype=None):
        tensors, spec = self.attention_terms(1, 1, dtype=dtype)
        found, at = {}, 0
        for kind, count, _ in _entries(spec):
            found[kind.split("(")[0]] = tensors[at]
            at += count
        return tuple(found.get(key) for key in entry["term_entries"])
    view.__name__ = entry["name"]
    view.__doc__ = f"({', '.join(entry['term_entries'])}) of the module's attention terms, None where absent."
    return view


def _method(entry):
    name, arguments = entry["name"], entry["arguments"]
    if entry["term_entries"]:
        return _term_view(entry)

    def method(self, *args, **kwargs):
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        values = call.arguments
        result = _ops.family_call(self._contract["module"], self._settings, self._state(), name,
                                  operator.index(values.get("q_len", 0)), operator.index(values.get("k_len", 0)),
                                  values.get("dtype"), _positions(self, values.get("positions")),
                                  operator.index(values.get("max_distance", 0)))
        if entry["outputs"] == 2:
            return tuple(result.unbind(0))
        if entry["property"] and result.dim() == 0:
            return float(result)
        return result

    signature = inspect.Signature([inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                     default=None if a == "dtype" else inspect.Parameter.empty)
                                   for a in arguments])
    if entry["property"]:
        method.__name__ = name
        method.__doc__ = f"The contract's {name} of the module."
        return property(method)
    method.__name__ = name
    method.__signature__ = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
                                              *signature.parameters.values()])
    method.__doc__ = f"The contract's {name} of the module's tensors (None when it acts in place)."
    return method


def _signature(contract):
    parameters = []
    for s in contract["settings"]:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if s["positional"] else inspect.Parameter.KEYWORD_ONLY
        default = inspect.Parameter.empty if s["required"] else None if s["type"] == "tensor" else s["default"]
        parameters.append(inspect.Parameter(s["name"], kind, default=default))
    return inspect.Signature(parameters)


def _docstring(contract):
    lines = [contract["summary"], "", "Arguments:"]
    for s in contract["settings"]:
        default = "" if s["required"] else " = None" if s["type"] == "tensor" else f" = {s['default']!r}"
        lines.append(f"    {s['name']} ({s['type']}{default}): {s['meaning']}")
    if contract["state"]:
        lines.append("")
        def kind(t):
            if t["borrowed"]:
                return "the layer's, borrowed"
            if t["parameter_when"]:
                return f"parameter when {t['parameter_when']}, else buffer"
            return "parameter" if t["parameter"] else "buffer"
        lines.append("Tensors: " + ", ".join(f"{t['python_name']} ({kind(t)})" for t in contract["state"]) + ".")
    return "\n".join(lines)


def generate(module_name):
    """{class name: class} for every contract of the catalog, as attributes of `module_name`."""
    classes = {}
    for contract in json.loads(_ops.family_catalog()):
        binding = _signature(contract)
        namespace = {
            "_contract": contract,
            "__signature__": binding,
            "__doc__": _docstring(contract),
            "__module__": module_name,
            "point": contract["point"],
            "registry_names": tuple(contract["families"]),
            "forward": {"queries_keys": _forward_queries_keys, "rotate": _rotate,
                        "relative": _relative_logits}.get(contract["forward"], _forward_lengths),
        }
        if contract["forward"] == "relative":
            namespace["logits"] = _relative_logits
            namespace["values"] = _relative_values
        if contract["pretrained"]:
            namespace[contract["pretrained_loader"]] = _loader(contract)
        if contract["forward"] == "rotate":
            namespace["_forward_signature"] = _rotate_signature(contract)
            namespace["_forward_parameters"] = _parameters(namespace["_forward_signature"])
            namespace["forward"] = _point_forward(_rotate, namespace["_forward_signature"], "The query/key point: "
                                                  "the inputs transformed at their positions (one tensor per input).")
        elif contract["forward"] == "embed":
            namespace["_forward_signature"] = _embed_signature(contract)
            namespace["_forward_parameters"] = _parameters(namespace["_forward_signature"])
            namespace["forward"] = _point_forward(_embed, namespace["_forward_signature"], "The input point: the "
                                                  "table's rows at the positions (or every cell of the grid).")
        for method in contract["methods"]:
            if not method["constant"]:
                namespace[method["name"]] = _method(method)
        classes[contract["module"]] = type(contract["module"], (FamilyModule,), namespace)
    return classes
