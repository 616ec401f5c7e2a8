// RoPE cos/sin tables: theta[r, j] = pos[r, axis_of[j]] * omega[j] (minus the
// re-rotation term), cos and sin times the attention factor and the xPos power.
//
// Two paths. Per entry: the angle as an exact double-double product reduced
// modulo pi/2 (sincos.h). Blocks of 64 consecutive positions (one axis, no
// re-rotation, no xPos, exact): row p0 + k is the exact anchor (p0) rotated by
// the exact step (k * omega_j), one complex product per entry, so the error
// never accumulates (about 2 double ulps per entry) and the j loop vectorizes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "posenc/error.h"
#include "posenc/kernels/rope.h"
#include "sincos.h"
#include "streaming_copy.h"

namespace posenc::kernels {

RopeLayout parse_rope_layout(std::string_view name, const char* op) {
  if (name == "half") return RopeLayout::kHalf;
  if (name == "interleaved") return RopeLayout::kInterleaved;
  fail_argument(op, "layout must be one of half, interleaved, got '", name, "'");
}

std::string_view rope_layout_name(RopeLayout layout) noexcept {
  return layout == RopeLayout::kHalf ? "half" : "interleaved";
}

void validate(const RopeTableSpec& spec, const char* op) {
  require(spec.n_axes >= 1 && spec.n_axes <= 3, op, "n_axes must be 1, 2 or 3, got ", spec.n_axes);
  require(!spec.omega.empty(), op, "omega must not be empty");
  const size_t half = spec.omega.size();
  for (size_t j = 0; j < half; ++j) {
    require(std::isfinite(spec.omega[j]), op, "omega[", j, "] must be finite, got ", spec.omega[j]);
  }
  require(spec.axis_of.empty() || spec.axis_of.size() == half, op, "axis_of must be empty or have ", half,
          " values (as omega), got ", spec.axis_of.size());
  for (size_t j = 0; j < spec.axis_of.size(); ++j) {
    require(spec.axis_of[j] >= 0 && spec.axis_of[j] < spec.n_axes, op, "axis_of[", j, "] must be in [0, ", spec.n_axes,
            "), got ", spec.axis_of[j]);
  }
  require(std::isfinite(spec.attention_factor), op, "attention_factor must be finite, got ", spec.attention_factor);
  require(spec.omega_from.empty() || spec.omega_from.size() == half, op, "omega_from must have ", half,
          " values (as omega), got ", spec.omega_from.size());
  for (size_t j = 0; j < spec.omega_from.size(); ++j) {
    require(std::isfinite(spec.omega_from[j]), op, "omega_from[", j, "] must be finite, got ", spec.omega_from[j]);
  }
  require(spec.xpos_zeta.empty() || spec.xpos_zeta.size() == half, op, "xpos_zeta must have ", half,
          " values (as omega), got ", spec.xpos_zeta.size());
  for (size_t j = 0; j < spec.xpos_zeta.size(); ++j) {
    const double z = spec.xpos_zeta[j];
    require(z > 0.0 && z <= 1.0, op, "xpos_zeta[", j, "] must be in (0, 1], got ", z);
  }
  require(std::isfinite(spec.xpos_power), op, "xpos_power must be finite, got ", spec.xpos_power);
  require(std::isfinite(spec.xpos_center), op, "xpos_center must be finite, got ", spec.xpos_center);
}

namespace {

using detail::kFastAngleLimit;
using detail::sincos_of_product;
using detail::sincos_reduced;

constexpr int64_t kBlock = 64;
// Below this many entries per call, threads cost more than they save.
constexpr int64_t kParallelThreshold = int64_t{1} << 15;
// int64 positions convert to double exactly up to here.
constexpr double kExactPosition = 0x1p53;

// Everything about a call that does not depend on the row.
struct Plan {
  const RopeTableSpec* spec = nullptr;
  int64_t half = 0;
  bool rerotate = false;
  bool xpos = false;
  bool fp32 = false;
  bool fast = true;  // every angle below kFastAngleLimit, positions exact in double
  double max_omega = 0.0;
  std::vector<int32_t> axis;                         // R/2 axis indices (zeros when spec.axis_of is empty)
  std::vector<double> log_zeta;                      // xPos: ln(zeta_j)
  std::vector<float> omega_f, omega_from_f, zeta_f;  // kFp32
};

Plan make_plan(const RopeTableSpec& spec, double max_abs_pos, double max_abs_pos_from) {
  Plan plan;
  plan.spec = &spec;
  plan.half = static_cast<int64_t>(spec.omega.size());
  plan.rerotate = !spec.omega_from.empty();
  plan.xpos = !spec.xpos_zeta.empty();
  plan.fp32 = spec.precision == Precision::kFp32;
  plan.axis.assign(spec.omega.size(), 0);
  if (!spec.axis_of.empty()) plan.axis.assign(spec.axis_of.begin(), spec.axis_of.end());
  for (double z : spec.xpos_zeta) plan.log_zeta.push_back(std::log(z));
  double max_w = 0.0, max_w_from = 0.0;
  for (double w : spec.omega) max_w = std::max(max_w, std::abs(w));
  for (double w : spec.omega_from) max_w_from = std::max(max_w_from, std::abs(w));
  // Margin for float rounding of omega, p and the product in kFp32.
  const double margin = plan.fp32 ? 1.0 + 0x1p-20 : 1.0;
  const double max_angle = (max_abs_pos * max_w + max_abs_pos_from * max_w_from) * margin * margin;
  plan.max_omega = max_w;
  plan.fast = max_angle < kFastAngleLimit && max_abs_pos <= kExactPosition && max_abs_pos_from <= kExactPosition;
  if (plan.fp32) {
    plan.omega_f.assign(spec.omega.begin(), spec.omega.end());
    plan.omega_from_f.assign(spec.omega_from.begin(), spec.omega_from.end());
    plan.zeta_f.assign(spec.xpos_zeta.begin(), spec.xpos_zeta.end());
  }
  return plan;
}

// Per-thread row buffers.
struct RowScratch {
  std::vector<double> p, p_from, angle, c, s;
  explicit RowScratch(int64_t half)
      : p(static_cast<size_t>(half)),
        p_from(static_cast<size_t>(half)),
        angle(static_cast<size_t>(half)),
        c(static_cast<size_t>(half)),
        s(static_cast<size_t>(half)) {}
};

// Exact angle p*w - q*v as a double-double (hi, lo), then its sin and cos.
inline void sincos_of_difference(double p, double w, double q, double v, double& s, double& c) noexcept {
  const double a = p * w;
  const double a_lo = std::fma(p, w, -a);
  const double b = q * v;
  const double b_lo = std::fma(q, v, -b);
  // Two-sum: hi + err == a - b exactly.
  const double hi = a - b;
  const double back = hi - a;
  const double err = (a - (hi - back)) + (-b - back);
  sincos_reduced(hi, s, c, (a_lo - b_lo) + err);
}

// cos and sin of one row into scratch.c / scratch.s (attention factor and
// xPos included). `pos_row` / `from_row` point at the row's n_axes coordinates.
void row_direct(const Plan& plan, const int64_t* pos_row, const int64_t* from_row, RowScratch& w) noexcept {
  const RopeTableSpec& spec = *plan.spec;
  const int64_t half = plan.half;
  double* p = w.p.data();
  double* q = w.p_from.data();
  double* c = w.c.data();
  double* s = w.s.data();
  for (int64_t j = 0; j < half; ++j) p[j] = static_cast<double>(pos_row[plan.axis[j]]);
  if (plan.rerotate) {
    for (int64_t j = 0; j < half; ++j) q[j] = static_cast<double>(from_row[plan.axis[j]]);
  }
  const double* omega = spec.omega.data();
  const double* omega_from = spec.omega_from.data();

  if (plan.fp32) {
    // The common formula, every step in float32: omega, p and the product
    // rounded to float; then cos/sin of that float angle (computed in double
    // and rounded once: correctly rounded in practice, as torch's are), times
    // the attention factor (and xPos power) in float32. Separate passes so
    // the sincos pass vectorizes.
    double* angle = w.angle.data();
    for (int64_t j = 0; j < half; ++j) {
      float a = static_cast<float>(p[j]) * plan.omega_f[j];
      if (plan.rerotate) a -= static_cast<float>(q[j]) * plan.omega_from_f[j];
      angle[j] = static_cast<double>(a);
    }
    if (plan.fast) {
      for (int64_t j = 0; j < half; ++j) sincos_reduced(angle[j], s[j], c[j]);
    } else {
      for (int64_t j = 0; j < half; ++j) {
        s[j] = std::sin(angle[j]);
        c[j] = std::cos(angle[j]);
      }
    }
    const float a = static_cast<float>(spec.attention_factor);
    const float power = static_cast<float>(spec.xpos_power);
    for (int64_t j = 0; j < half; ++j) {
      float factor = a;
      if (plan.xpos) factor *= std::pow(plan.zeta_f[j], static_cast<float>(p[j] - spec.xpos_center) * power);
      c[j] = static_cast<double>(static_cast<float>(c[j]) * factor);
      s[j] = static_cast<double>(static_cast<float>(s[j]) * factor);
    }
    return;
  }

  if (plan.fast && plan.rerotate) {
    for (int64_t j = 0; j < half; ++j) sincos_of_difference(p[j], omega[j], q[j], omega_from[j], s[j], c[j]);
  } else if (plan.fast) {
    for (int64_t j = 0; j < half; ++j) sincos_of_product(p[j], omega[j], s[j], c[j]);
  } else {
    // Huge angles: libm in long double (rare; correctness over speed).
    for (int64_t j = 0; j < half; ++j) {
      long double angle = static_cast<long double>(pos_row[plan.axis[j]]) * omega[j];
      if (plan.rerotate) angle -= static_cast<long double>(from_row[plan.axis[j]]) * omega_from[j];
      s[j] = static_cast<double>(sinl(angle));
      c[j] = static_cast<double>(cosl(angle));
    }
  }
  const double a = spec.attention_factor;
  if (plan.xpos) {
    const double e0 = spec.xpos_power;
    for (int64_t j = 0; j < half; ++j) {
      const double factor = a * std::exp((p[j] - spec.xpos_center) * e0 * plan.log_zeta[j]);
      c[j] *= factor;
      s[j] *= factor;
    }
  } else if (a != 1.0) {
    for (int64_t j = 0; j < half; ++j) {
      c[j] *= a;
      s[j] *= a;
    }
  }
}

// Where finished rows go: straight into the table, or, for a large table,
// through a staging row written out with streaming stores (no read-for-ownership).
template <class T>
class RowSink {
 public:
  RowSink(int64_t half, bool streaming) : half_(half), streaming_(streaming) {
    if (streaming_) {
      stage_c_.resize(static_cast<size_t>(half));
      stage_s_.resize(static_cast<size_t>(half));
    }
  }
  ~RowSink() {
    if (streaming_) detail::streaming_fence();
  }
  RowSink(const RowSink&) = delete;
  RowSink& operator=(const RowSink&) = delete;

