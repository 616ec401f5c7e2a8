// T5 relative-position buckets and biases (1D and 2D, forward and backward)
// against a transcription of Hugging Face's code and plain references.
#include "posenc/kernels/t5.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

namespace posenc::kernels {
namespace {

using test::best_seconds;
using test::expect_error;

// transformers/models/t5/modeling_t5.py, T5Attention._relative_position_bucket,
// for one element: int64 where torch uses int64, float32 where it uses float32
// (relative_position.float() / max_exact, torch.log, the Python double
// math.log(max_distance / max_exact) as a float32 operand, * (num_buckets -
// max_exact), .to(torch.long) truncating). torch.where takes the small branch
// for n < max_exact, so the log of 0 there is never used.
int64_t hf_bucket(int64_t relative_position, bool bidirectional, int64_t num_buckets, int64_t max_distance) {
  int64_t relative_buckets = 0;
  if (bidirectional) {
    num_buckets /= 2;
    relative_buckets += (relative_position > 0 ? 1 : 0) * num_buckets;
    relative_position = std::abs(relative_position);
  } else {
    relative_position = -std::min<int64_t>(relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  const bool is_small = relative_position < max_exact;
  if (is_small) return relative_buckets + relative_position;
  const float scaled = static_cast<float>(relative_position) / static_cast<float>(max_exact);
  const auto log_range = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float large = std::log(scaled) / log_range * static_cast<float>(num_buckets - max_exact);
  int64_t if_large = max_exact + static_cast<int64_t>(large);
  if_large = std::min(if_large, num_buckets - 1);
  return relative_buckets + if_large;
}

int64_t hf_bucket(int64_t rel, const T5BucketParams& p) {
  return hf_bucket(rel, p.bidirectional, p.num_buckets, p.max_distance);
}

std::string str(const T5BucketParams& p) {
  std::ostringstream s;
  s << "(" << (p.bidirectional ? "True" : "False") << ", " << p.num_buckets << ", " << p.max_distance << ")";
  return s.str();
}

const std::vector<T5BucketParams> kConfigs = {{true, 32, 128}, {false, 32, 128}, {true, 64, 256}, {false, 16, 50},
                                              {true, 8, 20},   {false, 2, 3},    {true, 4, 3}};

const std::vector<int64_t> kLargeOffsets = {1000000,           -1000000,           int64_t{1} << 40,
                                            -(int64_t{1} << 40), int64_t{1} << 62, -(int64_t{1} << 62)};

TEST(T5Bucket, MatchesHuggingFaceTranscription) {
  for (const T5BucketParams& p : kConfigs) {
    std::vector<int64_t> rel;
    for (int64_t r = -5000; r <= 5000; ++r) rel.push_back(r);
    rel.insert(rel.end(), kLargeOffsets.begin(), kLargeOffsets.end());
    std::vector<int64_t> got(rel.size());
    t5_buckets(p, rel, got);
    int64_t bad = 0;
    for (size_t k = 0; k < rel.size(); ++k) {
      const int64_t want = hf_bucket(rel[k], p);
      if ((got[k] != want || t5_bucket(p, rel[k]) != want) && bad++ < 3) {
        ADD_FAILURE() << str(p) << " rel=" << rel[k] << ": got " << got[k] << ", want " << want;
      }
    }
    EXPECT_EQ(bad, 0) << str(p);
  }
}

// Golden values from Hugging Face's function run in torch 1.13: bucket b is
// first reached at n = starts[b] (n = -rel, keys before the query).
TEST(T5Bucket, BucketStartsFromHuggingFace) {
  struct Golden {
    T5BucketParams params;
    std::vector<int64_t> starts;
  };
  const std::vector<Golden> golden = {
      {{true, 32, 128}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32, 46, 64, 91}},
      {{false, 32, 128}, {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
                          16, 19, 21, 24, 27, 31, 35, 40, 46, 52, 59, 67, 77, 87, 99, 113}},
      // max_exact = 12 and 77/12: neither a power of two.
      {{true, 50, 77}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 19, 22, 25, 29, 33, 38, 44, 51, 58, 67}},
  };
  for (const Golden& g : golden) {
    int64_t bucket = 0;
    for (int64_t n = 0; n < 5 * g.params.max_distance; ++n) {
      while (bucket + 1 < static_cast<int64_t>(g.starts.size()) && g.starts[bucket + 1] <= n) ++bucket;
      ASSERT_EQ(t5_bucket(g.params, -n), bucket) << str(g.params) << " n=" << n;
    }
  }
}

// Where the real log term is an integer, float32 lands on either side of it,
// and HF's bucket is the float32 one: (True, 18, 128) at n = 8 has the real
// value 4 + 5 log 2 / log 32 = 5, float32 gives 5 and double 4.99..; (True, 34,
// 27) at n = 12 has 8 + 9 log 1.5 / log 3.375 = 11, float32 gives 10.99...
// Golden values: Hugging Face's function run in torch 1.13 (keys before and
// after the query).
TEST(T5Bucket, Float32BoundariesFromHuggingFace) {
  struct Golden {
    T5BucketParams params;
    std::vector<int64_t> n, past, future;
  };
  const std::vector<Golden> golden = {
      {{true, 18, 128}, {8, 16, 64}, {5, 6, 8}, {14, 15, 17}},
      {{true, 34, 27}, {12, 18}, {10, 13}, {27, 30}},
      {{true, 38, 288}, {18, 36, 144}, {11, 13, 17}, {30, 32, 36}},
      {{false, 36, 50}, {30}, {26}, {0}},
      {{false, 54, 64}, {36}, {36}, {0}},
      {{false, 20, 320}, {20, 40, 160}, {12, 14, 18}, {0, 0, 0}},
  };
  for (const Golden& g : golden) {
    for (size_t k = 0; k < g.n.size(); ++k) {
      EXPECT_EQ(t5_bucket(g.params, -g.n[k]), g.past[k]) << str(g.params) << " rel=" << -g.n[k];
      EXPECT_EQ(t5_bucket(g.params, g.n[k]), g.future[k]) << str(g.params) << " rel=" << g.n[k];
      EXPECT_EQ(hf_bucket(-g.n[k], g.params), g.past[k]) << "the transcription, " << str(g.params);
    }
  }
}

TEST(T5Bucket, DefaultBoundaries) {
  // Bidirectional 32/128: max_exact 8, bucket 8 + floor(8 log(n/8) / log 16) for n >= 8; the real
  // value is an integer at n = 16, 32, 64 (2, 4, 6), where float32 must not fall just below.
  const T5BucketParams bi{true, 32, 128};
  const std::vector<std::pair<int64_t, int64_t>> bi_cases = {
      {0, 0},    {-1, 1},   {-7, 7},     {-8, 8},          {-11, 8},   {-12, 9},  {-15, 9},
      {-16, 10}, {-31, 11}, {-32, 12},   {-63, 13},        {-64, 14},  {-127, 15}, {-128, 15},
      {-1000000, 15},       {1, 17},     {8, 24},          {16, 26},   {32, 28},  {64, 30}, {128, 31}};
  for (auto [rel, want] : bi_cases) EXPECT_EQ(t5_bucket(bi, rel), want) << "rel=" << rel;
  // Causal 32/128: max_exact 16, future keys in bucket 0; 16 + floor(16 log(n/16) / log 8).
  const T5BucketParams causal{false, 32, 128};
  const std::vector<std::pair<int64_t, int64_t>> causal_cases = {
      {1, 0}, {1000, 0}, {0, 0}, {-15, 15}, {-16, 16}, {-32, 21}, {-64, 26}, {-127, 31}, {-128, 31}, {-1000000, 31}};
  for (auto [rel, want] : causal_cases) EXPECT_EQ(t5_bucket(causal, rel), want) << "rel=" << rel;
}

TEST(T5Bucket, Properties) {
  for (const T5BucketParams& p : kConfigs) {
    const int64_t per_dir = p.bidirectional ? p.num_buckets / 2 : p.num_buckets;
    const int64_t max_exact = per_dir / 2;
    int64_t previous = 0;
    for (int64_t n = 0; n <= 5000; ++n) {
      const int64_t past = t5_bucket(p, -n);
      // The exact region, then non-decreasing in n, capped at per_dir - 1 (reached from max_distance on).
      if (n < max_exact) EXPECT_EQ(past, n) << str(p) << " n=" << n;
      EXPECT_GE(past, previous) << str(p) << " n=" << n;
      EXPECT_LE(past, per_dir - 1) << str(p) << " n=" << n;
      if (n >= p.max_distance) EXPECT_EQ(past, per_dir - 1) << str(p) << " n=" << n;
      previous = past;
      // Future keys: the same buckets shifted by per_dir (bidirectional), or bucket 0.
      const int64_t future = t5_bucket(p, n);
      if (p.bidirectional) {
        EXPECT_EQ(future, n == 0 ? 0 : past + per_dir) << str(p) << " n=" << n;
      } else {
        EXPECT_EQ(future, 0) << str(p) << " n=" << n;
      }
    }
    for (int64_t rel : kLargeOffsets) EXPECT_EQ(t5_bucket(p, -std::abs(rel)), per_dir - 1) << str(p);
  }
}

TEST(T5Bucket, Errors) {
  auto check = [](T5BucketParams p, const std::string& message) {
    expect_error([&] { validate(p); }, "[t5_bucket] " + message);
    std::vector<int64_t> rel(2), out(2);
    expect_error([&] { t5_buckets(p, rel, out, "buckets"); }, "[buckets] " + message);
  };
  check({true, 1, 128}, "num_buckets must be >= 2, got 1");
  check({false, 1, 128}, "num_buckets must be >= 2, got 1");
  check({true, 31, 128}, "num_buckets must be even when bidirectional (half per direction), got 31");
  check({true, 2, 128}, "num_buckets must be >= 4 when bidirectional, got 2");
  check({true, 32, 16}, "max_distance must be > num_buckets/2 = 16, got 16");
  check({false, 5, 2}, "max_distance must be > num_buckets/2 = 2, got 2");
  EXPECT_NO_THROW(validate(T5BucketParams{false, 31, 16}));  // causal: any count >= 2
  std::vector<int64_t> rel(5), out(4);
  expect_error([&] { t5_buckets({}, rel, out); }, "[t5_bucket] out must hold one bucket per relative position (5), got 4");
}

// ---- 1D bias ----

struct T5Case {
  T5BucketParams params;
  int64_t heads, q_len, k_len, offset;
  std::string str() const {
    std::ostringstream s;
    s << "params=" << kernels::str(params) << " heads=" << heads << " q_len=" << q_len << " k_len=" << k_len
      << " offset=" << offset;
    return s.str();
  }
  T5BiasShape shape() const { return {heads, q_len, k_len, offset}; }
};

// T5-small/base/large head counts (8, 12, 16), prefill and decode, offsets
// past max_distance (the clamped region), several tiles, extreme offsets, and
// outputs large enough for threads and streaming stores.
const std::vector<T5Case> kT5Cases = {
    {{true, 32, 128}, 8, 64, 64, 0},         {{false, 32, 128}, 8, 1, 300, 299},
    {{true, 64, 256}, 12, 7, 5, -2},         {{false, 16, 50}, 3, 5, 7, 2},
    {{true, 8, 20}, 1, 300, 300, 0},         {{false, 2, 3}, 2, 50, 60, 10},
    {{true, 4, 3}, 16, 9, 11, -3},           {{true, 32, 128}, 2, 40, 5000, 4960},
    {{false, 32, 128}, 4, 3, 9, 1000000},    {{true, 32, 128}, 4, 3, 9, -1000000},
    {{true, 8, 20}, 2, 2, 3, int64_t{1} << 40},                {{false, 16, 50}, 1, 2, 3, -(int64_t{1} << 62)},
    {{true, 32, 128}, 3, 600, 701, 101},     {{false, 32, 128}, 2, 700, 650, -50},
};

template <class T>
std::vector<T> random_values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(u(rng));
  return v;
}

template <class T>
std::vector<T> t5_reference(const T5Case& c, const std::vector<T>& table) {
  std::vector<T> out(static_cast<size_t>(c.heads * c.q_len * c.k_len));
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t i = 0; i < c.q_len; ++i) {
      for (int64_t j = 0; j < c.k_len; ++j) {
        const int64_t b = hf_bucket(j - (i + c.offset), c.params);
        out[(h * c.q_len + i) * c.k_len + j] = table[b * c.heads + h];
      }
    }
  }
  return out;
}

