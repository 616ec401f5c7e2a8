// Fused attention (attention_forward) against a plain long-double reference
// that builds the whole logits matrix from the header's formula, takes the
// softmax and the two sums; one table of cases covers every term alone and
// combined, the masks, Tq < Tk, shared and per-head tables, clip distances
// below and above T, Dv != Dh, strided views and sizes that fit no tile.
// Then the weights output, thread-count independence, and every error message.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "check.h"
#include "strided_tensor.h"
#include "posenc/kernels/attention.h"
#include "posenc/kernels/attention_backward.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

using namespace posenc::test;  // strided_tensor.h: Tensor, make_tensor, fill, ...

// ---------------------------------------------------------------------------
// Cases

struct Case {
  const char* name;
  int64_t nb, nh, tq, tk, dh, dv;
  bool causal = false;
  int padding = 0;  // 1: random keys padded; 2: also every key of batch 0 and key 0 of the last batch
  bool content_shift = false, rel_k = false, rel_v = false, relative_shift = false;
  bool per_head = false;  // per-head relative / 2D tables
  int64_t k = 0;          // max_distance
  int64_t hg = 0, wg = 0;
  bool grid_h = false, grid_w = false, grid_bias = false;
  bool offset_bias = false;
  int bias = 0;  // 1: dense (B, H, Tq, Tk) with padded rows; 2: broadcast over the batch (stride_b 0)
  Layout layout = Layout::kContiguous;
  double scale = 0;  // 0: 1/sqrt(Dh)
  double spread = 1;  // inputs in [-spread, spread]: large logits exercise the running max
  bool ramp = false;  // key j scaled by 1 + j/8: the row max moves in later tiles
};

std::string describe(const Case& c) {
  return std::string(c.name) + ": B=" + std::to_string(c.nb) + " H=" + std::to_string(c.nh) +
         " Tq=" + std::to_string(c.tq) + " Tk=" + std::to_string(c.tk) + " Dh=" + std::to_string(c.dh) +
         " Dv=" + std::to_string(c.dv) + " K=" + std::to_string(c.k) + " grid=" + std::to_string(c.hg) + "x" +
         std::to_string(c.wg);
}

template <class T>
struct Inputs {
  Tensor<T> q, k, v;
  std::vector<T> u, w, rel_k, rel_v, grid_h, grid_w, offset_bias, grid_bias, bias;
  std::vector<uint8_t> padding;
  AttentionTerms<T> terms;
  AttentionParams params;
  int64_t tables = 1;
};

template <class T>
Inputs<T> make_inputs(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs<T> in;
  const double s = c.spread;
  in.q = make_tensor<T>(c.nb, c.nh, c.tq, c.dh, c.layout);
  in.k = make_tensor<T>(c.nb, c.nh, c.tk, c.dh, c.layout);
  in.v = make_tensor<T>(c.nb, c.nh, c.tk, c.dv, c.layout);
  fill(in.q, rng, -s, s);
  fill(in.k, rng, -s, s);
  fill(in.v, rng, -1, 1);
  if (c.ramp) {
    for (int64_t b = 0; b < c.nb; ++b)
      for (int64_t h = 0; h < c.nh; ++h)
        for (int64_t j = 0; j < c.tk; ++j)
          for (int64_t d = 0; d < c.dh; ++d) in.k.at(b, h, j, d) *= static_cast<T>(1 + j / 8.0);
  }
  in.tables = c.per_head ? c.nh : 1;
  AttentionTerms<T>& t = in.terms;
  if (c.content_shift) in.u = random_values<T>(c.nh * c.dh, rng, -s, s), t.content_shift = in.u.data();
  if (c.relative_shift) in.w = random_values<T>(c.nh * c.dh, rng, -s, s), t.relative_shift = in.w.data();
  if (c.rel_k) in.rel_k = random_values<T>(in.tables * (2 * c.k + 1) * c.dh, rng, -s, s), t.rel_k = in.rel_k.data();
  if (c.rel_v) in.rel_v = random_values<T>(in.tables * (2 * c.k + 1) * c.dv, rng), t.rel_v = in.rel_v.data();
  t.rel_tables = in.tables, t.max_distance = c.k;
  if (c.grid_h) in.grid_h = random_values<T>(in.tables * (2 * c.hg - 1) * c.dh, rng, -s, s), t.grid_h = in.grid_h.data();
  if (c.grid_w) in.grid_w = random_values<T>(in.tables * (2 * c.wg - 1) * c.dh, rng, -s, s), t.grid_w = in.grid_w.data();
  t.grid_tables = in.tables, t.grid_height = c.hg, t.grid_width = c.wg;
  if (c.grid_bias) {
    in.grid_bias = random_values<T>(c.nh * (2 * c.hg - 1) * (2 * c.wg - 1), rng, -2, 2);
    t.grid_bias = in.grid_bias.data();
  }
  if (c.offset_bias) in.offset_bias = random_values<T>(c.nh * (c.tq + c.tk - 1), rng, -2, 2), t.offset_bias = in.offset_bias.data();
  if (c.bias != 0) {
    const int64_t nbb = c.bias == 2 ? 1 : c.nb, ld = c.tk + 3;
    in.bias = random_values<T>(nbb * c.nh * c.tq * ld, rng, -2, 2);
    t.bias = in.bias.data();
    t.bias_stride_r = ld, t.bias_stride_h = c.tq * ld, t.bias_stride_b = c.bias == 2 ? 0 : c.nh * c.tq * ld;
  }
  in.params.scale = c.scale != 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(c.dh, 1)));
  in.params.causal = c.causal;
  if (c.padding != 0) {
    const int64_t ld = c.tk + 2;  // row stride wider than Tk
    in.padding.assign(static_cast<size_t>(std::max<int64_t>(c.nb * ld, 1)), 0);
    std::bernoulli_distribution pad(0.3);
    for (int64_t b = 0; b < c.nb; ++b)
      for (int64_t j = 0; j < c.tk; ++j) in.padding[static_cast<size_t>(b * ld + j)] = pad(rng) ? 1 : 0;
    if (c.padding == 2) {
      for (int64_t j = 0; j < c.tk; ++j) in.padding[static_cast<size_t>(j)] = 7;  // any non-zero byte
      if (c.nb > 1 && c.tk > 0) in.padding[static_cast<size_t>((c.nb - 1) * ld)] = 1;
    }
    in.params.key_padding = in.padding.data(), in.params.key_padding_stride = ld;
  }
  return in;
}

