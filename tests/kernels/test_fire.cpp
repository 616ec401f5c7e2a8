// FIRE (kernels/fire.h) against the paper's formula written plainly in long
// double pair by pair; the tile backward against central differences of that
// formula; the fused attention with the FIRE tile term against the same
// attention given FIRE's dense bias (values, dq/dk/dv, parameter gradients);
// properties that hold for any parameters; the refusals word for word.
#include "posenc/kernels/fire.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/attention.h"
#include "posenc/kernels/attention_backward.h"

namespace posenc::kernels {
namespace {

using test::expect_error;
using LD = long double;

// The paper's b_h(i, j) = f(psi(i - j) / psi(max(L, i))), psi(t) = log(c t + 1), f = W2 relu(W1 x + b1) + b2,
// for query i of q_len at position i + k_len - q_len; keys after it: no bias (nullopt -> 0 here, masked later).
struct Mlp {
  int64_t heads, hidden;
  std::vector<LD> w1, b1, w2, b2;
  LD c, L;
};

LD paper_bias(const Mlp& p, int64_t h, int64_t query, int64_t key) {
  if (key > query) return 0;
  const LD x = std::log(p.c * static_cast<LD>(query - key) + 1) / std::log(p.c * std::max(p.L, LD(query)) + 1);
  LD out = p.b2[h];
  for (int64_t k = 0; k < p.hidden; ++k) out += p.w2[h * p.hidden + k] * std::max(LD(0), p.w1[k] * x + p.b1[k]);
  return out;
}

// Deterministic parameters in the ranges of the authors' init (U(-1, 1) first layer, U(+-1/sqrt(hidden)) second).
Mlp make_mlp(int64_t heads, int64_t hidden, double c, double L, int seed) {
  Mlp p{heads, hidden, {}, {}, {}, {}, c, L};
  const auto u = [&](int n) { return static_cast<LD>(std::sin(1.3 * n + 0.7 * seed)); };
  const LD scale = 1 / std::sqrt(static_cast<LD>(hidden));
  for (int64_t k = 0; k < hidden; ++k) p.w1.push_back(u(3 * k)), p.b1.push_back(u(3 * k + 1));
  for (int64_t e = 0; e < heads * hidden; ++e) p.w2.push_back(scale * u(5 * e + 2));
  for (int64_t h = 0; h < heads; ++h) p.b2.push_back(scale * u(7 * h + 11));
  return p;
}

template <class T>
struct Params {
  std::vector<T> w1, b1, w2, b2;
  FireParams<T> p;
  explicit Params(const Mlp& m)
      : w1(m.w1.begin(), m.w1.end()), b1(m.b1.begin(), m.b1.end()), w2(m.w2.begin(), m.w2.end()),
        b2(m.b2.begin(), m.b2.end()) {
    p = {m.heads, m.hidden, w1.data(), b1.data(), w2.data(), b2.data(), static_cast<T>(m.c), static_cast<T>(m.L)};
  }
};

struct Case {
  int64_t heads, hidden, q_len, k_len;
  double c, L;
};

// Rows before and after L, k_len past one 256-key tile, Tq > Tk, one hidden unit.
const std::vector<Case> kCases{
    {2, 32, 7, 7, 0.1, 512}, {3, 5, 1, 9, 0.7, 3.5},    {1, 1, 6, 4, 0.3, 2.5},
    {4, 32, 40, 300, 0.1, 16.5}, {2, 8, 70, 70, 2.0, 30.25},
};

std::string name_of(const Case& c) {
  return "heads=" + std::to_string(c.heads) + " hidden=" + std::to_string(c.hidden) + " q=" +
         std::to_string(c.q_len) + " k=" + std::to_string(c.k_len) + " c=" + std::to_string(c.c) +
         " L=" + std::to_string(c.L);
}

TEST(Fire, DenseBiasMatchesThePaperOnEveryPair) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(name_of(c));
    const Mlp m = make_mlp(c.heads, c.hidden, c.c, c.L, 1);
    const Params<double> p64(m);
    const Params<float> p32(m);
    const size_t n = static_cast<size_t>(c.heads * c.q_len * c.k_len);
    std::vector<double> got(n, 7.0), ref(n);
    std::vector<float> got32(n, 7.0f);
    fire_bias(p64.p, c.q_len, c.k_len, got.data());
    fire_bias(p32.p, c.q_len, c.k_len, got32.data());
    reference::fire_bias(p64.p, c.q_len, c.k_len, ref.data());
    // The float32 parameters themselves, for the float32 comparison.
    Mlp m32 = m;
    for (auto* v : {&m32.w1, &m32.b1, &m32.w2, &m32.b2})
      for (LD& x : *v) x = static_cast<float>(x);
    m32.c = static_cast<float>(m.c), m32.L = static_cast<float>(m.L);
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.q_len; ++i) {
        for (int64_t j = 0; j < c.k_len; ++j) {
          const int64_t query = i + c.k_len - c.q_len;
          const size_t at = static_cast<size_t>((h * c.q_len + i) * c.k_len + j);
          const LD want = paper_bias(m, h, query, j);
          // 64 ulp of the sum of |terms| (<= hidden + 1 terms of size <= 2): log1p and the MLP in double.
          const double tol = 64 * std::numeric_limits<double>::epsilon() * (c.hidden + 1) * 2;
          EXPECT_NEAR(got[at], static_cast<double>(want), tol) << h << " " << i << " " << j;
          EXPECT_NEAR(ref[at], static_cast<double>(want), tol);
          // float32: the same, 64 float ulp of the terms' size.
          EXPECT_NEAR(got32[at], static_cast<double>(paper_bias(m32, h, query, j)),
                      64 * std::numeric_limits<float>::epsilon() * (c.hidden + 1) * 2);
          if (j > query) {
            EXPECT_EQ(got[at], 0.0);
          }
        }
      }
    }
  }
}

