#include "posenc/kernels/absolute.h"

#include <array>
#include <string>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

constexpr std::array<AbsoluteKindInfo, 7> kKinds{{
    {AbsoluteKind::kSinusoidal, "sinusoidal", "sin/cos(p * base^(-2i/D)) pairs (Vaswani et al. 2017)"},
    {AbsoluteKind::kIndex, "index", "p in every column"},
    {AbsoluteKind::kNormalized, "normalized", "p / (L-1) in every column"},
    {AbsoluteKind::kBinary, "binary", "bit j of p in column j, least significant first"},
    {AbsoluteKind::kSignedBinary, "signed-binary", "2 * bit_j(p) - 1"},
    {AbsoluteKind::kSineBinary, "sine-binary", "sin(p * pi / 2^(j+1)), the continuous bits"},
    {AbsoluteKind::kSineOnly, "sine-only", "sin(p * base^(-j/D)), no cosines and no linear translation"},
}};

NaiveKind to_naive(AbsoluteKind kind) {
  switch (kind) {
    case AbsoluteKind::kIndex: return NaiveKind::kIndex;
    case AbsoluteKind::kNormalized: return NaiveKind::kNormalized;
    case AbsoluteKind::kBinary: return NaiveKind::kBinary;
    case AbsoluteKind::kSignedBinary: return NaiveKind::kSignedBinary;
    case AbsoluteKind::kSineBinary: return NaiveKind::kSineBinary;
    case AbsoluteKind::kSineOnly: return NaiveKind::kSineOnly;
    case AbsoluteKind::kSinusoidal: break;
  }
  fail_argument("absolute", "kind 'sinusoidal' is not a naive kind");
}

}  // namespace

std::span<const AbsoluteKindInfo> absolute_kinds() noexcept { return kKinds; }

AbsoluteKind parse_absolute_kind(std::string_view name) {
  std::string known;
  for (const AbsoluteKindInfo& info : kKinds) {
    if (info.name == name) return info.kind;
    known += known.empty() ? "" : ", ";
    known += info.name;
  }
  fail_argument("absolute", "kind must be one of ", known, ", got '", name, "'");
}

std::string_view absolute_kind_name(AbsoluteKind kind) noexcept {
  for (const AbsoluteKindInfo& info : kKinds) {
    if (info.kind == kind) return info.name;
  }
  return "?";
}

namespace {
SinusoidalParams sinusoidal_params(const AbsoluteParams& p) {
  return SinusoidalParams{p.dim, p.base, p.scale, p.layout, p.precision};
}
NaiveParams naive_params(const AbsoluteParams& p, const Positions& positions) {
  // Only 0 means "the number of positions"; a negative length is refused by the naive validation.
  return NaiveParams{to_naive(p.kind), p.dim, p.length == 0 ? positions.count : p.length, p.base};
}
}  // namespace

void validate(const AbsoluteParams& params, const Positions& positions) {
  if (params.kind == AbsoluteKind::kSinusoidal) {
    validate(sinusoidal_params(params));
    validate_table_size("sinusoidal", positions, params.dim);
  } else {
    validate(naive_params(params, positions), positions);
  }
}

template <class T>
void absolute_table(const AbsoluteParams& params, const Positions& positions, std::span<T> out) {
  if (params.kind == AbsoluteKind::kSinusoidal) {
    sinusoidal_table(sinusoidal_params(params), positions, out);
  } else {
    naive_table(naive_params(params, positions), positions, out);
  }
}

template void absolute_table<float>(const AbsoluteParams&, const Positions&, std::span<float>);
template void absolute_table<double>(const AbsoluteParams&, const Positions&, std::span<double>);

}  // namespace posenc::kernels
