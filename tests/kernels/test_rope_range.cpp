// rope_range_rows: the row layout (cos | sin), values against cos/sin of the
// exact angles in long double, the regime its seq_len selects, bounded
// scratch that changes no value, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/rope_range.h"
#include "posenc/kernels/rope_scaling.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

// Row p - start: a * cos(p * omega_j) in column j, a * sin in column R/2 + j.
std::vector<double> exact_rows(const RopeFrequencies& f, int64_t start, int64_t count) {
  const int64_t half = static_cast<int64_t>(f.inv_freq.size());
  std::vector<double> rows(static_cast<size_t>(count * 2 * half));
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const long double angle =
          static_cast<long double>(start + r) * static_cast<long double>(f.inv_freq[static_cast<size_t>(j)]);
      rows[static_cast<size_t>(r * 2 * half + j)] = static_cast<double>(f.attention_factor * cosl(angle));
      rows[static_cast<size_t>(r * 2 * half + half + j)] = static_cast<double>(f.attention_factor * sinl(angle));
    }
  }
  return rows;
}

RopeScaling yarn() {
  RopeScaling s;
  s.type = RopeType::kYarn;
  s.factor = 4.0;
  s.original_max_position_embeddings = 256;
  return s;
}

TEST(RopeRangeRows, RowsHoldCosThenSinOfTheExactAngles) {
  const RopeConfig config{16, 10000.0, yarn(), Precision::kExact};
  const int64_t start = 100000, count = 37;
  const RopeRangeTable<double> d = rope_range_rows<double>(config, std::nullopt, start, count);
  const RopeRangeTable<float> f = rope_range_rows<float>(config, std::nullopt, start, count);
  ASSERT_EQ(d.frequencies.inv_freq.size(), 8u);
  EXPECT_GT(d.frequencies.attention_factor, 1.0);  // YaRN's factor is in every value
  const std::vector<double> exact = exact_rows(d.frequencies, start, count);
  EXPECT_LE(max_abs_diff(d.values, exact), 1e-12);
  EXPECT_LE(max_abs_diff(f.values, exact), 5e-7 * d.frequencies.attention_factor);
}

TEST(RopeRangeRows, FrequenciesAreThoseOfTheRangeOrOfTheGivenLength) {
  RopeScaling dynamic;
  dynamic.type = RopeType::kDynamic;
  dynamic.factor = 2.0;
  dynamic.original_max_position_embeddings = 64;
  const RopeConfig config{8, 10000.0, dynamic, Precision::kExact};
  // Positions 100..149: Hugging Face's length is the last position + 1 = 150, past L0.
  const RopeRangeTable<double> range = rope_range_rows<double>(config, std::nullopt, 100, 50);
  EXPECT_EQ(range.frequencies.inv_freq, rope_frequencies(8, 10000.0, dynamic, 150, "rope").inv_freq);
  EXPECT_NE(range.frequencies.inv_freq, rope_frequencies(8, 10000.0, {}, std::nullopt, "rope").inv_freq);
  // A given seq_len within L0 selects the unscaled spectrum for the same positions.
  const RopeRangeTable<double> given = rope_range_rows<double>(config, 64, 100, 50);
  EXPECT_EQ(given.frequencies.inv_freq, rope_frequencies(8, 10000.0, {}, std::nullopt, "rope").inv_freq);
  EXPECT_LE(max_abs_diff(given.values, exact_rows(given.frequencies, 100, 50)), 1e-12);
}

TEST(RopeRangeRows, BoundedScratchGivesTheSameTable) {
  const RopeConfig config{12, 500000.0, {}, Precision::kExact};
  const RopeRangeTable<float> whole = rope_range_rows<float>(config, std::nullopt, 7, 23);
  // 6 values per half row: batches of 1 row, and of 3 rows with a short last batch.
  for (const int64_t scratch : {int64_t{1}, int64_t{6}, int64_t{18}, int64_t{20}}) {
    const RopeRangeTable<float> batched = rope_range_rows<float>(config, std::nullopt, 7, 23, "rope", scratch);
    ASSERT_EQ(batched.values.size(), whole.values.size()) << scratch;
    EXPECT_LE(max_abs_diff(batched.values, exact_rows(whole.frequencies, 7, 23)), 5e-7) << scratch;
    EXPECT_LE(max_abs_diff(batched.values, whole.values), 1e-6) << scratch;
  }
}

TEST(RopeRangeRows, BadInputNamesTheCallerTheArgumentAndTheValue) {
  const RopeConfig odd{7, 10000.0, {}, Precision::kExact};
  expect_error([&] { rope_range_rows<double>(odd, std::nullopt, 0, 4, "rope-table"); },
               "[rope-table] dim must be even, got 7");
  const RopeConfig good{8, 10000.0, {}, Precision::kExact};
  expect_error([&] { rope_range_rows<double>(good, std::nullopt, 0, 0, "rope-table"); },
               "[rope-table] positions must be at least 1, got 0");
  expect_error([&] { rope_range_rows<float>(good, std::nullopt, 0, 4, "rope-table", 0); },
               "[rope-table] max_scratch_values must be positive, got 0");
  expect_error([&] { rope_range_rows<float>(good, std::nullopt, 0, int64_t{1} << 40, "rope-table"); },
               "[rope-table] positions x dim must be at most " + std::to_string(kMaxTableValues) +
                   " values, got 1099511627776 x 8");
}

}  // namespace
}  // namespace posenc::kernels
