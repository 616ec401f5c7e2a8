// CoPE (kernels/cope.h) against the paper's formula written plainly in long
// double (reference::cope_bias); the backward against central differences of
// that reference; the fused attention with the CoPE tile term against the
// same attention given CoPE's dense term as a bias (values, dq/dk/dv, de),
// with the dense backward adding the term's own q/k/e gradients; the
// property that contextual positions count down along a causal row; the
// refusals word for word.
#include "posenc/kernels/cope.h"

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

template <class T>
void fill(std::vector<T>& v, double f, double amplitude = 1.0) {
  for (size_t n = 0; n < v.size(); ++n) v[n] = static_cast<T>(amplitude * std::sin(f * static_cast<double>(n) + 0.5));
}

template <class T>
struct Case {
  int64_t batch, heads, q_len, k_len, dh, npos;
  std::vector<T> q, k, e;
  std::vector<uint8_t> padding;
  CopeParams<T> p;
  Case(int64_t b, int64_t h, int64_t tq, int64_t tk, int64_t d, int64_t n, bool pad)
      : batch(b), heads(h), q_len(tq), k_len(tk), dh(d), npos(n) {
    q.resize(static_cast<size_t>(b * h * tq * d)), k.resize(static_cast<size_t>(b * h * tk * d));
    e.resize(static_cast<size_t>(n * d));
    // Amplitude 2: gates spread over (0, 1), positions over many rows of e.
    fill(q, 0.37, 2.0), fill(k, 0.61, 2.0), fill(e, 0.83);
    p.npos = n, p.head_dim = d, p.e = e.data(), p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    if (pad) {
      padding.assign(static_cast<size_t>(b * tk), 0);
      for (int64_t j = 2; j < tk; j += 5) padding[static_cast<size_t>((b - 1) * tk + j)] = 1;  // last batch only
      p.key_padding = padding.data(), p.key_padding_stride = tk;
    }
  }
  BatchedMatrix<const T> qm() const { return contiguous_matrix<const T>(q.data(), batch, heads, q_len, dh); }
  BatchedMatrix<const T> km() const { return contiguous_matrix<const T>(k.data(), batch, heads, k_len, dh); }
  size_t pairs() const { return static_cast<size_t>(batch * heads * q_len * k_len); }
};

// npos 4 < the row lengths: many positions clamp to the last row; npos 64: none do.
template <class T>
void dense_matches_reference(T tol) {
  for (const int64_t npos : {4, 64}) {
    for (const bool pad : {false, true}) {
      const Case<T> c(2, 3, 13, 21, 8, npos, pad);
      std::vector<T> out(c.pairs());
      cope_bias(c.p, c.qm(), c.km(), out.data());
      std::vector<double> want(c.pairs());
      reference::cope_bias(c.p, c.qm(), c.km(), want.data());
      EXPECT_LE(test::max_abs_diff(out, want), tol) << "npos " << npos << " padding " << pad;
    }
  }
}

// float64: ~1e-15 relative over sums of <= 21 gates; float32: a few ulp of |z| <= ~6.
TEST(Cope, DenseMatchesReferenceDouble) { dense_matches_reference<double>(1e-12); }
TEST(Cope, DenseMatchesReferenceFloat) { dense_matches_reference<float>(5e-5f); }

