// The relative-vector modules: options checked once at construction, tensor
// shapes checked per call under the module's name, then the ops of
// relative_ops.h (whose Autograd kernels carry the gradients to q, probs and
// the tables). Inputs are widened to the compute dtype (exact) and the result
// rounded once, so a bfloat16 q never meets a rounded table.
#include "posenc/nn/relative_encodings.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "op_support.h"
#include "posenc/kernels/positions.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

using detail::dtype_name;

const char* bool_name(bool value) noexcept { return value ? "true" : "false"; }

void check_init_std(const std::string& op, double init_std) {
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", op, "] init_std must be finite and >= 0, got ",
                    init_std);
}

// A parameter of tables x rows x dim values must stay within the kernels'
// table limit; long double holds 2k+1 exactly for any int64 k.
void check_table_size(const std::string& op, const char* what, int64_t tables, long double rows, int64_t dim) {
  const long double values = static_cast<long double>(tables) * rows * static_cast<long double>(dim);
  std::ostringstream got;
  got << tables << " x " << std::fixed << std::setprecision(0) << rows << " x " << dim;
  TORCH_CHECK_VALUE(values <= static_cast<long double>(kernels::kMaxTableValues), "[", op, "] ", what,
                    " must have at most ", kernels::kMaxTableValues, " values, got ", got.str());
}

// 2k+1 rows for offsets -k..k.
long double rows_for(int64_t max_distance) { return 2.0L * static_cast<long double>(max_distance) + 1.0L; }

// [2k+1, Dh] shared, or [H, 2k+1, Dh] one per head.
std::vector<int64_t> table_shape(int64_t num_heads, int64_t rows, int64_t dim) {
  if (num_heads == 0) return {rows, dim};
  return {num_heads, rows, dim};
}

void check_max_distance(const std::string& op, int64_t max_distance) {
  TORCH_CHECK_VALUE(max_distance >= 0, "[", op, "] max_distance must be >= 0, got ", max_distance);
}

}  // namespace

// ---------------------------------------------------------------------------
// RelativeEncodingImpl

RelativeEncodingImpl::RelativeEncodingImpl(std::string name, int64_t num_heads, int64_t head_dim, bool shared_ok)
    : torch::nn::Module(std::move(name)), num_heads_(num_heads), head_dim_(head_dim) {
  if (shared_ok) {
    TORCH_CHECK_VALUE(num_heads >= 0, "[", this->name(),
                      "] num_heads must be >= 0 (0: one table shared by the heads), got ", num_heads);
  } else {
    TORCH_CHECK_VALUE(num_heads >= 1, "[", this->name(), "] num_heads must be >= 1, got ", num_heads);
  }
  TORCH_CHECK_VALUE(head_dim >= 1, "[", this->name(), "] head_dim must be >= 1, got ", head_dim);
}

at::Tensor RelativeEncodingImpl::values(const at::Tensor& /*probs*/) {
  TORCH_CHECK(false, "[", name(), "] has no value vectors");
}

void RelativeEncodingImpl::check_qk(const at::Tensor& q, const at::Tensor& k) const {
  TORCH_CHECK_VALUE(q.defined(), "[", name(), "] q must be a tensor, got None");
  TORCH_CHECK_VALUE(k.defined(), "[", name(), "] k must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_float_dtype(q.scalar_type()), "[", name(),
                   "] q must be float32, float64, bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type(), "[", name(), "] k must have q's dtype (",
                   dtype_name(q.scalar_type()), "), got ", dtype_name(k.scalar_type()));
  TORCH_CHECK_VALUE(q.dim() == 4, "[", name(), "] q must be 4-D (B, H, Tq, Dh), got ", q.dim(), "-D");
  TORCH_CHECK_VALUE(k.dim() == 4, "[", name(), "] k must be 4-D (B, H, Tk, Dh), got ", k.dim(), "-D");
  TORCH_CHECK_VALUE(q.size(3) == head_dim_, "[", name(), "] q must have head_dim = ", head_dim_,
                    " in its last dimension, got ", q.size(3));
  TORCH_CHECK_VALUE(num_heads_ == 0 || q.size(1) == num_heads_, "[", name(), "] q must have num_heads = ",
                    num_heads_, " heads, got ", q.size(1));
  TORCH_CHECK_VALUE(k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3), "[", name(),
                    "] k must have q's (B, H, Dh) = (", q.size(0), ", ", q.size(1), ", ", q.size(3), "), got (",
                    k.size(0), ", ", k.size(1), ", ", k.size(3), ")");
}

