// Relative position vectors (relative_logits, relative_values,
// relative_table_grad) against plain long-double references, the adjoint and
// translation properties the math promises, determinism of the table
// gradient, and every error message.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <algorithm>
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
#include <utility>
#include <vector>

#include "check.h"
#include "strided_tensor.h"
#include "posenc/kernels/relative.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

using namespace posenc::test;  // strided_tensor.h: Tensor, make_tensor, fill, ...

// ---------------------------------------------------------------------------
// Plain references in long double: the naive O(Tq Tk Dh) loops with the clip.
// Each element comes with the sum of the absolute values of its terms, the
// scale of any summation error.

struct Problem {
  int64_t batch, heads, tq, tk, dh, k, offset;
  bool shared;
};

int64_t reference_row(const Problem& p, int64_t i, int64_t j) {
  const int64_t o = j - i - p.offset;
  return (o < -p.k ? -p.k : o > p.k ? p.k : o) + p.k;
}

struct Reference {
  std::vector<long double> value, magnitude;  // contiguous (.., rows, cols)
};

template <class T>
long double table_at(const Problem& p, const std::vector<T>& table, int64_t h, int64_t r, int64_t d) {
  const int64_t t = p.shared ? 0 : h;
  return table[static_cast<size_t>((t * (2 * p.k + 1) + r) * p.dh + d)];
}

// out[b,h,i,j] = sum_d q[b,h,i,d] table[t(h), r(i,j), d]
template <class T>
Reference reference_logits(const Problem& p, const Tensor<T>& q, const std::vector<T>& table) {
  Reference ref;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.tq; ++i)
        for (int64_t j = 0; j < p.tk; ++j) {
          long double s = 0, m = 0;
          for (int64_t d = 0; d < p.dh; ++d) {
            const long double term = q.at(b, h, i, d) * table_at(p, table, h, reference_row(p, i, j), d);
            s += term;
            m += fabsl(term);
          }
          ref.value.push_back(s);
          ref.magnitude.push_back(m);
        }
  return ref;
}

// out[b,h,i,d] = sum_j probs[b,h,i,j] table[t(h), r(i,j), d]
template <class T>
Reference reference_values(const Problem& p, const Tensor<T>& probs, const std::vector<T>& table) {
  Reference ref;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.tq; ++i)
        for (int64_t d = 0; d < p.dh; ++d) {
          long double s = 0, m = 0;
          for (int64_t j = 0; j < p.tk; ++j) {
            const long double term = probs.at(b, h, i, j) * table_at(p, table, h, reference_row(p, i, j), d);
            s += term;
            m += fabsl(term);
          }
          ref.value.push_back(s);
          ref.magnitude.push_back(m);
        }
  return ref;
}

// grad[t, r, d] = sum over b, h with t(h) = t, (i, j) with r(i,j) = r of w[b,h,i,j] x[b,h,i,d]
template <class T>
Reference reference_table_grad(const Problem& p, const Tensor<T>& w, const Tensor<T>& x) {
  const int64_t tables = p.shared ? 1 : p.heads, rows = 2 * p.k + 1;
  Reference ref;
  ref.value.assign(static_cast<size_t>(tables * rows * p.dh), 0.0L);
  ref.magnitude = ref.value;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t i = 0; i < p.tq; ++i)
        for (int64_t j = 0; j < p.tk; ++j)
          for (int64_t d = 0; d < p.dh; ++d) {
            const size_t e = static_cast<size_t>(((p.shared ? 0 : h) * rows + reference_row(p, i, j)) * p.dh + d);
            const long double term = static_cast<long double>(w.at(b, h, i, j)) * x.at(b, h, i, d);
            ref.value[e] += term;
            ref.magnitude[e] += fabsl(term);
          }
  return ref;
}

// ---------------------------------------------------------------------------
// Tolerances: a sum of products computed in any order, with up to n
// roundings on each term's path, is within n u sum|terms| of the exact value
// (Higham, Accuracy and Stability, 3.1); u = 2^-24 (float), 2^-53 (double).
// The long-double reference adds n 2^-64 sum|terms|, negligible.

template <class T>
constexpr long double kUnit = std::is_same_v<T, float> ? 0x1p-24L : 0x1p-53L;

