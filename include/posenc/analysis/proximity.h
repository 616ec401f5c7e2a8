// Proximity between the encodings of positions (Wang et al., ICLR 2021, §3):
//   dot:    S[i, j] = PE[i] . PE[j]
//   cosine: S[i, j] = PE[i] . PE[j] / (|PE[i]| |PE[j]|), 0 where either row is all zeros
// Sums run in double. The sinusoidal table gives S[i, j] = s^2 sum_k cos((i - j) w_k):
// a function of i - j only, symmetric, decaying (with ripples) as |i - j| grows.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

enum class ProximityKind { kDot, kCosine };

// "dot" | "cosine".
std::string_view proximity_kind_name(ProximityKind kind) noexcept;
// Throws "[proximity] kind must be dot or cosine, got 'x'".
ProximityKind parse_proximity_kind(std::string_view name);

// table [n, d] -> S [n, n]. Sums run on the table scaled by a power of two
// (exact), so no product over- or underflows on the way. Throws as
// validate_table("proximity", "table", ...) and, when dot proximity itself
// exceeds float64 (a table of values near 1e300):
//   "[proximity] dot proximity must fit in float64, got products beyond 1.8e308 for a table whose largest |value|
//    is 1.0000000000000001e+300 (use cosine proximity, which does not depend on scale)"   (one line)
// Time O(n^2 d), memory 8 n^2 + 8 n d bytes.
Matrix proximity(const Matrix& table, ProximityKind kind);

// Row `row` of proximity(table, kind): S[row, j], j = 0 .. n-1, the same
// numbers in O(n d) time and O(n) extra memory (a decay plot needs one row).
// Throws as proximity() and "[proximity] row must be in [0, 7] for a table of 8 positions, got 9".
std::vector<double> proximity_row(const Matrix& table, int64_t row, ProximityKind kind);

}  // namespace posenc::analysis
