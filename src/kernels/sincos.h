// Internal: sine and cosine of a double angle, reduced modulo pi/2 in double
// precision, written so that loops over it vectorize. Accurate to a few
// double ulps for |angle| < kFastAngleLimit; callers fall back to libm above.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace posenc::kernels::detail {

// The round-to-integer shifter below is exact while |angle * 2/pi| < 2^51.
inline constexpr double kFastAngleLimit = 0x1p50;

inline constexpr double kTwoOverPi = 0.63661977236758134308;
// pi/2 split so that k * kPiOver2Hi is exact for |k| < 2^51 under FMA.
inline constexpr double kPiOver2Hi = 1.5707963267948966;       // nearest double to pi/2
inline constexpr double kPiOver2Lo = 6.123233995736766e-17;    // pi/2 - kPiOver2Hi

// Taylor series on |y| <= pi/4: the first omitted terms, (pi/4)^17/17! and
// (pi/4)^18/18!, are below 5e-17, so the truncation is under one double ulp.
inline double sin_poly(double y) noexcept {
  const double y2 = y * y;
  double p = 1.0 / 1307674368000.0;       // 1/15!
  p = p * y2 - 1.0 / 6227020800.0;        // 1/13!
  p = p * y2 + 1.0 / 39916800.0;          // 1/11!
  p = p * y2 - 1.0 / 362880.0;            // 1/9!
  p = p * y2 + 1.0 / 5040.0;              // 1/7!
  p = p * y2 - 1.0 / 120.0;               // 1/5!
  p = p * y2 + 1.0 / 6.0;                 // 1/3!
  return y - y * y2 * p;
}

inline double cos_poly(double y) noexcept {
  const double y2 = y * y;
  double p = 1.0 / 20922789888000.0;      // 1/16!
  p = p * y2 - 1.0 / 87178291200.0;       // 1/14!
  p = p * y2 + 1.0 / 479001600.0;         // 1/12!
  p = p * y2 - 1.0 / 3628800.0;           // 1/10!
  p = p * y2 + 1.0 / 40320.0;             // 1/8!
  p = p * y2 - 1.0 / 720.0;               // 1/6!
  p = p * y2 + 1.0 / 24.0;                // 1/4!
  p = p * y2 - 0.5;                       // 1/2!
  return 1.0 + y2 * p;
}

// sin and cos of angle + angle_lo, where angle_lo is a tail below angle's
// ulp (|angle| < kFastAngleLimit).
inline void sincos_reduced(double angle, double& s, double& c, double angle_lo = 0.0) noexcept {
  constexpr double kShifter = 0x1.8p52;  // adding it rounds to an integer
  const double t = std::fma(angle, kTwoOverPi, kShifter);
  const double k = t - kShifter;
  const int64_t quadrant = std::bit_cast<int64_t>(t) & 3;  // k mod 4, also for k < 0
  double y = std::fma(-k, kPiOver2Hi, angle);
  y = std::fma(-k, kPiOver2Lo, y) + angle_lo;
  const double sp = sin_poly(y);
  const double cp = cos_poly(y);
  const double s0 = (quadrant & 1) ? cp : sp;
  const double c0 = (quadrant & 1) ? sp : cp;
  s = (quadrant & 2) ? -s0 : s0;
  c = ((quadrant + 1) & 2) ? -c0 : c0;
}

// sin and cos of the exact product p * w: the rounding error of the double
// product (up to 1e-9 at p = 2^24) is carried into the reduced angle.
inline void sincos_of_product(double p, double w, double& s, double& c) noexcept {
  const double angle = p * w;
  sincos_reduced(angle, s, c, std::fma(p, w, -angle));
}

}  // namespace posenc::kernels::detail