template <class T>
void check_t5_cases() {
  for (const T5Case& c : kT5Cases) {
    const std::vector<T> table = random_values<T>(c.params.num_buckets * c.heads, 1);
    std::vector<T> out(static_cast<size_t>(c.heads * c.q_len * c.k_len), T(7));
    t5_bias<T>(c.params, c.shape(), table.data(), out.data());
    // A lookup: exact.
    EXPECT_EQ(test::max_abs_diff(out, t5_reference(c, table)), 0.0) << c.str();
  }
}

TEST(T5Bias, MatchesReferenceFloat) { check_t5_cases<float>(); }
TEST(T5Bias, MatchesReferenceDouble) { check_t5_cases<double>(); }

// Sums in long double; tol[b] bounds the kernel's double summation error.
template <class T>
void t5_backward_reference(const T5Case& c, const std::vector<T>& grad, std::vector<long double>& sum,
                           std::vector<double>& tol) {
  const int64_t n = c.params.num_buckets * c.heads;
  sum.assign(static_cast<size_t>(n), 0.0L);
  std::vector<long double> abs_sum(static_cast<size_t>(n), 0.0L);
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t i = 0; i < c.q_len; ++i) {
      for (int64_t j = 0; j < c.k_len; ++j) {
        const int64_t slot = hf_bucket(j - (i + c.offset), c.params) * c.heads + h;
        const T g = grad[(h * c.q_len + i) * c.k_len + j];
        sum[slot] += g;
        abs_sum[slot] += std::fabs(static_cast<long double>(g));
        ++count[slot];
      }
    }
  }
  tol.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    // Recursive summation of count terms in double (worst case count * 2^-53 * sum |g|),
    // then one rounding to T (half an ulp).
    tol[k] = static_cast<double>(count[k] * 0x1p-53 * abs_sum[k]) +
             std::numeric_limits<T>::epsilon() * std::fabs(static_cast<double>(sum[k]));
  }
}