// Every element of the view within (depth + 2) u sum|terms| of the reference
// (depth: the most roundings on one term's path), and the padding untouched.
template <class T>
void compare(const Tensor<T>& got, const Reference& ref, int64_t depth, const std::string& what) {
  int64_t failures = 0, n = 0;
  const auto& v = got.view;
  for (int64_t b = 0; b < v.batch; ++b)
    for (int64_t h = 0; h < v.heads; ++h)
      for (int64_t r = 0; r < v.rows; ++r)
        for (int64_t c = 0; c < v.cols; ++c, ++n) {
          const long double tol = (depth + 2) * kUnit<T> * ref.magnitude[static_cast<size_t>(n)];
          const long double want = ref.value[static_cast<size_t>(n)];
          const long double diff = fabsl(static_cast<long double>(got.at(b, h, r, c)) - want);
          if (!(diff <= tol) && ++failures <= 3) {
            ADD_FAILURE() << what << " at (" << b << ", " << h << ", " << r << ", " << c << "): got "
                          << got.at(b, h, r, c) << ", want " << static_cast<double>(want)
                          << " (tolerance " << static_cast<double>(tol) << ")";
          }
        }
  EXPECT_EQ(failures, 0) << what;
  EXPECT_EQ(changed_padding(got), 0) << what << ": wrote outside its view";
}

// ---------------------------------------------------------------------------
// The table of cases: real head shapes (32/64/128), Shaw's k = 4/16/128,
// Transformer-XL (k >= T, memory: Tk > Tq with query_offset = Tk - Tq),
// shared and per-head tables, batches, non-contiguous views, odd sizes that
// fit no block, T = 1, and empty extents.

struct Case {
  Problem p;
  bool strided;  // q, x token-major; logits, probs and values padded
};

std::string describe(const Case& c) {
  const Problem& p = c.p;
  return "B=" + std::to_string(p.batch) + " H=" + std::to_string(p.heads) + " Tq=" + std::to_string(p.tq) +
         " Tk=" + std::to_string(p.tk) + " Dh=" + std::to_string(p.dh) + " k=" + std::to_string(p.k) +
         " qo=" + std::to_string(p.offset) + (p.shared ? " shared" : " per-head") + (c.strided ? " strided" : "");
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // Shaw et al.: short clip distances, most of each row is a fill.
      {{1, 2, 40, 40, 64, 16, 0, true}, false},
      {{2, 3, 37, 37, 64, 4, 0, false}, true},
      {{1, 2, 200, 200, 128, 128, 0, true}, false},
      {{1, 1, 130, 130, 32, 16, 0, false}, false},
      {{3, 4, 21, 21, 32, 4, 0, true}, true},
      // Transformer-XL: k >= T, nothing clipped; with memory Tk > Tq.
      {{1, 2, 100, 100, 32, 128, 0, false}, false},
      {{1, 2, 50, 120, 64, 300, 70, false}, true},
      {{2, 2, 64, 64, 64, 127, 0, true}, false},
      // Tq != Tk both ways, offsets both signs.
      {{1, 2, 120, 50, 32, 16, 0, true}, false},
      {{1, 3, 33, 33, 64, 8, -9, false}, false},
      {{1, 1, 45, 70, 64, 20, 25, true}, true},
      {{1, 2, 70, 45, 32, 10, -25, false}, true},
      // Every key clipped to one side.
      {{1, 2, 20, 30, 16, 3, 1000, true}, false},
      {{1, 2, 20, 30, 16, 3, -1000, false}, false},
      // k = 0: every pair uses table[0].
      {{2, 2, 19, 23, 16, 0, 0, false}, false},
      // T = 1.
      {{1, 4, 1, 1, 64, 16, 0, false}, false},
      {{1, 2, 1, 17, 64, 16, 16, true}, false},
      // Odd sizes: Dh not a multiple of a vector, rows not a multiple of a block.
      {{1, 2, 67, 59, 24, 30, 3, false}, true},
      {{2, 1, 41, 43, 72, 50, -2, true}, false},
      {{1, 2, 29, 31, 5, 7, 0, false}, true},
      {{1, 1, 17, 13, 1, 2, 1, true}, false},
      {{1, 2, 99, 101, 100, 60, 0, false}, false},
      // Outputs above the streaming-store threshold (4 MiB), rows unaligned.
      {{1, 2, 1100, 1030, 16, 40, 5, false}, true},
      // Empty extents: valid, nothing (or zeros for empty sums) written.
      {{1, 2, 0, 16, 64, 4, 0, true}, false},
      {{1, 2, 16, 0, 64, 4, 0, false}, true},
      {{0, 2, 16, 16, 64, 4, 0, true}, false},
      {{1, 0, 16, 16, 64, 4, 0, false}, false},
      {{1, 2, 16, 16, 0, 4, 0, true}, true},
  };
  return all;
}

