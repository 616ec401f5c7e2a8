// ALiBi (Press et al., ICLR 2022): head h adds -m_h * |i' - j| to the logit
// of query i and key j, with i' = i + query_offset the query's position on the
// key axis (query_offset = k_len - q_len aligns the queries with the last
// q_len keys, as in decoding with a cache).
//
// Slopes: for n heads, n a power of two, m_h = 2^(-8h/n), h = 1 .. n (a
// geometric sequence starting at and with ratio 2^(-8/n)). Otherwise, with c
// the largest power of two below n: the c slopes of c heads, followed by the
// slopes of 2c heads at odd h = 1, 3, 5, ..., the first n - c of them (the
// paper's code, get_slopes).
//
// 2D (vision, e.g. CROMA): head h adds -m_h * dist((y,x), (y',x')) on a
// height x width grid flattened as y*W + x; dist Euclidean or Manhattan.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace posenc::kernels {

// "[op] num_heads must be >= 1, got 0"
std::vector<double> alibi_slopes(int64_t num_heads, const char* op = "alibi_slopes");

struct AlibiParams {
  int64_t num_heads = 0;  // >= 1
  int64_t q_len = 0, k_len = 0;
  int64_t query_offset = 0;  // |query_offset| <= 2^62
  bool causal = false;       // keys after the query (j > i') get -inf
};

// Messages: "[op] num_heads must be >= 1, got 0", "[op] q_len must be >= 0,
// got -1", "[op] k_len must be >= 0, got -1", "[op] query_offset must be
// within +-2^62, got ...", "[op] causal attention needs every query to see a
// key: query_offset must be >= 0, got -2", "[op] the bias must have at most
// 2^31 values (num_heads*q_len*k_len), got 4294967296".
void validate(const AlibiParams& params, const char* op = "alibi_bias");

// out: [num_heads, q_len, k_len] contiguous, overwritten; slopes: [num_heads].
// T is float or double (the product formed in double, rounded once).
template <class T>
void alibi_bias(const AlibiParams& params, const double* slopes, T* out, const char* op = "alibi_bias");

enum class GridDistance { kEuclidean, kManhattan };

// "euclidean" | "manhattan"; else "[op] distance must be \"euclidean\" or \"manhattan\", got \"cosine\""
GridDistance parse_grid_distance(std::string_view name, const char* op = "alibi_bias_2d");
std::string_view grid_distance_name(GridDistance distance) noexcept;

struct Alibi2dParams {
  int64_t num_heads = 0;
  int64_t height = 0, width = 0;  // >= 1 each
  GridDistance distance = GridDistance::kEuclidean;
};

// Messages as validate(AlibiParams) for num_heads and the size, plus
// "[op] height must be >= 1, got 0", "[op] width must be >= 1, got 0".
void validate(const Alibi2dParams& params, const char* op = "alibi_bias_2d");

// out: [num_heads, HW, HW] contiguous, overwritten.
template <class T>
void alibi_bias_2d(const Alibi2dParams& params, const double* slopes, T* out, const char* op = "alibi_bias_2d");

}  // namespace posenc::kernels
