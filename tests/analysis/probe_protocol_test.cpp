// The relative probe's pe-study protocol (probes.h): Wang & Chen's released
// relative.py, against a plain long-double reference written from
// docs/analysis.md, and the reading the paper reports for the sinusoid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis_test_support.h"
#include "posenc/analysis/probes.h"

namespace posenc::analysis {
namespace {

using Real = long double;
using test::expect_error;

ProbeOptions pe_study(uint64_t seed = 0) {
  ProbeOptions options;
  options.protocol = ProbeProtocol::kPeStudy;
  options.seed = seed;
  return options;
}

// ---- the reference -------------------------------------------------------------

// uniform_below and the partial Fisher-Yates of docs/analysis.md, over a full array.
std::vector<int64_t> documented_draw(int64_t total, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> items(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) items[i] = i;
  for (int64_t t = 0; t < count; ++t) {
    const auto bound = static_cast<uint64_t>(total - t);
    const uint64_t reject_under = (~bound + 1) % bound;  // 2^64 mod bound
    uint64_t r = rng();
    while (r < reject_under) r = rng();
    std::swap(items[t], items[t + static_cast<int64_t>(r % bound)]);
  }
  items.resize(static_cast<size_t>(count));
  return items;
}

struct Sample {
  int64_t first, second;
  Real label;
};

// argmin of mean log loss + |w|^2 / (2 N) (bias not penalized) by Newton's method in long double.
std::vector<Real> newton_fit(const Matrix& table, const std::vector<Sample>& train) {
  const int64_t d = table.cols, size = 2 * d + 1;
  const auto count = static_cast<Real>(train.size());
  std::vector<Real> theta(static_cast<size_t>(size), 0);
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<Real> grad(static_cast<size_t>(size), 0), hess(static_cast<size_t>(size * size), 0);
    for (const Sample& s : train) {
      std::vector<Real> f(static_cast<size_t>(size));
      for (int64_t k = 0; k < d; ++k) f[k] = table(s.first, k), f[d + k] = table(s.second, k);
      f[2 * d] = 1;
      Real logit = 0;
      for (int64_t k = 0; k < size; ++k) logit += theta[k] * f[k];
      const Real p = 1 / (1 + std::exp(-logit));
      for (int64_t k = 0; k < size; ++k) {
        grad[k] += (p - s.label) * f[k] / count;
        for (int64_t l = 0; l < size; ++l) hess[k * size + l] += p * (1 - p) * f[k] * f[l] / count;
      }
    }
    for (int64_t k = 0; k < 2 * d; ++k) grad[k] += theta[k] / count, hess[k * size + k] += 1 / count;
    const std::vector<Real> step = test::solve(hess, grad, size, 1);
    for (int64_t k = 0; k < size; ++k) theta[k] -= step[k];
  }
  return theta;
}

double reference_pe_study_error(const Matrix& table, int64_t folds, uint64_t seed, int64_t pairs) {
  const int64_t rows = std::min<int64_t>(table.rows, 512), d = table.cols;
  std::vector<Sample> samples;
  for (int64_t q : documented_draw(rows * rows, pairs, seed))
    samples.push_back({q / rows, q % rows, q / rows < q % rows ? Real(1) : Real(0)});
  std::vector<int64_t> fold(samples.size());
  int64_t t = 0;
  for (Real label : {Real(0), Real(1)})
    for (size_t k = 0; k < samples.size(); ++k)
      if (samples[k].label == label) fold[k] = t++ % folds;
  Real sum = 0;
  for (int64_t f = 0; f < folds; ++f) {
    std::vector<Sample> train, test;
    for (size_t k = 0; k < samples.size(); ++k) (fold[k] == f ? test : train).push_back(samples[k]);
    const std::vector<Real> theta = newton_fit(table, train);
    int64_t errors = 0;
    for (const Sample& s : test) {
      Real logit = theta[2 * d];
      for (int64_t k = 0; k < d; ++k) logit += theta[k] * table(s.first, k) + theta[d + k] * table(s.second, k);
      errors += (logit > 0) != (s.label == 1);
    }
    sum += static_cast<Real>(errors) / static_cast<Real>(test.size());
  }
  return static_cast<double>(sum / static_cast<Real>(folds));
}

// ---- tests -----------------------------------------------------------------------

TEST(ProbeProtocol, Names) {
  EXPECT_EQ(parse_probe_protocol("default"), ProbeProtocol::kDefault);
  EXPECT_EQ(parse_probe_protocol("pe-study"), ProbeProtocol::kPeStudy);
  EXPECT_EQ(probe_protocol_name(ProbeProtocol::kDefault), "default");
  EXPECT_EQ(probe_protocol_name(ProbeProtocol::kPeStudy), "pe-study");
  expect_error([] { parse_probe_protocol("x"); }, "[probe] protocol must be default or pe-study, got 'x'");
  expect_error([] { parse_probe_protocol("pe_study"); },
               "[probe] protocol must be default or pe-study, got 'pe_study'");
  ProbeOptions options;
  options.protocol = static_cast<ProbeProtocol>(7);
  expect_error([&] { probe(test::random_table(20, 3, 1), options); },
               "[probe] protocol must be default or pe-study, got '7'");
  expect_error([&] { relative_probe_error(test::random_table(20, 3, 1), options); },
               "[probe] protocol must be default or pe-study, got '7'");
}

TEST(ProbeProtocol, PairsDefaultToTheRowsUsedAndAreCapped) {
  // relative.py draws x.shape[0] pairs after x = x[:512]: min(n, 512), from min(n, 512)^2 ordered pairs.
  EXPECT_EQ(probe(test::random_table(40, 3, 2), pe_study()).pairs, 40);
  EXPECT_EQ(probe(test::random_table(600, 2, 2), pe_study()).pairs, 512);
  ProbeOptions options = pe_study();
  options.pairs = 2000;
  EXPECT_EQ(probe(test::random_table(40, 3, 2), options).pairs, 1600);  // capped at 40^2
  EXPECT_EQ(probe(test::random_table(40, 3, 2), options).protocol, ProbeProtocol::kPeStudy);
  EXPECT_EQ(probe(test::random_table(40, 3, 2)).pairs, 780);  // default: 4096 capped at 40 * 39 / 2
  EXPECT_EQ(probe(test::random_table(40, 3, 2)).protocol, ProbeProtocol::kDefault);
  options.pairs = 0;
  expect_error([&] { probe(test::random_table(40, 3, 2), options); }, "[probe] pairs must be >= 1, got 0");
  options.pairs = 4;
  expect_error([&] { probe(test::random_table(40, 3, 2), options); }, "[probe] pairs must be at least folds = 5, got 4");
  // n = 2 has 1 unordered pair but 4 ordered ones: enough for 2 folds.
  ProbeOptions two = pe_study();
  two.folds = 2;
  EXPECT_EQ(probe(test::random_table(2, 3, 2), two).pairs, 2);
}

TEST(ProbeProtocol, MatchesThePlainReference) {
  // Small problems (d = 2, 3: Newton in long double is exact enough), several
  // seeds and pair counts. The L-BFGS optimum differs from Newton's by ~1e-10,
  // so only a logit within that of 0 could flip a prediction. One flipped pair
  // moves the rate by 1 / (5 x fold size) >= 1 / 200: agreement within 1e-12
  // (the mean of five rates, long double against double) means the same predictions.
  for (const auto& [n, d] : {std::pair<int64_t, int64_t>{30, 2}, {60, 3}}) {
    const Matrix table = test::random_table(n, d, 40 + n);
    for (uint64_t seed : {0u, 1u, 5u}) {
      for (int64_t pairs : {n, int64_t{200}}) {
        ProbeOptions options = pe_study(seed);
        options.pairs = pairs;
        EXPECT_NEAR(relative_probe_error(table, options), reference_pe_study_error(table, 5, seed, pairs), 1e-12)
            << n << " x " << d << " seed " << seed << " pairs " << pairs;
      }
    }
  }
}

TEST(ProbeProtocol, OnlyTheFirst512RowsCount) {
  // relative.py reads x[:512]: rows beyond do not change the reading.
  const Matrix table = test::random_table(700, 4, 9);
  Matrix changed = table;
  for (int64_t p = 512; p < 700; ++p)
    for (int64_t k = 0; k < 4; ++k) changed(p, k) = 1e3 * static_cast<double>(p);
  EXPECT_EQ(relative_probe_error(changed, pe_study(3)), relative_probe_error(table, pe_study(3)));
}

TEST(ProbeProtocol, DependsOnScaleWhereTheDefaultDoesNot) {
  // No standardization and a fixed C: a sinusoid scaled by 2^-14 leaves the
  // penalty in charge, the weights near 0 and the logit the bias's sign: every
  // pair gets the majority label, an error of about the minority share ~0.5.
  // The default protocol standardizes columns: the same bits at any power of two.
  const Matrix table = test::sinusoidal_table(256, 64);
  Matrix small = table;
  for (double& v : small.values) v = std::ldexp(v, -14);
  const double unscaled = relative_probe_error(table, pe_study());
  const double shrunk = relative_probe_error(small, pe_study());
  EXPECT_LT(unscaled, 0.15);
  EXPECT_GT(shrunk, 0.4);
  EXPECT_EQ(relative_probe_error(small), relative_probe_error(table));
}

TEST(ProbeProtocol, SinusoidReadsWhatThePaperReports) {
  // Wang & Chen's script on get_sinusoid(512, 768) reads about 0.06 (issue 18;
  // the paper's own table could not be retrieved here, see docs/analysis.md).
  // One unseeded run of their script is one draw of a noisy number: measured
  // over 30 seeds here, pe-study reads 0.0562 with a standard deviation of
  // 0.0124 per seed. The mean of seeds 0 .. 9 has a standard error of ~0.004;
  // 0.06 +- 0.015 allows that and the rounding of "about 0.06", and still
  // excludes the default protocol, which reads 0.008 .. 0.016 on this table.
  const Matrix table = test::sinusoidal_table(512, 768);
  double sum = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) sum += relative_probe_error(table, pe_study(seed));
  const double mean = sum / 10;
  EXPECT_NEAR(mean, 0.06, 0.015);
  double default_sum = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    ProbeOptions options;
    options.seed = seed;
    default_sum += relative_probe_error(table, options);
  }
  EXPECT_LT(default_sum / 3, 0.025) << "pe-study mean " << mean;
}

}  // namespace
}  // namespace posenc::analysis
