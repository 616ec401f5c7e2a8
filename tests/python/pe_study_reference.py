"""The pe-study relative probe written plainly from docs/analysis.md, in numpy
float64 and with its own solver (damped Newton on the full Hessian), sharing
no code with posenc: std::mt19937_64 in pure Python, the documented bounded
draw and partial Fisher-Yates, stratified round-robin folds, and sklearn's
LogisticRegression(C=1) objective, mean log loss + |w|^2 / (2 N) with the
bias not penalized.
"""

import numpy as np

_MASK = (1 << 64) - 1


class Mt19937_64:
    """std::mt19937_64 (the C++ standard fixes its output)."""

    def __init__(self, seed):
        self.state = [seed & _MASK]
        for i in range(1, 312):
            previous = self.state[-1]
            self.state.append((6364136223846793005 * (previous ^ (previous >> 62)) + i) & _MASK)
        self.index = 312

    def _twist(self):
        upper, lower = 0xFFFFFFFF80000000, 0x7FFFFFFF
        for i in range(312):
            x = (self.state[i] & upper) | (self.state[(i + 1) % 312] & lower)
            x_a = x >> 1
            if x & 1:
                x_a ^= 0xB5026F5AA96619E9
            self.state[i] = self.state[(i + 156) % 312] ^ x_a
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.state[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & _MASK


def uniform_below(rng, bound):
    """Draw r until r >= 2^64 mod bound; r mod bound."""
    threshold = (1 << 64) % bound
    while True:
        r = rng()
        if r >= threshold:
            return r % bound


def sample_without_replacement(total, count, rng):
    """The first `count` entries of a partial Fisher-Yates over 0 .. total-1."""
    moved = {}
    sample = []
    for t in range(count):
        j = t + uniform_below(rng, total - t)
        value_j = moved.get(j, j)
        moved[j] = moved.get(t, t)
        moved[t] = value_j
        sample.append(value_j)
    return sample


def fit_logistic(x, y):
    """argmin mean log loss + |w|^2 / (2 N), bias not penalized: damped Newton, float64."""
    n, d = x.shape
    features = np.hstack([x, np.ones((n, 1))])
    penalty = np.full(d + 1, 1.0 / n)
    penalty[d] = 0.0

    def objective(theta):
        z = features @ theta
        return np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(penalty * theta * theta)

    theta = np.zeros(d + 1)
    f = objective(theta)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(features @ theta)))
        grad = features.T @ (p - y) / n + penalty * theta
        if np.max(np.abs(grad)) < 1e-12:
            break
        hess = (features * (p * (1 - p))[:, None]).T @ features / n + np.diag(penalty)
        hess[d, d] += 1e-12  # an all-one-label fold leaves the bias direction flat
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while objective(theta - t * step) > f - 1e-4 * t * grad @ step and t > 1e-10:
            t *= 0.5
        theta = theta - t * step
        f_next = objective(theta)
        if f - f_next <= 1e-15 * max(abs(f), 1.0):
            break
        f = f_next
    return theta[:d], theta[d]


def pe_study_relative_error(table, folds=5, seed=0, pairs=None):
    """(error, pairs used) of the pe-study relative probe (docs/analysis.md)."""
    table = np.asarray(table, dtype=np.float64)
    rows = min(table.shape[0], 512)
    used = min(rows if pairs is None else pairs, rows * rows)
    drawn = sample_without_replacement(rows * rows, used, Mt19937_64(seed))
    first = np.array([q // rows for q in drawn])
    second = np.array([q % rows for q in drawn])
    label = (first < second).astype(np.float64)
    fold = np.empty(used, dtype=np.int64)
    t = 0
    for value in (0.0, 1.0):  # label 0 in draw order, then label 1: round-robin
        for k in range(used):
            if label[k] == value:
                fold[k] = t % folds
                t += 1
    x = np.hstack([table[first], table[second]])
    rates = []
    for f in range(folds):
        train, test = fold != f, fold == f
        w, b = fit_logistic(x[train], label[train])
        predicted = (x[test] @ w + b) > 0
        rates.append(np.mean(predicted != (label[test] == 1.0)))
    return float(np.mean(rates)), used