// ---------------------------------------------------------------------------
// The reference: the header's formula term by term in long double, the full
// (Tq, Tk) logits matrix, a softmax, and the two sums. Shares nothing with
// the kernel. Alongside each value it keeps the magnitudes that bound the
// kernel's rounding (see `check`).

struct Reference {
  std::vector<long double> out, out_bound, weights, weights_bound;  // contiguous (B, H, Tq, Dv) / (B, H, Tq, Tk)
};

int64_t clip_row(int64_t d, int64_t k) { return std::clamp(d, -k, k) + k; }

template <class T>
Reference reference(const Case& c, const Inputs<T>& in, long double unit, int64_t row_step = 1) {
  const int64_t tq = c.tq, tk = c.tk, dh = c.dh, dv = c.dv, k = c.k, hg = c.hg, wg = c.wg;
  const long double scale = in.params.scale;
  Reference ref;
  ref.out.assign(static_cast<size_t>(c.nb * c.nh * tq * dv), 0.0L);
  ref.out_bound = ref.out;
  ref.weights.assign(static_cast<size_t>(c.nb * c.nh * tq * tk), 0.0L);
  ref.weights_bound = ref.weights;
  std::vector<long double> s(static_cast<size_t>(tk)), mag(static_cast<size_t>(tk));
  std::vector<bool> live(static_cast<size_t>(tk));
  for (int64_t b = 0; b < c.nb; ++b)
    for (int64_t h = 0; h < c.nh; ++h) {
      const int64_t t = c.per_head ? h : 0;
      for (int64_t i = 0; i < tq; i += row_step) {
        const int64_t ip = i + tk - tq;
        long double mx = -INFINITY;
        for (int64_t j = 0; j < tk; ++j) {
          const int64_t d = j - ip, r = clip_row(d, k);
          bool ok = !(c.causal && j > ip);
          if (c.padding != 0) ok = ok && in.padding[static_cast<size_t>(b * (tk + 2) + j)] == 0;
          live[static_cast<size_t>(j)] = ok;
          long double dot = 0, m = 0;
          for (int64_t e = 0; e < dh; ++e) {
            const long double qv = in.q.at(b, h, i, e);
            const long double qu = qv + (c.content_shift ? in.u[static_cast<size_t>(h * dh + e)] : 0);
            long double term = qu * in.k.at(b, h, j, e);
            dot += term, m += fabsl(term);
            if (c.rel_k) {
              const long double qw = qv + (c.relative_shift ? in.w[static_cast<size_t>(h * dh + e)] : 0);
              term = qw * in.rel_k[static_cast<size_t>((t * (2 * k + 1) + r) * dh + e)];
              dot += term, m += fabsl(term);
            }
            if (c.grid_h) {
              const int64_t a = j / wg - i / wg + hg - 1;
              term = qv * in.grid_h[static_cast<size_t>((t * (2 * hg - 1) + a) * dh + e)];
              dot += term, m += fabsl(term);
            }
            if (c.grid_w) {
              const int64_t a = j % wg - i % wg + wg - 1;
              term = qv * in.grid_w[static_cast<size_t>((t * (2 * wg - 1) + a) * dh + e)];
              dot += term, m += fabsl(term);
            }
          }
          long double x = scale * dot, xm = scale * m;
          if (c.offset_bias) {
            const long double bias = in.offset_bias[static_cast<size_t>(h * (tq + tk - 1) + d + tk - 1)];
            x += bias, xm += fabsl(bias);
          }
          if (c.grid_bias) {
            const int64_t dy = j / wg - i / wg + hg - 1, dx = j % wg - i % wg + wg - 1;
            const long double bias =
                in.grid_bias[static_cast<size_t>((h * (2 * hg - 1) + dy) * (2 * wg - 1) + dx)];
            x += bias, xm += fabsl(bias);
          }
          if (c.bias != 0) {
            const auto& tm = in.terms;
            const long double bias =
                in.bias[static_cast<size_t>(b * tm.bias_stride_b + h * tm.bias_stride_h + i * tm.bias_stride_r + j)];
            x += bias, xm += fabsl(bias);
          }
          s[static_cast<size_t>(j)] = x, mag[static_cast<size_t>(j)] = xm;
          if (ok) mx = std::max(mx, x);
        }
        if (mx == -INFINITY) continue;  // every key masked: zeros
        // Rounding of the kernel's logit j: at most Dh + 8 roundings on each
        // product's path (a dot product of length Dh per term, the scale, up to
        // five additions) times its magnitude, plus the rounding of s - m.
        // A perturbation delta of the logits moves each p_j by at most a
        // factor exp(2 max|delta|) (softmax is shift invariant).
        long double sum = 0, delta = 0;
        for (int64_t j = 0; j < tk; ++j) {
          if (!live[static_cast<size_t>(j)]) continue;
          sum += expl(s[static_cast<size_t>(j)] - mx);
          delta = std::max(delta, (dh + 8) * unit * mag[static_cast<size_t>(j)] +
                                      2 * unit * fabsl(s[static_cast<size_t>(j)] - mx));
        }
        // exp: a few ulp; the tile rescaling and 1/l: a few more. The kernel's
        // exp flushes arguments below -87 (float) / -708 (double) to 0: an
        // absolute error below 2^-125 (2^-1021) on any p.
        const long double prob_rel = 2 * delta + 16 * unit;
        const long double flush = std::is_same_v<T, float> ? 0x1p-125L : 0x1p-1021L;
        const size_t row = static_cast<size_t>((b * c.nh + h) * tq + i);
        for (int64_t j = 0; j < tk; ++j) {
          if (!live[static_cast<size_t>(j)]) continue;
          const long double p = expl(s[static_cast<size_t>(j)] - mx) / sum;
          ref.weights[row * tk + j] = p;
          ref.weights_bound[row * tk + j] = prob_rel * p + flush;
          const int64_t r = clip_row(j - ip, k);
          for (int64_t e = 0; e < dv; ++e) {
            long double val = in.v.at(b, h, j, e);
            if (c.rel_v) val += in.rel_v[static_cast<size_t>((t * (2 * k + 1) + r) * dv + e)];
            ref.out[row * dv + e] += p * val;
            // The sums over keys (values, and binned probabilities for rel_v):
            // at most 2 Tk roundings on a term's path.
            ref.out_bound[row * dv + e] += (prob_rel + (2 * tk + 8) * unit) * p * fabsl(val) + flush * fabsl(val);
          }
        }
      }
    }
  return ref;
}

