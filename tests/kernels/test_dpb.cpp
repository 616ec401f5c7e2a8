// Dynamic position biases (kernels/dpb.h) against the two source formulas
// transcribed here plainly in long double, one (query, key) pair at a time:
// x-transformers' DynamicPositionBias (Linear(1, dim) [+ LayerNorm] + SiLU,
// depth-1 x (Linear(dim, dim) [+ LayerNorm] + SiLU), Linear(dim, heads), read
// at i - j) and Swin V2's continuous position bias (8 t / (n-1), sign log2(1+|.|)
// / log2 8, Linear(2, 512) + ReLU + Linear(512, heads, no bias), 16 sigmoid).
// Backward passes against central differences of those transcriptions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/dpb.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using LVec = std::vector<long double>;

// Deterministic weights of either sign and of order 1 / sqrt(fan_in), as torch's default init.
std::vector<double> values(size_t n, double seed, double scale) {
  std::vector<double> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = scale * std::sin(seed + 1.37 * static_cast<double>(k) + 0.11 * k * k);
  return v;
}

// ---- DPB

struct DpbCase {
  int64_t heads, hidden, depth;
  bool log_distance, norm;
  int64_t q_len, k_len;
};

std::string name_of(const DpbCase& c) {
  return "heads=" + std::to_string(c.heads) + " hidden=" + std::to_string(c.hidden) +
         " depth=" + std::to_string(c.depth) + (c.log_distance ? " log" : "") + (c.norm ? " norm" : "") +
         " q=" + std::to_string(c.q_len) + " k=" + std::to_string(c.k_len);
}

const std::vector<DpbCase> kDpbCases{
    {3, 6, 2, false, false, 5, 5}, {3, 6, 2, true, false, 2, 7}, {2, 5, 1, false, true, 6, 3},
    {4, 4, 3, true, true, 4, 4},   {1, 7, 2, false, true, 1, 9}, {2, 3, 4, true, false, 3, 3},
};

// The MLP's weights in x-transformers' modules, flattened: mlp[0] Linear(1, dim), mlp[1..depth-1]
// Linear(dim, dim), optional LayerNorm weight/bias per layer, mlp[depth] Linear(dim, heads).
struct DpbNet {
  DpbParams p;
  std::vector<double> in_w, in_b, hid_w, hid_b, ln_w, ln_b, out_w, out_b;
  explicit DpbNet(const DpbCase& c) : p{c.heads, c.hidden, c.depth, c.log_distance, c.norm, c.q_len, c.k_len} {
    const auto hd = static_cast<size_t>(c.hidden), L = static_cast<size_t>(c.depth);
    const double s = 1.0 / std::sqrt(static_cast<double>(c.hidden));
    in_w = values(hd, 0.3, 1.0), in_b = values(hd, 1.1, 1.0);
    hid_w = values((L - 1) * hd * hd, 2.0, 1.6 * s), hid_b = values((L - 1) * hd, 2.7, s);
    if (c.norm) {
      ln_w = values(L * hd, 3.3, 0.4);
      for (double& v : ln_w) v += 1.0;
      ln_b = values(L * hd, 3.9, 0.2);
    }
    out_w = values(static_cast<size_t>(c.heads) * hd, 4.4, s), out_b = values(static_cast<size_t>(c.heads), 5.0, 0.5);
  }
  std::vector<double*> all() {
    std::vector<double*> v;
    for (auto* t : {&in_w, &in_b, &hid_w, &hid_b, &ln_w, &ln_b, &out_w, &out_b})
      for (double& x : *t) v.push_back(&x);
    return v;
  }
  DpbWeights<double> weights() const {
    return {in_w.data(),
            in_b.data(),
            hid_w.data(),
            hid_b.data(),
            p.norm ? ln_w.data() : nullptr,
            p.norm ? ln_b.data() : nullptr,
            out_w.data(),
            out_b.data()};
  }
};

