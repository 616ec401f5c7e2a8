#include "sinusoid_engine.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "sincos.h"
#include "streaming_copy.h"

namespace posenc::kernels::detail {
namespace {

// Re-anchoring from exact angles every 64 rows keeps the double recurrence's
// drift (about one double ulp per step) far below float32 resolution.
constexpr int64_t kAnchorEvery = 64;
// Below this many values per call, threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 15;

template <class T>
void write_row(const SinusoidRows& rows, const double* s, const double* c, T* out) noexcept {
  const int64_t half = static_cast<int64_t>(rows.omega.size());
  const double a = rows.scale;
  switch (rows.layout) {
    case SinusoidalLayout::kInterleaved:
      for (int64_t i = 0; i < half; ++i) {
        out[2 * i] = static_cast<T>(s[i] * a);
        out[2 * i + 1] = static_cast<T>(c[i] * a);
      }
      break;
    case SinusoidalLayout::kHalf:
      for (int64_t i = 0; i < half; ++i) out[i] = static_cast<T>(s[i] * a);
      for (int64_t i = 0; i < half; ++i) out[half + i] = static_cast<T>(c[i] * a);
      break;
    case SinusoidalLayout::kCosSin:
      for (int64_t i = 0; i < half; ++i) {
        out[2 * i] = static_cast<T>(c[i] * a);
        out[2 * i + 1] = static_cast<T>(s[i] * a);
      }
      break;
  }
}

// Where a finished row goes: straight into the table, or, for a large table,
// through a staging row copied out with streaming stores.
template <class T>
class RowSink {
 public:
  RowSink(const SinusoidRows& rows, int64_t count)
      : rows_(rows), width_(2 * static_cast<int64_t>(rows.omega.size())),
        streaming_(count * rows.row_stride * static_cast<int64_t>(sizeof(T)) >= kStreamingBytes) {
    if (streaming_) staging_.resize(static_cast<size_t>(width_));
  }
  ~RowSink() {
    if (streaming_) streaming_fence();
  }
  void put(const double* s, const double* c, T* out_row) {
    if (!streaming_) {
      write_row(rows_, s, c, out_row);
      return;
    }
    write_row(rows_, s, c, staging_.data());
    copy_streaming(staging_.data(), out_row, width_);
  }

 private:
  const SinusoidRows& rows_;
  int64_t width_;
  bool streaming_;
  std::vector<T> staging_;
};

// The (sin, cos) of one row. `fast` says every angle is below kFastAngleLimit.
struct RowAngles {
  std::span<const double> omega;
  std::vector<float> omega_f32;  // for Precision::kFp32
  bool fp32 = false;
  bool fast = true;

  void compute(double position, double* s, double* c) const noexcept {
    const int64_t half = static_cast<int64_t>(omega.size());
    if (fp32) {
      // The common formula: position and omega rounded to float32, product in float32.
      const float p = static_cast<float>(position);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p * omega_f32[i]);
        if (fast) {
          sincos_reduced(angle, s[i], c[i]);
        } else {
          s[i] = std::sin(angle);
          c[i] = std::cos(angle);
        }
      }
    } else if (fast) {
      for (int64_t i = 0; i < half; ++i) sincos_of_product(position, omega[i], s[i], c[i]);
    } else {
      for (int64_t i = 0; i < half; ++i) {
        s[i] = std::sin(position * omega[i]);
        c[i] = std::cos(position * omega[i]);
      }
    }
  }
};

RowAngles make_row_angles(const SinusoidRows& rows, double max_abs_position) {
  RowAngles angles;
  angles.omega = rows.omega;
  angles.fp32 = rows.precision == Precision::kFp32;
  double max_omega = 0.0;
  for (double w : rows.omega) max_omega = std::max(max_omega, std::abs(w));
  if (angles.fp32) {
    angles.omega_f32.assign(rows.omega.begin(), rows.omega.end());
    max_omega *= 1.0 + 0x1p-20;  // float rounding of omega and of the product
    max_abs_position *= 1.0 + 0x1p-20;
  }
  const double max_angle = max_abs_position * max_omega;
  angles.fast = std::isfinite(max_angle) && max_angle < kFastAngleLimit;
  return angles;
}