// Every element within its bound (an absolute floor of a few u for the
// values near 0 whose terms cancel is not needed: the bound is on the
// sum of |terms|), and rows with every key masked exactly 0.
template <class T>
void check(const Tensor<T>& got, const std::vector<long double>& want, const std::vector<long double>& bound,
           const std::string& what) {
  int64_t failures = 0, n = 0;
  const auto& v = got.view;
  for (int64_t b = 0; b < v.batch; ++b)
    for (int64_t h = 0; h < v.heads; ++h)
      for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t c = 0; c < v.cols; ++c, ++n) {
          const long double g = got.at(b, h, r, c), w = want[static_cast<size_t>(n)];
          const long double tol = bound[static_cast<size_t>(n)];
          if (!(fabsl(g - w) <= tol) && ++failures <= 3) {
            ADD_FAILURE() << what << " at (" << b << ", " << h << ", " << r << ", " << c << "): got "
                          << static_cast<double>(g) << ", want " << static_cast<double>(w) << " (tolerance "
                          << static_cast<double>(tol) << ")";
          }
        }
  EXPECT_EQ(failures, 0) << what;
  EXPECT_EQ(got.changed_padding(), 0) << what << ": wrote outside its view";
}

template <class T>
constexpr long double kUnit = std::is_same_v<T, float> ? 0x1p-24L : 0x1p-53L;

template <class T>
void run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(describe(c) + (std::is_same_v<T, float> ? " float32" : " float64"));
  const Inputs<T> in = make_inputs<T>(c, seed);
  const Reference ref = reference(c, in, kUnit<T>);
  Tensor<T> out = make_tensor<T>(c.nb, c.nh, c.tq, c.dv, c.layout == Layout::kContiguous ? c.layout : Layout::kPadded);
  Tensor<T> weights = make_tensor<T>(c.nb, c.nh, c.tq, c.tk, Layout::kPadded);
  poison(out);
  poison(weights);
  attention_forward<T>(in.params, in.q.in(), in.k.in(), in.v.in(), in.terms, out.view, weights.view);
  check(out, ref.out, ref.out_bound, "out");
  check(weights, ref.weights, ref.weights_bound, "weights");
  // Without the weights: the same output, bit for bit (the weights are a second pass).
  Tensor<T> out2 = make_tensor<T>(c.nb, c.nh, c.tq, c.dv, Layout::kContiguous);
  poison(out2);
  attention_forward<T>(in.params, in.q.in(), in.k.in(), in.v.in(), in.terms, out2.view);
  for (int64_t b = 0; b < c.nb; ++b)
    for (int64_t h = 0; h < c.nh; ++h)
      for (int64_t i = 0; i < c.tq; ++i)
        ASSERT_EQ(std::memcmp(out.view.row(b, h, i), out2.view.row(b, h, i), sizeof(T) * c.dv), 0) << "row " << i;
}

