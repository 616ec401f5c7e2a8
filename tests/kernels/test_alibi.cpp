// ALiBi slopes and biases (1D and 2D) against the paper's code and plain
// long double references.
#include "posenc/kernels/alibi.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

namespace posenc::kernels {
namespace {

using test::best_seconds;
using test::expect_error;

// The paper's get_slopes (Press et al., github.com/ofirpress/attention_with_linear_biases),
// transcribed line by line; Python's float ** int is C's pow.
std::vector<double> paper_slopes(int64_t n) {
  auto power_of_2 = [](int64_t m) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
    const double ratio = start;
    std::vector<double> out;
    for (int64_t i = 0; i < m; ++i) out.push_back(start * std::pow(ratio, static_cast<double>(i)));
    return out;
  };
  const double l = std::log2(static_cast<double>(n));
  if (l == std::floor(l)) return power_of_2(n);
  const auto closest = static_cast<int64_t>(std::pow(2.0, std::floor(l)));
  std::vector<double> out = power_of_2(closest);
  const std::vector<double> twice = paper_slopes(2 * closest);
  for (size_t i = 0; i < twice.size() && static_cast<int64_t>(out.size()) < n; i += 2) out.push_back(twice[i]);
  return out;
}

TEST(AlibiSlopes, MatchPaperCode) {
  for (int64_t n = 1; n <= 64; ++n) {
    const std::vector<double> got = alibi_slopes(n);
    const std::vector<double> want = paper_slopes(n);
    ASSERT_EQ(got.size(), want.size()) << "n=" << n;
    for (int64_t h = 0; h < n; ++h) {
      // 1e-13: the paper's start * ratio**i carries ratio's rounding i <= 64 times.
      EXPECT_NEAR(got[h], want[h], 1e-13 * want[h]) << "n=" << n << " h=" << h;
    }
  }
}

TEST(AlibiSlopes, ExactValues) {
  // 8 heads: 1/2 .. 1/256 (the paper's example).
  const std::vector<double> eight = alibi_slopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(eight[h], std::ldexp(1.0, -(h + 1))) << h;
  // 12 heads: the 8 slopes of 8 heads, then 16 heads' odd ones: 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
  const std::vector<double> twelve = alibi_slopes(12);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(twelve[h], std::ldexp(1.0, -(h + 1))) << h;
  for (int k = 0; k < 4; ++k) EXPECT_EQ(twelve[8 + k], std::ldexp(std::sqrt(0.5), -k)) << k;
  EXPECT_EQ(alibi_slopes(1), std::vector<double>{1.0 / 256});
}

TEST(AlibiSlopes, GeometricForPowersOfTwo) {
  for (int64_t n = 1; n <= 256; n *= 2) {
    const std::vector<double> s = alibi_slopes(n);
    const double ratio = std::exp2(-8.0 / static_cast<double>(n));
    // 4e-16: each slope is exp2 of an exact exponent, within one ulp; a ratio of two within two.
    EXPECT_NEAR(s[0], ratio, 4e-16 * ratio) << n;
    for (int64_t h = 0; h + 1 < n; ++h) EXPECT_NEAR(s[h + 1] / s[h], ratio, 4e-16) << n << " h=" << h;
  }
}

TEST(AlibiSlopes, Errors) {
  expect_error([] { alibi_slopes(0); }, "[alibi_slopes] num_heads must be >= 1, got 0");
  expect_error([] { alibi_slopes(-3, "my_op"); }, "[my_op] num_heads must be >= 1, got -3");
}

// ---- 1D bias ----

struct AlibiCase {
  int64_t heads, q_len, k_len, offset;
  bool causal;
  std::string str() const {
    std::ostringstream s;
    s << "heads=" << heads << " q_len=" << q_len << " k_len=" << k_len << " offset=" << offset
      << " causal=" << causal;
    return s.str();
  }
};

// Real shapes (8-32 heads, prefill and decode with a cache), odd sizes, more
// than one row block and column tile, offsets at the limits, and two outputs
// large enough for streaming stores and threads.
const std::vector<AlibiCase> kAlibiCases = {
    {1, 1, 1, 0, false},          {3, 5, 7, 2, false},         {3, 5, 7, 2, true},
    {8, 7, 5, -2, false},         {4, 1, 9, 8, true},          {2, 64, 64, 0, true},
    {12, 33, 100, 67, true},      {2, 40, 5000, 4960, true},   {2, 40, 5000, 3, false},
    {5, 6, 6, -4, false},         {2, 3, 4, 1000000000000, false},
    {1, 2, 3, int64_t{1} << 62, true},                        {1, 2, 3, -(int64_t{1} << 62), false},
    {4, 600, 701, 101, true},     {3, 700, 650, 0, false},
};

template <class T>
std::vector<T> alibi_reference(const AlibiCase& c, const std::vector<double>& slopes) {
  std::vector<T> out(static_cast<size_t>(c.heads * c.q_len * c.k_len));
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t i = 0; i < c.q_len; ++i) {
      for (int64_t j = 0; j < c.k_len; ++j) {
        const long double query = static_cast<long double>(i) + static_cast<long double>(c.offset);
        const long double key = static_cast<long double>(j);
        long double v = -static_cast<long double>(slopes[h]) * std::fabs(query - key);
        if (c.causal && key > query) v = -std::numeric_limits<long double>::infinity();
        out[(h * c.q_len + i) * c.k_len + j] = static_cast<T>(v);
      }
    }
  }
  return out;
}