  void put(const double* c, const double* s, T* cos_row, T* sin_row) noexcept {
    T* oc = streaming_ ? stage_c_.data() : cos_row;
    T* os = streaming_ ? stage_s_.data() : sin_row;
    for (int64_t j = 0; j < half_; ++j) {
      oc[j] = static_cast<T>(c[j]);
      os[j] = static_cast<T>(s[j]);
    }
    if (streaming_) {
      detail::copy_streaming(oc, cos_row, half_);
      detail::copy_streaming(os, sin_row, half_);
    }
  }

 private:
  int64_t half_;
  bool streaming_;
  std::vector<T> stage_c_, stage_s_;
};

// cos/sin of k * omega_j for k < kBlock: the exact steps inside a block.
struct BlockSteps {
  std::vector<double> c, s;  // [kBlock, half]
};

BlockSteps make_block_steps(const Plan& plan) {
  const int64_t half = plan.half;
  BlockSteps steps;
  steps.c.resize(static_cast<size_t>(kBlock * half));
  steps.s.resize(steps.c.size());
  for (int64_t k = 0; k < kBlock; ++k) {
    for (int64_t j = 0; j < half; ++j) {
      sincos_of_product(static_cast<double>(k), plan.spec->omega[j], steps.s[k * half + j], steps.c[k * half + j]);
    }
  }
  return steps;
}

// Rows first .. first+n-1 hold positions p0 .. p0+n-1 (n <= kBlock).
template <class T>
void block_consecutive(const Plan& plan, const BlockSteps& steps, int64_t p0, int64_t first, int64_t n, RowScratch& w,
                       RowSink<T>& sink, T* cos, T* sin) noexcept {
  const int64_t half = plan.half;
  const double* omega = plan.spec->omega.data();
  const double a = plan.spec->attention_factor;
  double* ac = w.p.data();  // the anchor's cos/sin, attention factor folded in
  double* as = w.p_from.data();
  for (int64_t j = 0; j < half; ++j) {
    sincos_of_product(static_cast<double>(p0), omega[j], as[j], ac[j]);
    ac[j] *= a;
    as[j] *= a;
  }
  double* c = w.c.data();
  double* s = w.s.data();
  for (int64_t k = 0; k < n; ++k) {
    const double* kc = steps.c.data() + k * half;
    const double* ks = steps.s.data() + k * half;
    for (int64_t j = 0; j < half; ++j) {
      c[j] = ac[j] * kc[j] - as[j] * ks[j];
      s[j] = as[j] * kc[j] + ac[j] * ks[j];
    }
    sink.put(c, s, cos + (first + k) * half, sin + (first + k) * half);
  }
}

// The steps k * omega_j must be fast angles too (positions may all be small).
bool blocks_apply(const Plan& plan, int64_t rows) {
  return !plan.fp32 && plan.fast && !plan.rerotate && !plan.xpos && plan.spec->n_axes == 1 && rows >= 2 * kBlock &&
         static_cast<double>(kBlock) * plan.max_omega < kFastAngleLimit;
}

bool is_streaming(int64_t rows, int64_t half, size_t elem) {
  return 2 * rows * half * static_cast<int64_t>(elem) >= detail::kStreamingBytes;
}

void check_table_args(const RopeTableSpec& spec, const int64_t* pos, const int64_t* pos_from, int64_t rows,
                      const void* cos, const void* sin) {
  validate(spec);
  require(rows >= 0, "rope", "rows must be >= 0, got ", rows);
  if (rows == 0) return;
  require(pos != nullptr, "rope", "positions must not be null");
  require(cos != nullptr && sin != nullptr, "rope", "cos and sin must not be null");
  require(spec.omega_from.empty() || pos_from != nullptr, "rope",
          "pos_from must be given when omega_from is set (re-rotation)");
  require(!spec.omega_from.empty() || pos_from == nullptr, "rope",
          "pos_from must be null unless omega_from is set (re-rotation)");
}

// xPos scales row p by zeta^((p - center) * power): far from the center that
// leaves T's normal range (q's factor underflows, k's overflows, and q.k turns
// NaN), so such positions are refused, naming the distance that still fits.
template <class T>
void check_xpos_range(const RopeTableSpec& spec, double lowest, double highest) {
  if (spec.xpos_zeta.empty() || spec.xpos_power == 0.0) return;
  const double smallest_zeta = *std::min_element(spec.xpos_zeta.begin(), spec.xpos_zeta.end());
  if (smallest_zeta == 1.0) return;
  // ln of the smallest normal T, with a margin for the attention factor and one product.
  const double ln_range = std::log(std::numeric_limits<T>::min()) * -1.0 - 2.0;
  const double reach = ln_range / (std::abs(spec.xpos_power) * -std::log(smallest_zeta));
  const double far = std::max(std::abs(lowest - spec.xpos_center), std::abs(highest - spec.xpos_center));
  if (far <= reach) return;
  const double worst = std::abs(lowest - spec.xpos_center) >= std::abs(highest - spec.xpos_center) ? lowest : highest;
  fail_argument("xpos", "positions must be within ", std::floor(reach), " of xpos_center ", spec.xpos_center,
                " (beyond, the decay factor zeta^((p - center) * power) leaves ",
                sizeof(T) == 4 ? "float32" : "float64", "'s range), got ", static_cast<int64_t>(worst));
}

// Fills rows [0, rows) of cos/sin, blocks of kBlock rows in parallel. A block
// whose positions are consecutive (block_start(first, n) gives its first
// position) takes the anchored recurrence; any other row is computed by
// direct(r, scratch).
template <class T, class BlockStart, class Direct>
void fill_table(const Plan& plan, int64_t rows, T* cos, T* sin, BlockStart block_start, Direct direct) {
  const int64_t half = plan.half;
  const bool use_blocks = blocks_apply(plan, rows);
  const BlockSteps steps = use_blocks ? make_block_steps(plan) : BlockSteps{};
  const bool streaming = is_streaming(rows, half, sizeof(T));
  const int64_t blocks = (rows + kBlock - 1) / kBlock;
#pragma omp parallel if (rows * half > kParallelThreshold)
  {
    RowScratch w(half);
    RowSink<T> sink(half, streaming);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t first = b * kBlock;
      const int64_t n = std::min(kBlock, rows - first);
      if (use_blocks) {
        if (const std::optional<int64_t> p0 = block_start(first, n)) {
          block_consecutive(plan, steps, *p0, first, n, w, sink, cos, sin);
          continue;
        }
      }
      for (int64_t r = first; r < first + n; ++r) {
        direct(r, w);
        sink.put(w.c.data(), w.s.data(), cos + r * half, sin + r * half);
      }
    }
  }
}

}  // namespace

