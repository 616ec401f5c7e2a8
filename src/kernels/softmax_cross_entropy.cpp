// Row-wise softmax cross-entropy and its gradient (posenc/kernels/softmax_cross_entropy.h).
#include "posenc/kernels/softmax_cross_entropy.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention_simd.h"
#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// Below this many logits a parallel region costs more than it saves.
constexpr int64_t kParallelLogits = int64_t{1} << 16;
// Vectors summed in T before the partial sum goes to double.
constexpr int64_t kFloatRun = 32;

struct RowResult {
  double loss = 0;
  bool correct = false;
};

template <class T>
RowResult cross_entropy_row(T* z, int64_t vocab, int64_t target, bool want_gradient, T scale) {
  using S = detail::Simd<T>;
  using V = typename S::V;
  constexpr int64_t kL = S::kLanes;
  const int64_t whole = vocab / kL * kL;
  const T target_logit = z[target];

  // Pass 1: the largest logit and its first position; per lane the first position of the lane's largest.
  const T lowest = -std::numeric_limits<T>::infinity();
  V best = detail::broadcast<T>(lowest);
  V at = detail::broadcast<T>(T(-1));
  V index = detail::lane_index<T>();
  for (int64_t j = 0; j < whole; j += kL) {
    const V x = S::load(z + j);
    const auto greater = x > best;
    best = greater ? x : best;
    at = greater ? index : at;
    index += T(kL);
  }
  T m = lowest;
  int64_t argmax = -1;
  for (int64_t l = 0; l < kL; ++l) {
    const int64_t position = static_cast<int64_t>(at[l]);  // exact: vocab < 2^24 is checked
    if (best[l] > m || (best[l] == m && position >= 0 && (argmax < 0 || position < argmax))) {
      m = best[l];
      argmax = position;
    }
  }
  for (int64_t j = whole; j < vocab; ++j) {
    if (z[j] > m) m = z[j], argmax = j;
  }

  // Pass 2: s = sum e^(z - m); with a gradient the exponentials replace the logits.
  const V mv = detail::broadcast<T>(m);
  double s = 0;
  V run{};
  int64_t in_run = 0;
  for (int64_t j = 0; j < whole; j += kL) {
    const V e = detail::exp_nonpositive<T>(S::load(z + j) - mv);
    if (want_gradient) S::store(z + j, e);
    run += e;
    if (++in_run == kFloatRun) {
      for (int64_t l = 0; l < kL; ++l) s += static_cast<double>(run[l]);
      run = V{};
      in_run = 0;
    }
  }
  for (int64_t l = 0; l < kL; ++l) s += static_cast<double>(run[l]);
  for (int64_t j = whole; j < vocab; ++j) {
    const T e = std::exp(z[j] - m);
    if (want_gradient) z[j] = e;
    s += static_cast<double>(e);
  }
  RowResult r;
  r.loss = static_cast<double>(m) + std::log(s) - static_cast<double>(target_logit);
  r.correct = argmax == target;
  if (!want_gradient) return r;

  // Pass 3: scale (softmax - onehot).
  const V factor = detail::broadcast<T>(static_cast<T>(static_cast<double>(scale) / s));
  for (int64_t j = 0; j < whole; j += kL) S::store(z + j, S::load(z + j) * factor);
  for (int64_t j = whole; j < vocab; ++j) z[j] *= factor[0];
  z[target] -= scale;
  return r;
}

}  // namespace

template <class T>
CrossEntropyRows softmax_cross_entropy_rows(T* logits, int64_t rows, int64_t vocab, const int64_t* targets,
                                            bool want_gradient, T gradient_scale, const char* op) {
  require(rows >= 0, op, "rows must be >= 0, got ", rows);
  require(vocab >= 1, op, "vocab must be >= 1, got ", vocab);
  // Lane positions are held in T: exact below 2^24 (float).
  require(vocab <= (int64_t{1} << 24), op, "vocab must be <= 16777216, got ", vocab);
  for (int64_t n = 0; n < rows; ++n) {
    require(targets[n] >= 0 && targets[n] < vocab, op, "targets must be in [0, ", vocab, "), got ", targets[n],
            " (row ", n, ")");
  }
  std::vector<RowResult> results(static_cast<size_t>(rows));
  const int threads = rows * vocab < kParallelLogits ? 1 : std::max(1, omp_get_max_threads());
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t n = 0; n < rows; ++n) {
    results[n] = cross_entropy_row<T>(logits + n * vocab, vocab, targets[n], want_gradient, gradient_scale);
  }
  CrossEntropyRows out;
  for (const RowResult& r : results) {
    out.loss_sum += r.loss;
    out.correct += r.correct;
  }
  return out;
}

template CrossEntropyRows softmax_cross_entropy_rows<float>(float*, int64_t, int64_t, const int64_t*, bool, float,
                                                            const char*);
template CrossEntropyRows softmax_cross_entropy_rows<double>(double*, int64_t, int64_t, const int64_t*, bool, double,
                                                             const char*);

}  // namespace posenc::kernels
