// softmax_cross_entropy_rows against the formula in long double, row by row:
// every vocabulary size around the vector width (whole vectors, a tail, only
// a tail), both dtypes, ties for the argmax, the thread count, the refusals.
#include "posenc/kernels/softmax_cross_entropy.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace posenc::kernels {
namespace {

template <class T>
std::vector<T> random_logits(int64_t rows, int64_t vocab, uint32_t seed, double spread) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, spread);
  std::vector<T> z(static_cast<size_t>(rows * vocab));
  for (T& x : z) x = static_cast<T>(normal(gen));
  return z;
}

struct Plain {
  long double loss = 0;
  int64_t correct = 0;
  std::vector<long double> gradient;
};

template <class T>
Plain plain(const std::vector<T>& z, int64_t rows, int64_t vocab, const std::vector<int64_t>& t, long double scale) {
  Plain p;
  p.gradient.resize(z.size());
  for (int64_t n = 0; n < rows; ++n) {
    const T* row = z.data() + n * vocab;
    int64_t arg = 0;
    for (int64_t j = 1; j < vocab; ++j) arg = row[j] > row[arg] ? j : arg;
    long double s = 0;
    for (int64_t j = 0; j < vocab; ++j) s += std::exp(static_cast<long double>(row[j]) - row[arg]);
    p.loss += row[arg] + std::log(s) - row[t[n]];
    p.correct += arg == t[n];
    for (int64_t j = 0; j < vocab; ++j) {
      p.gradient[n * vocab + j] =
          scale * (std::exp(static_cast<long double>(row[j]) - row[arg]) / s - (j == t[n] ? 1.0L : 0.0L));
    }
  }
  return p;
}

template <class T>
void check_against_plain(int64_t rows, int64_t vocab, double loss_tol, double grad_tol) {
  std::vector<T> z = random_logits<T>(rows, vocab, static_cast<uint32_t>(rows * 131 + vocab), 3.0);
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t n = 0; n < rows; ++n) t[n] = (n * 7 + 3) % vocab;
  const Plain want = plain(z, rows, vocab, t, 0.25L);
  const std::vector<T> before = z;
  const CrossEntropyRows no_grad = softmax_cross_entropy_rows<T>(z.data(), rows, vocab, t.data(), false, T(0.25));
  EXPECT_EQ(z, before) << "without a gradient the logits are left as they were";
  const CrossEntropyRows got = softmax_cross_entropy_rows<T>(z.data(), rows, vocab, t.data(), true, T(0.25));
  EXPECT_EQ(got.loss_sum, no_grad.loss_sum);
  EXPECT_EQ(got.correct, want.correct) << vocab;
  EXPECT_EQ(no_grad.correct, want.correct) << vocab;
  EXPECT_NEAR(got.loss_sum, static_cast<double>(want.loss), loss_tol * rows) << vocab;
  for (size_t i = 0; i < z.size(); ++i) {
    ASSERT_NEAR(z[i], static_cast<double>(want.gradient[i]), grad_tol) << "vocab " << vocab << " at " << i;
  }
}

TEST(SoftmaxCrossEntropyRows, EqualsTheFormulaForEveryVocabularyShape) {
  // float: 16 lanes with AVX-512, 8 with AVX2; double half that. 1 and 7: a tail only; 17: one vector and a tail.
  for (const int64_t vocab : {1, 7, 8, 16, 17, 33, 100, 1000, 8000}) {
    // float: logits of order 10, exp to 1 ulp, a sum in float over at most 32 vectors then in double.
    check_against_plain<float>(5, vocab, 2e-6, 6e-8);  // gradient: 4 ulps of values up to 0.25
    check_against_plain<double>(5, vocab, 1e-13, 2e-16);  // a few ulps of values up to 0.25
  }
}

TEST(SoftmaxCrossEntropyRows, ArgmaxIsTheFirstOfEqualLogits) {
  // Equal largest logits in different lanes and in the tail: the first position counts as the prediction.
  for (const int64_t first : {3, 20, 40}) {
    std::vector<float> z(43, 0.0f);
    z[first] = 2.0f;
    z[42] = 2.0f;  // in the tail
    if (first < 40) z[first + 16] = 2.0f;  // the same lane, one vector later
    const std::vector<int64_t> at_first{first}, at_later{42};
    std::vector<float> copy = z;
    EXPECT_EQ(softmax_cross_entropy_rows<float>(copy.data(), 1, 43, at_first.data(), false, 1.0f).correct, 1);
    EXPECT_EQ(softmax_cross_entropy_rows<float>(copy.data(), 1, 43, at_later.data(), false, 1.0f).correct, 0);
  }
}

TEST(SoftmaxCrossEntropyRows, ResultsDoNotDependOnTheThreadCount) {
  const int64_t rows = 64, vocab = 3000;
  const std::vector<float> z0 = random_logits<float>(rows, vocab, 5, 4.0);
  std::vector<int64_t> t(rows);
  for (int64_t n = 0; n < rows; ++n) t[n] = (n * 37) % vocab;
  const int saved = omp_get_max_threads();
  std::vector<float> one = z0, two = z0;
  omp_set_num_threads(1);
  const CrossEntropyRows a = softmax_cross_entropy_rows<float>(one.data(), rows, vocab, t.data(), true, 0.5f);
  omp_set_num_threads(2);
  const CrossEntropyRows b = softmax_cross_entropy_rows<float>(two.data(), rows, vocab, t.data(), true, 0.5f);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_EQ(one, two);
}

TEST(SoftmaxCrossEntropyRows, LargeLogitsStayFinite) {
  // Logits of 1e4: e^(z - max) never overflows; the loss is exact to the float's rounding.
  std::vector<float> z{1e4f, 1e4f - 1.0f, -1e4f};
  const std::vector<int64_t> t{1};
  const CrossEntropyRows r = softmax_cross_entropy_rows<float>(z.data(), 1, 3, t.data(), true, 1.0f);
  EXPECT_NEAR(r.loss_sum, 1.0 + std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(z[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(z[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)) - 1.0, 1e-7);
  EXPECT_EQ(z[2], 0.0f);
}

std::string message_of(int64_t rows, int64_t vocab, int64_t target) {
  std::vector<float> z(static_cast<size_t>(std::max<int64_t>(rows, 1) * std::max<int64_t>(vocab, 1)), 0.0f);
  const std::vector<int64_t> t(static_cast<size_t>(std::max<int64_t>(rows, 1)), target);
  try {
    softmax_cross_entropy_rows<float>(z.data(), rows, vocab, t.data(), false, 1.0f, "lce");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(SoftmaxCrossEntropyRows, RefusesBadArguments) {
  EXPECT_EQ(message_of(1, 0, 0), "[lce] vocab must be >= 1, got 0");
  EXPECT_EQ(message_of(-1, 4, 0), "[lce] rows must be >= 0, got -1");
  EXPECT_EQ(message_of(2, 8, 9), "[lce] targets must be in [0, 8), got 9 (row 0)");
  EXPECT_EQ(message_of(2, 8, -1), "[lce] targets must be in [0, 8), got -1 (row 0)");
  EXPECT_EQ(message_of(0, 8, 99), "no error");  // no rows: nothing to check or compute
}

}  // namespace
}  // namespace posenc::kernels