template <class T>
void rope_cos_sin(const RopeTableSpec& spec, const int64_t* pos, const int64_t* pos_from, int64_t rows, T* cos,
                  T* sin) {
  check_table_args(spec, pos, pos_from, rows, cos, sin);
  if (rows == 0) return;
  const int64_t axes = spec.n_axes;
  const auto [lowest, highest] = std::minmax_element(pos, pos + rows * axes);
  const double max_pos = std::max(std::abs(static_cast<double>(*lowest)), std::abs(static_cast<double>(*highest)));
  double max_from = 0.0;
  if (pos_from != nullptr) {
    for (int64_t k = 0; k < rows * axes; ++k) max_from = std::max(max_from, std::abs(static_cast<double>(pos_from[k])));
  }
  check_xpos_range<T>(spec, static_cast<double>(*lowest), static_cast<double>(*highest));
  const Plan plan = make_plan(spec, max_pos, max_from);
  auto block_start = [pos](int64_t first, int64_t n) -> std::optional<int64_t> {
    for (int64_t k = 1; k < n; ++k) {
      if (pos[first + k] != pos[first] + k) return std::nullopt;
    }
    return pos[first];
  };
  auto direct = [&](int64_t r, RowScratch& w) {
    row_direct(plan, pos + r * axes, pos_from == nullptr ? nullptr : pos_from + r * axes, w);
  };
  fill_table(plan, rows, cos, sin, block_start, direct);
}

