// The relative probe's model (private to posenc::analysis): logistic
// regression on pairs of rows, and the L-BFGS that fits it.
//
//   logit(i, j) = b + u . z[i] + v . z[j],  theta = (u [D], v [D], b),
//   f(theta) = mean over the training samples of the log loss
//              + (l2 / 2)(|u|^2 + |v|^2)      (the bias is not penalized)
// The default protocol's samples are its pairs in both orders (label 1 for
// (i, j), i < j; label 0 for (j, i)) with l2 = kL2; the pe-study protocol's are
// ordered pairs each used once, with sklearn's C = 1: l2 = 1 / samples.
// A pair's features are two rows, so f needs only z u and z v per position:
// O(n D + pairs) per evaluation instead of O(pairs D).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace posenc::analysis::detail {

constexpr double kL2 = 1e-4;          // L2 weight on u and v
constexpr int kMaxIterations = 100;   // L-BFGS iterations at most (bounded time)
constexpr double kTolerance = 1e-10;  // stop when a step lowers f by less (relative) or |grad|_inf is below
constexpr int kMemory = 10;           // L-BFGS (s, y) pairs kept

struct Pair {
  int64_t i, j;  // i < j
};

// One ordered pair (first, second) with its label: 1 when first < second.
struct OrderedPair {
  int64_t first, second;
  double label;
};

class PairLogistic {
 public:
  // z [n, d] row-major; z and train are kept by reference. Each pair in both orders, l2 = kL2.
  PairLogistic(const std::vector<double>& z, int64_t n, int64_t d, const std::vector<Pair>& train)
      : z_(z), n_(n), d_(d), train_(train) {}
  // Each sample once, with the given l2 (copied).
  PairLogistic(const std::vector<double>& z, int64_t n, int64_t d, std::vector<OrderedPair> samples, double l2)
      : z_(z), n_(n), d_(d), train_(no_pairs()), samples_(std::move(samples)), l2_(l2) {}

  int64_t size() const noexcept { return 2 * d_ + 1; }
  double logit(const std::vector<double>& theta, int64_t i, int64_t j) const noexcept;
  // f(theta); grad receives its gradient.
  double evaluate(const std::vector<double>& theta, std::vector<double>& grad) const;

 private:
  static const std::vector<Pair>& no_pairs() {
    static const std::vector<Pair> none;
    return none;
  }
  const std::vector<double>& z_;
  int64_t n_, d_;
  const std::vector<Pair>& train_;
  std::vector<OrderedPair> samples_;
  double l2_ = kL2;
};

// L-BFGS from theta = 0: memory kMemory, Armijo backtracking from step 1,
// at most max_iterations steps, stopping early at |grad|_inf <= kTolerance or
// when a step lowers f by <= kTolerance * max(|f|, 1). Deterministic.
std::vector<double> minimize(const PairLogistic& model, int max_iterations = kMaxIterations);

}  // namespace posenc::analysis::detail