const std::vector<Case>& cases() {
  using L = Layout;
  static const std::vector<Case> all = {
      // Content only; odd sizes: blocks of 48 (24 for double) rows, tiles of 128 keys.
      {.name = "plain", .nb = 2, .nh = 3, .tq = 37, .tk = 37, .dh = 16, .dv = 16},
      {.name = "plain tiles", .nb = 1, .nh = 2, .tq = 100, .tk = 300, .dh = 32, .dv = 32},
      {.name = "plain big logits", .nb = 1, .nh = 2, .tq = 70, .tk = 290, .dh = 16, .dv = 16, .spread = 4},
      {.name = "max moves", .nb = 1, .nh = 2, .tq = 50, .tk = 400, .dh = 8, .dv = 16, .spread = 2, .ramp = true},
      {.name = "scale", .nb = 1, .nh = 2, .tq = 33, .tk = 41, .dh = 16, .dv = 16, .scale = 0.7},
      // Each term alone.
      {.name = "content shift", .nb = 1, .nh = 2, .tq = 40, .tk = 40, .dh = 16, .dv = 16, .content_shift = true},
      {.name = "rel_k", .nb = 2, .nh = 2, .tq = 53, .tk = 53, .dh = 16, .dv = 16, .rel_k = true, .k = 5},
      {.name = "rel_v", .nb = 2, .nh = 2, .tq = 53, .tk = 53, .dh = 16, .dv = 16, .rel_v = true, .k = 5},
      {.name = "rel_k+v per head", .nb = 1, .nh = 3, .tq = 61, .tk = 61, .dh = 16, .dv = 32, .rel_k = true,
       .rel_v = true, .per_head = true, .k = 7},
      {.name = "rel K > T", .nb = 1, .nh = 2, .tq = 50, .tk = 50, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 80},
      {.name = "rel K = 0", .nb = 1, .nh = 2, .tq = 30, .tk = 30, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 0},
      {.name = "rel tiles", .nb = 1, .nh = 2, .tq = 130, .tk = 280, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 60},
      {.name = "rel K ~ T tiles", .nb = 1, .nh = 1, .tq = 150, .tk = 270, .dh = 8, .dv = 24, .rel_k = true,
       .rel_v = true, .per_head = true, .k = 269},
      {.name = "transformer-xl", .nb = 1, .nh = 2, .tq = 45, .tk = 45, .dh = 16, .dv = 16, .content_shift = true,
       .rel_k = true, .relative_shift = true, .k = 44},
      {.name = "grid_h", .nb = 1, .nh = 2, .tq = 35, .tk = 35, .dh = 16, .dv = 16, .hg = 5, .wg = 7, .grid_h = true},
      {.name = "grid_w", .nb = 1, .nh = 2, .tq = 35, .tk = 35, .dh = 16, .dv = 16, .hg = 5, .wg = 7, .grid_w = true},
      {.name = "2D relative", .nb = 2, .nh = 2, .tq = 117, .tk = 117, .dh = 16, .dv = 16, .per_head = true, .hg = 9,
       .wg = 13, .grid_h = true, .grid_w = true},
      {.name = "2D tall", .nb = 1, .nh = 1, .tq = 150, .tk = 150, .dh = 8, .dv = 16, .hg = 150, .wg = 1,
       .grid_h = true, .grid_w = true, .grid_bias = true},
      {.name = "2D wide", .nb = 1, .nh = 1, .tq = 60, .tk = 60, .dh = 8, .dv = 16, .hg = 1, .wg = 60, .grid_h = true,
       .grid_w = true, .grid_bias = true},
      {.name = "grid bias", .nb = 1, .nh = 2, .tq = 63, .tk = 63, .dh = 16, .dv = 16, .hg = 7, .wg = 9,
       .grid_bias = true},
      {.name = "offset bias", .nb = 2, .nh = 2, .tq = 57, .tk = 57, .dh = 16, .dv = 16, .offset_bias = true},
      {.name = "dense bias", .nb = 2, .nh = 2, .tq = 29, .tk = 150, .dh = 16, .dv = 16, .bias = 1},
      {.name = "dense bias broadcast", .nb = 2, .nh = 2, .tq = 29, .tk = 31, .dh = 16, .dv = 16, .bias = 2},
      // Masks.
      {.name = "causal", .nb = 1, .nh = 2, .tq = 150, .tk = 150, .dh = 16, .dv = 16, .causal = true},
      {.name = "key padding", .nb = 3, .nh = 2, .tq = 40, .tk = 140, .dh = 16, .dv = 16, .padding = 1},
      {.name = "fully masked rows", .nb = 2, .nh = 2, .tq = 30, .tk = 30, .dh = 16, .dv = 16, .causal = true,
       .padding = 2},
      {.name = "fully masked rows rel", .nb = 2, .nh = 1, .tq = 30, .tk = 30, .dh = 16, .dv = 16, .padding = 2,
       .rel_k = true, .rel_v = true, .k = 3},
      // Queries aligned to the last keys.
      {.name = "Tq < Tk", .nb = 1, .nh = 2, .tq = 13, .tk = 70, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 9, .offset_bias = true},
      {.name = "Tq < Tk causal", .nb = 2, .nh = 2, .tq = 60, .tk = 200, .dh = 16, .dv = 16, .causal = true,
       .padding = 1, .rel_k = true, .rel_v = true, .k = 20, .offset_bias = true, .bias = 1},
      {.name = "Tq > Tk", .nb = 1, .nh = 2, .tq = 70, .tk = 20, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 6, .offset_bias = true},
      {.name = "Tq >> Tk: whole blocks clipped", .nb = 1, .nh = 1, .tq = 200, .tk = 20, .dh = 8, .dv = 16,
       .rel_k = true, .rel_v = true, .k = 3},
      {.name = "decode Tq = 1", .nb = 2, .nh = 2, .tq = 1, .tk = 50, .dh = 16, .dv = 16, .causal = true,
       .rel_k = true, .rel_v = true, .k = 10, .offset_bias = true},
      {.name = "T = 1", .nb = 1, .nh = 2, .tq = 1, .tk = 1, .dh = 16, .dv = 16, .causal = true, .rel_k = true,
       .rel_v = true, .k = 4, .offset_bias = true},
      // Dv != Dh, dims that are not whole vectors.
      {.name = "Dv != Dh", .nb = 1, .nh = 2, .tq = 40, .tk = 45, .dh = 24, .dv = 40, .rel_v = true, .k = 3},
      {.name = "odd dims", .nb = 1, .nh = 2, .tq = 41, .tk = 43, .dh = 5, .dv = 7, .rel_k = true, .rel_v = true,
       .k = 4},
      {.name = "wide Dv", .nb = 1, .nh = 1, .tq = 20, .tk = 30, .dh = 8, .dv = 136, .rel_v = true, .k = 2},
      {.name = "Dh = 1", .nb = 1, .nh = 1, .tq = 17, .tk = 13, .dh = 1, .dv = 3},
      // Strided views: (B, T, H, D) viewed as (B, H, T, D), and padded rows.
      {.name = "token-major", .nb = 2, .nh = 3, .tq = 50, .tk = 50, .dh = 16, .dv = 16, .causal = true,
       .rel_k = true, .rel_v = true, .k = 8, .layout = L::kTokenMajor},
      {.name = "padded", .nb = 2, .nh = 2, .tq = 33, .tk = 66, .dh = 12, .dv = 20, .padding = 1, .rel_v = true,
       .k = 4, .offset_bias = true, .layout = L::kPadded},
      // Everything at once.
      {.name = "all terms", .nb = 2, .nh = 2, .tq = 35, .tk = 35, .dh = 16, .dv = 24, .causal = true, .padding = 1,
       .content_shift = true, .rel_k = true, .rel_v = true, .relative_shift = true, .per_head = true, .k = 6,
       .hg = 5, .wg = 7, .grid_h = true, .grid_w = true, .grid_bias = true, .offset_bias = true, .bias = 1,
       .layout = L::kTokenMajor},
      // Empty extents: nothing to do, or zeros (no keys).
      {.name = "no keys", .nb = 1, .nh = 2, .tq = 5, .tk = 0, .dh = 16, .dv = 16, .rel_k = true, .rel_v = true,
       .k = 2},
      {.name = "no queries", .nb = 1, .nh = 2, .tq = 0, .tk = 5, .dh = 16, .dv = 16},
      {.name = "no batch", .nb = 0, .nh = 2, .tq = 5, .tk = 5, .dh = 16, .dv = 16},
      {.name = "Dh = 0", .nb = 1, .nh = 2, .tq = 9, .tk = 11, .dh = 0, .dv = 4, .offset_bias = true},
      {.name = "Dv = 0", .nb = 1, .nh = 2, .tq = 9, .tk = 11, .dh = 4, .dv = 0, .rel_v = true, .k = 2},
  };
  return all;
}