template <class T>
void rope_cos_sin_range(const RopeTableSpec& spec, int64_t start, int64_t count, T* cos, T* sin) {
  validate(spec);
  require(spec.n_axes == 1, "rope", "a position range needs n_axes 1, got ", spec.n_axes);
  require(spec.omega_from.empty(), "rope", "a position range cannot re-rotate (omega_from must be empty)");
  require(count >= 0, "rope", "count must be >= 0, got ", count);
  if (count == 0) return;
  require(cos != nullptr && sin != nullptr, "rope", "cos and sin must not be null");
  const double max_pos =
      std::max(std::abs(static_cast<double>(start)), std::abs(static_cast<double>(start + count - 1)));
  check_xpos_range<T>(spec, static_cast<double>(start), static_cast<double>(start + count - 1));
  const Plan plan = make_plan(spec, max_pos, 0.0);
  auto block_start = [start](int64_t first, int64_t) -> std::optional<int64_t> { return start + first; };
  auto direct = [&](int64_t r, RowScratch& w) {
    const int64_t p = start + r;
    row_direct(plan, &p, nullptr, w);
  };
  fill_table(plan, count, cos, sin, block_start, direct);
}

template void rope_cos_sin<float>(const RopeTableSpec&, const int64_t*, const int64_t*, int64_t, float*, float*);
template void rope_cos_sin<double>(const RopeTableSpec&, const int64_t*, const int64_t*, int64_t, double*, double*);
template void rope_cos_sin_range<float>(const RopeTableSpec&, int64_t, int64_t, float*, float*);
template void rope_cos_sin_range<double>(const RopeTableSpec&, int64_t, int64_t, double*, double*);

}  // namespace posenc::kernels
