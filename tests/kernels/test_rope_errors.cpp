// RoPE kernels' argument checks: every message word for word, and empty
// inputs that must be no-ops rather than errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "check.h"
#include "rope_check.h"
#include "posenc/kernels/rope.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using test::spec_of;

TEST(Rope, Errors) {
  const auto check = [](RopeApplyParams p) { return [p] { validate(p); }; };
  expect_error(check({64, 7}), "[rope] rotary_dim must be even, got 7");
  expect_error(check({64, 0}), "[rope] rotary_dim must be at least 2, got 0");
  expect_error(check({64, -4}), "[rope] rotary_dim must be at least 2, got -4");
  expect_error(check({64, 96}), "[rope] rotary_dim must be at most head_dim (64), got 96");
  expect_error(check({0, 2}), "[rope] head_dim must be positive, got 0");
  expect_error([] { validate(RopeApplyParams{64, 7}, "apply_rope"); }, "[apply_rope] rotary_dim must be even, got 7");

  const std::vector<double> omega(32, 0.5), omega31(31, 0.5);
  std::vector<double> bad = omega;
  bad[3] = NAN;
  const std::vector<int32_t> axes = {0, 1, 2};
  const std::vector<double> zeta(32, 0.9);
  std::vector<double> bad_zeta = zeta;
  bad_zeta[5] = 1.5;
  const auto spec_error = [](RopeTableSpec s) { return [s] { validate(s); }; };
  expect_error(spec_error({}), "[rope] omega must not be empty");
  expect_error(spec_error(spec_of(bad)), "[rope] omega[3] must be finite, got nan");
  expect_error(spec_error(spec_of(std::span(omega).first(3), axes, 2)), "[rope] axis_of[2] must be in [0, 2), got 2");
  expect_error(spec_error(spec_of(omega, {}, 4)), "[rope] n_axes must be 1, 2 or 3, got 4");
  expect_error(spec_error(spec_of(omega, axes, 3)), "[rope] axis_of must be empty or have 32 values (as omega), got 3");
  RopeTableSpec s = spec_of(omega);
  s.omega_from = omega31;
  expect_error(spec_error(s), "[rope] omega_from must have 32 values (as omega), got 31");
  s.omega_from = bad;
  expect_error(spec_error(s), "[rope] omega_from[3] must be finite, got nan");
  s = spec_of(omega);
  s.attention_factor = INFINITY;
  expect_error(spec_error(s), "[rope] attention_factor must be finite, got inf");
  s = spec_of(omega);
  s.xpos_zeta = omega31;
  expect_error(spec_error(s), "[rope] xpos_zeta must have 32 values (as omega), got 31");
  s.xpos_zeta = bad_zeta;
  expect_error(spec_error(s), "[rope] xpos_zeta[5] must be in (0, 1], got 1.5");
  s.xpos_zeta = zeta;
  s.xpos_power = NAN;
  expect_error(spec_error(s), "[rope] xpos_power must be finite, got nan");
  s.xpos_power = 0.5;
  s.xpos_center = -INFINITY;
  expect_error(spec_error(s), "[rope] xpos_center must be finite, got -inf");
  expect_error([&] { validate(RopeTableSpec{}, "rerotate"); }, "[rerotate] omega must not be empty");

  std::vector<float> c(64), sn(64);
  const int64_t p[2] = {0, 1};
  expect_error([&] { rope_cos_sin<float>(spec_of(omega), p, nullptr, -1, c.data(), sn.data()); },
               "[rope] rows must be >= 0, got -1");
  RopeTableSpec rerot = spec_of(omega);
  rerot.omega_from = omega;
  expect_error([&] { rope_cos_sin<float>(rerot, p, nullptr, 2, c.data(), sn.data()); },
               "[rope] pos_from must be given when omega_from is set (re-rotation)");
  expect_error([&] { rope_cos_sin<float>(spec_of(omega), p, p, 2, c.data(), sn.data()); },
               "[rope] pos_from must be null unless omega_from is set (re-rotation)");
  expect_error([&] { rope_cos_sin_range<float>(rerot, 0, 2, c.data(), sn.data()); },
               "[rope] a position range cannot re-rotate (omega_from must be empty)");
  expect_error([&] { rope_cos_sin_range<float>(spec_of(omega, {}, 2), 0, 2, c.data(), sn.data()); },
               "[rope] a position range needs n_axes 1, got 2");
  expect_error([&] { rope_cos_sin_range<float>(spec_of(omega), 0, -3, c.data(), sn.data()); },
               "[rope] count must be >= 0, got -3");

  std::vector<float> x(2 * 3 * 4 * 8), grad(64);
  const RopeView<const float> in{x.data(), 2, 3, 4, 96, 32, 8};
  const auto apply = [&](RopeApplyParams p, RopeView<float> out, const float* cos, int64_t cos_batch) {
    return [=, &sn] { rope_apply<float, float>(p, in, out, cos, sn.data(), cos_batch); };
  };
  const RopeApplyParams params{8, 8};
  expect_error(apply(params, {x.data(), 2, 3, 5, 96, 32, 8}, c.data(), 1),
               "[rope] out must have the shape of in (2, 3, 4), got (2, 3, 5)");
  expect_error(apply(params, {x.data(), 2, 3, 4, 96, 32, 8}, c.data(), 3),
               "[rope] cos_batch must be 1 or batch (2), got 3");
  expect_error(apply(params, {x.data(), 2, 3, 4, 96, 40, 8}, c.data(), 1),
               "[rope] in place (in and out share data) needs equal strides");
  expect_error(apply({8, 9}, {x.data(), 2, 3, 4, 96, 32, 8}, c.data(), 1), "[rope] rotary_dim must be even, got 9");
  expect_error(apply(params, {x.data(), 2, 3, 4, 96, 32, 8}, nullptr, 1), "[rope] cos and sin must not be null");
  const auto angle_grad = [&](RopeView<const float> g) {
    return [=, &c, &sn, &grad] { rope_angle_grad<float, float>(params, in, g, c.data(), sn.data(), 1, grad.data()); };
  };
  expect_error(angle_grad({x.data(), 1, 3, 4, 96, 32, 8}),
               "[rope] grad must have the shape of x (2, 3, 4), got (1, 3, 4)");

  expect_error([] { parse_rope_layout("neox"); }, "[rope] layout must be one of half, interleaved, got 'neox'");
  expect_error([] { parse_rope_layout("", "apply_rope"); },
               "[apply_rope] layout must be one of half, interleaved, got ''");
  EXPECT_EQ(parse_rope_layout("interleaved"), RopeLayout::kInterleaved);
  EXPECT_EQ(rope_layout_name(parse_rope_layout("half")), "half");
}

TEST(Rope, EmptyInputsAreNoOps) {
  const std::vector<double> omega(4, 1.0);
  EXPECT_NO_THROW(rope_cos_sin<float>(spec_of(omega), nullptr, nullptr, 0, nullptr, nullptr));
  EXPECT_NO_THROW(rope_cos_sin_range<double>(spec_of(omega), 5, 0, nullptr, nullptr));
  EXPECT_NO_THROW((
      rope_apply<float, float>({8, 8}, {nullptr, 2, 3, 0, 0, 0, 8}, {nullptr, 2, 3, 0, 0, 0, 8}, nullptr, nullptr, 1)));
}

}  // namespace
}  // namespace posenc::kernels