template <class T>
void run_case(const Case& c) {
  const Problem& p = c.p;
  SCOPED_TRACE(describe(c) + (std::is_same_v<T, float> ? " float32" : " float64"));
  std::mt19937_64 rng(1234 + p.tq * 31 + p.tk * 7 + p.dh);
  const int64_t tables = p.shared ? 1 : p.heads, rows = 2 * p.k + 1;
  const RelativeParams params{p.k, p.offset};
  const Layout vectors = c.strided ? Layout::kTokenMajor : Layout::kContiguous;
  const Layout matrices = c.strided ? Layout::kPadded : Layout::kContiguous;

  std::vector<T> table = random_values<T>(static_cast<size_t>(tables * rows * p.dh), rng);
  const RelativeTable<const T> tab{table.data(), tables, rows, p.dh};

  Tensor<T> q = make_tensor<T>(p.batch, p.heads, p.tq, p.dh, vectors);
  fill(q, rng, -1.0, 1.0);
  Tensor<T> logits = make_tensor<T>(p.batch, p.heads, p.tq, p.tk, matrices);
  poison(logits);
  relative_logits<T>(params, q.in(), tab, logits.view);
  // One dot product of length Dh.
  compare(logits, reference_logits(p, q, table), p.dh, "logits");

  Tensor<T> probs = make_tensor<T>(p.batch, p.heads, p.tq, p.tk, matrices);
  fill(probs, rng, 0.0, 1.0);
  Tensor<T> values = make_tensor<T>(p.batch, p.heads, p.tq, p.dh, matrices);
  poison(values);
  relative_values<T>(params, probs.in(), tab, values.view);
  // Clipped probabilities are summed first (Tk terms at most), then a dot
  // product over the reached rows (at most min(2k+1, Tq+Tk)).
  compare(values, reference_values(p, probs, table), p.tk + std::min(rows, p.tq + p.tk), "values");

  Tensor<T> x = make_tensor<T>(p.batch, p.heads, p.tq, p.dh, vectors);
  fill(x, rng, -1.0, 1.0);
  Tensor<T> grad = make_tensor<T>(1, 1, tables * rows, p.dh, Layout::kContiguous);
  poison(grad);
  relative_table_grad<T>(params, probs.in(), x.in(), RelativeTable<T>{grad.view.data, tables, rows, p.dh});
  // Each row collects B H Tq products, each weight a sum of at most Tk.
  compare(grad, reference_table_grad(p, probs, x), p.batch * p.heads * p.tq + p.tk, "table_grad");
}

TEST(RelativeKernels, CasesFloat) {
  for (const Case& c : cases()) run_case<float>(c);
}

TEST(RelativeKernels, CasesDouble) {
  for (const Case& c : cases()) run_case<double>(c);
}