// x-transformers: pos = i - j (query at i' = i + k_len - q_len), log: sign(pos) * log(|pos| + 1).
LVec xtransformers(const DpbNet& n, int64_t i, int64_t j) {
  const int64_t hd = n.p.hidden;
  long double pos = static_cast<long double>((i + n.p.k_len - n.p.q_len) - j);
  if (n.p.log_distance) pos = (pos > 0 ? 1.0L : pos < 0 ? -1.0L : 0.0L) * std::log(std::fabs(pos) + 1.0L);
  LVec a{pos};
  for (int64_t l = 0; l < n.p.depth; ++l) {
    LVec z(static_cast<size_t>(hd));
    for (int64_t k = 0; k < hd; ++k) {
      if (l == 0) {
        z[k] = n.in_w[k] * a[0] + n.in_b[k];
      } else {
        long double s = n.hid_b[(l - 1) * hd + k];
        for (int64_t m = 0; m < hd; ++m) s += n.hid_w[((l - 1) * hd + k) * hd + m] * a[m];
        z[k] = s;
      }
    }
    if (n.p.norm) {  // nn.LayerNorm(dim): biased variance, eps 1e-5
      long double mu = 0, var = 0;
      for (long double v : z) mu += v;
      mu /= hd;
      for (long double v : z) var += (v - mu) * (v - mu);
      var /= hd;
      for (int64_t k = 0; k < hd; ++k)
        z[k] = (z[k] - mu) / std::sqrt(var + 1e-5L) * n.ln_w[l * hd + k] + n.ln_b[l * hd + k];
    }
    for (long double& v : z) v = v * (1.0L / (1.0L + std::exp(-v)));  // nn.SiLU
    a = z;
  }
  LVec out(static_cast<size_t>(n.p.num_heads));
  for (int64_t h = 0; h < n.p.num_heads; ++h) {
    long double s = n.out_b[h];
    for (int64_t k = 0; k < hd; ++k) s += n.out_w[h * hd + k] * a[k];
    out[h] = s;
  }
  return out;
}

TEST(Dpb, RowsMatchXTransformersOnEveryPair) {
  for (const DpbCase& c : kDpbCases) {
    SCOPED_TRACE(name_of(c));
    const DpbNet net(c);
    const int64_t columns = dpb_columns(net.p);
    ASSERT_EQ(columns, c.q_len + c.k_len - 1);
    std::vector<double> rows(static_cast<size_t>(c.heads * columns));
    dpb_offset_bias(net.p, net.weights(), rows.data());
    // The float32 path: the same weights rounded to float, formed in double, rounded once.
    auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    const std::vector<float> in_w = f(net.in_w), in_b = f(net.in_b), hid_w = f(net.hid_w), hid_b = f(net.hid_b),
                             ln_w = f(net.ln_w), ln_b = f(net.ln_b), out_w = f(net.out_w), out_b = f(net.out_b);
    std::vector<float> rows32(rows.size());
    dpb_offset_bias<float>(
        net.p,
        {in_w.data(), in_b.data(), hid_w.data(), hid_b.data(), ln_w.data(), ln_b.data(), out_w.data(), out_b.data()},
        rows32.data());
    const std::vector<double> dense = reference::dpb_bias(net.p, net.weights());
    for (int64_t i = 0; i < c.q_len; ++i) {
      for (int64_t j = 0; j < c.k_len; ++j) {
        const LVec want = xtransformers(net, i, j);
        // Offset rows: column d + k_len - 1 for d = j - i'.
        const int64_t column = j - (i + c.k_len - c.q_len) + c.k_len - 1;
        for (int64_t h = 0; h < c.heads; ++h) {
          const double w = static_cast<double>(want[h]);
          // 1e-14: a few dozen double roundings through <= 4 layers of width <= 7.
          EXPECT_NEAR(rows[h * columns + column], w, 1e-14 * std::max(1.0, std::fabs(w))) << i << "," << j;
          EXPECT_NEAR(dense[(h * c.q_len + i) * c.k_len + j], w, 1e-14 * std::max(1.0, std::fabs(w)));
          // float32: the weights' rounding (2^-24 relative) carried through the layers, then one rounding.
          EXPECT_NEAR(rows32[h * columns + column], w, 2e-6 * std::max(1.0, std::fabs(w)));
        }
      }
    }
  }
}

