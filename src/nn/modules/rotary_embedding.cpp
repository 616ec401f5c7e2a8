// The rotary modules: checks at construction, then per forward one cos/sin
// table (from the cache when the positions allow) shared by q and k, and
// the rotation op, whose Autograd kernel carries the gradients.
#include "posenc/nn/rotary_embedding.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "op_support.h"
#include "posenc/kernels/rope_axes.h"
#include "posenc/nn/ops.h"
#include "ops/rope/support.h"

namespace posenc::nn {
namespace {

// R, validated against D and the layout ("[RotaryEmbedding] rotary_dim must be even, got 7").
int64_t checked_rotary_dim(const char* op, int64_t head_dim, int64_t rotary_dim, kernels::RopeLayout layout) {
  const int64_t r = rotary_dim == 0 ? head_dim : rotary_dim;
  detail::translate_errors([&] { kernels::validate(kernels::RopeApplyParams{head_dim, r, layout, false}, op); });
  return r;
}

// q and k: floating (..., T, D) with D = head_dim.
void check_qk(const std::string& op, int64_t head_dim, const at::Tensor& q, const at::Tensor& k) {
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"q", &q}, {"k", &k}}) {
    detail::check_rope_input(op, name, *t);
    TORCH_CHECK_VALUE(t->size(-1) == head_dim, "[", op, "] ", name, " must have head_dim = ", head_dim,
                      " channels in its last dimension, got shape ", detail::shape_string(t->sizes()));
  }
}

// Rotates q and k by the tables `tables(compute)`, computed once per compute dtype.
template <class Tables>
std::tuple<at::Tensor, at::Tensor> rotate_both(const at::Tensor& q, const at::Tensor& k, kernels::RopeLayout layout,
                                               Tables&& tables) {
  const at::ScalarType q_compute = detail::compute_dtype(q.scalar_type());
  const at::ScalarType k_compute = detail::compute_dtype(k.scalar_type());
  const auto [q_cos, q_sin] = tables(q_compute);
  at::Tensor q_out = ops::rope_rotate(q, q_cos, q_sin, layout);
  if (k_compute == q_compute) return {q_out, ops::rope_rotate(k, q_cos, q_sin, layout)};
  const auto [k_cos, k_sin] = tables(k_compute);
  return {q_out, ops::rope_rotate(k, k_cos, k_sin, layout)};
}

kernels::RopeConfig cache_config(const RotaryEmbeddingOptions& o, int64_t rotary_dim) {
  return kernels::RopeConfig{rotary_dim, o.base(), o.scaling(), o.precision()};
}

template <class T>
kernels::RopeCache<T> make_cache(const kernels::RopeConfig& config) {
  return detail::translate_errors([&] { return kernels::RopeCache<T>(config); });
}

// Rows `p` (int64, values in [0, length)) of the cache, p.shape + [R/2].
template <class T>
std::pair<at::Tensor, at::Tensor> gather(kernels::RopeCache<T>& cache, int64_t seq_len, const at::Tensor& p) {
  detail::translate_errors([&] { cache.ensure(seq_len); });
  const int64_t half = cache.config().dim / 2;
  const auto options = at::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  const at::Tensor index = p.reshape({-1});
  const std::vector<int64_t> sizes = detail::table_sizes(p.sizes(), half);
  // from_blob only reads: the rows are copied out before the cache can change.
  const at::Tensor cos = at::from_blob(const_cast<T*>(cache.cos().data()), {cache.length(), half}, options);
  const at::Tensor sin = at::from_blob(const_cast<T*>(cache.sin().data()), {cache.length(), half}, options);
  return {cos.index_select(0, index).reshape(sizes), sin.index_select(0, index).reshape(sizes)};
}

}  // namespace

// ---------------------------------------------------------------------------
// RotaryEmbedding