// sum over pairs of grad * b, in long double, for central differences.
LD loss(const Mlp& m, int64_t q_len, int64_t k_len, const std::vector<double>& grad) {
  LD s = 0;
  for (int64_t h = 0; h < m.heads; ++h)
    for (int64_t i = 0; i < q_len; ++i)
      for (int64_t j = 0; j < k_len; ++j)
        s += grad[static_cast<size_t>((h * q_len + i) * k_len + j)] * paper_bias(m, h, i + k_len - q_len, j);
  return s;
}

TEST(Fire, GradientsMatchCentralDifferences) {
  for (const Case& c : kCases) {
    if (c.q_len * c.k_len > 5000) continue;  // the differences re-evaluate every pair per parameter
    SCOPED_TRACE(name_of(c));
    Mlp m = make_mlp(c.heads, c.hidden, c.c, c.L, 2);
    const Params<double> p(m);
    std::vector<double> grad(static_cast<size_t>(c.heads * c.q_len * c.k_len));
    for (size_t n = 0; n < grad.size(); ++n) grad[n] = std::cos(0.3 + 0.9 * static_cast<double>(n));
    std::vector<double> buffer(static_cast<size_t>(fire_gradient_size(c.heads, c.hidden)), 9.0);
    const FireGradients<double> g = fire_gradients(buffer.data(), c.heads, c.hidden);
    fire_bias_backward(p.p, c.q_len, c.k_len, grad.data(), g);
    const auto check = [&](const char* name, LD& param, double got) {
      const LD e = 1e-7L, keep = param;
      param = keep + e;
      const LD up = loss(m, c.q_len, c.k_len, grad);
      param = keep - e;
      const LD down = loss(m, c.q_len, c.k_len, grad);
      param = keep;
      const LD want = (up - down) / (2 * e);
      // 1e-6 relative: e^2 truncation in long double (no ReLU kink within e for these parameters).
      EXPECT_NEAR(got, static_cast<double>(want), 1e-6 * std::max(LD(1), std::fabs(want))) << name;
    };
    for (int64_t k = 0; k < c.hidden; ++k) check("w1", m.w1[k], g.w1[k]), check("b1", m.b1[k], g.b1[k]);
    for (int64_t e = 0; e < c.heads * c.hidden; ++e) check("w2", m.w2[e], g.w2[e]);
    for (int64_t h = 0; h < c.heads; ++h) check("b2", m.b2[h], g.b2[h]);
    check("c", m.c, *g.c);
    check("L", m.L, *g.threshold);
    // L above every query position moves the bias; below them all, not at all.
    if (m.L > c.k_len) {
      EXPECT_NE(*g.threshold, 0.0);
    }
  }
  // L below every query: the max picks i', and L gets no gradient.
  const Mlp m = make_mlp(2, 4, 0.5, 0.5, 3);
  const Params<double> p(m);
  std::vector<double> grad(2 * 3 * 5, 1.0), buffer(static_cast<size_t>(fire_gradient_size(2, 4)));
  const FireGradients<double> g = fire_gradients(buffer.data(), 2, 4);
  fire_bias_backward(p.p, 3, 5, grad.data(), g);  // queries at 2, 3, 4 > L
  EXPECT_EQ(*g.threshold, 0.0);
}

