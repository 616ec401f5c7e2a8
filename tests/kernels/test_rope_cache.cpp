// RopeCache: when it rebuilds (length growth, a new base / scaling /
// precision, a dynamic or longrope regime change) and when it must not, the
// version counter, and contents against cos/sin of the exact angles and
// against a direct rope_cos_sin of the same positions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_cache.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

// rope.h promises float32 tables within a few float32 ulps of the exact
// value; 5e-7 per unit of attention factor is ~4 ulps of 1.
constexpr double kFloatTolerance = 5e-7;
// Double tables: angles reduced in double-double, ~2 double ulps per entry.
constexpr double kDoubleTolerance = 1e-12;

template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? kFloatTolerance : kDoubleTolerance;
}

// cos and sin of p * omega_j in long double (omega as the cache reports it:
// the frequencies are tested against Hugging Face in test_rope_scaling.cpp).
void exact_table(const RopeFrequencies& f, int64_t length, std::vector<double>& cos, std::vector<double>& sin) {
  const size_t half = f.inv_freq.size();
  cos.assign(static_cast<size_t>(length) * half, 0.0);
  sin.assign(cos.size(), 0.0);
  for (int64_t p = 0; p < length; ++p) {
    for (size_t j = 0; j < half; ++j) {
      const long double angle = static_cast<long double>(p) * static_cast<long double>(f.inv_freq[j]);
      cos[static_cast<size_t>(p) * half + j] = static_cast<double>(f.attention_factor * cosl(angle));
      sin[static_cast<size_t>(p) * half + j] = static_cast<double>(f.attention_factor * sinl(angle));
    }
  }
}

template <class T>
void expect_contents(const RopeCache<T>& cache, const std::string& what) {
  const RopeFrequencies& f = cache.frequencies();
  const int64_t half = cache.config().dim / 2;
  ASSERT_EQ(static_cast<int64_t>(f.inv_freq.size()), half) << what;
  ASSERT_EQ(static_cast<int64_t>(cache.cos().size()), cache.length() * half) << what;
  ASSERT_EQ(cache.sin().size(), cache.cos().size()) << what;
  const std::vector<T> cos(cache.cos().begin(), cache.cos().end());
  const std::vector<T> sin(cache.sin().begin(), cache.sin().end());

  std::vector<double> exact_cos, exact_sin;
  exact_table(f, cache.length(), exact_cos, exact_sin);
  const double tol = tolerance<T>() * f.attention_factor;
  if (cache.config().precision == Precision::kExact) {
    EXPECT_LE(max_abs_diff(cos, exact_cos), tol) << what;
    EXPECT_LE(max_abs_diff(sin, exact_sin), tol) << what;
  }

  // The same positions through the per-entry path of rope_cos_sin.
  std::vector<int64_t> positions(static_cast<size_t>(cache.length()));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  RopeTableSpec spec;
  spec.omega = f.inv_freq;
  spec.attention_factor = f.attention_factor;
  spec.precision = cache.config().precision;
  std::vector<T> direct_cos(cos.size()), direct_sin(sin.size());
  rope_cos_sin<T>(spec, positions.data(), nullptr, cache.length(), direct_cos.data(), direct_sin.data());
  EXPECT_LE(max_abs_diff(cos, direct_cos), tol) << what;
  EXPECT_LE(max_abs_diff(sin, direct_sin), tol) << what;
}

RopeConfig config(int64_t dim, double base, RopeScaling scaling = {}) {
  RopeConfig c;
  c.dim = dim;
  c.base = base;
  c.scaling = std::move(scaling);
  return c;
}

template <class T>
class RopeCacheTest : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RopeCacheTest, Types);

TYPED_TEST(RopeCacheTest, BuildsOnFirstUseAndGrowsByDoubling) {
  RopeCache<TypeParam> cache(config(64, 10000.0));
  EXPECT_EQ(cache.version(), 0u);
  EXPECT_EQ(cache.length(), 0);
  EXPECT_TRUE(cache.cos().empty());

  EXPECT_TRUE(cache.ensure(100));
  EXPECT_EQ(cache.version(), 1u);
  EXPECT_EQ(cache.length(), 100);
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(64, 10000.0, RopeScaling{}).inv_freq);
  expect_contents(cache, "first build");

  // Shorter or equal: nothing to do.
  for (int64_t n : {1, 50, 100}) {
    EXPECT_FALSE(cache.ensure(n)) << n;
    EXPECT_EQ(cache.version(), 1u);
    EXPECT_EQ(cache.length(), 100);
  }
  // Slightly longer: doubled, to amortize a decode loop.
  EXPECT_TRUE(cache.ensure(101));
  EXPECT_EQ(cache.version(), 2u);
  EXPECT_EQ(cache.length(), 200);
  expect_contents(cache, "doubled");
  for (int64_t n = 102; n <= 200; ++n) ASSERT_FALSE(cache.ensure(n)) << n;
  // Much longer: exactly what is asked.
  EXPECT_TRUE(cache.ensure(1000));
  EXPECT_EQ(cache.version(), 3u);
  EXPECT_EQ(cache.length(), 1000);
  expect_contents(cache, "grown");
}