RotaryEmbeddingImpl::RotaryEmbeddingImpl(const RotaryEmbeddingOptions& options)
    : torch::nn::Module("RotaryEmbedding"),
      options_(options),
      rotary_dim_(checked_rotary_dim("RotaryEmbedding", options.head_dim(), options.rotary_dim(), options.layout())),
      cache_float_(make_cache<float>(cache_config(options, rotary_dim_))),
      cache_double_(make_cache<double>(cache_config(options, rotary_dim_))) {
  const bool scaled = options.scaling().type != kernels::RopeType::kDefault;
  const bool xpos = options.xpos_scale_base() != 0.0;
  const std::string_view type = kernels::rope_type_name(options.scaling().type);
  TORCH_CHECK_VALUE(!options.learned_frequencies() || !scaled, "[RotaryEmbedding] learned_frequencies start from ",
                    "base^(-2i/R) and take no scaling, got rope_type '", type, "'");
  TORCH_CHECK_VALUE(!xpos || !scaled, "[RotaryEmbedding] xPos uses the unscaled frequencies, got rope_type '", type,
                    "'");
  TORCH_CHECK_VALUE(!xpos || !options.learned_frequencies(),
                    "[RotaryEmbedding] xPos and learned_frequencies cannot be combined");
  TORCH_CHECK_VALUE(!options.seq_len() || *options.seq_len() >= 1, "[RotaryEmbedding] seq_len must be at least 1, got ",
                    options.seq_len().value_or(0));
  if (options.learned_frequencies()) {
    omega_ = register_parameter("omega", at::empty({rotary_dim_ / 2}));
    reset_parameters();
  }
}

void RotaryEmbeddingImpl::reset_parameters() {
  if (!omega_.defined()) return;
  at::NoGradGuard no_grad;
  omega_.copy_(ops::rope_inv_freq(rotary_dim_, options_.base()).first);
}

std::pair<at::Tensor, at::Tensor> RotaryEmbeddingImpl::cos_sin(const at::Tensor& positions, at::ScalarType compute) {
  const at::Tensor p = detail::int64_positions(name(), positions);
  const bool any = p.numel() > 0;
  const int64_t first = any ? p.min().item<int64_t>() : 0;
  const int64_t last = any ? p.max().item<int64_t>() : 0;
  const std::optional<int64_t> fixed = options_.seq_len();
  if (!any || first < 0 || (fixed && last >= *fixed)) {
    // Outside what a cache of [0, seq_len) holds: straight from the table op.
    ops::RopeOptions o;
    o.base = options_.base();
    o.scaling = options_.scaling();
    o.seq_len = fixed;
    o.precision = options_.precision();
    return ops::rope_cos_sin(p, rotary_dim_, o, compute);
  }
  const int64_t seq_len = fixed.value_or(last + 1);
  const std::lock_guard<std::mutex> lock(*cache_mutex_);
  return compute == at::kDouble ? gather(cache_double_, seq_len, p) : gather(cache_float_, seq_len, p);
}

std::tuple<at::Tensor, at::Tensor> RotaryEmbeddingImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& positions) {
  check_qk(name(), options_.head_dim(), q, k);
  const at::Tensor p = detail::int64_positions(name(), positions);
  detail::rows_batch(name(), {}, q, p.sizes(), p.sizes());
  detail::rows_batch(name(), {}, k, p.sizes(), p.sizes());
  if (omega_.defined()) {
    ops::RopeOptions o;
    o.rotary_dim = rotary_dim_;
    o.layout = options_.layout();
    o.precision = options_.precision();
    return {ops::rope_learned(q, p, omega_.to(detail::compute_dtype(q.scalar_type())), o),
            ops::rope_learned(k, p, omega_.to(detail::compute_dtype(k.scalar_type())), o)};
  }
  if (options_.xpos_scale_base() != 0.0) {
    ops::XposOptions o;
    o.scale_base = options_.xpos_scale_base();
    o.gamma = options_.xpos_gamma();
    o.center = options_.xpos_center();
    o.rotary_dim = rotary_dim_;
    o.base = options_.base();
    o.layout = options_.layout();
    o.precision = options_.precision();
    const auto [q_out, k_out] = ops::xpos(q, k, p, o);
    return {q_out, k_out};
  }
  return rotate_both(q, k, options_.layout(), [&](at::ScalarType compute) { return cos_sin(p, compute); });
}

void RotaryEmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::RotaryEmbedding(head_dim=" << options_.head_dim() << ", rotary_dim=" << rotary_dim_
         << ", base=" << options_.base() << ", layout=" << kernels::rope_layout_name(options_.layout())
         << ", rope_type=" << kernels::rope_type_name(options_.scaling().type)
         << ", precision=" << kernels::precision_name(options_.precision());
  if (omega_.defined()) stream << ", learned_frequencies=true";
  if (options_.xpos_scale_base() != 0.0) stream << ", xpos_scale_base=" << options_.xpos_scale_base();
  stream << ")";
}

// ---------------------------------------------------------------------------
// RotaryEmbeddingAxial

