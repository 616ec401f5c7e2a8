// Proximity between the encodings of positions (Wang et al., ICLR 2021, §3):
//   dot:    S[i, j] = PE[i] . PE[j]
//   cosine: S[i, j] = PE[i] . PE[j] / (|PE[i]| |PE[j]|), 0 where either row is all zeros
// Sums run in double. The sinusoidal table gives S[i, j] = s^2 sum_k cos((i - j) w_k):
// a function of i - j only, symmetric, decaying (with ripples) as |i - j| grows.
#pragma once

#include <string_view>

#include "posenc/analysis/matrix.h"

namespace posenc::analysis {

enum class ProximityKind { kDot, kCosine };

// "dot" | "cosine".
std::string_view proximity_kind_name(ProximityKind kind) noexcept;
// Throws "[proximity] kind must be dot or cosine, got 'x'".
ProximityKind parse_proximity_kind(std::string_view name);

// table [n, d] -> S [n, n]. Throws as validate_table("proximity", "table", ...).
Matrix proximity(const Matrix& table, ProximityKind kind);

}  // namespace posenc::analysis