TEST(AttentionCases, Float) {
  uint64_t seed = 11;
  for (const Case& c : cases()) run_case<float>(c, seed++);
}

TEST(AttentionCases, Double) {
  uint64_t seed = 101;
  for (const Case& c : cases()) run_case<double>(c, seed++);
}

// The weights of a row sum to 1 (to Tk roundings), masked keys get exactly 0.
TEST(AttentionWeights, RowsSumToOneMaskedZero) {
  const Case c{.name = "weights", .nb = 2, .nh = 2, .tq = 70, .tk = 150, .dh = 16, .dv = 16, .causal = true,
               .padding = 2, .rel_k = true, .k = 5, .offset_bias = true};
  const Inputs<float> in = make_inputs<float>(c, 5);
  Tensor<float> out = make_tensor<float>(c.nb, c.nh, c.tq, c.dv, Layout::kContiguous);
  Tensor<float> w = make_tensor<float>(c.nb, c.nh, c.tq, c.tk, Layout::kContiguous);
  attention_forward<float>(in.params, in.q.in(), in.k.in(), in.v.in(), in.terms, out.view, w.view);
  for (int64_t b = 0; b < c.nb; ++b)
    for (int64_t h = 0; h < c.nh; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        const int64_t ip = i + c.tk - c.tq;
        double sum = 0;
        bool any = false;
        for (int64_t j = 0; j < c.tk; ++j) {
          const bool masked = j > ip || in.padding[static_cast<size_t>(b * (c.tk + 2) + j)] != 0;
          const float p = w.at(b, h, i, j);
          if (masked) {
            ASSERT_EQ(p, 0.0f) << b << " " << h << " " << i << " " << j;
          } else {
            ASSERT_GE(p, 0.0f);
            any = true;
          }
          sum += p;
        }
        // Each p within ~2^-20 relative of exact (the case bound), Tk of them.
        if (any) {
          EXPECT_NEAR(sum, 1.0, 1e-5) << b << " " << h << " " << i;
        } else {
          EXPECT_EQ(sum, 0.0);
          for (int64_t e = 0; e < c.dv; ++e) EXPECT_EQ(out.at(b, h, i, e), 0.0f);
        }
      }
}

// exp on exactly representable logits s_j = -39/32 j (q = 1, k_j = s_j, Dh = 1,
// scale 1; s_0 = 0 is the max): p_j / p_0 = exp(s_j), down to e^-77, within
// 8 ulp (two exps of a few ulp each, two products with 1/l).
template <class T>
void check_exp_ratios() {
  const int64_t tk = 64;
  std::vector<T> q = {T(1)}, k(tk), v(tk, T(0)), out(1), w(tk);
  for (int64_t j = 0; j < tk; ++j) k[static_cast<size_t>(j)] = T(-39.0 / 32.0 * static_cast<double>(j));
  attention_forward<T>({}, contiguous_matrix<const T>(q.data(), 1, 1, 1, 1),
                       contiguous_matrix<const T>(k.data(), 1, 1, tk, 1),
                       contiguous_matrix<const T>(v.data(), 1, 1, tk, 1), {}, contiguous_matrix(out.data(), 1, 1, 1, 1),
                       contiguous_matrix(w.data(), 1, 1, 1, tk));
  for (int64_t j = 1; j < tk; ++j) {
    const long double ratio = static_cast<long double>(w[static_cast<size_t>(j)]) / w[0];
    const long double want = expl(static_cast<long double>(k[static_cast<size_t>(j)]));
    EXPECT_LE(fabsl(ratio / want - 1), 8 * kUnit<T>) << "j = " << j;
  }
}