// Properties for any parameters: x in [0, 1] (so the MLP only ever sees its training interval), the
// diagonal is f(0) on every row, and past L the first key is f(1) on every row (progressive interpolation).
// The authors' init (torch.nn.Linear defaults) does not make f monotone, so neither is the bias at init;
// what holds is that the bias along a row is f composed with an increasing map of i' - j: f non-increasing
// on [0, 1] (here w1 >= 0, w2 <= 0) gives every row non-increasing in i' - j.
TEST(Fire, InterpolationAndMonotoneRows) {
  const int64_t q_len = 60, k_len = 60;
  Mlp m = make_mlp(3, 16, 0.1, 20.5, 4);
  const Params<double> p(m);
  std::vector<double> bias(static_cast<size_t>(3 * q_len * k_len));
  fire_bias(p.p, q_len, k_len, bias.data());
  for (int64_t h = 0; h < 3; ++h) {
    const double f0 = static_cast<double>(paper_bias(m, h, 5, 5));
    // f(1): the first key of a query past L.
    const double f1 = static_cast<double>(paper_bias(m, h, 59, 0));
    for (int64_t i = 0; i < q_len; ++i) {
      EXPECT_NEAR(bias[static_cast<size_t>((h * q_len + i) * k_len + i)], f0, 1e-13);
      if (i >= 21) {
        EXPECT_NEAR(bias[static_cast<size_t>((h * q_len + i) * k_len)], f1, 1e-13) << i;
      }
    }
  }
  for (LD& w : m.w1) w = std::fabs(w);
  for (LD& w : m.w2) w = -std::fabs(w);
  const Params<double> mono(m);
  fire_bias(mono.p, q_len, k_len, bias.data());
  for (int64_t h = 0; h < 3; ++h) {
    for (int64_t i = 0; i < q_len; ++i) {
      const double* row = bias.data() + (h * q_len + i) * k_len;
      for (int64_t j = 1; j <= i; ++j) EXPECT_LE(row[j - 1], row[j]) << h << " " << i << " " << j;  // d = i - j
    }
  }
}

TEST(Fire, BackwardIndependentOfThreadCount) {
  const Mlp m = make_mlp(5, 32, 0.1, 40.5, 5);
  const Params<float> p(m);
  const int64_t q_len = 100, k_len = 300;
  std::vector<float> grad(static_cast<size_t>(5 * q_len * k_len));
  for (size_t n = 0; n < grad.size(); ++n) grad[n] = static_cast<float>(std::sin(0.1 * static_cast<double>(n)));
  const auto run = [&](int threads) {
    std::vector<float> buffer(static_cast<size_t>(fire_gradient_size(5, 32)));
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    fire_bias_backward(p.p, q_len, k_len, grad.data(), fire_gradients(buffer.data(), 5, 32));
    omp_set_num_threads(keep);
    return buffer;
  };
  EXPECT_EQ(run(1), run(3));
}

