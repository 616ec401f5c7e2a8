// posenc::check on tensors built here from plain float64 formulas: a
// correct table matches, each broken one is explained by its hypothesis
// only, and bad requests throw the documented messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "posenc/check/check.h"

namespace {

using posenc::check::CheckReport;
using posenc::check::CheckRequest;
using posenc::check::DumpedTensor;

// [n, d] interleaved sinusoidal table, rows p = first .. first+n-1, float32-rounded:
// PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i), w_i = 10000^(-2i/d); half: sines then cosines.
DumpedTensor sinusoidal(int64_t n, int64_t d, int64_t first, bool half) {
  DumpedTensor t{"table", "float32", {n, d}, std::vector<double>(static_cast<size_t>(n * d))};
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double a = static_cast<double>(r + first) * std::pow(10000.0, -2.0 * i / d);
      t.values[r * d + (half ? i : 2 * i)] = static_cast<float>(std::sin(a));
      t.values[r * d + (half ? i + d / 2 : 2 * i + 1)] = static_cast<float>(std::cos(a));
    }
  }
  return t;
}

std::vector<std::string> explaining(const CheckReport& r) {
  std::vector<std::string> names;
  for (const auto& h : r.hypotheses) {
    if (h.explains) names.push_back(h.name);
  }
  return names;
}

CheckRequest table_request(DumpedTensor t) {
  CheckRequest q;
  q.kind = "sinusoidal";
  q.tensor = std::move(t);
  return q;
}

TEST(Check, CorrectTableMatches) {
  const CheckReport r = posenc::check::run_check(table_request(sinusoidal(64, 32, 0, false)));
  EXPECT_TRUE(r.matches);
  EXPECT_EQ(r.what, "table");
  EXPECT_LE(r.max_abs, r.tolerance);
  EXPECT_DOUBLE_EQ(r.tolerance, std::ldexp(1.0, -21));  // float32, value range 1
  EXPECT_TRUE(r.hypotheses.empty());
  ASSERT_EQ(r.bands.size(), 7u);  // [0,1) [1,2) [2,4) ... [32,64)
  EXPECT_EQ(r.bands.back().lo, 32);
  EXPECT_EQ(r.bands.back().hi, 64);
}

TEST(Check, HalfLayoutIsDiagnosed) {
  const CheckReport r = posenc::check::run_check(table_request(sinusoidal(64, 32, 0, true)));
  EXPECT_FALSE(r.matches);
  EXPECT_EQ(explaining(r), std::vector<std::string>{"layout-half"});
  ASSERT_FALSE(r.diagnosis.empty());
  EXPECT_EQ(r.diagnosis[0].rfind("layout-half: the other sin/cos layout: half", 0), 0u) << r.diagnosis[0];
}

TEST(Check, OffByOneIsDiagnosed) {
  const CheckReport r = posenc::check::run_check(table_request(sinusoidal(64, 32, -1, false)));
  EXPECT_EQ(explaining(r), std::vector<std::string>{"positions-1"});
}

TEST(Check, ScaledTableGivesTheConstant) {
  DumpedTensor t = sinusoidal(64, 32, 0, false);
  for (double& v : t.values) v = static_cast<float>(v * 0.5);
  const CheckReport r = posenc::check::run_check(table_request(t));
  ASSERT_TRUE(r.ratio.has_value());
  EXPECT_NEAR(*r.ratio, 0.5, 1e-7);
  EXPECT_EQ(explaining(r), std::vector<std::string>{"constant-factor"});
}

TEST(Check, Errors) {
  EXPECT_THROW(
      {
        try {
          posenc::check::parse_what("tables");
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "[check] --what must be one of cos-sin, rotated, bias, table, got 'tables'");
          throw;
        }
      },
      std::invalid_argument);
  CheckRequest q = table_request(sinusoidal(4, 8, 0, false));
  q.positions = std::vector<int64_t>{0, 1, 2};
  EXPECT_THROW(
      {
        try {
          posenc::check::run_check(q);
        } catch (const std::invalid_argument& e) {
          EXPECT_STREQ(e.what(), "[check] --positions must list 4 positions (the tensor's rows), got 3");
          throw;
        }
      },
      std::invalid_argument);
}

}  // namespace