TEST(AttentionWeights, ExpOnExactLogits) {
  check_exp_ratios<float>();
  check_exp_ratios<double>();
}

// Each row is computed by one thread in a fixed order: 1 and 2 threads give
// the same bits (also for the weights), above the size that goes parallel.
TEST(AttentionThreads, IndependentOfThreadCount) {
  const Case c{.name = "threads", .nb = 2, .nh = 4, .tq = 200, .tk = 230, .dh = 32, .dv = 32, .causal = true,
               .padding = 1, .rel_k = true, .rel_v = true, .k = 30, .offset_bias = true};
  const Inputs<float> in = make_inputs<float>(c, 9);
  std::vector<Tensor<float>> outs, ws;
  const int saved = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    outs.push_back(make_tensor<float>(c.nb, c.nh, c.tq, c.dv, Layout::kContiguous));
    ws.push_back(make_tensor<float>(c.nb, c.nh, c.tq, c.tk, Layout::kContiguous));
    attention_forward<float>(in.params, in.q.in(), in.k.in(), in.v.in(), in.terms, outs.back().view,
                             ws.back().view);
  }
  omp_set_num_threads(saved);
  for (size_t n = 1; n < outs.size(); ++n) {
    EXPECT_EQ(std::memcmp(outs[0].store.data(), outs[n].store.data(), outs[0].store.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(ws[0].store.data(), ws[n].store.data(), ws[0].store.size() * sizeof(float)), 0);
  }
}

// Zero keys and unit values: every logit is q . rel_k[r] for the clipped row
// r, so out = 1 + sum_r n_r e^{L_r} rel_v[r] / sum_r n_r e^{L_r} with n_r the
// number of keys whose offset clips to r: counts per row, not a sum over keys
// as in the reference.
TEST(AttentionProperties, RelativeOnlyByRowCounts) {
  const int64_t nh = 2, t = 90, dh = 16, dv = 16, k = 12;
  std::mt19937_64 rng(3);
  std::vector<double> q = random_values<double>(nh * t * dh, rng), keys(nh * t * dh, 0.0), v(nh * t * dv, 1.0);
  std::vector<double> rel_k = random_values<double>((2 * k + 1) * dh, rng);
  std::vector<double> rel_v = random_values<double>((2 * k + 1) * dv, rng);
  AttentionTerms<double> terms;
  terms.rel_k = rel_k.data(), terms.rel_v = rel_v.data(), terms.max_distance = k;
  std::vector<double> out(nh * t * dv);
  attention_forward<double>({}, contiguous_matrix<const double>(q.data(), 1, nh, t, dh),
                            contiguous_matrix<const double>(keys.data(), 1, nh, t, dh),
                            contiguous_matrix<const double>(v.data(), 1, nh, t, dv), terms,
                            contiguous_matrix(out.data(), 1, nh, t, dv));
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t i = 0; i < t; ++i) {
      std::vector<long double> weight(2 * k + 1, 0.0L);
      long double total = 0;
      for (int64_t r = 0; r < 2 * k + 1; ++r) {
        long double logit = 0;
        for (int64_t d = 0; d < dh; ++d) logit += static_cast<long double>(q[(h * t + i) * dh + d]) * rel_k[r * dh + d];
        weight[r] = expl(logit);  // AttentionParams{}: scale 1
      }
      std::vector<long double> n(2 * k + 1, 0.0L);
      for (int64_t j = 0; j < t; ++j) n[clip_row(j - i, k)] += 1;
      for (int64_t r = 0; r < 2 * k + 1; ++r) total += n[r] * weight[r];
      for (int64_t d = 0; d < dv; ++d) {
        long double want = 1;
        for (int64_t r = 0; r < 2 * k + 1; ++r) want += n[r] * weight[r] / total * rel_v[r * dv + d];
        // A few hundred double roundings on values of size ~1.
        EXPECT_NEAR(out[(h * t + i) * dv + d], static_cast<double>(want), 1e-13) << h << " " << i << " " << d;
      }
    }
}

// ---------------------------------------------------------------------------
// Errors, word for word.

struct ErrorSetup {
  std::vector<float> data = std::vector<float>(1 << 16, 0.0f);
  BatchedMatrix<const float> q = contiguous_matrix<const float>(data.data(), 1, 8, 16, 64);
  BatchedMatrix<const float> k = q, v = q;
  BatchedMatrix<float> out = contiguous_matrix(data.data(), 1, 8, 16, 64);
  AttentionTerms<float> terms;
  AttentionParams params;
  void call(BatchedMatrix<float> weights = {}, const char* op = "attention") const {
    attention_forward<float>(params, q, k, v, terms, out, weights, op);
  }
};

