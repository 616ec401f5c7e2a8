// The naive encodings the tutorials derive the sinusoid from. Each is [N, D]:
//   index:         PE[p, j] = p
//   normalized:    PE[p, j] = p / (L-1)          (L = params.length; 0 when L = 1)
//   binary:        PE[p, j] = bit j of p          (least significant first; p >= 0)
//   signed-binary: PE[p, j] = 2*bit_j(p) - 1      (p >= 0)
//   sine-binary:   PE[p, j] = sin(p * pi / 2^(j+1)), the continuous "dials"
//   sine-only:     PE[p, j] = sin(p * omega_j), omega_j = base^(-j/D): no cosines,
//                  hence no linear translation operator.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/kernels/positions.h"

namespace posenc::kernels {

enum class NaiveKind { kIndex, kNormalized, kBinary, kSignedBinary, kSineBinary, kSineOnly };

struct NaiveParams {
  NaiveKind kind = NaiveKind::kIndex;
  int64_t dim = 0;
  int64_t length = 0;     // normalized only: L >= 1 (callers default it to N)
  double base = 10000.0;  // sine-only only
};

// "index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only".
std::string_view naive_kind_name(NaiveKind kind) noexcept;

void validate(const NaiveParams& params, const Positions& positions);

template <class T>
void naive_table(const NaiveParams& params, const Positions& positions, std::span<T> out);

}  // namespace posenc::kernels
