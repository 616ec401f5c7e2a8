// How linearly translatable a table is: does a D x D matrix T(delta) with
// PE[p + delta] = T(delta) PE[p] exist?
//
// The residual for one delta is relative:
//   r(delta) = ||Y - X T^T||_F / ||Y||_F,  X = PE[0 .. n-1-delta], Y = PE[delta .. n-1]
// T = 0 gives 1, so a useful operator gives r well below 1. When Y is all
// zeros r is 0 / 0: refused (an all-zero table is not "exactly translatable").
// r is scale-free and computed so at any scale (a table of 1e200s is fitted
// as the same table scaled by a power of two, which is exact).
//
// exact:  T(delta) given (the sinusoid's block rotations from
//         kernels::translation_matrix, RoPE's from rotation_operator below):
//         r ~ 1e-15 for float64 tables.
// fitted: the best T by ridge least squares, judged out of sample: the pairs
//         (X[p], Y[p]), p = 0 .. N-1 (N = n - delta), are split into `folds`
//         folds by a Fisher-Yates shuffle seeded with `seed` (mt19937_64; the
//         t-th shuffled pair goes to fold t mod folds; docs/analysis.md has the
//         exact rule); T is fitted on the other folds with ridge
//         lambda = 1e-10 * trace(X^T X) / D over the training pairs (x 10 until
//         the Cholesky factorization succeeds in float64; T = 0 when the training
//         X is all zeros), solved in the primal D x D form when D <= every
//         fold's training pairs, else in the dual n x n form; r is computed
//         on the held-out fold and the folds' squared errors are pooled.
//         Out of sample, so a table with D >= n (BERT: 512 x 768) is not
//         trivially translatable; a sinusoid gives ~1e-6, a random table ~1
//         or more (an overfitted T does worse than T = 0).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

struct TranslationResidual {
  std::string method;            // "exact" | "least-squares"
  std::vector<int64_t> deltas;
  std::vector<double> residuals; // one per delta
  double max_residual = 0;       // over deltas
};

// 1, 2, 4, ... up to max(1, positions / 4).
std::vector<int64_t> default_deltas(int64_t positions);

// operator_for(delta) returns T(delta) as a D x D matrix. Throws
//   "[translation] deltas must hold at least 1 delta, got 0"
//   "[translation] delta must be in [1, 7] for a table of 8 positions, got 8"
//   "[translation] operator for delta 2 must be 16 x 16, got 16 x 8"
//   "[translation] the targets of delta 4 (rows 4 .. 5 of the table) must not all be zero, got all zeros: the
//    relative residual is undefined"   (one line)
// and as validate_table("translation", "table" / "operator for delta 2", ...).
// deltas_done, when given, is called after each delta with the number done
// (progress display; the library prints nothing).
TranslationResidual translation_residual_exact(const Matrix& table, std::span<const int64_t> deltas,
                                               const std::function<Matrix(int64_t)>& operator_for,
                                               const std::function<void(size_t)>& deltas_done = {});

// folds in [2, n - delta] for every delta (checked in the order given). Throws
// the delta, zero-target and table errors above and
//   "[translation] folds must be in [2, 7] for delta 1 on a table of 8 positions, got 9"
// Cost per delta (N = n - delta): primal O(folds (N D^2 + D^3)) time and
// 2 (folds + 2) D^2 doubles; dual (D > the training pairs) O(n^2 D + folds N^3)
// time and n^2 + 2 N^2 doubles. Deltas run one after another.
TranslationResidual translation_residual_fitted(const Matrix& table, std::span<const int64_t> deltas,
                                                int64_t folds = 5, uint64_t seed = 0,
                                                const std::function<void(size_t)>& deltas_done = {});

// One (sin, cos) column pair of angular frequency omega: PE[p][sin_col] =
// a sin(p omega + phi), PE[p][cos_col] = a cos(p omega + phi).
struct RotationPair {
  int64_t sin_col = 0;
  int64_t cos_col = 0;
  double omega = 0.0;
};

// T(delta) [dim, dim] with PE[p + delta] = T(delta) PE[p] for a table laid out
// as `pairs` (RoPE's cos/sin tables, any sinusoid-like layout): each pair is
// rotated by the angle delta * omega,
//   T[s][s] = T[c][c] = cos(delta omega),  T[s][c] = sin(delta omega) = -T[c][s];
// columns in no pair are carried unchanged (identity: right for constant
// columns). T(a) T(b) = T(a + b), T(-a) = T(a)^T. For the sinusoidal layouts
// kernels::translation_matrix gives the same matrix. Throws
//   "[translation] dim must be in [1, 46340] (a dense dim x dim matrix), got 0"
//   "[translation] pair 1 sin_col must be in [0, 7], got 9"   (likewise cos_col)
//   "[translation] pair 0 sin_col and cos_col must differ, got 3 and 3"
//   "[translation] pair columns must be distinct, got column 3 in pairs 0 and 2"
//   "[translation] pair 0 omega must be finite, got inf"
Matrix rotation_operator(int64_t dim, std::span<const RotationPair> pairs, int64_t delta);

}  // namespace posenc::analysis