template <class T>
void check_t5_backward_cases() {
  for (const T5Case& c : kT5Cases) {
    const std::vector<T> grad = random_values<T>(c.heads * c.q_len * c.k_len, 2);
    std::vector<T> got(static_cast<size_t>(c.params.num_buckets * c.heads), T(7));
    t5_bias_backward<T>(c.params, c.shape(), grad.data(), got.data());
    std::vector<long double> want;
    std::vector<double> tol;
    t5_backward_reference(c, grad, want, tol);
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_NEAR(got[k], static_cast<double>(want[k]), tol[k]) << c.str() << " slot " << k;
    }
  }
}

TEST(T5BiasBackward, MatchesReferenceFloat) { check_t5_backward_cases<float>(); }
TEST(T5BiasBackward, MatchesReferenceDouble) { check_t5_backward_cases<double>(); }

TEST(T5BiasBackward, IsTheAdjointOfTheForward) {
  // <bias(table), g> = <table, backward(g)>: the bias is linear in the table.
  for (const T5Case& c : kT5Cases) {
    const std::vector<double> table = random_values<double>(c.params.num_buckets * c.heads, 3);
    const std::vector<double> g = random_values<double>(c.heads * c.q_len * c.k_len, 4);
    std::vector<double> bias(g.size()), grad_table(table.size());
    t5_bias<double>(c.params, c.shape(), table.data(), bias.data());
    t5_bias_backward<double>(c.params, c.shape(), g.data(), grad_table.data());
    long double lhs = 0, rhs = 0, scale = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      lhs += static_cast<long double>(bias[k]) * g[k];
      scale += std::fabs(static_cast<long double>(bias[k]) * g[k]);
    }
    for (size_t k = 0; k < table.size(); ++k) rhs += static_cast<long double>(table[k]) * grad_table[k];
    // 1e-12 of sum |terms|: double sums of up to 2^21 terms.
    EXPECT_NEAR(static_cast<double>(lhs), static_cast<double>(rhs), 1e-12 * static_cast<double>(scale) + 1e-300)
        << c.str();
  }
}

