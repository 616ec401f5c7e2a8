"""Plain float64 numpy transcriptions of the definitions in
include/posenc/analysis/{proximity,indicators,monotone_range}.h, written from
the formulas (loops, explicit ranks with ties at their mean rank, brute-force
ranges) and sharing nothing with the library; used by the Python API tests
(test_analysis.py) and the CLI tests (test_cli_analysis.py).
"""

import numpy as np


def reference_proximity(table, kind):
    """S[i, j] = PE[i] . PE[j] (dot) or the cosine, 0 where a row is all zeros."""
    t = np.asarray(table, dtype=np.float64)
    n = t.shape[0]
    s = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            dot = float(np.sum(t[i] * t[j]))
            if kind == "dot":
                s[i, j] = dot
            else:
                ni, nj = np.sqrt(np.sum(t[i] * t[i])), np.sqrt(np.sum(t[j] * t[j]))
                s[i, j] = 0.0 if ni == 0 or nj == 0 else dot / (ni * nj)
    return s


def ranks(values):
    """Ranks 1..n, ties sharing their mean rank."""
    values = list(values)
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            r[order[k]] = mean_rank
        i = j + 1
    return r


def spearman(x, y):
    """Pearson correlation of the ranks; 0 when y is constant."""
    if all(v == y[0] for v in y):
        return 0.0
    rx, ry = np.array(ranks(x)), np.array(ranks(y))
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return float(np.sum(rx * ry) / np.sqrt(np.sum(rx * rx) * np.sum(ry * ry)))


def reference_indicators(s, window=None):
    s = np.asarray(s, dtype=np.float64)
    n = s.shape[0]
    w = n - 1 if window is None else window
    rhos = []
    for x in range(n):
        for direction in (1, -1):
            reach = n - 1 - x if direction == 1 else x
            m_max = min(w, reach)
            if m_max < 2:
                continue
            # Offsets from 1: S[x, x] (|PE[x]|^2) tops its row and is no offset.
            m = np.arange(1, m_max + 1)
            rhos.append(spearman(m, s[x, x + direction * m]))
    monotonicity = -float(np.mean(rhos)) if rhos else 0.0  # W = 1 or n = 2: nothing to rank

    # Band 1 <= |y - x| <= W: the diagonal |PE[x]|^2 says nothing about offsets.
    offsets = np.subtract.outer(np.arange(n), np.arange(n)).T  # [x, y] -> y - x
    band = (np.abs(offsets) <= w) & (offsets != 0)
    values = s[band]
    diagonals = [d for d in range(-w, w + 1) if d != 0]
    within = sum(((s[offsets == d] - s[offsets == d].mean()) ** 2).sum() for d in diagonals)
    total = ((values - values.mean()) ** 2).sum()
    invariance = 1.0 if total == 0 else 1.0 - within / total

    a, b = [], []
    for x in range(n):
        for m in range(1, w + 1):
            if x + m < n and x - m >= 0:
                a.append(s[x, x + m])
                b.append(s[x, x - m])
    a, b = np.array(a), np.array(b)
    if len(a) == 0:
        return {"monotonicity": monotonicity, "translation_invariance": invariance, "symmetry": 1.0, "window": w}
    denom = a.var() + b.var() + (a.mean() - b.mean()) ** 2
    symmetry = 1.0 if denom == 0 else 2 * np.mean((a - a.mean()) * (b - b.mean())) / denom
    return {"monotonicity": monotonicity, "translation_invariance": invariance, "symmetry": float(symmetry),
            "window": w}


def reference_monotone_range(s):
    """Brute force: walk each row forward while proximity falls strictly."""
    s = np.asarray(s, dtype=np.float64)
    n = s.shape[0]
    per_row = []
    for x in range(n):
        r = 0
        while x + r + 1 <= n - 1 and s[x, x + r + 1] < s[x, x + r]:
            r += 1
        per_row.append(r)
    uncensored = [r for x, r in enumerate(per_row) if r != n - 1 - x]
    pool = uncensored if uncensored else per_row
    ordered = sorted(uncensored)
    return {
        "range": ordered[(len(ordered) - 1) // 2] if uncensored else n - 1,
        "all_censored": not uncensored,
        "min": min(pool),
        "max": max(pool),
        "mean": sum(pool) / len(pool),
        "uncensored_rows": len(uncensored),
        "per_row": per_row,
    }