// The largest offsets allowed: every key clipped to the far edge, and a huge
// k with no columns (a table that exists only on paper).
TEST(RelativeKernels, ExtremeOffsets) {
  const int64_t limit = int64_t{1} << 62;
  std::mt19937_64 rng(7);
  for (const int64_t offset : {limit, -limit}) {
    const Problem p{1, 2, 9, 11, 16, 3, offset, true};
    std::vector<float> table = random_values<float>(7 * 16, rng);
    Tensor<float> q = make_tensor<float>(1, 2, 9, 16, Layout::kContiguous);
    fill(q, rng, -1.0, 1.0);
    Tensor<float> out = make_tensor<float>(1, 2, 9, 11, Layout::kContiguous);
    poison(out);
    relative_logits<float>({3, offset}, q.in(), {table.data(), 1, 7, 16}, out.view);
    compare(out, reference_logits(p, q, table), 16, "logits, offset " + std::to_string(offset));
  }
  const int64_t k = (int64_t{1} << 62) - 1;  // 2k+1 = 2^63 - 1 rows of 0 columns
  Tensor<float> q = make_tensor<float>(1, 1, 3, 0, Layout::kContiguous);
  Tensor<float> out = make_tensor<float>(1, 1, 3, 4, Layout::kContiguous);
  poison(out);
  relative_logits<float>({k, -limit}, q.in(), {nullptr, 1, 2 * k + 1, 0}, out.view);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out.at(0, 0, i, j), 0.0f) << i << ", " << j;
}

// ---------------------------------------------------------------------------
// Properties, in double.

// The three are one trilinear form S = sum q[i,d] g[i,j] T[r(i,j), d]:
//   <logits(q, T), g> = <q, values(g, T)> = <T, table_grad(g, q)>.
TEST(RelativeProperties, Adjoint) {
  const std::vector<Problem> problems = {
      {2, 3, 50, 61, 64, 16, 0, false}, {1, 4, 70, 70, 32, 200, 0, true}, {1, 2, 33, 80, 24, 40, 47, true}};
  for (const Problem& p : problems) {
    SCOPED_TRACE("B=" + std::to_string(p.batch) + " Tq=" + std::to_string(p.tq) + " k=" + std::to_string(p.k));
    std::mt19937_64 rng(99);
    const int64_t tables = p.shared ? 1 : p.heads, rows = 2 * p.k + 1;
    std::vector<double> table = random_values<double>(static_cast<size_t>(tables * rows * p.dh), rng);
    Tensor<double> q = make_tensor<double>(p.batch, p.heads, p.tq, p.dh, Layout::kContiguous);
    Tensor<double> g = make_tensor<double>(p.batch, p.heads, p.tq, p.tk, Layout::kContiguous);
    fill(q, rng, -1.0, 1.0);
    fill(g, rng, -1.0, 1.0);
    Tensor<double> logits = make_tensor<double>(p.batch, p.heads, p.tq, p.tk, Layout::kContiguous);
    Tensor<double> values = make_tensor<double>(p.batch, p.heads, p.tq, p.dh, Layout::kContiguous);
    std::vector<double> grad(table.size());
    const RelativeParams params{p.k, p.offset};
    relative_logits<double>(params, q.in(), {table.data(), tables, rows, p.dh}, logits.view);
    relative_values<double>(params, g.in(), {table.data(), tables, rows, p.dh}, values.view);
    relative_table_grad<double>(params, g.in(), q.in(), {grad.data(), tables, rows, p.dh});

    long double lhs = 0, mid = 0, rhs = 0, magnitude = 0;
    for (size_t n = 0; n < g.store.size(); ++n) lhs += static_cast<long double>(logits.store[n]) * g.store[n];
    for (size_t n = 0; n < q.store.size(); ++n) mid += static_cast<long double>(q.store[n]) * values.store[n];
    for (size_t n = 0; n < table.size(); ++n) rhs += static_cast<long double>(table[n]) * grad[n];
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t i = 0; i < p.tq; ++i)
          for (int64_t j = 0; j < p.tk; ++j)
            for (int64_t d = 0; d < p.dh; ++d)
              magnitude += fabsl(q.at(b, h, i, d) * g.at(b, h, i, j) *
                                 table_at(p, table, h, reference_row(p, i, j), d));
    // Each side is S with every term through at most n roundings (n: the
    // longest chain of the three kernels), so two sides differ by <= 2 n u sum|terms|.
    const int64_t n = p.batch * p.heads * p.tq + 2 * p.tk + std::min(2 * p.k + 1, p.tq + p.tk) + p.dh + 4;
    const long double tol = 2 * n * 0x1p-53L * magnitude;
    EXPECT_LE(fabsl(lhs - mid), tol) << static_cast<double>(lhs) << " vs " << static_cast<double>(mid);
    EXPECT_LE(fabsl(lhs - rhs), tol) << static_cast<double>(lhs) << " vs " << static_cast<double>(rhs);
    EXPECT_GT(fabsl(lhs), 1e3 * tol);  // the identity is not met trivially by zeros
  }
}