TEST(T5Bias, EmptyExtents) {
  const T5BucketParams p{};
  const std::vector<float> table = random_values<float>(32 * 4, 5);
  std::vector<float> out(8, 3.0f);
  t5_bias<float>(p, {4, 0, 5, 0}, table.data(), out.data());
  t5_bias<float>(p, {4, 5, 0, 0}, table.data(), out.data());
  t5_bias<float>(p, {4, 0, 0, 0}, nullptr, nullptr);  // nothing to write: no pointer needed
  EXPECT_EQ(out, std::vector<float>(8, 3.0f));
  // Backward of an empty bias: every bucket's sum is 0, and the table is overwritten with it.
  std::vector<float> grad_table(32 * 4, 3.0f);
  t5_bias_backward<float>(p, {4, 0, 5, 0}, nullptr, grad_table.data());
  EXPECT_EQ(grad_table, std::vector<float>(32 * 4, 0.0f));
}

TEST(T5Bias, Errors) {
  auto check = [](T5BucketParams p, T5BiasShape s, const std::string& message) {
    expect_error([&] { validate(p, s); }, "[t5_bias] " + message);
    std::vector<float> table(1024), out(1024);
    expect_error([&] { t5_bias<float>(p, s, table.data(), out.data()); }, "[t5_bias] " + message);
    expect_error([&] { t5_bias_backward<float>(p, s, out.data(), table.data(), "t5"); }, "[t5] " + message);
  };
  check({true, 31, 128}, {1, 2, 2, 0}, "num_buckets must be even when bidirectional (half per direction), got 31");
  check({}, {0, 2, 2, 0}, "heads must be >= 1, got 0");
  check({}, {1, -1, 2, 0}, "q_len must be >= 0, got -1");
  check({}, {1, 2, -1, 0}, "k_len must be >= 0, got -1");
  check({}, {1, 2, 2, (int64_t{1} << 62) + 1}, "query_offset must be within +-2^62, got 4611686018427387905");
  check({}, {1, 65536, 65536, 0}, "the bias must have at most 2^31 values (heads*q_len*k_len), got 4294967296");
  check({}, {3, int64_t{1} << 62, 4, 0},
        "the bias must have at most 2^31 values (heads*q_len*k_len), got 5.5340232221128655e+19");
  std::vector<float> buf(64);
  expect_error([&] { t5_bias<float>({}, {1, 2, 2, 0}, nullptr, buf.data()); }, "[t5_bias] table must not be null");
  expect_error([&] { t5_bias<float>({}, {1, 2, 2, 0}, buf.data(), nullptr); }, "[t5_bias] out must not be null");
  expect_error([&] { t5_bias_backward<float>({}, {1, 2, 2, 0}, nullptr, buf.data()); },
               "[t5_bias] grad must not be null");
  expect_error([&] { t5_bias_backward<float>({}, {1, 2, 2, 0}, buf.data(), nullptr); },
               "[t5_bias] grad_table must not be null");
}

