#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "check.h"
#include "posenc/kernels/learnable_sinusoidal.h"
#include "posenc/kernels/reference.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::max_abs_diff;

std::vector<double> random_omega(int64_t half, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> w(static_cast<size_t>(half));
  for (auto& v : w) v = std::pow(10000.0, -u(rng));  // in (1e-4, 1], like trained frequencies
  return w;
}

TEST(LearnableSinusoidal, ForwardMatchesReference) {
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    const auto w = random_omega(48, 3);
    std::vector<int64_t> pos = {0, 1, 5, 511, 70000, -3, (int64_t{1} << 24) - 1};
    std::vector<double> out(pos.size() * 96);
    learnable_sinusoidal_forward<double>({layout, 1.5}, Positions::list(pos), w, out);
    const auto expected = reference::sinusoidal_with_omega(std::vector<double>(pos.begin(), pos.end()), w, 1.5, layout);
    EXPECT_LE(max_abs_diff(out, expected), 1e-12) << layout_name(layout);

    std::vector<float> wf(w.begin(), w.end());
    std::vector<float> outf(pos.size() * 96);
    learnable_sinusoidal_forward<float>({layout, 1.5}, Positions::list(pos), wf, outf);
    const auto expected_f =
        reference::sinusoidal_with_omega(std::vector<double>(pos.begin(), pos.end()), std::vector<double>(wf.begin(), wf.end()), 1.5, layout);
    EXPECT_LE(max_abs_diff(outf, expected_f), 1.5 * 5e-7) << layout_name(layout);  // spec bound x amplitude
  }
}

TEST(LearnableSinusoidal, BackwardMatchesCentralDifferences) {
  // L(w) = sum(g * PE(w)); dL/dw_i from the kernel against (L(w+h) - L(w-h)) / 2h.
  for (auto layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    const int64_t half = 8, count = 40;
    const auto w = random_omega(half, 11);
    std::mt19937 rng(5);
    std::normal_distribution<double> n01;
    std::vector<double> g(static_cast<size_t>(count * 2 * half));
    for (auto& v : g) v = n01(rng);
    const Positions pos = Positions::range(-7, count);
    const LearnableSinusoidalParams params{layout, 0.75};
    std::vector<double> grad(static_cast<size_t>(half));
    learnable_sinusoidal_backward<double>(params, pos, w, g, grad);
    const auto loss = [&](const std::vector<double>& omega) {
      std::vector<double> out(g.size());
      learnable_sinusoidal_forward<double>(params, pos, omega, out);
      double l = 0;
      for (size_t k = 0; k < g.size(); ++k) l += g[k] * out[k];
      return l;
    };
    const double h = 1e-6;
    for (int64_t i = 0; i < half; ++i) {
      auto plus = w, minus = w;
      plus[i] += h;
      minus[i] -= h;
      const double numeric = (loss(plus) - loss(minus)) / (2 * h);
      // central difference error ~h^2 * |L'''| (positions up to 32 -> p^3 ~ 3e4)
      EXPECT_NEAR(grad[i], numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << layout_name(layout) << " i=" << i;
    }
  }
}

TEST(LearnableSinusoidal, EqualsFixedWhenOmegaIsFixed) {
  // Initialised at the fixed frequencies, the learnable encoding is the fixed one.
  std::vector<double> out(64 * 100), positions(100);
  learnable_sinusoidal_forward<double>({}, Positions::range(0, 100), sinusoidal_frequencies(64, 10000.0), out);
  for (int k = 0; k < 100; ++k) positions[k] = k;
  EXPECT_LE(max_abs_diff(out, reference::sinusoidal(positions, 64, 10000.0, 1.0, SinusoidalLayout::kInterleaved)), 1e-12);
}

TEST(LearnableSinusoidal, Errors) {
  std::vector<float> out(40), grad(2);
  std::vector<float> w = {1.0f, NAN};
  expect_error([&] { learnable_sinusoidal_forward<float>({}, Positions::range(0, 10), w, out); },
               "[learnable-sinusoidal] omega must be finite, got nan at index 1");
  std::vector<float> none;
  expect_error([&] { learnable_sinusoidal_forward<float>({}, Positions::range(0, 10), none, out); },
               "[learnable-sinusoidal] omega must hold at least 1 frequency, got 0");
  w[1] = 0.5f;
  expect_error([&] { learnable_sinusoidal_forward<float>({}, Positions::range(0, 0), w, out); },
               "[learnable-sinusoidal] positions must be at least 1, got 0");
  expect_error([&] { learnable_sinusoidal_backward<float>({}, Positions::range(0, 10), w, out, std::span<float>(grad.data(), 1)); },
               "[learnable-sinusoidal] grad_omega must hold 2 values, got 1");
}

}  // namespace
}  // namespace posenc::kernels