RotaryEmbeddingAxialImpl::RotaryEmbeddingAxialImpl(const RotaryEmbeddingAxialOptions& options)
    : torch::nn::Module("RotaryEmbeddingAxial"),
      options_(options),
      rotary_dim_(
          checked_rotary_dim("RotaryEmbeddingAxial", options.head_dim(), options.rotary_dim(), options.layout())) {
  if (!options.dims_per_axis().empty()) {
    detail::translate_errors(
        [&] { kernels::validate_axial_dims(options.dims_per_axis(), rotary_dim_, "RotaryEmbeddingAxial"); });
  }
}

std::tuple<at::Tensor, at::Tensor> RotaryEmbeddingAxialImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                     const at::Tensor& coords) {
  check_qk(name(), options_.head_dim(), q, k);
  const at::Tensor c = detail::int64_positions(name(), coords);
  const std::string n_axes = c.dim() >= 2 ? std::to_string(c.size(-1)) : "n_axes";
  const detail::RowsShape shape("coords", "", ", n_axes", ", " + n_axes);
  const at::IntArrayRef rows = c.dim() >= 2 ? c.sizes().slice(0, c.dim() - 1) : at::IntArrayRef();
  detail::rows_batch(name(), shape, q, rows, c.sizes());
  detail::rows_batch(name(), shape, k, rows, c.sizes());
  ops::RopeAxialOptions o;
  o.dims_per_axis = options_.dims_per_axis();
  o.base = options_.base();
  o.scaling = options_.scaling();
  o.seq_len = options_.seq_len();
  o.precision = options_.precision();
  return rotate_both(q, k, options_.layout(),
                     [&](at::ScalarType compute) { return ops::rope_axial_cos_sin(c, rotary_dim_, o, compute); });
}

void RotaryEmbeddingAxialImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::RotaryEmbeddingAxial(head_dim=" << options_.head_dim() << ", rotary_dim=" << rotary_dim_
         << ", dims_per_axis=" << at::IntArrayRef(options_.dims_per_axis()) << ", base=" << options_.base()
         << ", layout=" << kernels::rope_layout_name(options_.layout()) << ")";
}

// ---------------------------------------------------------------------------
// MultimodalRotaryEmbedding

MultimodalRotaryEmbeddingImpl::MultimodalRotaryEmbeddingImpl(const MultimodalRotaryEmbeddingOptions& options)
    : torch::nn::Module("MultimodalRotaryEmbedding"),
      options_(options),
      rotary_dim_(checked_rotary_dim("MultimodalRotaryEmbedding", options.head_dim(), options.rotary_dim(),
                                     options.layout())) {
  // The sections and the scaling, checked now rather than at the first forward.
  detail::translate_errors([&] {
    kernels::mrope_frequencies(rotary_dim_, options.base(), options.scaling(), options.mrope_section(),
                               options.interleaved(), options.seq_len(), "MultimodalRotaryEmbedding");
  });
}

std::tuple<at::Tensor, at::Tensor> MultimodalRotaryEmbeddingImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                          const at::Tensor& positions3) {
  check_qk(name(), options_.head_dim(), q, k);
  const at::Tensor p = detail::int64_positions(name(), positions3);
  const bool three = p.dim() >= 2 && p.size(0) == 3;
  const detail::RowsShape shape("positions", "3, ");
  detail::rows_batch(name(), shape, q, three ? p.sizes().slice(1) : at::IntArrayRef(), p.sizes());
  detail::rows_batch(name(), shape, k, three ? p.sizes().slice(1) : at::IntArrayRef(), p.sizes());
  ops::MRopeOptions o;
  o.mrope_section = options_.mrope_section();
  o.interleaved = options_.interleaved();
  o.base = options_.base();
  o.scaling = options_.scaling();
  o.seq_len = options_.seq_len();
  o.precision = options_.precision();
  return rotate_both(q, k, options_.layout(),
                     [&](at::ScalarType compute) { return ops::mrope_cos_sin(p, rotary_dim_, o, compute); });
}

void MultimodalRotaryEmbeddingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::MultimodalRotaryEmbedding(head_dim=" << options_.head_dim() << ", rotary_dim=" << rotary_dim_
         << ", mrope_section=" << at::IntArrayRef(options_.mrope_section())
         << ", interleaved=" << (options_.interleaved() ? "true" : "false") << ", base=" << options_.base()
         << ", layout=" << kernels::rope_layout_name(options_.layout()) << ")";
}

}  // namespace posenc::nn