// ---- 2D bias ----

struct T5Grid {
  T5BucketParams params;
  int64_t heads, height, width;
  std::string str() const {
    std::ostringstream s;
    s << "params=" << kernels::str(params) << " heads=" << heads << " grid=" << height << "x" << width;
    return s.str();
  }
  T5Bias2dShape shape() const { return {heads, height, width}; }
  int64_t hw() const { return height * width; }
};

const std::vector<T5Grid> kGrids = {
    {{true, 32, 128}, 1, 3, 5},  {{false, 16, 50}, 3, 1, 7},   {{true, 8, 20}, 2, 4, 1},
    {{true, 4, 3}, 3, 1, 1},     {{false, 2, 3}, 2, 6, 6},     {{true, 8, 20}, 4, 12, 30},  // offsets past 2*max_distance
    {{true, 32, 128}, 3, 32, 32},  // 3M values: threads and streaming stores
};

template <class T>
void check_t5_2d_cases() {
  for (const T5Grid& c : kGrids) {
    const int64_t hw = c.hw();
    const std::vector<T> th = random_values<T>(c.params.num_buckets * c.heads, 6);
    const std::vector<T> tw = random_values<T>(c.params.num_buckets * c.heads, 7);
    std::vector<T> out(static_cast<size_t>(c.heads * hw * hw), T(7));
    t5_bias_2d<T>(c.params, c.shape(), th.data(), tw.data(), out.data());
    std::vector<T> want(out.size());
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t q = 0; q < hw; ++q) {
        for (int64_t k = 0; k < hw; ++k) {
          const int64_t bh = hf_bucket(k / c.width - q / c.width, c.params);
          const int64_t bw = hf_bucket(k % c.width - q % c.width, c.params);
          want[(h * hw + q) * hw + k] =
              static_cast<T>(static_cast<long double>(th[bh * c.heads + h]) + tw[bw * c.heads + h]);
        }
      }
    }
    // One rounding of an exact sum in both (long double holds a float sum exactly; a double
    // sum may round twice there): at most one ulp of T.
    double worst = 0;
    for (size_t k = 0; k < out.size(); ++k) {
      worst = std::max(worst, std::abs(static_cast<double>(out[k]) - want[k]) /
                                  std::max(std::abs(static_cast<double>(want[k])), 1e-30));
    }
    EXPECT_LE(worst, std::numeric_limits<T>::epsilon()) << c.str();
  }
}

