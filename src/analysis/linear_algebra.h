// The small dense linear algebra that proximity, the translation fit and the
// probes share (private to posenc::analysis). Row-major float64.
//
// Determinism: every entry of a product is one sum over k in the order
// k = 0, 1, ... (dot products: 8 fixed lanes, combined in a fixed tree), so a
// result never depends on the blocking or on the number of OpenMP threads.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc::analysis::detail {

// c [m, n] = a^T b with a [k, m], b [k, n]: c[i, j] = sum_t a[t, i] b[t, j].
// `parallel`: split the rows of c over OpenMP threads (callers already inside
// a parallel loop pass false).
void multiply_tn(const double* a, const double* b, int64_t k, int64_t m, int64_t n, double* c, bool parallel);

// c [m, m] = a^T a, a [k, m]: exactly symmetric (the upper triangle is
// computed, the lower one mirrored). The Gram matrix of a's columns; the Gram
// matrix of rows X X^T is gram_tn(X^T).
void gram_tn(const double* a, int64_t k, int64_t m, double* c, bool parallel);

// out [cols, rows] = a^T for a [rows, cols].
void transpose(const double* a, int64_t rows, int64_t cols, double* out) noexcept;

// sum_t a[t] b[t] (8 lanes, then a fixed pairwise tree).
double dot(const double* a, const double* b, int64_t n) noexcept;

// a [n, n] symmetric positive definite, in place: its lower triangle becomes L
// with a = L L^T (the strict upper triangle is not read or written). Returns
// false when a pivot is not positive, i.e. a is not SPD in float64.
bool cholesky(double* a, int64_t n) noexcept;

// Solves L L^T x = b for the m columns of b [n, m] in place (L from cholesky).
void cholesky_solve(const double* l, int64_t n, double* b, int64_t m);

// Factors a + lambda I (a [n, n] symmetric positive semi-definite) into l,
// raising lambda tenfold, at most 12 times, while float64 round-off leaves it
// not SPD. Returns false when no attempt succeeds.
bool ridge_cholesky(const std::vector<double>& a, int64_t n, double lambda, std::vector<double>& l);

}  // namespace posenc::analysis::detail
