// CPU kernels of the analysis ops (schemas.cpp): each converts its tensor to
// a float64 matrix once and calls posenc::analysis, which validates the
// values (non-empty, finite, square) and the options with its own messages.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "posenc/analysis/indicators.h"
#include "posenc/analysis/monotone_range.h"
#include "posenc/analysis/probes.h"
#include "posenc/analysis/proximity.h"
#include "posenc/analysis/translation_fit.h"

namespace posenc::analysis_torch {
namespace {

// The analysis layer takes the seed as uint64; Python passes an int.
uint64_t seed_of(std::string_view op, int64_t seed) {
  TORCH_CHECK_VALUE(seed >= 0, "[", op, "] seed must be >= 0, got ", seed);
  return static_cast<uint64_t>(seed);
}

// table [n, d] -> S [n, n] float64
at::Tensor proximity(const at::Tensor& table, c10::string_view kind) {
  return translate_errors([&] {
    const analysis::ProximityKind k = analysis::parse_proximity_kind(to_std(kind));
    return tensor_of(analysis::proximity(matrix_of("proximity", "table", table), k));
  });
}

std::tuple<double, double, double, double, double, int64_t> indicators(const at::Tensor& matrix,
                                                                       c10::optional<int64_t> window) {
  return translate_errors([&] {
    const analysis::Indicators r = analysis::indicators(
        matrix_of("indicators", "matrix", matrix), window ? std::optional<int64_t>(*window) : std::nullopt);
    return std::make_tuple(r.monotonicity, r.translation_invariance, r.symmetry, r.monotonicity_violation_rate,
                           r.within_diagonal_variance_share, r.window);
  });
}

std::tuple<int64_t, bool, int64_t, int64_t, double, int64_t, at::Tensor> monotone_range(const at::Tensor& matrix) {
  return translate_errors([&] {
    const analysis::MonotoneRange r = analysis::monotone_range(matrix_of("monotone range", "matrix", matrix));
    at::Tensor per_row = at::empty({static_cast<int64_t>(r.per_row.size())}, at::TensorOptions().dtype(at::kLong));
    std::copy(r.per_row.begin(), r.per_row.end(), per_row.data_ptr<int64_t>());
    return std::make_tuple(r.range, r.all_censored, r.min, r.max, r.mean, r.uncensored_rows, per_row);
  });
}

std::tuple<std::string, std::vector<int64_t>, std::vector<double>, double> translation_residual(
    const at::Tensor& table, at::OptionalIntArrayRef deltas, int64_t folds, int64_t seed) {
  return translate_errors([&] {
    const uint64_t s = seed_of("translation", seed);
    const analysis::Matrix m = matrix_of("translation", "table", table);
    const std::vector<int64_t> d =
        deltas.has_value() ? std::vector<int64_t>(deltas->begin(), deltas->end()) : analysis::default_deltas(m.rows);
    analysis::TranslationResidual r = analysis::translation_residual_fitted(m, d, folds, s);
    return std::make_tuple(std::move(r.method), std::move(r.deltas), std::move(r.residuals), r.max_residual);
  });
}

std::tuple<double, double, int64_t, int64_t, int64_t, std::string> probe(const at::Tensor& table, int64_t folds,
                                                                         int64_t seed, c10::optional<int64_t> pairs,
                                                                         c10::string_view protocol) {
  return translate_errors([&] {
    analysis::ProbeOptions options;
    options.protocol = analysis::parse_probe_protocol(to_std(protocol));
    options.folds = folds;
    options.seed = seed_of("probe", seed);
    if (pairs) options.pairs = *pairs;  // None: the protocol's default (4096, or 512 for pe-study)
    const analysis::ProbeResult r = analysis::probe(matrix_of("probe", "table", table), options);
    return std::make_tuple(r.absolute_mae, r.relative_error, r.folds, static_cast<int64_t>(r.seed), r.pairs,
                           analysis::probe_protocol_name(r.protocol));
  });
}

// The results describe a matrix; they are not functions of it to differentiate. Registered for the
// Autograd key as well, they never require grad: torch 2's default autograd fallback would otherwise
// give them a grad_fn that only warns (torch 1.13's left them alone).
template <auto F>
struct WithoutAutograd;
template <class R, class... A, R (*F)(A...)>
struct WithoutAutograd<F> {
  static R call(A... args) {
    const at::AutoDispatchBelowADInplaceOrView below;
    const at::NoGradGuard no_grad;
    return F(args...);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(posenc, Autograd, m) {
  m.impl("proximity", &WithoutAutograd<&proximity>::call);
  m.impl("indicators", &WithoutAutograd<&indicators>::call);
  m.impl("monotone_range", &WithoutAutograd<&monotone_range>::call);
  m.impl("translation_residual", &WithoutAutograd<&translation_residual>::call);
  m.impl("probe", &WithoutAutograd<&probe>::call);
}

TORCH_LIBRARY_IMPL(posenc, CPU, m) {
  m.impl("proximity", proximity);
  m.impl("indicators", indicators);
  m.impl("monotone_range", monotone_range);
  m.impl("translation_residual", translation_residual);
  m.impl("probe", probe);
}

}  // namespace posenc::analysis_torch