// d/dx sum(G * b) for every element of q, k and e, against central differences of the long-double reference.
TEST(Cope, GradientsMatchCentralDifferences) {
  for (const int64_t npos : {3, 32}) {
    Case<double> c(2, 2, 5, 7, 4, npos, /*pad=*/true);
    std::vector<double> grad(c.pairs());
    fill(grad, 0.29);
    std::vector<double> dq(c.q.size()), dk(c.k.size()), de(c.e.size());
    cope_bias_backward(c.p, c.qm(), c.km(), grad.data(),
                       contiguous_matrix(dq.data(), c.batch, c.heads, c.q_len, c.dh),
                       contiguous_matrix(dk.data(), c.batch, c.heads, c.k_len, c.dh), de.data());
    const auto loss = [&] {
      std::vector<double> b(c.pairs());
      reference::cope_bias(c.p, c.qm(), c.km(), b.data());
      long double s = 0;
      for (size_t n = 0; n < b.size(); ++n) s += static_cast<long double>(grad[n]) * b[n];
      return static_cast<double>(s);
    };
    const double h = 1e-6;
    const auto check = [&](std::vector<double>& x, const std::vector<double>& analytic, const char* name) {
      double worst = 0, norm = 0;
      for (size_t n = 0; n < x.size(); ++n) {
        const double keep = x[n];
        x[n] = keep + h;
        const double up = loss();
        x[n] = keep - h;
        const double down = loss();
        x[n] = keep;
        worst = std::max(worst, std::abs((up - down) / (2 * h) - analytic[n]));
        norm = std::max(norm, std::abs(analytic[n]));
      }
      EXPECT_GT(norm, 1e-3) << name;  // the gradient is not trivially zero
      // Central differences: O(h^2) truncation + 1e-16 / h rounding.
      EXPECT_LT(worst, 1e-7) << name << " npos " << npos;
    };
    check(c.q, dq, "q");
    check(c.k, dk, "k");
    check(c.e, de, "e");
  }
}

// Positions count the gates from the query back to the key: non-increasing in
// j along a causal row, p_ii = g_ii, every step p_ij - p_i,j+1 = g_ij in [0, 1];
// with every gate 1 (q.k huge) they are the relative positions i - j + 1.
TEST(Cope, PositionsCountDownAlongARow) {
  const Case<double> c(1, 1, 9, 9, 6, 16, /*pad=*/false);
  std::vector<double> g(9), p(9), z(16);
  for (int64_t i = 0; i < 9; ++i) {
    cope_row(c.p, c.q.data() + i * 6, c.k.data(), 6, nullptr, i, g.data(), p.data(), z.data());
    EXPECT_EQ(p[static_cast<size_t>(i)], g[static_cast<size_t>(i)]);
    for (int64_t j = 0; j < i; ++j) {
      EXPECT_GE(p[static_cast<size_t>(j)], p[static_cast<size_t>(j + 1)]);
      EXPECT_NEAR(p[static_cast<size_t>(j)] - p[static_cast<size_t>(j + 1)], g[static_cast<size_t>(j)], 1e-14);
      EXPECT_GT(g[static_cast<size_t>(j)], 0.0);
      EXPECT_LT(g[static_cast<size_t>(j)], 1.0);
    }
  }
  std::vector<double> ones(6, 10.0);
  for (int64_t i = 0; i < 9; ++i) {
    cope_row(c.p, ones.data(), ones.data(), 0, nullptr, i, g.data(), p.data(), z.data());
    for (int64_t j = 0; j <= i; ++j) EXPECT_DOUBLE_EQ(p[static_cast<size_t>(j)], static_cast<double>(i - j + 1));
  }
}

