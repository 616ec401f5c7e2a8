"""Plain float64 references for the posenc ops, written from the formulas in
include/posenc/kernels/*.h with numpy and Python's math/decimal; they call
nothing from posenc."""

import math
from decimal import Decimal, localcontext

import numpy as np

LAYOUTS = ("interleaved", "half", "cos-sin")

# pi to 60 digits, for reducing exact angles.
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494")


def frequencies(dim, base=10000.0):
    """omega_i = base^(-2i/dim), float64."""
    return np.array([base ** (-2.0 * i / dim) for i in range(dim // 2)], dtype=np.float64)


def place(sin, cos, layout):
    """[N, D/2] sines and cosines -> [N, D] in a layout."""
    n, half = sin.shape
    out = np.empty((n, 2 * half), dtype=np.float64)
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = sin, cos
    elif layout == "half":
        out[:, :half], out[:, half:] = sin, cos
    elif layout == "cos-sin":
        out[:, 0::2], out[:, 1::2] = cos, sin
    else:
        raise ValueError(layout)
    return out


def sinusoids(positions, omega, layout="interleaved", scale=1.0):
    """[N, 2*len(omega)]: scale * sin / cos of p * omega_i (float64 angles)."""
    p = np.asarray(positions, dtype=np.float64).reshape(-1, 1)
    angles = p * np.asarray(omega, dtype=np.float64).reshape(1, -1)
    return scale * place(np.sin(angles), np.cos(angles), layout)


def sinusoidal(positions, dim, base=10000.0, layout="interleaved", scale=1.0):
    return sinusoids(positions, frequencies(dim, base), layout, scale)


def sinusoidal_exact(positions, dim, base=10000.0, layout="interleaved"):
    """Like sinusoidal(), with p * omega formed and reduced modulo 2*pi in
    60-digit decimal arithmetic before the float64 sin/cos: accurate to
    ~1e-16 at any position, the yardstick for the float32 precision claims."""
    with localcontext() as ctx:
        ctx.prec = 60
        omega = [Decimal(base) ** (Decimal(-2 * i) / Decimal(dim)) for i in range(dim // 2)]
        two_pi = 2 * _PI
        reduced = [[float((Decimal(int(p)) * w) % two_pi) for w in omega] for p in positions]
    angles = np.array(reduced, dtype=np.float64).reshape(len(positions), dim // 2)
    return place(np.sin(angles), np.cos(angles), layout)


def sinusoidal_fp32_formula(positions, dim, base=10000.0, layout="interleaved"):
    """The common float32 formula: omega rounded to float32, p rounded to
    float32, their product rounded to float32, then sin/cos of that angle."""
    omega32 = frequencies(dim, base).astype(np.float32)
    p32 = np.asarray(positions, dtype=np.float64).astype(np.float32).reshape(-1, 1)
    angles = (p32 * omega32.reshape(1, -1)).astype(np.float32).astype(np.float64)
    return place(np.sin(angles), np.cos(angles), layout)


def naive(kind, positions, dim, length=0, base=10000.0):
    """The naive encodings of kernels/naive.h, [N, dim] float64."""
    positions = [int(p) for p in positions]
    out = np.zeros((len(positions), dim), dtype=np.float64)
    big_l = length if length > 0 else len(positions)
    for k, p in enumerate(positions):
        for j in range(dim):
            if kind == "index":
                value = p
            elif kind == "normalized":
                value = 0.0 if big_l == 1 else p / (big_l - 1)
            elif kind == "binary":
                value = (p >> j) & 1 if j < 64 else 0
            elif kind == "signed-binary":
                value = 2 * ((p >> j) & 1 if j < 64 else 0) - 1
            elif kind == "sine-binary":
                value = math.sin(p * math.pi / 2 ** (j + 1))
            elif kind == "sine-only":
                value = math.sin(p * base ** (-j / dim))
            else:
                raise ValueError(kind)
            out[k, j] = value
    return out


def _axis(size, axis_dim, base, layout, normalize, normalize_scale):
    """1D encoding of the coordinates 0..size-1 of one grid axis."""
    if normalize:
        coords = [0.0 if size == 1 else c / (size - 1) * normalize_scale for c in range(size)]
    else:
        coords = list(range(size))
    return sinusoidal(coords, axis_dim, base, layout)


def grid_2d(height, width, dim, base=10000.0, layout="interleaved", normalize=False,
            normalize_scale=2 * math.pi):
    """[H*W, dim]: row y*W + x is [PE_y(y), PE_x(x)], each dim/2 wide."""
    ys = _axis(height, dim // 2, base, layout, normalize, normalize_scale)
    xs = _axis(width, dim // 2, base, layout, normalize, normalize_scale)
    return np.array([np.concatenate([ys[y], xs[x]]) for y in range(height) for x in range(width)])


def grid_3d(frames, height, width, dim, base=10000.0, layout="interleaved", normalize=False,
            normalize_scale=2 * math.pi):
    """[F*H*W, dim]: row (t*H + y)*W + x is [PE_t(t), PE_y(y), PE_x(x)], each dim/3 wide."""
    ts = _axis(frames, dim // 3, base, layout, normalize, normalize_scale)
    ys = _axis(height, dim // 3, base, layout, normalize, normalize_scale)
    xs = _axis(width, dim // 3, base, layout, normalize, normalize_scale)
    return np.array([np.concatenate([ts[t], ys[y], xs[x]])
                     for t in range(frames) for y in range(height) for x in range(width)])