TEST(T5Bias2d, MatchesReferenceFloat) { check_t5_2d_cases<float>(); }
TEST(T5Bias2d, MatchesReferenceDouble) { check_t5_2d_cases<double>(); }

template <class T>
void check_t5_2d_backward_cases() {
  for (const T5Grid& c : kGrids) {
    const int64_t hw = c.hw(), n = c.params.num_buckets * c.heads;
    const std::vector<T> grad = random_values<T>(c.heads * hw * hw, 8);
    std::vector<T> gh(static_cast<size_t>(n), T(7)), gw(static_cast<size_t>(n), T(7));
    t5_bias_2d_backward<T>(c.params, c.shape(), grad.data(), gh.data(), gw.data());
    std::vector<long double> sh(static_cast<size_t>(n)), sw(static_cast<size_t>(n));
    long double abs_total = 0;
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t q = 0; q < hw; ++q) {
        for (int64_t k = 0; k < hw; ++k) {
          const T g = grad[(h * hw + q) * hw + k];
          sh[hf_bucket(k / c.width - q / c.width, c.params) * c.heads + h] += g;
          sw[hf_bucket(k % c.width - q % c.width, c.params) * c.heads + h] += g;
          abs_total += std::fabs(static_cast<long double>(g));
        }
      }
    }
    for (int64_t k = 0; k < n; ++k) {
      // Double sums of at most HW^2 terms (HW^2 * 2^-53 * sum |g|), then one rounding to T.
      const double sum_tol = static_cast<double>(static_cast<long double>(hw * hw) * 0x1p-53 * abs_total);
      EXPECT_NEAR(gh[k], static_cast<double>(sh[k]),
                  sum_tol + std::numeric_limits<T>::epsilon() * std::fabs(static_cast<double>(sh[k])))
          << c.str() << " table_h slot " << k;
      EXPECT_NEAR(gw[k], static_cast<double>(sw[k]),
                  sum_tol + std::numeric_limits<T>::epsilon() * std::fabs(static_cast<double>(sw[k])))
          << c.str() << " table_w slot " << k;
    }
  }
}

TEST(T5Bias2dBackward, MatchesReferenceFloat) { check_t5_2d_backward_cases<float>(); }
TEST(T5Bias2dBackward, MatchesReferenceDouble) { check_t5_2d_backward_cases<double>(); }

TEST(T5Bias2dBackward, IsTheAdjointOfTheForward) {
  for (const T5Grid& c : kGrids) {
    const int64_t hw = c.hw(), n = c.params.num_buckets * c.heads;
    const std::vector<double> th = random_values<double>(n, 9), tw = random_values<double>(n, 10);
    const std::vector<double> g = random_values<double>(c.heads * hw * hw, 11);
    std::vector<double> bias(g.size()), gh(th.size()), gw(tw.size());
    t5_bias_2d<double>(c.params, c.shape(), th.data(), tw.data(), bias.data());
    t5_bias_2d_backward<double>(c.params, c.shape(), g.data(), gh.data(), gw.data());
    long double lhs = 0, rhs = 0, scale = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      lhs += static_cast<long double>(bias[k]) * g[k];
      scale += std::fabs(static_cast<long double>(bias[k]) * g[k]);
    }
    for (int64_t k = 0; k < n; ++k) rhs += static_cast<long double>(th[k]) * gh[k] + static_cast<long double>(tw[k]) * gw[k];
    // 1e-12 of sum |terms|: double sums of up to 2^22 terms.
    EXPECT_NEAR(static_cast<double>(lhs), static_cast<double>(rhs), 1e-12 * static_cast<double>(scale)) << c.str();
  }
}

