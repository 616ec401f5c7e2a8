// Probes of Wang & Chen (EMNLP 2020, "What do position embeddings learn?"):
// what a table's rows tell a linear model about positions.
//
// absolute: ridge linear regression from PE[p] (plus a bias) to p, k-fold
//   cross-validation over positions shuffled by `seed`; the score is the mean
//   absolute error of the rounded prediction, |round(p_hat) - p|, over every
//   held-out position. lambda = 1e-8 * trace(X^T X) / D keeps D >= n tables
//   solvable (dual form). 0 for a table that encodes p linearly (index,
//   sinusoidal with enough low frequencies); about n/3 for one that does not
//   (a constant table predicts the training mean).
// relative: logistic regression on [PE[i], PE[j]] (plus a bias) predicting
//   whether i < j, on `pairs` ordered pairs i != j drawn by `seed` (both
//   orders of each drawn pair), k-fold over pairs; L2 weight 1e-4, fitted by a
//   fixed number of L-BFGS iterations from 0 (deterministic). The score is
//   the held-out error rate in [0, 1]: 0.5 is chance.
#pragma once

#include <cstdint>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

struct ProbeOptions {
  int64_t folds = 5;
  uint64_t seed = 0;
  int64_t pairs = 4096;  // relative probe: pairs drawn (capped at n (n - 1) / 2)
};

struct ProbeResult {
  double absolute_mae = 0;
  double relative_error = 0;
  int64_t folds = 0;
  uint64_t seed = 0;
  int64_t pairs = 0;  // pairs used by the relative probe
};

// table [n, d], n >= folds. Throws
//   "[probe] folds must be in [2, 8] for a table of 8 positions, got 9"
//   "[probe] pairs must be >= 1, got 0"
// and as validate_table("probe", "table", ...).
double absolute_probe_mae(const Matrix& table, const ProbeOptions& options = {});
double relative_probe_error(const Matrix& table, const ProbeOptions& options = {});
ProbeResult probe(const Matrix& table, const ProbeOptions& options = {});

}  // namespace posenc::analysis
