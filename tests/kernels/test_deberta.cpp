// DeBERTa (kernels/deberta.h): the log buckets against Hugging Face's
// make_log_bucket_position (golden values computed with torch from HF's
// formula, and a transcription of it here, float32 as torch's default dtype);
// the rows of c2p and p2c against HF's gathers; the dense reference's backward
// against central differences; the fused attention's rel_k (c2p) and rel_q
// (p2c) terms addressed through rel_index against the same attention given
// the dense bias (values and every gradient), causal, Tq != Tk, key padding;
// the refusals word for word.
#include "posenc/kernels/deberta.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "check.h"
#include "posenc/kernels/attention.h"
#include "posenc/kernels/attention_backward.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

// HF (modeling_deberta_v2.py) line by line, under torch's float32 default dtype:
//   sign = sign(rel); mid = bucket_size // 2
//   abs_pos = where(-mid < rel < mid, mid - 1, |rel|)
//   log_pos = ceil(log(abs_pos / mid) / log(tensor((max_position - 1) / mid)) * (mid - 1)) + mid
//   bucket_pos = where(abs_pos <= mid, rel, log_pos * sign)
int64_t hf_bucket(int64_t rel, int64_t bucket_size, int64_t max_position) {
  const int64_t sign = rel > 0 ? 1 : rel < 0 ? -1 : 0;
  const int64_t mid = bucket_size / 2;
  const int64_t abs_pos = rel < mid && rel > -mid ? mid - 1 : std::llabs(rel);
  const float num = std::log(static_cast<float>(abs_pos) / static_cast<float>(mid));
  const float den = std::log(static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  const float log_pos = std::ceil(num / den * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  return abs_pos <= mid ? rel : static_cast<int64_t>(log_pos) * sign;
}

struct Golden {
  int64_t buckets, max_rel, rel, bucket;
};

// torch: make_log_bucket_position(torch.tensor(rel), buckets, max_rel) with HF's code (torch 2.x, CPU).
// (256, 256) at 1292 and (512, 4096) at 1643 are where a float64 log gives one bucket more.
const std::vector<Golden> kGolden{
    {256, 512, 0, 0},        {256, 512, 1, 1},         {256, 512, 127, 127},     {256, 512, 128, 128},
    {256, 512, 129, 129},    {256, 512, 200, 169},     {256, 512, -200, -169},   {256, 512, 255, 192},
    {256, 512, 300, 207},    {256, 512, 400, 233},     {256, 512, 500, 254},     {256, 512, 506, 255},
    {256, 512, 511, 255},    {256, 512, 512, 256},     {256, 512, -513, -256},   {256, 512, 1000, 317},
    {256, 512, 5000, 465},   {256, 512, -100000, -740}, {256, 256, 129, 130},    {256, 256, -131, -133},
    {256, 256, 200, 211},    {256, 256, 511, 384},     {256, 256, 1292, 554},    {256, 256, -18357, -1043},
    {512, 4096, 300, 271},   {512, 4096, 1643, 427},   {512, 4096, -6395, -552}, {32, 128, 127, 31},
    {32, 128, 128, 32},      {32, 128, -300, -38},     {32, 128, 100000, 80},    {3, 3, 2, 1},
    {3, 3, -100000, -1},
};

TEST(Deberta, BucketsEqualHuggingFaceGoldenValues) {
  for (const Golden& g : kGolden) {
    const DebertaParams p{g.buckets, g.max_rel};
    EXPECT_EQ(deberta_bucket(p, g.rel), g.bucket) << g.buckets << " " << g.max_rel << " rel " << g.rel;
    EXPECT_EQ(hf_bucket(g.rel, g.buckets, g.max_rel), g.bucket) << "transcription " << g.rel;
  }
}

TEST(Deberta, BucketsEqualTheTranscriptionEverywhere) {
  for (const auto& [buckets, max_rel] : std::vector<std::pair<int64_t, int64_t>>{
           {256, 512}, {256, 256}, {128, 512}, {64, 1024}, {8, 16}, {2, 3}, {3, 3}, {100, 1000}, {512, 4096}}) {
    const DebertaParams p{buckets, max_rel};
    for (int64_t rel = -6000; rel <= 6000; ++rel) {
      ASSERT_EQ(deberta_bucket(p, rel), hf_bucket(rel, buckets, max_rel)) << buckets << " " << max_rel << " " << rel;
    }
    for (int e = 13; e <= 40; ++e) {
      const int64_t rel = (int64_t{1} << e) + 1;
      EXPECT_EQ(deberta_bucket(p, rel), hf_bucket(rel, buckets, max_rel)) << rel;
      EXPECT_EQ(deberta_bucket(p, -rel), -deberta_bucket(p, rel)) << rel;
    }
  }
  // No buckets (HF's position_buckets = -1): the offset itself, and span = max_relative_positions.
  const DebertaParams plain{0, 7};
  EXPECT_EQ(deberta_bucket(plain, -300), -300);
  EXPECT_EQ(deberta_span(plain), 7);
  EXPECT_EQ(deberta_row(plain, -300), 0);
  EXPECT_EQ(deberta_row(plain, 3), 10);
  EXPECT_EQ(deberta_row(plain, 300), 13);
}

// HF's rows: c2p_pos[i, j] = clamp(rel[i, j] + span, 0, 2 span - 1) with rel[i, j] = bucket(i - j);
// p2c gathers p2c_pos[j, i] = clamp(-rel[j, i] + span, ...) and transposes: row for (i, j) is p2c_pos[j, i].
TEST(Deberta, RowsOfBothTermsAreHuggingFacesGathers) {
  for (const DebertaParams p : {DebertaParams{256, 512}, DebertaParams{8, 16}, DebertaParams{0, 5}}) {
    const int64_t span = deberta_span(p), n = 700;
    const auto bucket = [&](int64_t x) { return p.position_buckets > 0 ? hf_bucket(x, p.position_buckets, p.max_relative_positions) : x; };
    for (int64_t i = 0; i < n; i += 3) {
      for (int64_t j = 0; j < n; j += 7) {
        const int64_t c2p = std::clamp<int64_t>(bucket(i - j) + span, 0, 2 * span - 1);
        const int64_t p2c = std::clamp<int64_t>(-bucket(j - i) + span, 0, 2 * span - 1);
        ASSERT_EQ(deberta_row(p, i - j), c2p) << i << " " << j;
        ASSERT_EQ(deberta_row(p, i - j), p2c) << i << " " << j;
      }
    }
    // The fused attention's index: offset d = j - i' = c - K.
    const int64_t k = 40;
    std::vector<int64_t> index(2 * k + 1);
    deberta_row_index(p, k, index.data());
    for (int64_t c = 0; c <= 2 * k; ++c) EXPECT_EQ(index[c], deberta_row(p, k - c));
  }
}

TEST(Deberta, Errors) {
  expect_error([] { validate_deberta({256, 0}); }, "[deberta] max_relative_positions must be >= 1, got 0");
  expect_error([] { validate_deberta({1, 512}); }, "[deberta] position_buckets must be 0 (no buckets) or >= 2, got 1");
  expect_error([] { validate_deberta({-1, 512}); },
               "[deberta] position_buckets must be 0 (no buckets) or >= 2, got -1");
  expect_error([] { validate_deberta({300, 256}); },
               "[deberta] position_buckets must be <= max_relative_positions, got 300 > 256");
  expect_error([] { validate_deberta({2, 2}); },
               "[deberta] max_relative_positions must be > position_buckets / 2 + 1 = 2, got 2");
  expect_error([] { validate_deberta({256, 512}, "DebertaRelative"); validate_deberta({0, -3}, "DebertaRelative"); },
               "[DebertaRelative] max_relative_positions must be >= 1, got -3");
  validate_deberta({256, 512});
  validate_deberta({0, 1});
  validate_deberta({3, 3});
  // The fused attention's index is checked against the tables' rows.
  std::vector<double> x(16, 0.0), o(16);
  std::vector<int64_t> index{0, 1, 600};
  AttentionTerms<double> terms;
  terms.rel_k = x.data(), terms.rel_index = index.data(), terms.rel_rows = 512, terms.max_distance = 1;
  const auto m = [&](double* p) { return contiguous_matrix<const double>(p, 1, 1, 2, 4); };
  const auto run = [&] { attention_forward<double>({}, m(x.data()), m(x.data()), m(x.data()), terms, contiguous_matrix(o.data(), 1, 1, 2, 4)); };
  expect_error(run, "[attention] rel_index[2] must be a row in [0, 512), got 600");
  terms.rel_rows = 0;
  expect_error(run, "[attention] rel_index rows must be >= 1, got 0");
  terms.rel_rows = 700, terms.rel_v = x.data();
  expect_error(run, "[attention] rel_index addresses rel_k and rel_q, not rel_v");
}

// Smooth deterministic fill.
template <class T>
void fill(std::vector<T>& v, double f, double phase = 0.5) {
  for (size_t n = 0; n < v.size(); ++n) v[n] = static_cast<T>(std::sin(f * static_cast<double>(n) + phase));
}

TEST(Deberta, ReferenceBackwardMatchesCentralDifferences) {
  const DebertaParams p{8, 16};
  const int64_t b = 2, h = 2, tq = 5, tk = 23, dh = 3, rows = 2 * deberta_span(p);
  std::vector<double> q(b * h * tq * dh), k(b * h * tk * dh), pk(h * rows * dh), pq(h * rows * dh),
      g(b * h * tq * tk);
  fill(q, 0.3), fill(k, 0.7), fill(pk, 1.1), fill(pq, 0.9), fill(g, 0.13);
  const auto loss = [&] {
    std::vector<double> out(g.size());
    deberta_bias_reference(p, b, h, tq, tk, dh, q.data(), k.data(), pk.data(), pq.data(), out.data());
    double s = 0;
    for (size_t e = 0; e < out.size(); ++e) s += out[e] * g[e];
    return s;
  };
  std::vector<double> dq(q.size()), dk(k.size()), dpk(pk.size()), dpq(pq.size());
  deberta_bias_backward_reference(p, b, h, tq, tk, dh, q.data(), k.data(), pk.data(), pq.data(), g.data(), dq.data(),
                                  dk.data(), dpk.data(), dpq.data());
  for (auto [x, dx] : {std::pair{&q, &dq}, std::pair{&k, &dk}, std::pair{&pk, &dpk}, std::pair{&pq, &dpq}}) {
    double norm = 0;
    for (size_t e = 0; e < x->size(); ++e) {
      const double keep = (*x)[e], eps = 1e-3;
      (*x)[e] = keep + eps;
      const double up = loss();
      (*x)[e] = keep - eps;
      const double down = loss();
      (*x)[e] = keep;
      // The loss is linear in each input: central differences are exact up to rounding (~1e-14 / eps).
      EXPECT_NEAR((*dx)[e], (up - down) / (2 * eps), 1e-8) << e;
      norm = std::max(norm, std::abs((*dx)[e]));
    }
    EXPECT_GT(norm, 0.1);
  }
}

struct FusedCase {
  int64_t buckets, max_rel, batch, heads, q_len, k_len, dh, dv;
  bool causal, padding, c2p, p2c;
};

std::string name_of(const FusedCase& c) {
  return "buckets=" + std::to_string(c.buckets) + " max=" + std::to_string(c.max_rel) + " B=" +
         std::to_string(c.batch) + " H=" + std::to_string(c.heads) + " Tq=" + std::to_string(c.q_len) +
         " Tk=" + std::to_string(c.k_len) + " Dh=" + std::to_string(c.dh) + " Dv=" + std::to_string(c.dv) +
         (c.causal ? " causal" : "") + (c.padding ? " padding" : "") + (c.c2p ? " c2p" : "") + (c.p2c ? " p2c" : "");
}

// Buckets that clamp inside the sequence (span 8 vs 150 keys), no buckets, several key and query
// tiles, Tq < Tk and Tq > Tk, Dh not a whole vector, each term alone.
const std::vector<FusedCase> kFused{
    {8, 16, 2, 3, 70, 150, 16, 8, true, true, true, true},
    {8, 16, 1, 2, 150, 150, 13, 5, false, true, true, true},
    {16, 64, 2, 2, 90, 40, 8, 8, false, false, true, true},
    {0, 6, 1, 2, 33, 61, 9, 7, false, true, true, true},
    {256, 512, 1, 1, 200, 200, 16, 16, true, false, true, true},
    {8, 16, 1, 2, 50, 140, 16, 4, true, false, false, true},
    {8, 16, 1, 2, 50, 140, 16, 4, false, true, true, false},
};

// The fused attention with c2p as rel_k and p2c as rel_q (through rel_index) against the same
// attention given scale * deberta_bias_reference as a dense bias; its gradients against the dense
// bias's gradient taken through deberta_bias_backward_reference.
template <class T>
void fused_equals_dense(const FusedCase& c, double tol) {
  SCOPED_TRACE(name_of(c));
  const DebertaParams p{c.buckets, c.max_rel};
  const int64_t b = c.batch, h = c.heads, tq = c.q_len, tk = c.k_len, dh = c.dh, dv = c.dv;
  const int64_t rows = 2 * deberta_span(p), kd = std::max(tq, tk) - 1;
  std::vector<double> qd(b * h * tq * dh), kdv(b * h * tk * dh), vd(b * h * tk * dv), god(b * h * tq * dv);
  std::vector<double> pkd(h * rows * dh), pqd(h * rows * dh);
  fill(qd, 0.37), fill(kdv, 0.61), fill(vd, 0.23), fill(god, 0.71), fill(pkd, 0.53, 0.1), fill(pqd, 0.29, 0.2);
  const auto cast = [](const std::vector<double>& x) { return std::vector<T>(x.begin(), x.end()); };
  const std::vector<T> q = cast(qd), k = cast(kdv), v = cast(vd), go = cast(god), pk = cast(pkd), pq = cast(pqd);
  std::vector<int64_t> index(2 * kd + 1);
  deberta_row_index(p, kd, index.data());
  std::vector<uint8_t> padding(b * tk, 0);
  if (c.padding) {
    for (int64_t j = 3; j < tk; j += 11) padding[(b - 1) * tk + j] = 1;
  }
  AttentionParams params;
  params.scale = 1 / std::sqrt(3.0 * static_cast<double>(dh)), params.causal = c.causal;
  if (c.padding) params.key_padding = padding.data(), params.key_padding_stride = tk;
  // The dense bias (the same for every batch entry only in its table part: it reads q and k, so per (b, h)).
  std::vector<double> dense(b * h * tq * tk);
  deberta_bias_reference(p, b, h, tq, tk, dh, qd.data(), kdv.data(), c.c2p ? pkd.data() : nullptr,
                         c.p2c ? pqd.data() : nullptr, dense.data());
  std::vector<T> bias(dense.size());
  for (size_t e = 0; e < dense.size(); ++e) bias[e] = static_cast<T>(params.scale * dense[e]);

  const auto qm = contiguous_matrix<const T>(q.data(), b, h, tq, dh);
  const auto km = contiguous_matrix<const T>(k.data(), b, h, tk, dh);
  const auto vm = contiguous_matrix<const T>(v.data(), b, h, tk, dv);
  struct Run {
    std::vector<T> out, lse, dq, dk, dv, dbias, dpk, dpq;
  };
  const auto run = [&](bool fused) {
    AttentionTerms<T> terms;
    if (fused) {
      if (c.c2p) terms.rel_k = pk.data();
      if (c.p2c) terms.rel_q = pq.data();
      terms.rel_tables = h, terms.max_distance = kd, terms.rel_index = index.data(), terms.rel_rows = rows;
    } else {
      terms.bias = bias.data(), terms.bias_stride_b = h * tq * tk, terms.bias_stride_h = tq * tk;
      terms.bias_stride_r = tk;
    }
    Run r;
    r.out.resize(b * h * tq * dv), r.lse.resize(b * h * tq);
    attention_forward<T>(params, qm, km, vm, terms, contiguous_matrix(r.out.data(), b, h, tq, dv), {}, "attention",
                         r.lse.data());
    r.dq.resize(q.size()), r.dk.resize(k.size()), r.dv.resize(v.size());
    AttentionGradients<T> g;
    g.q = contiguous_matrix(r.dq.data(), b, h, tq, dh);
    g.k = contiguous_matrix(r.dk.data(), b, h, tk, dh);
    g.v = contiguous_matrix(r.dv.data(), b, h, tk, dv);
    if (fused) {
      r.dpk.assign(pk.size(), T(7)), r.dpq.assign(pq.size(), T(7));  // overwritten
      if (c.c2p) g.rel_k = r.dpk.data();
      if (c.p2c) g.rel_q = r.dpq.data();
    } else {
      r.dbias.resize(bias.size());
      g.bias = contiguous_matrix(r.dbias.data(), b, h, tq, tk);
    }
    attention_backward<T>(params, qm, km, vm, terms, contiguous_matrix<const T>(r.out.data(), b, h, tq, dv),
                          r.lse.data(), contiguous_matrix<const T>(go.data(), b, h, tq, dv), g);
    return r;
  };
  const Run fused = run(true), plain = run(false);
  // The dense bias's gradient through the reference backward gives the terms' parts of dq, dk and the tables'.
  const std::vector<double> dbias(plain.dbias.begin(), plain.dbias.end());
  std::vector<double> dq_t(q.size()), dk_t(k.size()), dpk(pk.size()), dpq(pq.size());
  deberta_bias_backward_reference(p, b, h, tq, tk, dh, qd.data(), kdv.data(), c.c2p ? pkd.data() : nullptr,
                                  c.p2c ? pqd.data() : nullptr, dbias.data(), dq_t.data(), dk_t.data(), dpk.data(),
                                  dpq.data());
  std::vector<double> want_dq(q.size()), want_dk(k.size());
  for (size_t e = 0; e < q.size(); ++e) want_dq[e] = plain.dq[e] + params.scale * dq_t[e];
  for (size_t e = 0; e < k.size(); ++e) want_dk[e] = plain.dk[e] + params.scale * dk_t[e];
  for (double& x : dpk) x *= params.scale;
  for (double& x : dpq) x *= params.scale;
  EXPECT_LE(test::max_abs_diff(fused.out, plain.out), tol) << "out";
  EXPECT_LE(test::max_abs_diff(fused.dq, want_dq), tol) << "dq";
  EXPECT_LE(test::max_abs_diff(fused.dk, want_dk), tol) << "dk";
  EXPECT_LE(test::max_abs_diff(fused.dv, plain.dv), tol) << "dv";
  if (c.c2p) {
    EXPECT_LE(test::max_abs_diff(fused.dpk, dpk), 4 * tol) << "drel_k";
  }
  if (c.p2c) {
    EXPECT_LE(test::max_abs_diff(fused.dpq, dpq), 4 * tol) << "drel_q";
  }
  double norm = 0;
  for (double x : c.p2c ? dpq : dpk) norm = std::max(norm, std::abs(x));
  EXPECT_GT(norm, 1e-3);  // the gradients compared are not all zero
}

// float64: the same sums in another order; float32: ~1e-6 relative over sums of a few hundred
// terms (table rows gather up to B * Tq * Tk / rows pairs: 4x).
TEST(Deberta, FusedAttentionEqualsDenseBiasDouble) {
  for (const FusedCase& c : kFused) fused_equals_dense<double>(c, 1e-11);
}
TEST(Deberta, FusedAttentionEqualsDenseBiasFloat) {
  for (const FusedCase& c : kFused) fused_equals_dense<float>(c, 5e-5);
}

TEST(Deberta, FusedBackwardIndependentOfThreadCount) {
  const DebertaParams p{8, 16};
  const int64_t b = 2, h = 4, tq = 100, tk = 130, dh = 16, rows = 16, kd = tk - 1;
  std::vector<float> q(b * h * tq * dh), k(b * h * tk * dh), v(b * h * tk * dh), go(b * h * tq * dh);
  std::vector<float> pk(h * rows * dh), pq(h * rows * dh);
  fill(q, 0.37), fill(k, 0.61), fill(v, 0.23), fill(go, 0.71), fill(pk, 0.53), fill(pq, 0.29);
  std::vector<int64_t> index(2 * kd + 1);
  deberta_row_index(p, kd, index.data());
  AttentionTerms<float> terms;
  terms.rel_k = pk.data(), terms.rel_q = pq.data(), terms.rel_tables = h, terms.max_distance = kd;
  terms.rel_index = index.data(), terms.rel_rows = rows;
  AttentionParams params;
  params.scale = 0.1;
  const auto m = [](std::vector<float>& x, int64_t t) { return contiguous_matrix<const float>(x.data(), 2, 4, t, 16); };
  const auto run = [&](int threads) {
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> out(go.size()), lse(b * h * tq), dpk(pk.size()), dpq(pq.size()), dk(k.size());
    attention_forward<float>(params, m(q, tq), m(k, tk), m(v, tk), terms, contiguous_matrix(out.data(), 2, 4, tq, 16),
                             {}, "attention", lse.data());
    AttentionGradients<float> g;
    g.rel_k = dpk.data(), g.rel_q = dpq.data(), g.k = contiguous_matrix(dk.data(), 2, 4, tk, 16);
    attention_backward<float>(params, m(q, tq), m(k, tk), m(v, tk), terms, m(out, tq), lse.data(), m(go, tq), g);
    omp_set_num_threads(keep);
    dpk.insert(dpk.end(), dpq.begin(), dpq.end());
    dpk.insert(dpk.end(), dk.begin(), dk.end());
    return dpk;
  };
  EXPECT_EQ(run(1), run(3));
}

}  // namespace
}  // namespace posenc::kernels
