// Probes of Wang & Chen (EMNLP 2020, "What do position embeddings learn?"):
// what a table's rows tell a linear model about positions.
//
// absolute: ridge linear regression from PE[p] (plus an unpenalized bias: X and
//   p centred on the training rows) to p, k-fold cross-validation over
//   positions shuffled by `seed` (mt19937_64 Fisher-Yates; the t-th shuffled
//   position goes to fold t mod folds; docs/analysis.md has the exact rule);
//   the score is the mean absolute error of the rounded prediction,
//   |round(p_hat) - p|, over every held-out position.
//   lambda = 1e-8 * trace(Xc^T Xc) / D (Xc: the centred training rows) keeps
//   D >= n tables solvable (dual form). 0 for a table that encodes p linearly
//   (index, sinusoidal with enough low frequencies); about n/4 for one that
//   does not (a constant or one-hot table predicts the training mean, and
//   mean |p - (n-1)/2| = n/4).
// relative: logistic regression on [PE[i], PE[j]] (plus a bias) predicting
//   whether i < j, on `pairs` unordered pairs {i, j} drawn without replacement
//   by `seed` (partial Fisher-Yates over the n (n - 1) / 2 pairs; the t-th
//   drawn pair goes to fold t mod folds), each used in both orders, k-fold over
//   pairs (so a held-out pair was never seen in either order). Columns are
//   standardized by the training pairs' mean and deviation (a constant column
//   becomes 0), so the probe does not depend on the table's scale. Loss: mean
//   log loss + (1e-4 / 2) |w|^2 (bias not penalized), minimized from 0 by
//   L-BFGS (memory 10, Armijo backtracking, at most 100 iterations, stopping
//   early when a step lowers the loss by < 1e-10 relative): deterministic.
//   "i < j" is predicted when the logit is > 0. The score is the held-out error
//   rate in [0, 1]: 0.5 is chance (a constant table gives exactly 0.5).
//   Positions are shared between folds, so a table whose rows are linearly
//   independent (D >= n, even random) can learn a score per position.
// relative, protocol pe-study: the released script of Wang & Chen
//   (github.com/MiuLab/PE-Study, relative.py; docs/analysis.md). The first
//   R = min(n, 512) rows; `pairs` (default R, as the script's x.shape[0])
//   ordered pairs (i, j) drawn without replacement from all R^2, i = j
//   included (partial Fisher-Yates over q = i R + j, the same rule), each used
//   once with label [i < j]; folds stratified by label (the t-th pair in the
//   order "label 0 in draw order, then label 1" goes to fold t mod folds); the
//   table as it is (no standardization: the probe depends on its scale);
//   sklearn's LogisticRegression defaults: mean log loss + (1 / (2 N)) |w|^2
//   (C = 1 on the summed loss, N training pairs, bias not penalized), at most
//   1000 L-BFGS iterations; the score is the mean over folds of each fold's
//   error rate (cross_val_score(...).mean()). The absolute probe is the same
//   under both protocols.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

// How the relative probe is run: posenc's (kDefault) or Wang & Chen's script (kPeStudy).
enum class ProbeProtocol { kDefault, kPeStudy };

struct ProbeOptions {
  int64_t folds = 5;
  uint64_t seed = 0;
  // Relative probe: pairs drawn; nullopt: 4096 (default protocol, capped at
  // n (n - 1) / 2) or min(n, 512) (pe-study, capped at min(n, 512)^2).
  std::optional<int64_t> pairs;
  ProbeProtocol protocol = ProbeProtocol::kDefault;
};

struct ProbeResult {
  double absolute_mae = 0;
  double relative_error = 0;
  int64_t folds = 0;
  uint64_t seed = 0;
  int64_t pairs = 0;  // pairs used by the relative probe
  ProbeProtocol protocol = ProbeProtocol::kDefault;
};

// "default" | "pe-study"; else "[probe] protocol must be default or pe-study, got 'x'".
ProbeProtocol parse_probe_protocol(std::string_view name);
std::string probe_protocol_name(ProbeProtocol protocol);

// table [n, d], n >= folds >= 2. Scale-free at any scale (an extreme table is
// probed scaled by a power of two). Throws
//   "[probe] the table has 1 position; the probes need at least 2 (cross-validation holds out positions in at
//    least 2 folds)"   (one line)
//   "[probe] folds must be >= 2, got 1"
//   "[probe] the table has 3 positions; 5 folds need at least 5 (one held-out position per fold): use 2 .. 3 folds
//    or a table of at least 5 positions"   (one line)
// and as validate_table("probe", "table", ...); the relative probe (and probe) also
//   "[probe] pairs must be >= 1, got 0"
//   "[probe] pairs must be at least folds = 5, got 3"
//   "[probe] the table has 2 positions, hence 1 pair; 2 folds need at least 2 (one held-out pair per fold): use
//    a table of at least 3 positions"   (one line; only n = 2 has fewer pairs than folds, default protocol)
//   "[probe] protocol must be default or pe-study, got 'x'"   (an enum value out of range)
double absolute_probe_mae(const Matrix& table, const ProbeOptions& options = {});
double relative_probe_error(const Matrix& table, const ProbeOptions& options = {});
ProbeResult probe(const Matrix& table, const ProbeOptions& options = {});

}  // namespace posenc::analysis