TYPED_TEST(RopeCacheTest, RebuildsWhenTheConfigurationChanges) {
  RopeCache<TypeParam> cache(config(64, 10000.0));
  cache.ensure(300);
  const uint64_t v0 = cache.version();

  // The same configuration again: the frequencies agree, nothing is rebuilt.
  cache.reconfigure(config(64, 10000.0));
  EXPECT_FALSE(cache.ensure(300));
  EXPECT_EQ(cache.version(), v0);

  // A new base.
  cache.reconfigure(config(64, 500000.0));
  EXPECT_EQ(cache.config().base, 500000.0);
  EXPECT_TRUE(cache.ensure(300));
  EXPECT_EQ(cache.version(), v0 + 1);
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(64, 500000.0, RopeScaling{}).inv_freq);
  expect_contents(cache, "new base");

  // A scaling: linear factor 4.
  RopeScaling linear;
  linear.type = RopeType::kLinear;
  linear.factor = 4.0;
  cache.reconfigure(config(64, 500000.0, linear));
  EXPECT_TRUE(cache.ensure(10));
  EXPECT_EQ(cache.version(), v0 + 2);
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(64, 500000.0, linear).inv_freq);
  EXPECT_EQ(cache.length(), 10);  // new frequencies: exactly the length asked
  expect_contents(cache, "linear");

  // A scaling with an attention factor (YaRN): included in cos and sin.
  RopeScaling yarn;
  yarn.type = RopeType::kYarn;
  yarn.factor = 4.0;
  yarn.original_max_position_embeddings = 64;
  cache.reconfigure(config(64, 500000.0, yarn));
  EXPECT_TRUE(cache.ensure(200));
  EXPECT_DOUBLE_EQ(cache.frequencies().attention_factor, 0.1 * std::log(4.0) + 1.0);
  expect_contents(cache, "yarn");
  const double a = cache.frequencies().attention_factor;
  for (int64_t k : {0, 77, 199 * 32 + 31}) {
    const double c = cache.cos()[static_cast<size_t>(k)], s = cache.sin()[static_cast<size_t>(k)];
    EXPECT_NEAR(c * c + s * s, a * a, 4 * tolerance<TypeParam>()) << k;  // the factor scales the unit circle
  }

  // A new dim.
  cache.reconfigure(config(32, 500000.0));
  EXPECT_TRUE(cache.ensure(5));
  EXPECT_EQ(cache.cos().size(), 5u * 16u);
  expect_contents(cache, "new dim");

  // Precision alone: same frequencies, other table.
  const uint64_t v1 = cache.version();
  RopeConfig fp32 = config(32, 500000.0);
  fp32.precision = Precision::kFp32;
  cache.reconfigure(fp32);
  EXPECT_TRUE(cache.ensure(5));
  EXPECT_EQ(cache.version(), v1 + 1);
  expect_contents(cache, "fp32");
  EXPECT_FALSE(cache.ensure(5));
}

TYPED_TEST(RopeCacheTest, DynamicRebuildsOnEveryLengthAboveTheOriginal) {
  RopeScaling dynamic;
  dynamic.type = RopeType::kDynamic;
  dynamic.factor = 2.0;
  dynamic.original_max_position_embeddings = 256;
  RopeCache<TypeParam> cache(config(64, 10000.0, dynamic));
  const std::vector<double> plain = rope_frequencies(64, 10000.0, RopeScaling{}).inv_freq;

  EXPECT_TRUE(cache.ensure(100));
  EXPECT_EQ(cache.frequencies().inv_freq, plain);
  // Growth within L0 keeps the default spectrum: a plain doubling.
  EXPECT_TRUE(cache.ensure(256));
  EXPECT_EQ(cache.length(), 256);
  EXPECT_EQ(cache.frequencies().inv_freq, plain);
  const uint64_t v = cache.version();

  // One past L0: the NTK base of that length, the whole table rebuilt.
  EXPECT_TRUE(cache.ensure(257));
  EXPECT_EQ(cache.version(), v + 1);
  EXPECT_EQ(cache.length(), 257);
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(64, 10000.0, dynamic, 257).inv_freq);
  EXPECT_NE(cache.frequencies().inv_freq, plain);
  expect_contents(cache, "dynamic 257");
  EXPECT_FALSE(cache.ensure(257));

  // Every longer sequence has its own frequencies: never a stale table.
  EXPECT_TRUE(cache.ensure(258));
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(64, 10000.0, dynamic, 258).inv_freq);
  EXPECT_EQ(cache.length(), 258);

  // Back below L0: the default spectrum again (unlike HF's grow-only cache).
  EXPECT_TRUE(cache.ensure(10));
  EXPECT_EQ(cache.frequencies().inv_freq, plain);
  EXPECT_EQ(cache.length(), 10);
  expect_contents(cache, "dynamic back");
  // Within L0 any length < current is served.
  EXPECT_FALSE(cache.ensure(3));
}