TEST(T5Bias2d, Errors) {
  auto check = [](T5BucketParams p, T5Bias2dShape s, const std::string& message) {
    expect_error([&] { validate(p, s); }, "[t5_bias_2d] " + message);
    std::vector<float> a(1024), b(1024), out(1024);
    expect_error([&] { t5_bias_2d<float>(p, s, a.data(), b.data(), out.data()); }, "[t5_bias_2d] " + message);
    expect_error([&] { t5_bias_2d_backward<float>(p, s, out.data(), a.data(), b.data(), "t5_2d"); },
                 "[t5_2d] " + message);
  };
  check({true, 2, 128}, {1, 2, 2}, "num_buckets must be >= 4 when bidirectional, got 2");
  check({}, {0, 2, 2}, "heads must be >= 1, got 0");
  check({}, {1, 0, 2}, "height must be >= 1, got 0");
  check({}, {1, 2, 0}, "width must be >= 1, got 0");
  check({}, {1, 256, 256}, "the bias must have at most 2^31 values (heads*HW*HW), got 4294967296");
}

TEST(T5Bias2d, ExactSizeLimitPasses) {
  EXPECT_NO_THROW(validate(T5BucketParams{}, T5Bias2dShape{2, 128, 256}));  // 2 * 2^15 * 2^15 = 2^31
  expect_error([] { validate(T5BucketParams{}, T5Bias2dShape{3, 128, 256}); },
               "[t5_bias_2d] the bias must have at most 2^31 values (heads*HW*HW), got 3221225472");
}

// ---- determinism ----

TEST(T5BiasBackward, SameBitsWithOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  const T5Case c{{true, 32, 128}, 4, 300, 310, 10};
  const std::vector<float> grad = random_values<float>(c.heads * c.q_len * c.k_len, 12);
  const T5Grid g{{true, 32, 128}, 4, 16, 16};
  const std::vector<float> grad_2d = random_values<float>(g.heads * g.hw() * g.hw(), 13);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> out(32 * 4), gh(32 * 4), gw(32 * 4);
    t5_bias_backward<float>(c.params, c.shape(), grad.data(), out.data());
    t5_bias_2d_backward<float>(g.params, g.shape(), grad_2d.data(), gh.data(), gw.data());
    out.insert(out.end(), gh.begin(), gh.end());
    out.insert(out.end(), gw.begin(), gw.end());
    return out;
  };
  const std::vector<float> one = run(1), two = run(2);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// ---- timing (POSENC_BIAS_TIMING=1) ----

// Best of a few fills of a warm 32 x 4096 x 4096 float32 bias (2 GiB), next
// to a parallel std::fill of the same buffer as the write-bandwidth roofline.
TEST(T5Timing, Fill32x4096x4096) {
  const char* env = std::getenv("POSENC_BIAS_TIMING");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set POSENC_BIAS_TIMING=1";
  const int64_t heads = 32, t = 4096, n = heads * t * t;
  const T5BucketParams p{};
  const std::vector<float> table = random_values<float>(p.num_buckets * heads, 14);
  std::vector<float> out(static_cast<size_t>(n));  // zeroed: touched once before timing
  const double bytes = static_cast<double>(n) * sizeof(float);  // one write per value
  const double fill_s = best_seconds([&] {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < heads * t; ++r) std::fill(out.data() + r * t, out.data() + (r + 1) * t, 1.0f);
  });
  const double t5_s = best_seconds([&] { t5_bias<float>(p, {heads, t, t, 0}, table.data(), out.data()); });
  EXPECT_EQ(out[1], table[t5_bucket(p, 1) * heads]);  // the buffer was really written
  std::printf("[timing] threads=%d  std::fill %.1f GB/s (%.3f s)  t5_bias %.1f GB/s (%.3f s)\n",
              omp_get_max_threads(), bytes / fill_s / 1e9, fill_s, bytes / t5_s / 1e9, t5_s);
}

}  // namespace
}  // namespace posenc::kernels
