"""The violation-style indicators written plainly from include/posenc/analysis/indicators.h
in numpy float64 (pairs compared one by one, sums of squares per diagonal),
sharing nothing with the library."""

import numpy as np


def reference_violation_rate(s, window=None):
    """Inverted offset pairs m < m' (S[x, x+-m'] > S[x, x+-m]; ties one half) over all such pairs."""
    s = np.asarray(s, dtype=np.float64)
    n = s.shape[0]
    w = n - 1 if window is None else window
    violated, pairs = 0.0, 0
    for x in range(n):
        for sign in (1, -1):
            v = [s[x, x + sign * m] for m in range(1, w + 1) if 0 <= x + sign * m < n]
            for a in range(len(v)):
                for b in range(a + 1, len(v)):
                    violated += 1.0 if v[b] > v[a] else 0.5 if v[b] == v[a] else 0.0
                    pairs += 1
    return 0.5 if pairs == 0 else violated / pairs


def reference_variance_share(s, window=None):
    """Within-diagonal sum of squares over the band 1 <= |y - x| <= W / its total sum of squares."""
    s = np.asarray(s, dtype=np.float64)
    n = s.shape[0]
    w = n - 1 if window is None else window
    diagonals = [np.diagonal(s, d) for d in range(-w, w + 1) if d != 0]
    band = np.concatenate(diagonals)
    within = sum(np.sum((d - d.mean()) ** 2) for d in diagonals)
    return within / np.sum((band - band.mean()) ** 2)