TEST(AttentionErrors, Shapes) {
  {
    ErrorSetup s;
    s.k = contiguous_matrix<const float>(s.data.data(), 1, 8, 16, 32);
    expect_error([&] { s.call(); }, "[attention] k must be (B, H, Tk, Dh) = (1, 8, *, 64) like q, got (1, 8, 16, 32)");
  }
  {
    ErrorSetup s;
    s.k = contiguous_matrix<const float>(s.data.data(), 2, 8, 16, 64);
    expect_error([&] { s.call(); }, "[attention] k must be (B, H, Tk, Dh) = (1, 8, *, 64) like q, got (2, 8, 16, 64)");
  }
  {
    ErrorSetup s;
    s.v = contiguous_matrix<const float>(s.data.data(), 1, 8, 15, 64);
    expect_error([&] { s.call(); }, "[attention] v must have the keys' (B, H, Tk) = (1, 8, 16), got (1, 8, 15)");
  }
  {
    ErrorSetup s;
    s.out = contiguous_matrix(s.data.data(), 1, 8, 16, 32);
    expect_error([&] { s.call(); }, "[attention] out must be (B, H, Tq, Dv) = (1, 8, 16, 64), got (1, 8, 16, 32)");
  }
  {
    ErrorSetup s;
    expect_error([&] { s.call(contiguous_matrix(s.data.data(), 1, 8, 16, 15)); },
                 "[attention] weights must be (B, H, Tq, Tk) = (1, 8, 16, 16), got (1, 8, 16, 15)");
  }
  {
    ErrorSetup s;
    s.q = contiguous_matrix<const float>(s.data.data(), 1, 8, -1, 64);
    expect_error([&] { s.call(); }, "[attention] q must be (B, H, Tq, Dh) with extents >= 0, got (1, 8, -1, 64)");
  }
  {
    ErrorSetup s;
    s.k.data = nullptr;
    expect_error([&] { s.call(); }, "[attention] k must have data for its (1, 8, 16, 64) elements, got null");
  }
}

TEST(AttentionErrors, Backward) {
  ErrorSetup s;
  std::vector<float> lse(8 * 16, 0.0f), grad(1 << 16, 0.0f);
  const BatchedMatrix<const float> out = contiguous_matrix<const float>(s.data.data(), 1, 8, 16, 64);
  BatchedMatrix<const float> grad_out = out;
  AttentionGradients<float> g;
  const float* logsumexp = lse.data();
  const auto call = [&] { attention_backward<float>(s.params, s.q, s.k, s.v, s.terms, out, logsumexp, grad_out, g); };
  grad_out = contiguous_matrix<const float>(s.data.data(), 1, 8, 15, 64);
  expect_error(call, "[attention] grad_out must be (B, H, Tq, Dv) = (1, 8, 16, 64), got (1, 8, 15, 64)");
  grad_out = out;
  g.q = contiguous_matrix(grad.data(), 1, 8, 16, 32);
  expect_error(call, "[attention] the gradient of q must be (1, 8, 16, 64), got (1, 8, 16, 32)");
  g.q = {};
  g.rel_k = grad.data();
  expect_error(call, "[attention] the gradient of rel_k needs the rel_k term, got none");
  g.rel_k = nullptr;
  logsumexp = nullptr;
  expect_error(call, "[attention] logsumexp must be the forward's (B, H, Tq) rows, got null");
  logsumexp = lse.data();
  grad_out.data = nullptr;
  expect_error(call, "[attention] grad_out must have data for its (1, 8, 16, 64) elements, got null");
}

TEST(AttentionErrors, Params) {
  {
    ErrorSetup s;
    s.params.scale = -1;
    expect_error([&] { s.call(); }, "[attention] scale must be finite and > 0, got -1");
    s.params.scale = std::numeric_limits<double>::infinity();
    expect_error([&] { s.call(); }, "[attention] scale must be finite and > 0, got inf");
    s.params.scale = 0;
    expect_error([&] { s.call(); }, "[attention] scale must be finite and > 0, got 0");
  }
  {
    ErrorSetup s;
    s.q = contiguous_matrix<const float>(s.data.data(), 1, 8, 9, 64);
    s.k = s.v = contiguous_matrix<const float>(s.data.data(), 1, 8, 8, 64);
    s.out = contiguous_matrix(s.data.data(), 1, 8, 9, 64);
    s.params.causal = true;
    expect_error([&] { s.call(); }, "[attention] causal needs q_len <= k_len, got q_len 9 and k_len 8");
  }
  {
    ErrorSetup s;
    s.terms.rel_k = s.data.data();
    s.terms.max_distance = -1;
    expect_error([&] { s.call(); }, "[attention] max_distance must be >= 0, got -1");
    s.terms.max_distance = (int64_t{1} << 60) + 1;
    expect_error([&] { s.call(); }, "[attention] max_distance must be <= 2^60, got 1152921504606846977");
    s.terms.max_distance = 2;
    s.terms.rel_tables = 3;
    expect_error([&] { s.call(); }, "[attention] relative tables must be shared (1) or one per head (8), got 3");
  }
  {
    ErrorSetup s;
    s.terms.grid_h = s.data.data();
    s.terms.grid_height = 45, s.terms.grid_width = 45;
    expect_error([&] { s.call(); },
                 "[attention] 2D terms need q_len = k_len = height*width = 2025, got q_len 16 and k_len 16");
    s.terms.grid_height = 0;
    expect_error([&] { s.call(); }, "[attention] 2D terms need height >= 1 and width >= 1, got height 0 and width 45");
    s.terms.grid_height = 4, s.terms.grid_width = 4, s.terms.grid_tables = 2;
    expect_error([&] { s.call(); }, "[attention] 2D tables must be shared (1) or one per head (8), got 2");
  }
  {
    ErrorSetup s;  // the caller's name
    s.params.scale = -2;
    expect_error([&] { s.call({}, "mha"); }, "[mha] scale must be finite and > 0, got -2");
  }
}

