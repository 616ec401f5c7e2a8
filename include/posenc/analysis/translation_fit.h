// How linearly translatable a table is: does a D x D matrix T(delta) with
// PE[p + delta] = T(delta) PE[p] exist?
//
// The residual for one delta is relative:
//   r(delta) = ||Y - X T^T||_F / ||Y||_F,  X = PE[0 .. n-1-delta], Y = PE[delta .. n-1]
// (0 when Y is all zeros and the fit is exact). T = 0 gives 1, so a useful
// operator gives r well below 1.
//
// exact:  T(delta) given (the sinusoid's and RoPE's block rotations,
//         kernels/translation.h): r ~ 1e-15 for float64 tables.
// fitted: the best T by ridge least squares, judged out of sample: the pairs
//         (X[p], Y[p]) are split into `folds` folds (shuffled by `seed`); T is
//         fitted on the other folds with ridge lambda = 1e-10 * trace(X^T X) / D
//         (solved in the smaller of the primal D x D or dual n x n form) and
//         r is computed on the held-out fold; the folds' squared errors are
//         pooled. Out of sample, so a table with D >= n (BERT: 512 x 768) is
//         not trivially translatable; a sinusoid gives ~1e-6, a random table ~1.
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
//   "[translation] delta must be in [1, 7] for a table of 8 positions, got 8"
//   "[translation] operator for delta 2 must be 16 x 16, got 16 x 8"
TranslationResidual translation_residual_exact(const Matrix& table, std::span<const int64_t> deltas,
                                               const std::function<Matrix(int64_t)>& operator_for);

// folds in [2, n - delta] for every delta. Throws
//   "[translation] folds must be in [2, 7] for delta 1 on a table of 8 positions, got 9"
TranslationResidual translation_residual_fitted(const Matrix& table, std::span<const int64_t> deltas,
                                                int64_t folds = 5, uint64_t seed = 0);

}  // namespace posenc::analysis