// The fused attention with CopeTileBias against attention_{forward,backward}
// with the dense term as a bias, plus cope_bias_backward of that bias's
// gradient for the term's own share of dq, dk and de. Causal, Tq != Tk, key
// padding, several key and query tiles, a clamping npos.
template <class T>
void fused_equals_dense(T tol, int threads = 0) {
  const Case<T> c(2, 3, 70, 150, 16, 24, /*pad=*/true);
  const int64_t batch = c.batch, heads = c.heads, q_len = c.q_len, k_len = c.k_len, dh = c.dh, dv = 8;
  std::vector<T> v(static_cast<size_t>(batch * heads * k_len * dv)), go(static_cast<size_t>(batch * heads * q_len * dv));
  fill(v, 0.23), fill(go, 0.71);
  AttentionParams params;
  params.scale = c.p.scale, params.causal = true;
  params.key_padding = c.padding.data(), params.key_padding_stride = k_len;
  std::vector<T> dense(c.pairs());
  cope_bias(c.p, c.qm(), c.km(), dense.data());
  const auto vm = contiguous_matrix<const T>(v.data(), batch, heads, k_len, dv);
  struct Run {
    std::vector<T> out, lse, dq, dk, dv, dbias;
    std::vector<double> de;
  };
  const int saved = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  const auto run = [&](bool tile) {
    AttentionTerms<T> terms;
    const CopeTileBias<T> cope(c.p, c.qm(), c.km());
    if (tile) {
      terms.tile_bias = &cope;
    } else {
      terms.bias = dense.data(), terms.bias_stride_b = heads * q_len * k_len, terms.bias_stride_h = q_len * k_len;
      terms.bias_stride_r = k_len;
    }
    Run r;
    r.out.resize(static_cast<size_t>(batch * heads * q_len * dv)), r.lse.resize(static_cast<size_t>(batch * heads * q_len));
    attention_forward<T>(params, c.qm(), c.km(), vm, terms, contiguous_matrix(r.out.data(), batch, heads, q_len, dv),
                         {}, "attention", r.lse.data());
    r.dq.resize(c.q.size()), r.dk.resize(c.k.size()), r.dv.resize(v.size());
    AttentionGradients<T> g;
    g.q = contiguous_matrix(r.dq.data(), batch, heads, q_len, dh);
    g.k = contiguous_matrix(r.dk.data(), batch, heads, k_len, dh);
    g.v = contiguous_matrix(r.dv.data(), batch, heads, k_len, dv);
    if (tile) {
      r.de.assign(static_cast<size_t>(cope.gradient_size()), 5.0);
      g.tile_bias = r.de.data();
    } else {
      r.dbias.resize(c.pairs());
      g.bias = contiguous_matrix(r.dbias.data(), batch, heads, q_len, k_len);
    }
    attention_backward<T>(params, c.qm(), c.km(), vm, terms,
                          contiguous_matrix<const T>(r.out.data(), batch, heads, q_len, dv), r.lse.data(),
                          contiguous_matrix<const T>(go.data(), batch, heads, q_len, dv), g);
    return r;
  };
  const Run fused = run(true);
  Run plain = run(false);
  omp_set_num_threads(saved);
  // The dense term's own gradients of q, k, e from its bias gradient.
  std::vector<T> dq(c.q.size()), dk(c.k.size()), de(c.e.size());
  cope_bias_backward(c.p, c.qm(), c.km(), plain.dbias.data(), contiguous_matrix(dq.data(), batch, heads, q_len, dh),
                     contiguous_matrix(dk.data(), batch, heads, k_len, dh), de.data());
  for (size_t n = 0; n < dq.size(); ++n) plain.dq[n] += dq[n];
  for (size_t n = 0; n < dk.size(); ++n) plain.dk[n] += dk[n];
  const auto close = [&](const auto& a, const auto& b, const char* what) {
    EXPECT_LE(test::max_abs_diff(a, b), tol) << what;
  };
  close(fused.out, plain.out, "out");
  close(fused.dq, plain.dq, "dq");
  close(fused.dk, plain.dk, "dk");
  close(fused.dv, plain.dv, "dv");
  close(fused.de, de, "de");
  EXPECT_GT(test::max_abs_diff(de, std::vector<T>(de.size(), T(0))), 1e-3);  // de is not trivially 0
  EXPECT_GT(test::max_abs_diff(dq, std::vector<T>(dq.size(), T(0))), 1e-3);  // nor the term's dq
}

// float64: the same sums in another order; float32: ~1e-6 relative over sums of a few hundred terms.
TEST(Cope, FusedAttentionEqualsDenseBiasDouble) { fused_equals_dense<double>(1e-11); }
TEST(Cope, FusedAttentionEqualsDenseBiasFloat) { fused_equals_dense<float>(5e-5f); }
TEST(Cope, FusedAttentionEqualsDenseBiasOneThread) { fused_equals_dense<double>(1e-11, 1); }

