// The relative probe's model (private to posenc::analysis): logistic
// regression on pairs of rows, and the L-BFGS that fits it.
//
//   logit(i, j) = b + u . z[i] + v . z[j],  theta = (u [D], v [D], b),
//   f(theta) = mean over the training pairs, both orders, of the log loss
//              (label 1 for (i, j), i < j; label 0 for (j, i))
//              + (kL2 / 2)(|u|^2 + |v|^2)     (the bias is not penalized)
// A pair's features are two rows, so f needs only z u and z v per position:
// O(n D + pairs) per evaluation instead of O(pairs D).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc::analysis::detail {

constexpr double kL2 = 1e-4;          // L2 weight on u and v
constexpr int kMaxIterations = 100;   // L-BFGS iterations at most (bounded time)
constexpr double kTolerance = 1e-10;  // stop when a step lowers f by less (relative) or |grad|_inf is below
constexpr int kMemory = 10;           // L-BFGS (s, y) pairs kept

struct Pair {
  int64_t i, j;  // i < j
};

class PairLogistic {
 public:
  // z [n, d] row-major; both are kept by reference.
  PairLogistic(const std::vector<double>& z, int64_t n, int64_t d, const std::vector<Pair>& train)
      : z_(z), n_(n), d_(d), train_(train) {}

  int64_t size() const noexcept { return 2 * d_ + 1; }
  double logit(const std::vector<double>& theta, int64_t i, int64_t j) const noexcept;
  // f(theta); grad receives its gradient.
  double evaluate(const std::vector<double>& theta, std::vector<double>& grad) const;

 private:
  const std::vector<double>& z_;
  int64_t n_, d_;
  const std::vector<Pair>& train_;
};

// L-BFGS from theta = 0: memory kMemory, Armijo backtracking from step 1,
// at most kMaxIterations steps, stopping early at |grad|_inf <= kTolerance or
// when a step lowers f by <= kTolerance * max(|f|, 1). Deterministic.
std::vector<double> minimize(const PairLogistic& model);

}  // namespace posenc::analysis::detail
