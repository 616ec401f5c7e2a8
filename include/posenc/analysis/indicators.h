// The three properties of Wang et al. (ICLR 2021, "On position embeddings in
// BERT") as scale-free statistics of a proximity matrix S [n, n] (any matrix
// indexed by positions: dot/cosine proximity, an attention bias, an averaged
// attention map). Offsets m = 1 .. W, W = window (default n - 1).
//
// monotonicity in [-1, 1]: for each row x and direction s = +1, -1, the
//   sequence v_m = S[x, x + s m], m = 1 .. M with M = min(W, how far the row
//   reaches) >= 2; rho = Spearman's rank correlation of (m, v_m) (ties take
//   their mean rank; rho = 0 when v is constant). monotonicity = -mean rho over
//   all such sequences: 1 when proximity falls strictly with the offset in
//   every row and both directions, -1 when it rises, 0 in expectation when the
//   entries of each row are exchangeable (an i.i.d. random table), and 0 when
//   no sequence exists (W = 1 or n = 2). The diagonal m = 0 is left out: it
//   tops its row by construction (|PE[x]|^2; 1 under cosine), and ranking it
//   made random tables read +0.05 .. +0.09.
// translation_invariance in [0, 1]: over the band B = {(x, y): 1 <= |y - x| <= W}
//   (the diagonal is left out: |PE[x]|^2 is not about offsets, and its large
//   values would make every dot-product matrix look invariant), the share of
//   S's variance explained by the offset y - x (the correlation ratio eta^2):
//   1 - sum_B (S - mean of its diagonal)^2 / sum_B (S - mean_B)^2;
//   1 for a Toeplitz matrix (constant diagonals). When S is constant on B
//   (to within 1e-12 of its size: constant_on_band below; the proximity of
//   an all-zero or constant table) the ratio is 0 / 0 (or round-off) and
//   the indicators are refused rather than read as "perfectly invariant".
// symmetry in [-1, 1]: the pairs (a, b) = (S[x, x + m], S[x, x - m]) for every
//   x and m = 1 .. W with both inside; Lin's concordance correlation
//   2 cov(a, b) / (var a + var b + (mean a - mean b)^2) (population moments):
//   1 exactly when a = b (every row mirrors about its diagonal entry: x is as
//   close to x + m as to x - m; not the same as S = S^T, which dot and cosine
//   proximity always are), -1 when a = -b with zero means; 1 when the
//   denominator is 0 while S varies on B (then a = b: every pair mirrors) and
//   when no pair exists (n = 2).
// Violation-style readings of the first two (posenc's own, docs/analysis.md):
// monotonicity_violation_rate in [0, 1]: over the same sequences v_m, m = 1 .. M
//   (every row x, both directions, M >= 2), the share of the pairs m < m' that
//   are inverted, v_m' > v_m (the farther offset is more similar), a tie
//   v_m' = v_m counting one half; pooled over all M (M - 1) / 2 pairs of all
//   sequences. 0 when proximity falls strictly with the offset everywhere, 1
//   when it rises, 0.5 in expectation for exchangeable rows (a random table),
//   and 0.5 when no pair exists (W = 1 or n = 2: no evidence, as
//   monotonicity reads 0 there).
// within_diagonal_variance_share in [0, 1]: sum over the offsets d = +-1 .. +-W
//   of the within-diagonal sum of squares sum_x (S[x, x + d] - mean_d)^2,
//   divided by the total sum of squares over B: the share of S's variance
//   the offset does not explain, i.e. 1 - translation_invariance, formed as a
//   quotient rather than a difference so that a share of 1e-20 is not rounded
//   to 0. 0 exactly for a Toeplitz matrix, 1 when every diagonal has the same mean.
// Scale: every indicator is scale-free, and is computed so at any scale: S
// times 1e160 or 1e-200 gives the same numbers as S (within the rounding of the
// scaled values themselves).
#pragma once

#include <cstdint>
#include <optional>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

struct Indicators {
  double monotonicity = 0;
  double translation_invariance = 0;
  double symmetry = 0;
  double monotonicity_violation_rate = 0;     // 0: falls everywhere, 0.5: no trend
  double within_diagonal_variance_share = 0;  // 0: Toeplitz (= 1 - translation_invariance)
  int64_t window = 0;                         // the W used
};

// S square, n >= 2, finite, not constant on B; window in [1, n - 1]. Throws
//   "[indicators] window must be in [1, 7] for an 8 x 8 matrix, got 9"
//   "[indicators] matrix must be at least 2 x 2, got 1 x 1"
//   "[indicators] matrix must vary over the offsets 1 .. 7 (1 <= |y - x| <= 7), got S[x, y] = 0 there to within
//    1e-12 (relative): the indicators are undefined"   (one line)
// and as validate_square("indicators", "matrix", ...).
Indicators indicators(const Matrix& s, std::optional<int64_t> window = std::nullopt);

// Whether every S[x, y] with 1 <= |y - x| <= window is the same number up to
// round-off: max - min <= 1e-12 max(|max|, |min|) (the case indicators()
// refuses; rows equal up to rounding give such a band). S square, n >= 2,
// window in [1, n - 1]; unchecked.
bool constant_on_band(const Matrix& s, int64_t window);

}  // namespace posenc::analysis
