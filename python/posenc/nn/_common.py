"""Shared checks of the posenc.nn modules: one message style, raised once at construction."""

import operator


def fail(name, message):
    """ValueError "[Name] message": the library's format (the op tag in brackets)."""
    raise ValueError(f"[{name}] {message}")


def as_int(name, argument, value):
    """value as an int, else TypeError "[Name] argument must be an int, got float"."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"[{name}] {argument} must be an int, got {type(value).__name__}") from None


def integer(name, argument, value, *, minimum):
    """value as an int >= minimum, else ValueError "[Name] argument must be >= minimum, got value"."""
    number = as_int(name, argument, value)
    if number < minimum:
        fail(name, f"{argument} must be >= {minimum}, got {number}")
    return number


def choice(name, argument, value, allowed):
    if value not in allowed:
        fail(name, f"{argument} must be " + " or ".join(f"'{a}'" for a in allowed) + f", got '{value}'")
    return value