template <class T, class PositionAt>
void rows_direct(const SinusoidRows& rows, const RowAngles& angles, int64_t count,
                 PositionAt position_at, T* out) {
  const int64_t half = static_cast<int64_t>(rows.omega.size());
#pragma omp parallel if (count * half > kParallelThreshold)
  {
    std::vector<double> s(half), c(half);
    RowSink<T> sink(rows, count);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < count; ++r) {
      angles.compute(position_at(r), s.data(), c.data());
      sink.put(s.data(), c.data(), out + r * rows.row_stride);
    }
  }
}

}  // namespace

template <class T>
void sinusoid_rows_arithmetic(const SinusoidRows& rows, double start, double step, int64_t count,
                              T* out) {
  if (count <= 0) return;
  const double last = start + static_cast<double>(count - 1) * step;
  const RowAngles angles = make_row_angles(rows, std::max(std::abs(start), std::abs(last)));
  auto position_at = [=](int64_t r) { return start + static_cast<double>(r) * step; };
  if (angles.fp32 || !angles.fast) {
    rows_direct(rows, angles, count, position_at, out);
    return;
  }
  const int64_t half = static_cast<int64_t>(rows.omega.size());
  // Rotation by one step of each frequency, from the exact angle step*omega_i.
  std::vector<double> step_cos(half), step_sin(half);
  for (int64_t i = 0; i < half; ++i) sincos_of_product(step, rows.omega[i], step_sin[i], step_cos[i]);
  const int64_t blocks = (count + kAnchorEvery - 1) / kAnchorEvery;
#pragma omp parallel if (count * half > kParallelThreshold)
  {
    std::vector<double> s(half), c(half);
    RowSink<T> sink(rows, count);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * kAnchorEvery;
      const int64_t end = std::min(count, first + kAnchorEvery);
      angles.compute(position_at(first), s.data(), c.data());
      sink.put(s.data(), c.data(), out + first * rows.row_stride);
      for (int64_t r = first + 1; r < end; ++r) {
        for (int64_t i = 0; i < half; ++i) {
          const double next_s = s[i] * step_cos[i] + c[i] * step_sin[i];
          const double next_c = c[i] * step_cos[i] - s[i] * step_sin[i];
          s[i] = next_s;
          c[i] = next_c;
        }
        sink.put(s.data(), c.data(), out + r * rows.row_stride);
      }
    }
  }
}

template <class T>
void sinusoid_rows_list(const SinusoidRows& rows, const double* positions, int64_t count,
                        T* out) {
  double max_abs = 0.0;
  for (int64_t r = 0; r < count; ++r) max_abs = std::max(max_abs, std::abs(positions[r]));
  const RowAngles angles = make_row_angles(rows, max_abs);
  rows_direct(rows, angles, count, [positions](int64_t r) { return positions[r]; }, out);
}

template <class T>
void sinusoid_rows_list(const SinusoidRows& rows, const int64_t* positions, int64_t count,
                        T* out) {
  double max_abs = 0.0;
  for (int64_t r = 0; r < count; ++r) max_abs = std::max(max_abs, std::abs(static_cast<double>(positions[r])));
  const RowAngles angles = make_row_angles(rows, max_abs);
  rows_direct(rows, angles, count,
              [positions](int64_t r) { return static_cast<double>(positions[r]); }, out);
}

#define POSENC_INSTANTIATE(T)                                                                   \
  template void sinusoid_rows_arithmetic<T>(const SinusoidRows&, double, double, int64_t, T*); \
  template void sinusoid_rows_list<T>(const SinusoidRows&, const double*, int64_t, T*);        \
  template void sinusoid_rows_list<T>(const SinusoidRows&, const int64_t*, int64_t, T*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels::detail