// -inf exactly where the reference has it, else within rel_tol relative.
template <class T>
void expect_bias_near(const std::vector<T>& got, const std::vector<T>& want, double rel_tol,
                      const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  int64_t bad = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    const double g = got[k], w = want[k];
    const bool ok = std::isinf(w) ? g == w : std::abs(g - w) <= rel_tol * std::abs(w);
    if (!ok && bad++ < 3) ADD_FAILURE() << label << " at " << k << ": got " << g << ", want " << w;
  }
  EXPECT_EQ(bad, 0) << label;
}

template <class T>
void check_alibi_cases() {
  for (const AlibiCase& c : kAlibiCases) {
    const std::vector<double> slopes = alibi_slopes(c.heads);
    std::vector<T> out(static_cast<size_t>(c.heads * c.q_len * c.k_len), T(7));
    alibi_bias<T>({c.heads, c.q_len, c.k_len, c.offset, c.causal}, slopes.data(), out.data());
    // 2 ulp of T: |i' - j| is rounded to double beyond 2^53, the product once more, then to T.
    expect_bias_near(out, alibi_reference<T>(c, slopes), 2 * std::numeric_limits<T>::epsilon(), c.str());
  }
}

TEST(AlibiBias, MatchesReferenceFloat) { check_alibi_cases<float>(); }
TEST(AlibiBias, MatchesReferenceDouble) { check_alibi_cases<double>(); }

TEST(AlibiBias, CausalMaskIsExactlyTheFuture) {
  // Decoding 3 queries after 5 cached keys: query i sees keys 0 .. 5 + i.
  const std::vector<double> slopes = alibi_slopes(2);
  std::vector<float> out(2 * 3 * 8);
  alibi_bias<float>({2, 3, 8, 5, true}, slopes.data(), out.data());
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 8; ++j) {
        const float v = out[(h * 3 + i) * 8 + j];
        if (j > 5 + i) {
          EXPECT_TRUE(std::isinf(v) && v < 0) << h << "," << i << "," << j;
        } else {
          EXPECT_EQ(v, static_cast<float>(-slopes[h] * static_cast<double>(5 + i - j))) << h << "," << i << "," << j;
        }
      }
    }
  }
}

TEST(AlibiBias, EmptyExtentsWriteNothing) {
  const std::vector<double> slopes = alibi_slopes(16);
  std::vector<float> out(8, 3.0f);
  alibi_bias<float>({16, 0, 5, 0, false}, slopes.data(), out.data());
  alibi_bias<float>({16, 5, 0, 0, true}, slopes.data(), out.data());
  alibi_bias<float>({16, 0, 0, 0, false}, nullptr, nullptr);  // nothing to write: no pointer needed
  EXPECT_EQ(out, std::vector<float>(8, 3.0f));
}