// Without clipping only j - i - qo matters: moving query_offset by s reads
// table row r - s, the same as keeping qo and shifting the table rows by s.
TEST(RelativeProperties, TranslationOfQueryOffset) {
  const int64_t nh = 2, tq = 40, tk = 52, dh = 32, k = 120, qo = 6;
  for (const int64_t s : {-17, 1, 23}) {
    SCOPED_TRACE("s=" + std::to_string(s));
    std::mt19937_64 rng(5);
    const int64_t rows = 2 * k + 1;
    std::vector<double> table = random_values<double>(static_cast<size_t>(nh * rows * dh), rng);
    std::vector<double> shifted = random_values<double>(table.size(), rng);  // rows never reached stay random
    for (int64_t t = 0; t < nh; ++t)
      for (int64_t r = 0; r < rows; ++r)
        if (r - s >= 0 && r - s < rows)
          for (int64_t d = 0; d < dh; ++d) shifted[(t * rows + r) * dh + d] = table[(t * rows + r - s) * dh + d];
    Tensor<double> q = make_tensor<double>(1, nh, tq, dh, Layout::kContiguous);
    Tensor<double> probs = make_tensor<double>(1, nh, tq, tk, Layout::kContiguous);
    fill(q, rng, -1.0, 1.0);
    fill(probs, rng, 0.0, 1.0);
    Tensor<double> a = make_tensor<double>(1, nh, tq, tk, Layout::kContiguous), b = a;
    b.view.data = b.store.data();
    relative_logits<double>({k, qo + s}, q.in(), {table.data(), nh, rows, dh}, a.view);
    relative_logits<double>({k, qo}, q.in(), {shifted.data(), nh, rows, dh}, b.view);
    // Two length-Dh dot products of the same terms: each within Dh u sum|terms| <= Dh u Dh.
    EXPECT_LE(test::max_abs_diff(a.store, b.store), 2.0 * dh * dh * 0x1p-53);
    Tensor<double> va = make_tensor<double>(1, nh, tq, dh, Layout::kContiguous), vb = va;
    vb.view.data = vb.store.data();
    relative_values<double>({k, qo + s}, probs.in(), {table.data(), nh, rows, dh}, va.view);
    relative_values<double>({k, qo}, probs.in(), {shifted.data(), nh, rows, dh}, vb.view);
    // Sums of Tk terms of size <= 1 (probabilities times table entries), each
    // through at most Tk + (Tq + Tk) roundings.
    EXPECT_LE(test::max_abs_diff(va.store, vb.store), 2.0 * (tq + 2 * tk) * tk * 0x1p-53);
    // And the shift is not a no-op: the original table at qo differs.
    Tensor<double> c = make_tensor<double>(1, nh, tq, tk, Layout::kContiguous);
    relative_logits<double>({k, qo}, q.in(), {table.data(), nh, rows, dh}, c.view);
    EXPECT_GT(test::max_abs_diff(a.store, c.store), 0.1);
  }
}

// Each table row is summed in one fixed order: the same bits with 1, 2 and 3 threads.
TEST(RelativeProperties, TableGradDeterministic) {
  const int saved = omp_get_max_threads();
  for (const bool shared : {true, false}) {
    for (const int64_t k : {int64_t{8}, int64_t{400}}) {
      SCOPED_TRACE(std::string(shared ? "shared" : "per-head") + " k=" + std::to_string(k));
      const int64_t nb = 2, nh = 4, tq = 300, tk = 310, dh = 40, tables = shared ? 1 : nh, rows = 2 * k + 1;
      std::mt19937_64 rng(11);
      Tensor<float> w = make_tensor<float>(nb, nh, tq, tk, Layout::kContiguous);
      Tensor<float> x = make_tensor<float>(nb, nh, tq, dh, Layout::kTokenMajor);
      fill(w, rng, -1.0, 1.0);
      fill(x, rng, -1.0, 1.0);
      std::vector<float> one(static_cast<size_t>(tables * rows * dh));
      omp_set_num_threads(1);
      relative_table_grad<float>({k, 3}, w.in(), x.in(), {one.data(), tables, rows, dh});
      for (const int threads : {2, 3}) {
        std::vector<float> more(one.size());
        omp_set_num_threads(threads);
        relative_table_grad<float>({k, 3}, w.in(), x.in(), {more.data(), tables, rows, dh});
        EXPECT_EQ(std::memcmp(one.data(), more.data(), one.size() * sizeof(float)), 0) << threads << " threads";
      }
    }
  }
  omp_set_num_threads(saved);
}