// The fused attention with the FIRE tile term against the same kernel given FIRE's dense bias:
// outputs, dq, dk, dv, and the tile term's parameter gradients against fire_bias_backward of the
// dense bias's gradient. Causal, Tq != Tk, key padding, several key and query tiles.
template <class T>
void fused_equals_dense(T tol) {
  const int64_t batch = 2, heads = 3, q_len = 70, k_len = 150, dh = 16, dv = 8, hidden = 12;
  const Mlp m = make_mlp(heads, hidden, 0.2, 100.5, 6);
  const Params<T> p(m);
  const auto fill = [](std::vector<T>& v, double f) {
    for (size_t n = 0; n < v.size(); ++n) v[n] = static_cast<T>(std::sin(f * static_cast<double>(n) + 0.5));
  };
  std::vector<T> q(static_cast<size_t>(batch * heads * q_len * dh)), k(static_cast<size_t>(batch * heads * k_len * dh));
  std::vector<T> v(static_cast<size_t>(batch * heads * k_len * dv)), go(static_cast<size_t>(batch * heads * q_len * dv));
  fill(q, 0.37), fill(k, 0.61), fill(v, 0.23), fill(go, 0.71);
  std::vector<uint8_t> padding(static_cast<size_t>(batch * k_len), 0);
  for (int64_t j = 3; j < k_len; j += 11) padding[static_cast<size_t>(k_len + j)] = 1;  // batch 1 only
  AttentionParams params;
  params.scale = 0.25, params.causal = true, params.key_padding = padding.data(), params.key_padding_stride = k_len;
  std::vector<T> dense(static_cast<size_t>(heads * q_len * k_len));
  fire_bias(p.p, q_len, k_len, dense.data());

  const auto qm = contiguous_matrix<const T>(q.data(), batch, heads, q_len, dh);
  const auto km = contiguous_matrix<const T>(k.data(), batch, heads, k_len, dh);
  const auto vm = contiguous_matrix<const T>(v.data(), batch, heads, k_len, dv);
  struct Run {
    std::vector<T> out, lse, dq, dk, dv, dbias;
    std::vector<double> dtile;
  };
  const auto run = [&](bool tile) {
    AttentionTerms<T> terms;
    const FireTileBias<T> fire(p.p);
    if (tile) {
      terms.tile_bias = &fire;
    } else {
      terms.bias = dense.data(), terms.bias_stride_b = 0, terms.bias_stride_h = q_len * k_len;
      terms.bias_stride_r = k_len;
    }
    Run r;
    r.out.resize(static_cast<size_t>(batch * heads * q_len * dv)), r.lse.resize(static_cast<size_t>(batch * heads * q_len));
    attention_forward<T>(params, qm, km, vm, terms, contiguous_matrix(r.out.data(), batch, heads, q_len, dv), {},
                         "attention", r.lse.data());
    r.dq.resize(q.size()), r.dk.resize(k.size()), r.dv.resize(v.size());
    AttentionGradients<T> g;
    g.q = contiguous_matrix(r.dq.data(), batch, heads, q_len, dh);
    g.k = contiguous_matrix(r.dk.data(), batch, heads, k_len, dh);
    g.v = contiguous_matrix(r.dv.data(), batch, heads, k_len, dv);
    if (tile) {
      r.dtile.assign(static_cast<size_t>(fire.gradient_size()), 5.0);
      g.tile_bias = r.dtile.data();
    } else {
      r.dbias.resize(static_cast<size_t>(batch * heads * q_len * k_len));
      g.bias = contiguous_matrix(r.dbias.data(), batch, heads, q_len, k_len);
    }
    attention_backward<T>(params, qm, km, vm, terms, contiguous_matrix<const T>(r.out.data(), batch, heads, q_len, dv),
                          r.lse.data(), contiguous_matrix<const T>(go.data(), batch, heads, q_len, dv), g);
    return r;
  };
  const Run fused = run(true), plain = run(false);
  const auto close = [&](const std::vector<T>& a, const std::vector<T>& b, const char* what) {
    EXPECT_LE(test::max_abs_diff(a, b), tol) << what;
  };
  close(fused.out, plain.out, "out");
  close(fused.dq, plain.dq, "dq");
  close(fused.dk, plain.dk, "dk");
  close(fused.dv, plain.dv, "dv");
  // The dense gradient summed over the batch, through the FIRE backward.
  std::vector<T> dsum(static_cast<size_t>(heads * q_len * k_len), T(0));
  for (int64_t b = 0; b < batch; ++b)
    for (size_t e = 0; e < dsum.size(); ++e) dsum[e] += plain.dbias[b * dsum.size() + e];
  std::vector<T> want(static_cast<size_t>(fire_gradient_size(heads, hidden)));
  fire_bias_backward(p.p, q_len, k_len, dsum.data(), fire_gradients(want.data(), heads, hidden));
  double norm = 0;
  for (const T& x : want) norm = std::max(norm, std::abs(static_cast<double>(x)));
  EXPECT_GT(norm, 1e-3);
  for (size_t e = 0; e < want.size(); ++e) {
    EXPECT_NEAR(fused.dtile[e], static_cast<double>(want[e]), tol * std::max(1.0, norm)) << e;
  }
}