TEST(AlibiBias, Errors) {
  auto check = [](AlibiParams p, const std::string& message) {
    expect_error([&] { validate(p); }, "[alibi_bias] " + message);
    std::vector<float> out(1);
    const std::vector<double> slopes(8, 0.5);
    expect_error([&] { alibi_bias<float>(p, slopes.data(), out.data(), "alibi"); }, "[alibi] " + message);
  };
  check({0, 1, 1, 0, false}, "num_heads must be >= 1, got 0");
  check({1, -1, 1, 0, false}, "q_len must be >= 0, got -1");
  check({1, 1, -1, 0, false}, "k_len must be >= 0, got -1");
  check({1, 1, 1, (int64_t{1} << 62) + 1, false}, "query_offset must be within +-2^62, got 4611686018427387905");
  check({1, 1, 1, -(int64_t{1} << 62) - 1, false}, "query_offset must be within +-2^62, got -4611686018427387905");
  check({1, 2, 1, -2, true}, "causal attention needs every query to see a key: query_offset must be >= 0, got -2");
  check({1, 65536, 65536, 0, false},
        "the bias must have at most 2^31 values (num_heads*q_len*k_len), got 4294967296");
  check({int64_t{1} << 40, int64_t{1} << 40, int64_t{1} << 40, 0, false},
        "the bias must have at most 2^31 values (num_heads*q_len*k_len), got 1.3292279957849159e+36");
  EXPECT_NO_THROW(validate(AlibiParams{2, 32768, 32768, 0, false}));  // exactly 2^31
  EXPECT_NO_THROW(validate(AlibiParams{int64_t{1} << 40, int64_t{1} << 40, 0, 0, false}));  // empty
  std::vector<float> out(4);
  const std::vector<double> slopes = alibi_slopes(1);
  expect_error([&] { alibi_bias<float>({1, 2, 2, 0, false}, nullptr, out.data()); },
               "[alibi_bias] slopes must not be null");
  expect_error([&] { alibi_bias<float>({1, 2, 2, 0, false}, slopes.data(), nullptr); },
               "[alibi_bias] out must not be null");
}

// ---- 2D bias ----

struct Alibi2dCase {
  int64_t heads, height, width;
  GridDistance distance;
  std::string str() const {
    std::ostringstream s;
    s << "heads=" << heads << " grid=" << height << "x" << width << " " << grid_distance_name(distance);
    return s.str();
  }
};

template <class T>
std::vector<T> alibi_2d_reference(const Alibi2dCase& c, const std::vector<double>& slopes) {
  const int64_t hw = c.height * c.width;
  std::vector<T> out(static_cast<size_t>(c.heads * hw * hw));
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t q = 0; q < hw; ++q) {
      for (int64_t k = 0; k < hw; ++k) {
        const long double dy = static_cast<long double>(k / c.width - q / c.width);
        const long double dx = static_cast<long double>(k % c.width - q % c.width);
        const long double dist = c.distance == GridDistance::kEuclidean ? std::sqrt(dy * dy + dx * dx)
                                                                        : std::fabs(dy) + std::fabs(dx);
        out[(h * hw + q) * hw + k] = static_cast<T>(-static_cast<long double>(slopes[h]) * dist);
      }
    }
  }
  return out;
}

template <class T>
void check_alibi_2d_cases() {
  std::vector<Alibi2dCase> cases;
  for (GridDistance d : {GridDistance::kEuclidean, GridDistance::kManhattan}) {
    for (auto [height, width] : {std::pair<int64_t, int64_t>{3, 5}, {1, 7}, {4, 1}, {1, 1}, {6, 6}}) {
      cases.push_back({1, height, width, d});
      cases.push_back({4, height, width, d});
    }
    cases.push_back({3, 32, 32, d});  // 3M values: threads and streaming stores
  }
  for (const Alibi2dCase& c : cases) {
    const std::vector<double> slopes = alibi_slopes(c.heads);
    const int64_t hw = c.height * c.width;
    std::vector<T> out(static_cast<size_t>(c.heads * hw * hw), T(7));
    alibi_bias_2d<T>({c.heads, c.height, c.width, c.distance}, slopes.data(), out.data());
    // 2 ulp of T: sqrt and the product each round once in double (then once to T).
    expect_bias_near(out, alibi_2d_reference<T>(c, slopes), 2 * std::numeric_limits<T>::epsilon(), c.str());
  }
}