TEST(Dpb, GradientsMatchDifferencesOfTheFormula) {
  for (const DpbCase& c : kDpbCases) {
    SCOPED_TRACE(name_of(c));
    DpbNet net(c);
    const int64_t columns = dpb_columns(net.p);
    const std::vector<double> grad = values(static_cast<size_t>(c.heads * columns), 0.7, 1.0);
    // loss = sum_h,d grad[h, d] b_h(d), each offset d read from one pair (i, j) of the transcription.
    auto loss = [&] {
      long double s = 0;
      for (int64_t col = 0; col < columns; ++col) {
        const int64_t d = col - (c.k_len - 1);
        // A pair with j - i' = d: i' = max(k_len - q_len, -d) ... pick i = q_len - 1 (i' = k_len - 1) when d <= 0.
        const int64_t i = d <= 0 ? c.q_len - 1 : c.q_len - 1 - d, j = i + c.k_len - c.q_len + d;
        const LVec b = xtransformers(net, i, j);
        for (int64_t h = 0; h < c.heads; ++h) s += grad[h * columns + col] * b[h];
      }
      return s;
    };
    DpbNet g(c);  // same shapes, holds the gradients
    dpb_offset_bias_backward(net.p, net.weights(), grad.data(),
                             DpbGradients<double>{g.in_w.data(), g.in_b.data(), g.hid_w.data(), g.hid_b.data(),
                                                  c.norm ? g.ln_w.data() : nullptr, c.norm ? g.ln_b.data() : nullptr,
                                                  g.out_w.data(), g.out_b.data()});
    const std::vector<double*> params = net.all(), grads = g.all();
    ASSERT_EQ(params.size(), grads.size());
    for (size_t k = 0; k < params.size(); ++k) {
      const double saved = *params[k];
      const double e = 1e-5;
      *params[k] = saved + e;
      const long double up = loss();
      *params[k] = saved - e;
      const long double down = loss();
      *params[k] = saved;
      const double want = static_cast<double>((up - down) / (2 * e));
      // 1e-7: e^2 truncation of the central difference times the third derivative, in long double.
      EXPECT_NEAR(*grads[k], want, 1e-7 * std::max(1.0, std::fabs(want))) << "parameter " << k;
    }
  }
}

TEST(Dpb, LogDistanceInputIsOddAndMonotone) {
  for (int64_t r = -300; r <= 300; ++r) {
    EXPECT_EQ(dpb_input(r, false), static_cast<double>(r));
    EXPECT_EQ(dpb_input(-r, true), -dpb_input(r, true));
    EXPECT_LT(dpb_input(r, true), dpb_input(r + 1, true));
    // 1 ulp: log1p against log of 1 + |r| (exact for these integers).
    EXPECT_NEAR(dpb_input(r, true), (r < 0 ? -1 : 1) * std::log(1.0 + std::abs(static_cast<double>(r))),
                std::numeric_limits<double>::epsilon() * 8);
  }
  EXPECT_EQ(dpb_input(0, true), 0.0);
}

TEST(Dpb, EmptyLengthsGiveNoColumnsAndZeroGradients) {
  DpbCase c{2, 3, 2, false, true, 0, 4};
  DpbNet net(c), g(c);
  EXPECT_EQ(dpb_columns(net.p), 0);
  for (double* v : g.all()) *v = 7.0;
  dpb_offset_bias_backward<double>(net.p, net.weights(), nullptr,
                                   {g.in_w.data(), g.in_b.data(), g.hid_w.data(), g.hid_b.data(), g.ln_w.data(),
                                    g.ln_b.data(), g.out_w.data(), g.out_b.data()});
  for (double* v : g.all()) EXPECT_EQ(*v, 0.0);
}

TEST(Dpb, LargeCallsOnThreadsMatchXTransformers) {
  // Large enough for the parallel path (work >= 2^18): every offset against the transcription.
  const DpbCase c{4, 32, 2, true, true, 300, 200};
  const DpbNet net(c);
  const int64_t columns = dpb_columns(net.p);
  std::vector<double> rows(static_cast<size_t>(c.heads * columns));
  dpb_offset_bias(net.p, net.weights(), rows.data());
  for (int64_t col = 0; col < columns; ++col) {
    const int64_t d = col - (c.k_len - 1);
    const int64_t i = d <= 0 ? c.q_len - 1 : c.q_len - 1 - d, j = i + c.k_len - c.q_len + d;
    const LVec want = xtransformers(net, i, j);
    for (int64_t h = 0; h < c.heads; ++h) {
      // 1e-13: width 32, as above.
      EXPECT_NEAR(rows[h * columns + col], static_cast<double>(want[h]), 1e-13) << "d=" << d;
    }
  }
}

TEST(Dpb, Errors) {
  DpbCase c{2, 3, 2, false, false, 2, 2};
  const DpbNet net(c);
  double out[64];
  auto call = [&](DpbParams p) { return [p, &net, &out] { dpb_offset_bias(p, net.weights(), out); }; };
  DpbParams p = net.p;
  p.num_heads = 0;
  expect_error(call(p), "[dpb] num_heads must be >= 1, got 0");
  p = net.p, p.hidden = 0;
  expect_error(call(p), "[dpb] hidden must be >= 1, got 0");
  p = net.p, p.depth = 0;
  expect_error(call(p), "[dpb] depth must be >= 1, got 0");
  p = net.p, p.q_len = -1;
  expect_error(call(p), "[dpb] q_len must be >= 0, got -1");
  p = net.p, p.k_len = -3;
  expect_error(call(p), "[dpb] k_len must be >= 0, got -3");
  p = net.p, p.norm = true;  // no norm weights given
  expect_error(call(p), "[dpb] norm_weight must not be null");
  DpbWeights<double> w = net.weights();
  w.hidden_weight = nullptr;
  expect_error([&] { dpb_offset_bias(net.p, w, out); }, "[dpb] hidden_weight must not be null");
}

