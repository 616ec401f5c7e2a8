// Registry of the absolute table kinds computed from parameters alone
// (sinusoidal and the naive ones): one entry point for the CLI, the torch
// op and the Python `posenc.absolute`. Learned tables and learnable
// frequencies take tensors and live in learned.h / learnable_sinusoidal.h;
// the 2D/3D grids in sinusoidal_nd.h.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "posenc/kernels/naive.h"
#include "posenc/kernels/sinusoidal.h"

namespace posenc::kernels {

enum class AbsoluteKind { kSinusoidal, kIndex, kNormalized, kBinary, kSignedBinary, kSineBinary, kSineOnly };

struct AbsoluteKindInfo {
  AbsoluteKind kind;
  std::string_view name;     // "sinusoidal", "index", ... as used on the CLI and in Python
  std::string_view summary;  // one line with the formula
};

std::span<const AbsoluteKindInfo> absolute_kinds() noexcept;
// Throws "[absolute] kind must be one of sinusoidal, index, ..., got 'x'".
AbsoluteKind parse_absolute_kind(std::string_view name);
std::string_view absolute_kind_name(AbsoluteKind kind) noexcept;

struct AbsoluteParams {
  AbsoluteKind kind = AbsoluteKind::kSinusoidal;
  int64_t dim = 0;
  double base = 10000.0;
  double scale = 1.0;    // sinusoidal amplitude
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  Precision precision = Precision::kExact;
  int64_t length = 0;    // normalized: L >= 1; 0 means positions.count
};

// Throws on any parameter the kind cannot take (before any output is touched).
void validate(const AbsoluteParams& params, const Positions& positions);

template <class T>
void absolute_table(const AbsoluteParams& params, const Positions& positions, std::span<T> out);

}  // namespace posenc::kernels