void RelativeEncodingImpl::check_probs(const at::Tensor& probs) const {
  TORCH_CHECK_VALUE(probs.defined(), "[", name(), "] probs must be a tensor, got None");
  TORCH_CHECK_TYPE(detail::is_float_dtype(probs.scalar_type()), "[", name(),
                   "] probs must be float32, float64, bfloat16 or float16, got ", probs.scalar_type());
  TORCH_CHECK_VALUE(probs.dim() == 4, "[", name(), "] probs must be 4-D (B, H, Tq, Tk), got ", probs.dim(), "-D");
  TORCH_CHECK_VALUE(num_heads_ == 0 || probs.size(1) == num_heads_, "[", name(), "] probs must have num_heads = ",
                    num_heads_, " heads, got ", probs.size(1));
}

at::ScalarType RelativeEncodingImpl::compute_dtype(const at::Tensor& input, const at::Tensor& param) noexcept {
  return input.scalar_type() == at::kDouble || param.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// ---------------------------------------------------------------------------
// ShawRelative

ShawRelativeImpl::ShawRelativeImpl(const ShawRelativeOptions& options)
    : RelativeEncodingImpl("ShawRelative", options.num_heads(), options.head_dim()), options_(options) {
  check_max_distance(name(), options.max_distance());
  check_init_std(name(), options.init_std());
  check_table_size(name(), "a table (tables x (2*max_distance+1) x head_dim)", std::max<int64_t>(num_heads(), 1),
                   rows_for(options.max_distance()), head_dim());
  const std::vector<int64_t> shape = table_shape(num_heads(), 2 * options.max_distance() + 1, head_dim());
  key_table_ = register_parameter("key_table", at::empty(shape));
  if (options.values()) value_table_ = register_parameter("value_table", at::empty(shape));
  reset_parameters();
}

void ShawRelativeImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  key_table_.normal_(0.0, options_.init_std());
  if (value_table_.defined()) value_table_.normal_(0.0, options_.init_std());
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk)
at::Tensor ShawRelativeImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  const at::ScalarType compute = compute_dtype(q, key_table_);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  return ops::relative_logits(q.to(compute), key_table_.to(compute), {options_.max_distance(), k_len - q_len}, k_len)
      .to(q.scalar_type());
}

// probs (B, H, Tq, Tk) -> (B, H, Tq, Dh)
at::Tensor ShawRelativeImpl::values(const at::Tensor& probs) {
  if (!options_.values()) return RelativeEncodingImpl::values(probs);
  check_probs(probs);
  const at::ScalarType compute = compute_dtype(probs, value_table_);
  const int64_t q_len = probs.size(2), k_len = probs.size(3);
  return ops::relative_values(probs.to(compute), value_table_.to(compute), {options_.max_distance(), k_len - q_len})
      .to(probs.scalar_type());
}

void ShawRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::ShawRelative(max_distance=" << options_.max_distance() << ", head_dim=" << head_dim()
         << ", num_heads=" << num_heads() << ", values=" << bool_name(options_.values())
         << ", init_std=" << options_.init_std() << ")";
}

// ---------------------------------------------------------------------------
// SinusoidalRelative

SinusoidalRelativeImpl::SinusoidalRelativeImpl(const SinusoidalRelativeOptions& options)
    : RelativeEncodingImpl("SinusoidalRelative", 0, options.head_dim()), options_(options) {
  check_max_distance(name(), options.max_distance());
  TORCH_CHECK_VALUE(options.head_dim() % 2 == 0, "[", name(), "] head_dim must be even, got ", options.head_dim());
  detail::translate_errors(
      [&] { kernels::validate(kernels::SinusoidalParams{head_dim(), options.base()}, "SinusoidalRelative"); });
  check_table_size(name(), "the table ((2*max_distance+1) x head_dim)", 1, rows_for(options.max_distance()),
                   head_dim());
  const at::Tensor omega = at::empty({head_dim() / 2});
  omega_ = options.learnable() ? register_parameter("omega", omega) : register_buffer("omega", omega);
  reset_parameters();
}

void SinusoidalRelativeImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  omega_.copy_(ops::sinusoidal_frequencies(head_dim(), options_.base()));
}

at::Tensor SinusoidalRelativeImpl::table(at::ScalarType compute) const {
  // Fixed and learnable read the same omega, so they agree at initialisation.
  return ops::sinusoidal_relative_table(options_.max_distance(), head_dim(), options_.base(), omega_.to(compute),
                                        compute);
}