// ---- CPB

struct CpbCase {
  int64_t heads, hidden, height, width, pretrained_height, pretrained_width;
};

std::string name_of(const CpbCase& c) {
  return "heads=" + std::to_string(c.heads) + " hidden=" + std::to_string(c.hidden) +
         " grid=" + std::to_string(c.height) + "x" + std::to_string(c.width) +
         " pretrained=" + std::to_string(c.pretrained_height) + "x" + std::to_string(c.pretrained_width);
}

const std::vector<CpbCase> kCpbCases{
    {3, 16, 4, 4, 0, 0}, {2, 9, 3, 5, 0, 0}, {4, 12, 2, 6, 8, 8}, {1, 5, 1, 4, 0, 0}, {3, 512, 3, 3, 0, 0},
};

struct CpbNet {
  CpbParams p;
  std::vector<double> w1, b1, w2;
  explicit CpbNet(const CpbCase& c)
      : p{c.heads, c.hidden, c.height, c.width, c.pretrained_height, c.pretrained_width},
        w1(values(static_cast<size_t>(2 * c.hidden), 0.2, 0.9)),
        b1(values(static_cast<size_t>(c.hidden), 1.3, 0.3)),
        w2(values(static_cast<size_t>(c.heads * c.hidden), 2.1, 2.0 / std::sqrt(static_cast<double>(c.hidden)))) {}
  CpbWeights<double> weights() const { return {w1.data(), b1.data(), w2.data()}; }
};

// Swin V2's WindowAttention: relative_coords_table (dh, dw) / (window - 1) * 8, sign * log2(|.| + 1) / log2(8),
// cpb_mlp = Linear(2, hidden) -> ReLU -> Linear(hidden, heads, bias=False), then 16 * sigmoid, read at
// relative_coords = coords[i] - coords[j].
LVec swin_v2(const CpbNet& n, long double dy, long double dx) {
  const long double wy = n.p.pretrained_height > 0 ? n.p.pretrained_height : n.p.height;
  const long double wx = n.p.pretrained_width > 0 ? n.p.pretrained_width : n.p.width;
  // An axis of extent 1 has only offset 0: coordinate 0 (Swin's 0 / 0).
  long double cy = wy > 1 ? dy / (wy - 1) * 8 : 0, cx = wx > 1 ? dx / (wx - 1) * 8 : 0;
  auto log_spaced = [](long double v) {
    return (v > 0 ? 1.0L : v < 0 ? -1.0L : 0.0L) * std::log2(std::fabs(v) + 1.0L) / std::log2(8.0L);
  };
  cy = log_spaced(cy), cx = log_spaced(cx);
  LVec out(static_cast<size_t>(n.p.num_heads), 0.0L);
  for (int64_t k = 0; k < n.p.hidden; ++k) {
    const long double hidden = std::max(0.0L, n.w1[2 * k] * cy + n.w1[2 * k + 1] * cx + n.b1[k]);
    for (int64_t h = 0; h < n.p.num_heads; ++h) out[h] += n.w2[h * n.p.hidden + k] * hidden;
  }
  for (long double& v : out) v = 16.0L / (1.0L + std::exp(-v));
  return out;
}

TEST(Cpb, GridMatchesSwinV2OnEveryPair) {
  for (const CpbCase& c : kCpbCases) {
    SCOPED_TRACE(name_of(c));
    const CpbNet net(c);
    const int64_t rows = cpb_rows(net.p), cols = cpb_cols(net.p), cells = c.height * c.width;
    ASSERT_EQ(rows, 2 * c.height - 1);
    std::vector<double> grid(static_cast<size_t>(c.heads * rows * cols));
    cpb_grid_bias(net.p, net.weights(), grid.data());
    const std::vector<double> dense = reference::cpb_bias(net.p, net.weights());
    for (int64_t i = 0; i < cells; ++i) {
      for (int64_t j = 0; j < cells; ++j) {
        const int64_t yi = i / c.width, xi = i % c.width, yj = j / c.width, xj = j % c.width;
        const LVec want = swin_v2(net, yi - yj, xi - xj);
        // The fused attention reads grid_bias at (y_j - y_i + H - 1, x_j - x_i + W - 1).
        const int64_t at = (yj - yi + c.height - 1) * cols + (xj - xi + c.width - 1);
        for (int64_t h = 0; h < c.heads; ++h) {
          // 1e-14 relative: log2 and sums of <= 512 terms in double against long double (values in (0, 16)).
          EXPECT_NEAR(grid[h * rows * cols + at], static_cast<double>(want[h]), 1e-14 * 16);
          EXPECT_NEAR(dense[(h * cells + i) * cells + j], static_cast<double>(want[h]), 1e-14 * 16);
        }
      }
    }
  }
}