// ---------------------------------------------------------------------------
// Errors, word for word.

struct ErrorSetup {
  std::vector<float> q = std::vector<float>(1 * 8 * 16 * 64), out = std::vector<float>(1 * 8 * 16 * 16);
  std::vector<float> table = std::vector<float>(8 * 9 * 64);
  BatchedMatrix<const float> qv = contiguous_matrix<const float>(q.data(), 1, 8, 16, 64);
  BatchedMatrix<float> ov = contiguous_matrix<float>(out.data(), 1, 8, 16, 16);
  BatchedMatrix<const float> pv = contiguous_matrix<const float>(out.data(), 1, 8, 16, 16);
  BatchedMatrix<float> vv = contiguous_matrix<float>(q.data(), 1, 8, 16, 64);
  RelativeTable<const float> tv{table.data(), 1, 9, 64};
  RelativeTable<float> gv{table.data(), 1, 9, 64};
  RelativeParams params{4, 0};
};

TEST(RelativeErrors, Params) {
  ErrorSetup s;
  expect_error([&] { relative_logits<float>({-1, 0}, s.qv, s.tv, s.ov); },
               "[relative_logits] max_distance must be >= 0, got -1");
  expect_error([&] { relative_logits<float>({4, (int64_t{1} << 62) + 1}, s.qv, s.tv, s.ov); },
               "[relative_logits] query_offset must be within +-2^62, got 4611686018427387905");
  expect_error([&] { relative_values<float>({4, -(int64_t{1} << 62) - 1}, s.pv, s.tv, s.vv); },
               "[relative_values] query_offset must be within +-2^62, got -4611686018427387905");
  expect_error([&] { relative_table_grad<float>({4, std::numeric_limits<int64_t>::min()}, s.pv, s.qv, s.gv); },
               "[relative_table_grad] query_offset must be within +-2^62, got -9223372036854775808");
}

TEST(RelativeErrors, Table) {
  ErrorSetup s;
  expect_error([&] { relative_logits<float>(s.params, s.qv, {s.table.data(), 1, 8, 64}, s.ov); },
               "[relative_logits] table must have 2*max_distance+1 = 9 rows, got 8");
  expect_error([&] { relative_values<float>(s.params, s.pv, {s.table.data(), 1, 9, 32}, s.vv); },
               "[relative_values] table must have head_dim = 64 columns, got 32");
  expect_error([&] { relative_table_grad<float>(s.params, s.pv, s.qv, {s.table.data(), 3, 9, 64}); },
               "[relative_table_grad] table must be shared (1 table) or one per head (8 tables), got 3");
  expect_error([&] { relative_logits<float>({std::numeric_limits<int64_t>::max(), 0}, s.qv, s.tv, s.ov); },
               "[relative_logits] table must have 2*max_distance+1 = 18446744073709551615 rows, got 9");
  expect_error([&] { relative_logits<float>(s.params, s.qv, {s.table.data(), 1, -9, 64}, s.ov); },
               "[relative_logits] table must have 2*max_distance+1 = 9 rows, got -9");
  expect_error([&] { validate_relative("shaw", {2, 0}, 8, 5, 32, 8, 64); },
               "[shaw] table must have head_dim = 64 columns, got 32");
  validate_relative("shaw", {2, 0}, 8, 5, 64, 8, 64);  // per head: fine
}