at::Tensor SinusoidalRelativeImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  const at::ScalarType compute = compute_dtype(q, omega_);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  return ops::relative_logits(q.to(compute), table(compute), {options_.max_distance(), k_len - q_len}, k_len)
      .to(q.scalar_type());
}

at::Tensor SinusoidalRelativeImpl::values(const at::Tensor& probs) {
  if (!options_.values()) return RelativeEncodingImpl::values(probs);
  check_probs(probs);
  const at::ScalarType compute = compute_dtype(probs, omega_);
  const int64_t q_len = probs.size(2), k_len = probs.size(3);
  return ops::relative_values(probs.to(compute), table(compute), {options_.max_distance(), k_len - q_len})
      .to(probs.scalar_type());
}

void SinusoidalRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalRelative(max_distance=" << options_.max_distance() << ", head_dim=" << head_dim()
         << ", base=" << options_.base() << ", learnable=" << bool_name(options_.learnable())
         << ", values=" << bool_name(options_.values()) << ")";
}

// ---------------------------------------------------------------------------
// TransformerXLRelative

TransformerXLRelativeImpl::TransformerXLRelativeImpl(const TransformerXLOptions& options)
    : RelativeEncodingImpl("TransformerXLRelative", options.num_heads(), options.head_dim(), /*shared_ok=*/false),
      options_(options),
      model_dim_(options.model_dim()) {
  TORCH_CHECK_VALUE(options.model_dim() >= 0, "[", name(), "] model_dim must be >= 0 (0: num_heads*head_dim), got ",
                    options.model_dim());
  check_table_size(name(), "u and v (num_heads x head_dim)", 1, num_heads(), head_dim());
  if (model_dim_ == 0) model_dim_ = num_heads() * head_dim();
  TORCH_CHECK_VALUE(model_dim_ % 2 == 0, "[", name(), "] model_dim must be even (sines then cosines), got ",
                    model_dim_);
  detail::translate_errors([&] {
    kernels::validate(kernels::SinusoidalParams{model_dim_, options.base()}, "TransformerXLRelative");
  });
  check_init_std(name(), options.init_std());
  check_table_size(name(), "w_r (num_heads*head_dim x model_dim)", 1, num_heads() * head_dim(), model_dim_);
  u_ = register_parameter("u", at::empty({num_heads(), head_dim()}));
  v_ = register_parameter("v", at::empty({num_heads(), head_dim()}));
  w_r_ = register_parameter("w_r", at::empty({num_heads() * head_dim(), model_dim_}));
  reset_parameters();
}

void TransformerXLRelativeImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  for (at::Tensor* p : {&u_, &v_, &w_r_}) p->normal_(0.0, options_.init_std());
}

// -> [H, 2k+1, Dh]
at::Tensor TransformerXLRelativeImpl::table(int64_t max_distance, at::ScalarType compute) const {
  // R over positions -k..k (row m: position m - k), then flipped: row r holds R_{k-r}.
  const kernels::SinusoidalParams params{model_dim_, options_.base(), 1.0, kernels::SinusoidalLayout::kHalf};
  const at::Tensor r = ops::sinusoidal_range(-max_distance, 2 * max_distance + 1, params, compute).flip({0});
  // (2k+1, model_dim) x (model_dim, H*Dh) -> [2k+1, H, Dh] -> [H, 2k+1, Dh]
  return at::matmul(r, w_r_.to(compute).t())
      .view({2 * max_distance + 1, num_heads(), head_dim()})
      .permute({1, 0, 2})
      .contiguous();
}

// q (B, H, Tq, Dh), k (B, H, Tk, Dh) -> (B, H, Tq, Tk)
at::Tensor TransformerXLRelativeImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  const at::ScalarType compute = compute_dtype(q, w_r_);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  // Offsets j - i' run over -(Tk-1) .. Tq-1: this k reaches them all, so nothing is clipped.
  const int64_t max_distance = std::max<int64_t>(std::max(q_len, k_len) - 1, 0);
  const at::Tensor qc = q.to(compute);
  const at::Tensor kc = k.to(compute);
  const at::Tensor u = u_.to(compute), v = v_.to(compute);
  // u . k_j, the same for every query: (B, H, 1, Tk)
  const at::Tensor content = at::matmul(kc, u.unsqueeze(-1)).transpose(2, 3);
  const at::Tensor position = ops::relative_logits(qc + v.view({1, num_heads(), 1, head_dim()}),
                                                   table(max_distance, compute), {max_distance, k_len - q_len}, k_len);
  return (position + content).to(q.scalar_type());
}

void TransformerXLRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::TransformerXLRelative(num_heads=" << num_heads() << ", head_dim=" << head_dim()
         << ", model_dim=" << model_dim_ << ", base=" << options_.base() << ", init_std=" << options_.init_std()
         << ")";
}

// ---------------------------------------------------------------------------
// Relative2d

Relative2dImpl::Relative2dImpl(const Relative2dOptions& options)
    : RelativeEncodingImpl("Relative2d", options.num_heads(), options.head_dim()), options_(options) {
  TORCH_CHECK_VALUE(options.height() >= 1, "[", name(), "] height must be >= 1, got ", options.height());
  TORCH_CHECK_VALUE(options.width() >= 1, "[", name(), "] width must be >= 1, got ", options.width());
  check_init_std(name(), options.init_std());
  const int64_t tables = std::max<int64_t>(num_heads(), 1);
  check_table_size(name(), "table_h (tables x (2*height-1) x head_dim)", tables,
                   2.0L * static_cast<long double>(options.height()) - 1.0L, head_dim());
  check_table_size(name(), "table_w (tables x (2*width-1) x head_dim)", tables,
                   2.0L * static_cast<long double>(options.width()) - 1.0L, head_dim());
  table_h_ = register_parameter("table_h", at::empty(table_shape(num_heads(), 2 * options.height() - 1, head_dim())));
  table_w_ = register_parameter("table_w", at::empty(table_shape(num_heads(), 2 * options.width() - 1, head_dim())));
  reset_parameters();
}

void Relative2dImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  table_h_.normal_(0.0, options_.init_std());
  table_w_.normal_(0.0, options_.init_std());
}

// q, k (B, H, height*width, Dh) -> (B, H, HW, HW)
at::Tensor Relative2dImpl::logits(const at::Tensor& q, const at::Tensor& k) {
  check_qk(q, k);
  const int64_t cells = options_.height() * options_.width();
  TORCH_CHECK_VALUE(q.size(2) == cells && k.size(2) == cells, "[", name(),
                    "] q and k must both have height*width = ", cells, " positions, got ", q.size(2), " and ",
                    k.size(2));
  const at::ScalarType compute = compute_dtype(q, table_h_);
  return ops::relative_logits_2d(q.to(compute), table_h_.to(compute), table_w_.to(compute),
                                 {options_.height(), options_.width()})
      .to(q.scalar_type());
}

void Relative2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::Relative2d(height=" << options_.height() << ", width=" << options_.width()
         << ", head_dim=" << head_dim() << ", num_heads=" << num_heads() << ", init_std=" << options_.init_std()
         << ")";
}

// ---------------------------------------------------------------------------
// The attention terms (posenc/nn/attention_terms.h): the tables, never a (Tq, Tk) tensor.

void ShawRelativeImpl::add_terms(AttentionTerms& terms, int64_t /*q_len*/, int64_t /*k_len*/,
                                 at::ScalarType compute) {
  terms.rel_k = key_table_.to(compute);
  if (options_.values()) terms.rel_v = value_table_.to(compute);
  terms.max_distance = options_.max_distance();
}

void SinusoidalRelativeImpl::add_terms(AttentionTerms& terms, int64_t /*q_len*/, int64_t /*k_len*/,
                                       at::ScalarType compute) {
  const at::Tensor t = table(compute);  // one table for keys and values (NEZHA)
  terms.rel_k = t;
  if (options_.values()) terms.rel_v = t;
  terms.max_distance = options_.max_distance();
}

void TransformerXLRelativeImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len,
                                          at::ScalarType compute) {
  // Every offset has its own vector: K reaches -(Tk-1) .. Tq-1.
  const int64_t max_distance = std::max<int64_t>(std::max(q_len, k_len) - 1, 0);
  terms.rel_k = table(max_distance, compute);
  terms.max_distance = max_distance;
  terms.content_shift = u_.to(compute);
  terms.relative_shift = v_.to(compute);
}

void Relative2dImpl::add_terms(AttentionTerms& terms, int64_t q_len, int64_t k_len, at::ScalarType compute) {
  const int64_t cells = options_.height() * options_.width();
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", name(), "] q and k must both have height*width = ", cells,
                    " positions, got ", q_len, " and ", k_len);
  terms.grid_h = table_h_.to(compute);
  terms.grid_w = table_w_.to(compute);
  terms.grid_height = options_.height();
  terms.grid_width = options_.width();
}

}  // namespace posenc::nn