TEST(AttentionErrors, ValidateDirectly) {
  AttentionParams p;
  expect_error([&] { validate_attention("attention", p, 1, 8, 2048, 2048, 64, 64, 1, 0, true, 45, 45, 1); },
               "[attention] 2D terms need q_len = k_len = height*width = 2025, got q_len 2048 and k_len 2048");
  expect_error([&] { validate_attention("attention", p, 1, 8, 16, 16, 64, 64, 3, 4, false, 0, 0, 1); },
               "[attention] relative tables must be shared (1) or one per head (8), got 3");
  expect_error([&] { validate_attention("attention", p, 1, -8, 16, 16, 64, 64, 1, 4, false, 0, 0, 1); },
               "[attention] sizes (B, H, Tq, Tk, Dh, Dv) must be >= 0, got (1, -8, 16, 16, 64, 64)");
  EXPECT_NO_THROW(validate_attention("attention", p, 1, 8, 2025, 2025, 64, 64, 8, 4, true, 45, 45, 8));
}

// ---------------------------------------------------------------------------
// Timing (POSENC_ATTENTION_TIMING=1; run with OMP_NUM_THREADS=2): the
// benchmark shape B=1, H=8, T=2048, Dh=64 float32, spot-checked first.

TEST(AttentionTiming, Shape2048) {
  const char* env = std::getenv("POSENC_ATTENTION_TIMING");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set POSENC_ATTENTION_TIMING=1 to time";
  struct Family {
    const char* name;
    Case c;
  };
  const Case base{.name = "", .nb = 1, .nh = 8, .tq = 2048, .tk = 2048, .dh = 64, .dv = 64};
  std::vector<Family> families;
  families.push_back({"none", base});
  Case causal = base;
  causal.causal = true;
  families.push_back({"none causal", causal});
  Case rel = base;
  rel.rel_k = rel.rel_v = true, rel.k = 128, rel.per_head = true;
  families.push_back({"shaw k+v K=128", rel});
  rel.k = 2047;
  families.push_back({"shaw k+v K=2047", rel});
  Case grid = base;
  grid.tq = grid.tk = 2025, grid.hg = grid.wg = 45, grid.grid_h = grid.grid_w = true;
  families.push_back({"2D relative 45x45", grid});
  Case ob = base;
  ob.offset_bias = true;
  families.push_back({"offset bias", ob});
  std::printf("[attention timing] B=1 H=8 Dh=64 float32, %d threads\n", omp_get_max_threads());
  for (const Family& f : families) {
    const Case& c = f.c;
    const Inputs<float> in = make_inputs<float>(c, 17);
    std::vector<float> out(static_cast<size_t>(c.nh * c.tq * c.dv));
    const auto ov = contiguous_matrix(out.data(), 1, c.nh, c.tq, c.dv);
    const auto run = [&] { attention_forward<float>(in.params, in.q.in(), in.k.in(), in.v.in(), in.terms, ov); };
    run();
    // Spot check rows of head 0 against the reference (on a cut-down copy: first head only).
    Case one = c;
    one.nh = 1;
    one.per_head = false;
    Inputs<float> in1 = make_inputs<float>(one, 17);
    // Head 0's tables are the first slice in both layouts; copy head 0's q, k, v.
    for (int64_t i = 0; i < c.tq; ++i)
      for (int64_t d = 0; d < c.dh; ++d) in1.q.at(0, 0, i, d) = in.q.at(0, 0, i, d);
    for (int64_t j = 0; j < c.tk; ++j) {
      for (int64_t d = 0; d < c.dh; ++d) in1.k.at(0, 0, j, d) = in.k.at(0, 0, j, d);
      for (int64_t d = 0; d < c.dv; ++d) in1.v.at(0, 0, j, d) = in.v.at(0, 0, j, d);
    }
    in1.rel_k = in.rel_k, in1.rel_v = in.rel_v, in1.grid_h = in.grid_h, in1.grid_w = in.grid_w;
    in1.offset_bias = in.offset_bias;
    in1.terms.rel_k = in1.rel_k.empty() ? nullptr : in1.rel_k.data();
    in1.terms.rel_v = in1.rel_v.empty() ? nullptr : in1.rel_v.data();
    in1.terms.grid_h = in1.grid_h.empty() ? nullptr : in1.grid_h.data();
    in1.terms.grid_w = in1.grid_w.empty() ? nullptr : in1.grid_w.data();
    in1.terms.offset_bias = in1.offset_bias.empty() ? nullptr : in1.offset_bias.data();
    const Reference ref = reference(one, in1, kUnit<float>, 97);
    for (int64_t i = 0; i < c.tq; i += 97)
      for (int64_t d = 0; d < c.dv; ++d) {
        const size_t n = static_cast<size_t>(i * c.dv + d);
        ASSERT_LE(fabsl(out[n] - ref.out[n]), ref.out_bound[n]) << f.name << " row " << i << " col " << d;
      }
    // Best of 5 by wall time, with that run's process CPU time (all threads):
    // on a shared machine the wall time includes waiting for a core.
    double wall = 1e30, cpu = 0;
    for (int r = 0; r < 5; ++r) {
      timespec c0{}, c1{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
      const auto t0 = std::chrono::steady_clock::now();
      run();
      const double w = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
      if (w < wall) wall = w, cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
    }
    // 4 B H Tq Tk Dh: the two products of plain attention, whatever the terms add.
    const double flop = 4.0 * c.nb * c.nh * c.tq * c.tk * c.dh * (c.causal ? 0.5 : 1.0);
    std::printf("  %-20s %8.2f ms  %7.1f GFLOP/s   (CPU %8.2f ms: %6.1f GFLOP per CPU-second)%s\n", f.name, wall * 1e3,
                flop / wall * 1e-9, cpu * 1e3, flop / cpu * 1e-9, c.causal ? "  causal: half the pairs" : "");
  }
}

}  // namespace
}  // namespace posenc::kernels