// The fused backward's gradients are the same bits whatever the thread count.
TEST(Cope, FusedBackwardIndependentOfThreadCount) {
  // Large enough for the kernels to go parallel (B H Tq Tk (Dh + Dv) > 2^18).
  const Case<double> c(1, 4, 64, 128, 8, 12, /*pad=*/false);
  std::vector<double> v(static_cast<size_t>(4 * 128 * 8)), go(static_cast<size_t>(4 * 64 * 8));
  fill(v, 0.3), fill(go, 0.4);
  AttentionParams params;
  params.scale = c.p.scale, params.causal = true;
  const auto once = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    const CopeTileBias<double> cope(c.p, c.qm(), c.km());
    AttentionTerms<double> terms;
    terms.tile_bias = &cope;
    std::vector<double> out(go.size()), lse(4 * 64), dq(c.q.size()), dk(c.k.size()), de(c.e.size());
    const auto vm = contiguous_matrix<const double>(v.data(), 1, 4, 128, 8);
    attention_forward<double>(params, c.qm(), c.km(), vm, terms, contiguous_matrix(out.data(), 1, 4, 64, 8), {},
                              "attention", lse.data());
    AttentionGradients<double> g;
    g.q = contiguous_matrix(dq.data(), 1, 4, 64, 8), g.k = contiguous_matrix(dk.data(), 1, 4, 128, 8);
    g.tile_bias = de.data();
    attention_backward<double>(params, c.qm(), c.km(), vm, terms, contiguous_matrix<const double>(out.data(), 1, 4, 64, 8),
                               lse.data(), contiguous_matrix<const double>(go.data(), 1, 4, 64, 8), g);
    omp_set_num_threads(saved);
    dq.insert(dq.end(), dk.begin(), dk.end());
    dq.insert(dq.end(), de.begin(), de.end());
    return dq;
  };
  EXPECT_EQ(once(1), once(4));
}

TEST(Cope, Errors) {
  Case<double> c(1, 2, 2, 3, 4, 8, false);
  std::vector<double> out(64);
  const auto call = [&](CopeParams<double> p) { return [p, &c, &out] { cope_bias(p, c.qm(), c.km(), out.data()); }; };
  CopeParams<double> bad = c.p;
  bad.npos = 0;
  expect_error(call(bad), "[cope] npos must be >= 1, got 0");
  bad = c.p, bad.head_dim = 0;
  expect_error(call(bad), "[cope] head_dim must be >= 1, got 0");
  bad = c.p, bad.scale = -1;
  expect_error(call(bad), "[cope] scale must be finite and > 0, got -1");
  bad = c.p, bad.scale = std::numeric_limits<double>::infinity();
  expect_error(call(bad), "[cope] scale must be finite and > 0, got inf");
  bad = c.p, bad.e = nullptr;
  expect_error(call(bad), "[cope] e must not be null");
  bad = c.p, bad.head_dim = 5;
  expect_error(call(bad), "[cope] q must be (B, H, Tq, Dh) with Dh = head_dim = 5, got (1, 2, 2, 4)");
  expect_error([&] { cope_bias(c.p, c.km(), c.qm(), out.data(), "cope_bias"); },
               "[cope_bias] CoPE is causal and needs q_len <= k_len, got q_len 3 and k_len 2");
  expect_error([&] { CopeTileBias<double> t(bad, c.qm(), c.km(), "attention"); },
               "[attention] q must be (B, H, Tq, Dh) with Dh = head_dim = 5, got (1, 2, 2, 4)");
  // The fused attention refuses the term without the causal mask.
  std::vector<double> v(16, 0.0), o(16);
  const CopeTileBias<double> cope(c.p, c.qm(), c.km());
  AttentionTerms<double> terms;
  terms.tile_bias = &cope;
  expect_error(
      [&] {
        attention_forward<double>({}, c.qm(), c.km(), contiguous_matrix<const double>(v.data(), 1, 2, 3, 2), terms,
                                  contiguous_matrix(o.data(), 1, 2, 2, 2));
      },
      "[attention] the cope term needs causal attention, got causal false");
  // Empty queries: zero gradients.
  Case<double> empty(1, 2, 0, 3, 4, 8, false);
  std::vector<double> dk(empty.k.size(), 3.0), de(empty.e.size(), 3.0);
  cope_bias_backward<double>(empty.p, empty.qm(), empty.km(), nullptr, {}, contiguous_matrix(dk.data(), 1, 2, 3, 4),
                             de.data());
  for (double g : dk) EXPECT_EQ(g, 0.0);
  for (double g : de) EXPECT_EQ(g, 0.0);
}

}  // namespace
}  // namespace posenc::kernels