TYPED_TEST(RopeCacheTest, LongropeSwitchesShortToLongAndBack) {
  RopeScaling longrope;
  longrope.type = RopeType::kLongrope;
  longrope.original_max_position_embeddings = 128;
  longrope.max_position_embeddings = 4096;
  for (int i = 0; i < 16; ++i) {
    longrope.short_factor.push_back(1.0 + 0.1 * i);
    longrope.long_factor.push_back(2.0 + 3.0 * i);
  }
  RopeCache<TypeParam> cache(config(32, 10000.0, longrope));
  EXPECT_TRUE(cache.ensure(100));
  const RopeFrequencies short_f = rope_frequencies(32, 10000.0, longrope, 100);
  EXPECT_EQ(cache.frequencies().inv_freq, short_f.inv_freq);
  EXPECT_TRUE(cache.ensure(128));  // growth, still short
  EXPECT_EQ(cache.length(), 200);
  EXPECT_FALSE(cache.ensure(128));
  const uint64_t v = cache.version();

  // Past L0 every position must use the long factors, even those already cached.
  EXPECT_TRUE(cache.ensure(129));
  EXPECT_EQ(cache.version(), v + 1);
  EXPECT_EQ(cache.frequencies().inv_freq, rope_frequencies(32, 10000.0, longrope, 129).inv_freq);
  EXPECT_NE(cache.frequencies().inv_freq, short_f.inv_freq);
  EXPECT_EQ(cache.frequencies().attention_factor, short_f.attention_factor);
  EXPECT_EQ(cache.length(), 129);
  expect_contents(cache, "long");
  // Growth in the long regime is a plain doubling with the same frequencies.
  EXPECT_TRUE(cache.ensure(130));
  EXPECT_EQ(cache.length(), 258);
  EXPECT_FALSE(cache.ensure(258));
  expect_contents(cache, "long grown");

  // And back to the short factors.
  EXPECT_TRUE(cache.ensure(64));
  EXPECT_EQ(cache.frequencies().inv_freq, short_f.inv_freq);
  EXPECT_EQ(cache.length(), 64);
}

TYPED_TEST(RopeCacheTest, Errors) {
  expect_error([] { RopeCache<TypeParam> c(config(7, 10000.0)); }, "[rope] dim must be even, got 7");
  expect_error([] { RopeCache<TypeParam> c(config(8, 0.0)); }, "[rope] base must be finite and > 0, got 0");
  RopeScaling bad;
  bad.type = RopeType::kLinear;
  expect_error([&] { RopeCache<TypeParam> c(config(8, 10000.0, bad)); }, "[rope] linear needs factor");

  RopeCache<TypeParam> cache(config(8, 10000.0));
  expect_error([&] { cache.ensure(0); }, "[rope] seq_len must be positive, got 0");
  expect_error([&] { cache.ensure(-3); }, "[rope] seq_len must be positive, got -3");
  cache.ensure(10);
  // A refused configuration leaves the cache as it was.
  expect_error([&] { cache.reconfigure(config(8, 10000.0, bad)); }, "[rope] linear needs factor");
  EXPECT_EQ(cache.config().scaling.type, RopeType::kDefault);
  EXPECT_FALSE(cache.ensure(10));
  expect_error([&] { cache.ensure(int64_t{1} << 40); },
               "[rope] cache length x dim/2 must be at most 2147483648 values, got 1099511627776 x 4");
  EXPECT_EQ(cache.length(), 10);
  EXPECT_EQ(cache.version(), 1u);
}

}  // namespace
}  // namespace posenc::kernels
