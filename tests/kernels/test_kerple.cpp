// KERPLE offset rows (kernels/kerple.h) against the paper's formulas written
// plainly in long double over (i, j) pairs, the gradients against the
// hand-derived derivatives and central differences of that reference.
#include "posenc/kernels/kerple.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "check.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

// The paper's kernels of the distance |i - j| between key j and query i' = i + k_len - q_len.
long double reference(KerpleKind kind, long double r1, long double r2, int64_t i, int64_t j, int64_t q_len,
                      int64_t k_len) {
  const long double dist = std::fabs(static_cast<long double>(j - (i + k_len - q_len)));
  if (kind == KerpleKind::kLog) return -r1 * std::log(1.0L + r2 * dist);
  return dist == 0 ? 0.0L : -r1 * std::pow(dist, r2);
}

struct Case {
  KerpleKind kind;
  int64_t heads, q_len, k_len;
};

const std::vector<Case> kCases{
    {KerpleKind::kLog, 4, 7, 7},   {KerpleKind::kLog, 3, 1, 9},   {KerpleKind::kLog, 2, 5, 3},
    {KerpleKind::kPower, 4, 7, 7}, {KerpleKind::kPower, 3, 1, 9}, {KerpleKind::kPower, 1, 6, 2},
};

std::string name_of(const Case& c) {
  return std::string(kerple_kind_name(c.kind)) + " heads=" + std::to_string(c.heads) + " q=" +
         std::to_string(c.q_len) + " k=" + std::to_string(c.k_len);
}

// Per head r1 in (0.01, 2], r2 in (0.01, 1] and, for the power kernel, one r2 up to its bound 2.
void parameters(const Case& c, std::vector<double>& r1, std::vector<double>& r2) {
  r1.resize(c.heads), r2.resize(c.heads);
  for (int64_t h = 0; h < c.heads; ++h) {
    r1[h] = 0.3 + 0.55 * static_cast<double>(h);
    r2[h] = c.kind == KerpleKind::kPower && h == c.heads - 1 ? 2.0 : 0.05 + 0.3 * static_cast<double>(h);
  }
}

TEST(Kerple, RowsMatchThePaperOnEveryPair) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name_of(c));
    std::vector<double> r1, r2;
    parameters(c, r1, r2);
    const KerpleParams p{c.kind, c.heads, c.q_len, c.k_len};
    ASSERT_EQ(kerple_columns(p), c.q_len + c.k_len - 1);
    std::vector<double> rows(static_cast<size_t>(c.heads * kerple_columns(p)));
    std::vector<float> rows32(rows.size());
    std::vector<float> r1f(r1.begin(), r1.end()), r2f(r2.begin(), r2.end());
    kerple_offset_bias(p, r1.data(), r2.data(), rows.data());
    kerple_offset_bias(p, r1f.data(), r2f.data(), rows32.data());
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.q_len; ++i) {
        for (int64_t j = 0; j < c.k_len; ++j) {
          // The fused attention's layout: column d + k_len - 1 for d = j - i'.
          const int64_t column = j - (i + c.k_len - c.q_len) + c.k_len - 1;
          const long double want = reference(c.kind, r1[h], r2[h], i, j, c.q_len, c.k_len);
          const double got = rows[static_cast<size_t>(h * kerple_columns(p) + column)];
          // 4 ulp: log1p/pow in double against long double.
          EXPECT_NEAR(got, static_cast<double>(want), 4 * std::numeric_limits<double>::epsilon() *
                                                          std::max(1.0L, std::fabs(want)));
          const long double want32 = reference(c.kind, r1f[h], r2f[h], i, j, c.q_len, c.k_len);
          // float32: formed in double from the float parameters, rounded once (half an ulp).
          EXPECT_NEAR(rows32[static_cast<size_t>(h * kerple_columns(p) + column)], static_cast<double>(want32),
                      0.5 * std::numeric_limits<float>::epsilon() * std::max(1.0L, std::fabs(want32)));
        }
      }
    }
  }
}