TEST(Alibi2d, MatchesReferenceFloat) { check_alibi_2d_cases<float>(); }
TEST(Alibi2d, MatchesReferenceDouble) { check_alibi_2d_cases<double>(); }

TEST(Alibi2d, OneRowGridIsTheSequenceBias) {
  // On a 1 x W grid both distances are |x' - x|: the 1D bias with q_len = k_len = W.
  const std::vector<double> slopes = alibi_slopes(6);
  std::vector<float> seq(6 * 9 * 9);
  alibi_bias<float>({6, 9, 9, 0, false}, slopes.data(), seq.data());
  for (GridDistance d : {GridDistance::kEuclidean, GridDistance::kManhattan}) {
    std::vector<float> grid(seq.size());
    alibi_bias_2d<float>({6, 1, 9, d}, slopes.data(), grid.data());
    EXPECT_EQ(grid, seq) << grid_distance_name(d);
  }
}

TEST(Alibi2d, DistanceNames) {
  EXPECT_EQ(parse_grid_distance("euclidean"), GridDistance::kEuclidean);
  EXPECT_EQ(parse_grid_distance("manhattan"), GridDistance::kManhattan);
  for (GridDistance d : {GridDistance::kEuclidean, GridDistance::kManhattan}) {
    EXPECT_EQ(parse_grid_distance(grid_distance_name(d)), d);
  }
  expect_error([] { parse_grid_distance("cosine"); },
               "[alibi_bias_2d] distance must be \"euclidean\" or \"manhattan\", got \"cosine\"");
  expect_error([] { parse_grid_distance("Euclidean", "alibi2d"); },
               "[alibi2d] distance must be \"euclidean\" or \"manhattan\", got \"Euclidean\"");
}

TEST(Alibi2d, Errors) {
  auto check = [](Alibi2dParams p, const std::string& message) {
    expect_error([&] { validate(p); }, "[alibi_bias_2d] " + message);
    std::vector<double> out(1);
    const std::vector<double> slopes(8, 0.5);
    expect_error([&] { alibi_bias_2d<double>(p, slopes.data(), out.data()); }, "[alibi_bias_2d] " + message);
  };
  check({0, 2, 2}, "num_heads must be >= 1, got 0");
  check({1, 0, 2}, "height must be >= 1, got 0");
  check({1, 2, 0}, "width must be >= 1, got 0");
  check({1, 256, 256}, "the bias must have at most 2^31 values (num_heads*HW*HW), got 4294967296");
  check({1, int64_t{1} << 40, 1}, "the bias must have at most 2^31 values (num_heads*HW*HW), got 1.2089258196146292e+24");
  std::vector<float> out(4);
  expect_error([&] { alibi_bias_2d<float>({1, 1, 2}, nullptr, out.data()); },
               "[alibi_bias_2d] slopes must not be null");
}

// ---- timing (POSENC_BIAS_TIMING=1) ----

// Best of a few fills of a warm 32 x 4096 x 4096 float32 bias (2 GiB), next
// to a parallel std::fill of the same buffer as the write-bandwidth roofline.
TEST(AlibiTiming, Fill32x4096x4096) {
  const char* env = std::getenv("POSENC_BIAS_TIMING");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set POSENC_BIAS_TIMING=1";
  const int64_t heads = 32, t = 4096, n = heads * t * t;
  std::vector<float> out(static_cast<size_t>(n));  // zeroed: touched once before timing
  const std::vector<double> slopes = alibi_slopes(heads);
  const double bytes = static_cast<double>(n) * sizeof(float);  // one write per value
  const double fill_s = best_seconds([&] {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < heads * t; ++r) std::fill(out.data() + r * t, out.data() + (r + 1) * t, 1.0f);
  });
  const double alibi_s = best_seconds([&] { alibi_bias<float>({heads, t, t, 0, true}, slopes.data(), out.data()); });
  EXPECT_EQ(out[1], -std::numeric_limits<float>::infinity());  // the buffer was really written
  std::printf("[timing] threads=%d  std::fill %.1f GB/s (%.3f s)  alibi_bias causal %.1f GB/s (%.3f s)\n",
              omp_get_max_threads(), bytes / fill_s / 1e9, fill_s, bytes / alibi_s / 1e9, alibi_s);
}

}  // namespace
}  // namespace posenc::kernels