TEST(RelativeErrors, Views) {
  ErrorSetup s;
  expect_error([&] { relative_logits<float>(s.params, s.qv, s.tv, contiguous_matrix(s.out.data(), 1, 8, 15, 16)); },
               "[relative_logits] out must be (B, H, Tq) = (1, 8, 16) like q, got (1, 8, 15)");
  expect_error([&] { relative_values<float>(s.params, s.pv, s.tv, contiguous_matrix(s.q.data(), 2, 8, 16, 32)); },
               "[relative_values] out must be (B, H, Tq) = (1, 8, 16) like probs, got (2, 8, 16)");
  expect_error(
      [&] {
        relative_table_grad<float>(s.params, s.pv, contiguous_matrix<const float>(s.q.data(), 1, 4, 16, 64), s.gv);
      },
      "[relative_table_grad] x must be (B, H, Tq) = (1, 8, 16) like weights, got (1, 4, 16)");
  expect_error(
      [&] { relative_logits<float>(s.params, contiguous_matrix<const float>(s.q.data(), 1, -8, 16, 64), s.tv, s.ov); },
      "[relative_logits] q must have extents (B, H, rows, cols) >= 0, got (1, -8, 16, 64)");
  expect_error([&] { relative_logits<float>(s.params, s.qv, s.tv, contiguous_matrix(s.out.data(), 1, 8, 16, -1)); },
               "[relative_logits] out must have extents (B, H, rows, cols) >= 0, got (1, 8, 16, -1)");
  const auto negative_probs = contiguous_matrix<const float>(s.out.data(), -1, 8, 16, 16);
  expect_error([&] { relative_values<float>(s.params, negative_probs, s.tv, s.vv); },
               "[relative_values] probs must have extents (B, H, rows, cols) >= 0, got (-1, 8, 16, 16)");
  expect_error(
      [&] {
        relative_table_grad<float>(s.params, s.pv, contiguous_matrix<const float>(s.q.data(), 1, 8, 16, -64), s.gv);
      },
      "[relative_table_grad] x must have extents (B, H, rows, cols) >= 0, got (1, 8, 16, -64)");
}

TEST(RelativeErrors, NullData) {
  ErrorSetup s;
  const auto null_q = contiguous_matrix<const float>(nullptr, 1, 8, 16, 64);
  expect_error([&] { relative_logits<float>(s.params, null_q, s.tv, s.ov); },
               "[relative_logits] q must have data for its (1, 8, 16, 64) elements, got null");
  expect_error([&] { relative_logits<float>(s.params, s.qv, s.tv, contiguous_matrix<float>(nullptr, 1, 8, 16, 16)); },
               "[relative_logits] out must have data for its (1, 8, 16, 16) elements, got null");
  expect_error([&] { relative_values<float>(s.params, s.pv, {nullptr, 1, 9, 64}, s.vv); },
               "[relative_values] table must have data for its (1, 9, 64) elements, got null");
  expect_error([&] { relative_table_grad<float>(s.params, s.pv, s.qv, {nullptr, 8, 9, 64}); },
               "[relative_table_grad] grad must have data for its (8, 9, 64) elements, got null");
  expect_error(
      [&] { relative_table_grad<float>(s.params, contiguous_matrix<const float>(nullptr, 1, 8, 16, 16), s.qv, s.gv); },
      "[relative_table_grad] weights must have data for its (1, 8, 16, 16) elements, got null");
  // Empty views may be null.
  relative_logits<float>(s.params, contiguous_matrix<const float>(nullptr, 1, 8, 0, 64), s.tv,
                         contiguous_matrix<float>(nullptr, 1, 8, 0, 16));
  relative_values<float>(s.params, contiguous_matrix<const float>(nullptr, 0, 8, 16, 16), s.tv,
                         contiguous_matrix<float>(nullptr, 0, 8, 16, 64));
}

TEST(RelativeErrors, CallerName) {
  ErrorSetup s;
  expect_error([&] { relative_logits<float>({-2, 0}, s.qv, s.tv, s.ov, "shaw_logits"); },
               "[shaw_logits] max_distance must be >= 0, got -2");
  expect_error([&] { relative_values<double>({-3, 0}, {}, {}, {}, "xl_values"); },
               "[xl_values] max_distance must be >= 0, got -3");
}

// ---------------------------------------------------------------------------
// Timing (POSENC_RELATIVE_TIMING=1): the benchmark shape, spot-checked first.

// Best of `runs`: wall seconds, and the process CPU seconds of that run
// (all threads; on a shared machine the wall time includes waiting for a core).
struct Timing {
  double wall = 1e30, cpu = 0;
};