TEST(Kerple, GradientsMatchDerivativesAndDifferences) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name_of(c));
    std::vector<double> r1, r2;
    parameters(c, r1, r2);
    const KerpleParams p{c.kind, c.heads, c.q_len, c.k_len};
    const int64_t columns = kerple_columns(p);
    std::vector<double> grad(static_cast<size_t>(c.heads * columns));
    for (size_t n = 0; n < grad.size(); ++n) grad[n] = std::sin(1.0 + 0.7 * static_cast<double>(n));
    std::vector<double> g1(c.heads), g2(c.heads);
    kerple_offset_bias_backward(p, r1.data(), r2.data(), grad.data(), g1.data(), g2.data());
    for (int64_t h = 0; h < c.heads; ++h) {
      // sum over columns of grad * d(reference)/dr, by central differences of the long double reference.
      auto loss = [&](long double a, long double b) {
        long double s = 0;
        for (int64_t col = 0; col < columns; ++col) {
          // Column col holds the offset d = col - (k_len - 1).
          const long double dist = std::fabs(static_cast<long double>(col - (c.k_len - 1)));
          const long double v = c.kind == KerpleKind::kLog ? -a * std::log(1.0L + b * dist)
                                                           : (dist == 0 ? 0.0L : -a * std::pow(dist, b));
          s += grad[static_cast<size_t>(h * columns + col)] * v;
        }
        return s;
      };
      const long double e = 1e-7L;
      // The power kernel's r2 = 2 sits on its bound: one-sided difference there.
      const bool at_bound = c.kind == KerpleKind::kPower && r2[h] == 2.0;
      const long double d1 = (loss(r1[h] + e, r2[h]) - loss(r1[h] - e, r2[h])) / (2 * e);
      const long double d2 = at_bound ? (loss(r1[h], r2[h]) - loss(r1[h], r2[h] - e)) / e
                                      : (loss(r1[h], r2[h] + e) - loss(r1[h], r2[h] - e)) / (2 * e);
      // 1e-6 relative: the differences' truncation error (e^2 central, e one-sided), in long double.
      EXPECT_NEAR(g1[h], static_cast<double>(d1), 1e-6 * std::max(1.0L, std::fabs(d1)));
      EXPECT_NEAR(g2[h], static_cast<double>(d2), (at_bound ? 1e-4 : 1e-6) * std::max(1.0L, std::fabs(d2)));
    }
  }
}

TEST(Kerple, BiasIsMonotoneNonIncreasingInDistance) {
  // Any r1, r2 > 0 (in particular the authors' U(0, 2), U(0, 1) initialisation).
  for (KerpleKind kind : {KerpleKind::kLog, KerpleKind::kPower}) {
    for (double a : {0.01, 0.5, 2.0}) {
      for (double b : {0.01, 0.4, 1.0, 2.0}) {
        const KerpleParams p{kind, 1, 40, 40};
        std::vector<double> rows(static_cast<size_t>(kerple_columns(p)));
        kerple_offset_bias(p, &a, &b, rows.data());
        // Column 39 is d = 0; going out either way, the bias never rises and is 0 at d = 0.
        EXPECT_EQ(rows[39], 0.0);
        for (int64_t d = 1; d < 40; ++d) {
          EXPECT_LE(rows[39 + d], rows[39 + d - 1]) << "a=" << a << " b=" << b << " d=" << d;
          EXPECT_LE(rows[39 - d], rows[39 - d + 1]) << "a=" << a << " b=" << b << " d=" << -d;
          EXPECT_EQ(rows[39 + d], rows[39 - d]);  // symmetric in d
        }
      }
    }
  }
}

TEST(Kerple, EmptyLengthsGiveNoColumns) {
  const double a = 1, b = 1;
  EXPECT_EQ(kerple_columns({KerpleKind::kLog, 2, 0, 5}), 0);
  EXPECT_EQ(kerple_columns({KerpleKind::kLog, 2, 5, 0}), 0);
  double g1 = 7, g2 = 7;
  kerple_offset_bias_backward<double>({KerpleKind::kLog, 1, 0, 3}, &a, &b, nullptr, &g1, &g2);
  EXPECT_EQ(g1, 0.0);
  EXPECT_EQ(g2, 0.0);
}

TEST(Kerple, Errors) {
  double out[64];
  auto call = [&](KerpleKind kind, int64_t heads, int64_t q, int64_t k, double a, double b) {
    return [=, &out] {
      const std::vector<double> r1(static_cast<size_t>(std::max<int64_t>(heads, 1)), a);
      std::vector<double> r2(r1.size(), 0.5);
      r2.back() = b;
      kerple_offset_bias<double>({kind, heads, q, k}, r1.data(), r2.data(), out);
    };
  };
  expect_error(call(KerpleKind::kLog, 0, 2, 2, 1, 1), "[kerple] num_heads must be >= 1, got 0");
  expect_error(call(KerpleKind::kLog, 1, -1, 2, 1, 1), "[kerple] q_len must be >= 0, got -1");
  expect_error(call(KerpleKind::kLog, 1, 2, -3, 1, 1), "[kerple] k_len must be >= 0, got -3");
  expect_error(call(KerpleKind::kLog, 1, 2, 2, 0, 1), "[kerple] r1 must be > 0, got 0 (head 0)");
  expect_error(call(KerpleKind::kLog, 2, 2, 2, 1, -0.5), "[kerple] r2 must be > 0, got -0.5 (head 1)");
  expect_error(call(KerpleKind::kLog, 1, 2, 2, std::nan(""), 1), "[kerple] r1 must be > 0, got nan (head 0)");
  expect_error(call(KerpleKind::kPower, 3, 2, 2, 1, 2.5), "[kerple] r2 must be <= 2, got 2.5 (head 2)");
  expect_error([] { parse_kerple_kind("cosine"); }, "[kerple] kind must be \"log\" or \"power\", got \"cosine\"");
  EXPECT_EQ(parse_kerple_kind("power"), KerpleKind::kPower);
  EXPECT_EQ(kerple_kind_name(parse_kerple_kind("log")), "log");
}

}  // namespace
}  // namespace posenc::kernels
