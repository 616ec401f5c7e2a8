"""torch.ops.posenc with torch's own argument errors turned into posenc's.

A call that does not match an op's schema (posenc.sinusoidal(3, 8.0)) makes
torch raise RuntimeError with the whole schema text; an allocation libtorch
cannot make raises RuntimeError "[enforce fail at alloc_cpu.cpp:...]". Users
are promised TypeError / ValueError naming the argument and the value, and
MemoryError for memory: this wrapper translates those two cases and passes
every other exception through unchanged.
"""

import re

import torch

# torch.compiler.is_compiling (torch >= 2.3): True while torch.compile traces; torch 1.13 has no tracer.
_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

_SCHEMA_TYPE = re.compile(r"Expected a value of type '([^']+)' for argument '([^']+)' but instead found type '([^']+)'")
_SCHEMA_VALUE = re.compile(r"^Value: (.*)$", re.MULTILINE)
_ALLOCATION = re.compile(r"can't allocate memory: you tried to allocate (\d+) bytes")


def _gigabytes(count):
    return f"{int(count) / 2**30:.1f} GiB"


def translate(name, error):
    """The exception posenc promises for `error` raised by op `name`, or None to re-raise it."""
    text = str(error)
    first = text.splitlines()[0] if text else ""
    found = _SCHEMA_TYPE.search(text)
    if found:
        expected, argument, actual = found.groups()
        value = _SCHEMA_VALUE.search(text)
        shown = f" ({value.group(1)})" if value else ""
        return TypeError(f"[{name}] {argument} must be {expected}, got {actual}{shown}")
    if "Declaration:" in text and first:
        # Other schema mismatches (a missing or extra argument): torch's first line names it.
        return TypeError(f"[{name}] {first.replace('posenc::', '')}")
    allocation = _ALLOCATION.search(text)
    if allocation:
        return MemoryError(f"[{name}] out of memory: could not allocate {_gigabytes(allocation.group(1))}")
    return None


def _checked(op, name):
    """op (a packet, or one overload such as op.out) raising posenc's exceptions; a plain function, which
    torch.compile traces (under its trace the op is called as it is)."""
    def call(*args, **kwargs):
        if _compiling():  # the tracer records the op itself; the messages are the eager call's
            return op(*args, **kwargs)
        try:
            return op(*args, **kwargs)
        except RuntimeError as error:
            translated = translate(name, error)
            if translated is None:
                raise
            raise translated from None
    return call


class CheckedOps:
    """Attribute access like torch.ops.posenc; each op raises posenc's exceptions."""

    def __init__(self, namespace):
        self._namespace = namespace

    def __getattr__(self, name):
        op = _checked(getattr(self._namespace, name), name)
        setattr(self, name, op)  # once per op
        return op