TEST(Cpb, GradientsMatchDifferencesOfTheFormula) {
  for (const CpbCase& c : kCpbCases) {
    if (c.hidden > 32) continue;  // 3 * hidden differences of the whole grid each
    SCOPED_TRACE(name_of(c));
    CpbNet net(c);
    const int64_t rows = cpb_rows(net.p), cols = cpb_cols(net.p);
    const std::vector<double> grad = values(static_cast<size_t>(c.heads * rows * cols), 0.4, 1.0);
    auto loss = [&] {
      long double s = 0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t q = 0; q < cols; ++q) {
          const LVec b = swin_v2(net, c.height - 1 - r, c.width - 1 - q);
          for (int64_t h = 0; h < c.heads; ++h) s += grad[(h * rows + r) * cols + q] * b[h];
        }
      }
      return s;
    };
    std::vector<double> g1(net.w1.size()), gb(net.b1.size()), g2(net.w2.size());
    cpb_grid_bias_backward(net.p, net.weights(), grad.data(), CpbGradients<double>{g1.data(), gb.data(), g2.data()});
    auto check = [&](std::vector<double>& param, const std::vector<double>& got, const char* name) {
      for (size_t k = 0; k < param.size(); ++k) {
        const double saved = param[k], e = 1e-6;
        param[k] = saved + e;
        const long double up = loss();
        param[k] = saved - e;
        const long double down = loss();
        param[k] = saved;
        const double want = static_cast<double>((up - down) / (2 * e));
        // 1e-7: central-difference truncation; the weights keep every ReLU input away from 0 by >> e.
        EXPECT_NEAR(got[k], want, 1e-7 * std::max(1.0, std::fabs(want))) << name << "[" << k << "]";
      }
    };
    check(net.w1, g1, "fc1_weight");
    check(net.b1, gb, "fc1_bias");
    check(net.w2, g2, "fc2_weight");
  }
}

TEST(Cpb, CoordinatesAreLogSpacedOddAndBoundedBy8) {
  // The window's edge maps to 8 -> log2(9) / 3; the centre to 0; odd in t.
  for (int64_t n : {2, 3, 7, 8, 24}) {
    EXPECT_EQ(cpb_coordinate(0, n), 0.0);
    EXPECT_NEAR(cpb_coordinate(n - 1, n), std::log2(9.0) / 3.0, 1e-15);
    for (int64_t t = 1; t < n; ++t) {
      EXPECT_EQ(cpb_coordinate(-t, n), -cpb_coordinate(t, n));
      EXPECT_GT(cpb_coordinate(t, n), cpb_coordinate(t - 1, n));
    }
  }
  EXPECT_EQ(cpb_coordinate(0, 1), 0.0);
  // A pretrained window: the offsets of a larger window reach past 8.
  EXPECT_NEAR(cpb_coordinate(15, 8), std::log2(1.0 + 8.0 * 15 / 7) / 3.0, 1e-15);
}

TEST(Cpb, Errors) {
  const CpbNet net(CpbCase{2, 4, 2, 2, 0, 0});
  double out[64];
  auto call = [&](CpbParams p) { return [p, &net, &out] { cpb_grid_bias(p, net.weights(), out); }; };
  CpbParams p = net.p;
  p.num_heads = 0;
  expect_error(call(p), "[cpb] num_heads must be >= 1, got 0");
  p = net.p, p.hidden = 0;
  expect_error(call(p), "[cpb] hidden must be >= 1, got 0");
  p = net.p, p.height = 0;
  expect_error(call(p), "[cpb] height must be >= 1, got 0");
  p = net.p, p.width = -2;
  expect_error(call(p), "[cpb] width must be >= 1, got -2");
  p = net.p, p.pretrained_height = 1;
  expect_error(call(p), "[cpb] pretrained_height must be 0 (the grid's) or >= 2, got 1");
  p = net.p, p.pretrained_width = -4;
  expect_error(call(p), "[cpb] pretrained_width must be 0 (the grid's) or >= 2, got -4");
  expect_error(
      [&] {
        cpb_grid_bias<double>(net.p, {net.w1.data(), nullptr, net.w2.data()}, out);
      },
      "[cpb] fc1_bias must not be null");
}

}  // namespace
}  // namespace posenc::kernels