// float64: the same sums in another order; float32: ~1e-6 relative over sums of a few hundred terms.
TEST(Fire, FusedAttentionEqualsDenseBiasDouble) { fused_equals_dense<double>(1e-12); }
TEST(Fire, FusedAttentionEqualsDenseBiasFloat) { fused_equals_dense<float>(2e-5f); }

TEST(Fire, Errors) {
  const Mlp m = make_mlp(2, 3, 0.1, 512, 7);
  Params<double> p(m);
  double out[64];
  const auto call = [&](FireParams<double> q) { return [q, &out] { fire_bias(q, 2, 2, out); }; };
  FireParams<double> bad = p.p;
  bad.num_heads = 0;
  expect_error(call(bad), "[fire] num_heads must be >= 1, got 0");
  bad = p.p, bad.hidden = 0;
  expect_error(call(bad), "[fire] hidden must be >= 1, got 0");
  bad = p.p, bad.c = -1;
  expect_error(call(bad), "[fire] c must be > 0, got -1");
  bad = p.p, bad.c = std::nan("");
  expect_error(call(bad), "[fire] c must be > 0, got nan");
  bad = p.p, bad.threshold = 0;
  expect_error(call(bad), "[fire] threshold L must be > 0, got 0");
  bad = p.p, bad.threshold = std::numeric_limits<double>::infinity();
  expect_error(call(bad), "[fire] threshold L must be > 0, got inf");
  bad = p.p, bad.w2 = nullptr;
  expect_error(call(bad), "[fire] w1, b1, w2 and b2 must not be null");
  expect_error([&] { fire_bias(p.p, -1, 2, out, "fire_bias"); }, "[fire_bias] q_len and k_len must be >= 0, got -1 and 2");
  expect_error([&] { FireTileBias<double> t(bad, "FireBias"); }, "[FireBias] w1, b1, w2 and b2 must not be null");
  // The fused attention refuses the term without the causal mask.
  std::vector<double> x(16, 0.0), o(16);
  const FireTileBias<double> fire(p.p);
  AttentionTerms<double> terms;
  terms.tile_bias = &fire;
  expect_error(
      [&] {
        attention_forward<double>({}, contiguous_matrix<const double>(x.data(), 1, 2, 2, 4),
                                  contiguous_matrix<const double>(x.data(), 1, 2, 2, 4),
                                  contiguous_matrix<const double>(x.data(), 1, 2, 2, 4), terms,
                                  contiguous_matrix(o.data(), 1, 2, 2, 4));
      },
      "[attention] the fire term needs causal attention, got causal false");
  // Empty lengths: nothing to write, zero gradients.
  std::vector<double> buffer(static_cast<size_t>(fire_gradient_size(2, 3)), 4.0);
  fire_bias_backward<double>(p.p, 0, 5, nullptr, fire_gradients(buffer.data(), 2, 3));
  for (double g : buffer) EXPECT_EQ(g, 0.0);
}

}  // namespace
}  // namespace posenc::kernels