template <class F>
Timing best_of(F&& f, int runs) {
  const auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  Timing best;
  for (int r = 0; r < runs; ++r) {
    const double c0 = cpu_now();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (wall < best.wall) best = {wall, cpu_now() - c0};
  }
  return best;
}

TEST(RelativeTiming, Shape2048) {
  const char* env = std::getenv("POSENC_RELATIVE_TIMING");
  if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set POSENC_RELATIVE_TIMING=1 to time";
  const int64_t nh = 8, t = 2048, dh = 64, k = 2047, rows = 2 * k + 1;
  std::mt19937_64 rng(3);
  const std::vector<float> q = random_values<float>(static_cast<size_t>(nh * t * dh), rng);
  const std::vector<float> probs = random_values<float>(static_cast<size_t>(nh * t * t), rng);
  const std::vector<float> table = random_values<float>(static_cast<size_t>(nh * rows * dh), rng);
  std::vector<float> logits(probs.size()), values(q.size()), grad(table.size());
  const auto qv = contiguous_matrix<const float>(q.data(), 1, nh, t, dh);
  const auto pv = contiguous_matrix<const float>(probs.data(), 1, nh, t, t);
  const double flop = 2.0 * nh * t * t * dh;  // one multiply-add per (h, i, j, d)
  for (const int64_t tables : {int64_t{1}, nh}) {
    const RelativeTable<const float> tab{table.data(), tables, rows, dh};
    const auto lv = contiguous_matrix(logits.data(), 1, nh, t, t);
    const auto vv = contiguous_matrix(values.data(), 1, nh, t, dh);
    const Timing tl = best_of([&] { relative_logits<float>({k, 0}, qv, tab, lv); }, 5);
    const Timing tv = best_of([&] { relative_values<float>({k, 0}, pv, tab, vv); }, 5);
    const RelativeTable<float> gv{grad.data(), tables, rows, dh};
    const Timing tg = best_of([&] { relative_table_grad<float>({k, 0}, pv, qv, gv); }, 5);
    // Spot check: a few elements of each against long-double dot products
    // (length Dh resp. Tk; float32 tolerance as in the case table).
    std::uniform_int_distribution<int64_t> pick(0, t - 1);
    for (int n = 0; n < 32; ++n) {
      const int64_t h = n % nh, i = pick(rng), j = pick(rng), d = j % dh;
      const int64_t tb = tables == 1 ? 0 : h;
      long double s = 0, m = 0, sv = 0, mv = 0;
      const float* row_q = &q[(h * t + i) * dh];
      const float* row_p = &probs[(h * t + i) * t];
      for (int64_t e = 0; e < dh; ++e) {
        const long double term = static_cast<long double>(row_q[e]) * table[(tb * rows + j - i + k) * dh + e];
        s += term, m += fabsl(term);
      }
      for (int64_t jj = 0; jj < t; ++jj) {
        const long double term = static_cast<long double>(row_p[jj]) * table[(tb * rows + jj - i + k) * dh + d];
        sv += term, mv += fabsl(term);
      }
      EXPECT_LE(fabsl(logits[(h * t + i) * t + j] - s), (dh + 2) * 0x1p-24L * m);
      EXPECT_LE(fabsl(values[(h * t + i) * dh + d] - sv), (2 * t + 2) * 0x1p-24L * mv);
    }
    std::printf("[relative timing] B=1 H=8 T=2048 Dh=64 k=2047, %s table, %d threads\n",
                tables == 1 ? "shared" : "per-head", omp_get_max_threads());
    const std::pair<const char*, Timing> rows_out[] = {{"logits", tl}, {"values", tv}, {"table_grad", tg}};
    for (const auto& [name, tm] : rows_out) {
      std::printf("  %-10s %7.2f ms  %6.1f GFLOP/s   (CPU %7.2f ms: %6.1f GFLOP per CPU-second)\n", name,
                  tm.wall * 1e3, flop / tm.wall * 1e-9, tm.cpu * 1e3, flop / tm.cpu * 1e-9);
    }
  }
}

}  // namespace
}  // namespace posenc::kernels
