// Calls into the posenc ops through the dispatcher, with the schemas' own
// argument types (ops/schemas.cpp). The autograd kernels, the routing ops and
// the public C++ API (posenc/nn/*_ops.h) go through these, so every call sees
// the registered Autograd and CPU kernels.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/List.h>

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ops/rope/support.h"

namespace posenc::nn::dispatch {

at::Tensor sinusoidal(const at::Tensor& positions, int64_t dim, double base, double scale, c10::string_view layout,
                      c10::string_view precision, c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_range(int64_t start, int64_t count, int64_t dim, double base, double scale,
                            c10::string_view layout, c10::string_view precision,
                            c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_frequencies(int64_t dim, double base);

at::Tensor absolute_table(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype);
at::Tensor absolute_table_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                                double scale, c10::string_view layout, c10::string_view precision,
                                int64_t length, c10::optional<at::ScalarType> dtype);
at::Tensor absolute(c10::string_view kind, const at::Tensor& positions, int64_t dim, double base, double scale,
                    c10::string_view layout, c10::string_view precision, int64_t length,
                    c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                    const c10::optional<at::Tensor>& omega);
at::Tensor absolute_range(c10::string_view kind, int64_t start, int64_t count, int64_t dim, double base,
                          double scale, c10::string_view layout, c10::string_view precision, int64_t length,
                          c10::optional<at::ScalarType> dtype, const c10::optional<at::Tensor>& table,
                          const c10::optional<at::Tensor>& omega);
std::vector<std::string> absolute_kinds();

at::Tensor learnable_sinusoidal(const at::Tensor& positions, const at::Tensor& omega, c10::string_view layout,
                                double scale);
at::Tensor learnable_sinusoidal_backward(const at::Tensor& grad_out, const at::Tensor& positions,
                                         const at::Tensor& omega, c10::string_view layout, double scale);

at::Tensor learned(const at::Tensor& table, const at::Tensor& positions);
at::Tensor learned_backward(const at::Tensor& grad_out, const at::Tensor& positions, int64_t rows);

at::Tensor sinusoidal_2d(int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype);
at::Tensor sinusoidal_3d(int64_t frames, int64_t height, int64_t width, int64_t dim, double base, double scale,
                         c10::string_view layout, c10::string_view precision, bool normalize, double normalize_scale,
                         c10::optional<at::ScalarType> dtype);
at::Tensor translation_matrix(double delta, int64_t dim, double base, c10::string_view layout);

// RoPE (ops/rope/; implemented in ops/rope/api.cpp).
using detail::ScalingArg;
using detail::ScalingListArg;
using Tables = std::tuple<at::Tensor, at::Tensor>;

std::vector<std::string> rope_scaling_keys();
std::tuple<at::Tensor, double> rope_inv_freq(int64_t dim, double base, const ScalingArg& scaling,
                                             c10::optional<int64_t> seq_len);
Tables rope_cos_sin(const at::Tensor& positions, int64_t dim, double base, const ScalingArg& scaling,
                    c10::optional<int64_t> seq_len, c10::string_view precision, c10::optional<at::ScalarType> dtype);
Tables rope_cos_sin_range(int64_t start, int64_t count, int64_t dim, double base, const ScalingArg& scaling,
                          c10::optional<int64_t> seq_len, c10::string_view precision,
                          c10::optional<at::ScalarType> dtype);
Tables rope_axial_cos_sin(const at::Tensor& coords, int64_t rotary_dim, at::IntArrayRef dims_per_axis, double base,
                          const ScalingListArg& scaling, at::OptionalIntArrayRef seq_len,
                          c10::string_view precision, c10::optional<at::ScalarType> dtype);
Tables mrope_cos_sin(const at::Tensor& positions3, int64_t rotary_dim, at::IntArrayRef mrope_section,
                     bool interleaved, double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                     c10::string_view precision, c10::optional<at::ScalarType> dtype);
Tables xpos_cos_sin(const at::Tensor& positions, int64_t rotary_dim, double scale_base, double gamma,
                    double center, bool keys, double base, c10::string_view precision,
                    c10::optional<at::ScalarType> dtype);
Tables rope_rerotate_cos_sin(const at::Tensor& from_positions, const at::Tensor& to_positions, int64_t dim,
                             double base, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                             c10::optional<double> to_base, const ScalingArg& to_scaling,
                             c10::optional<int64_t> to_seq_len, c10::string_view precision,
                             c10::optional<at::ScalarType> dtype);

at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                       bool inverse);
at::Tensor& rope_rotate_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, c10::string_view layout,
                         bool inverse);
at::Tensor rope_rotate_omega(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                             c10::string_view layout, bool inverse, c10::string_view precision);
at::Tensor& rope_rotate_omega_(at::Tensor& x, const at::Tensor& positions, const at::Tensor& omega,
                               c10::string_view layout, bool inverse, c10::string_view precision);
std::tuple<at::Tensor, at::Tensor> rope_rotate_omega_backward(const at::Tensor& grad, const at::Tensor& x,
                                                              const at::Tensor& positions, const at::Tensor& omega,
                                                              c10::string_view layout, bool inverse,
                                                              c10::string_view precision,
                                                              std::array<bool, 2> output_mask);

at::Tensor rope(const at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega);
at::Tensor& rope_(at::Tensor& x, const at::Tensor& positions, double base, c10::string_view layout,
                  c10::optional<int64_t> rotary_dim, const ScalingArg& scaling, c10::optional<int64_t> seq_len,
                  bool inverse, c10::string_view precision, const c10::optional<at::Tensor>& omega);
at::Tensor rope_axial(const at::Tensor& x, const at::Tensor& coords, at::IntArrayRef dims_per_axis, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingListArg& scaling,
                      at::OptionalIntArrayRef seq_len, bool inverse, c10::string_view precision);
at::Tensor mrope(const at::Tensor& x, const at::Tensor& positions3, at::IntArrayRef mrope_section, bool interleaved,
                 double base, c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                 c10::optional<int64_t> seq_len, bool inverse, c10::string_view precision);
std::tuple<at::Tensor, at::Tensor> xpos(const at::Tensor& q, const at::Tensor& k, const at::Tensor& positions,
                                        double scale_base, double gamma, double center, double base,
                                        c10::string_view layout, c10::optional<int64_t> rotary_dim,
                                        c10::string_view precision);
at::Tensor rerotate(const at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions,
                    double base, c10::string_view layout, c10::optional<int64_t> rotary_dim,
                    const ScalingArg& scaling, c10::optional<int64_t> seq_len, c10::optional<double> to_base,
                    const ScalingArg& to_scaling, c10::optional<int64_t> to_seq_len, c10::string_view precision);
at::Tensor& rerotate_(at::Tensor& k, const at::Tensor& from_positions, const at::Tensor& to_positions, double base,
                      c10::string_view layout, c10::optional<int64_t> rotary_dim, const ScalingArg& scaling,
                      c10::optional<int64_t> seq_len, c10::optional<double> to_base, const ScalingArg& to_scaling,
                      c10::optional<int64_t> to_seq_len, c10::string_view precision);

// Relative position vectors (ops/relative/; implemented in
// ops/relative/api.cpp).
at::Tensor relative_logits(const at::Tensor& q, const at::Tensor& table, int64_t max_distance,
                           c10::optional<int64_t> k_len, int64_t query_offset);
at::Tensor relative_values(const at::Tensor& probs, const at::Tensor& table, int64_t max_distance,
                           int64_t query_offset);
at::Tensor relative_table_grad(const at::Tensor& weights, const at::Tensor& x, int64_t max_distance, int64_t tables,
                               int64_t query_offset);
at::Tensor relative_2d_expand(const at::Tensor& rel_h, const at::Tensor& rel_w, int64_t height, int64_t width);
std::tuple<at::Tensor, at::Tensor> relative_2d_reduce(const at::Tensor& grad, int64_t height, int64_t width);
at::Tensor relative_logits_2d(const at::Tensor& q, const at::Tensor& table_h, const at::Tensor& table_w,
                              int64_t height, int64_t width);
at::Tensor sinusoidal_relative_table(int64_t max_distance, int64_t dim, double base,
                                     const c10::optional<at::Tensor>& omega, c10::string_view layout,
                                     c10::optional<at::ScalarType> dtype);

// Attention biases (ops/bias/; implemented in ops/bias/api.cpp).
at::Tensor alibi_slopes(int64_t num_heads, c10::optional<at::ScalarType> dtype);
at::Tensor alibi_bias(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal,
                      c10::optional<at::ScalarType> dtype);
at::Tensor& alibi_bias_out(int64_t num_heads, int64_t q_len, int64_t k_len, bool causal, at::Tensor& out);
at::Tensor alibi_bias_2d(int64_t num_heads, int64_t height, int64_t width, c10::string_view distance,
                         c10::optional<at::ScalarType> dtype);
at::Tensor t5_bucket(const at::Tensor& relative_position, bool bidirectional, int64_t num_buckets,
                     int64_t max_distance);
at::Tensor t5_bias(const at::Tensor& table, int64_t q_len, int64_t k_len, bool bidirectional, int64_t max_distance);
at::Tensor t5_bias_backward(const at::Tensor& grad, int64_t num_buckets, bool bidirectional, int64_t max_distance);
at::Tensor t5_bias_2d(const at::Tensor& table_h, const at::Tensor& table_w, int64_t height, int64_t width,
                      bool bidirectional, int64_t max_distance);
std::tuple<at::Tensor, at::Tensor> t5_bias_2d_backward(const at::Tensor& grad, int64_t num_buckets, int64_t height,
                                                       int64_t width, bool bidirectional, int64_t max_distance);

}  // namespace posenc::nn::dispatch

// ---- Attention (ops/attention/; checks in ops/attention/api.cpp) ----
namespace posenc::nn {
struct AttentionTerms;
struct AttentionCall;
}  // namespace posenc::nn
namespace posenc::nn::detail {
struct TermSpecObject;
using TermSpecArg = c10::intrusive_ptr<TermSpecObject>;
}  // namespace posenc::nn::detail

namespace posenc::nn::dispatch {

// terms: the term list of `spec` (posenc/nn/attention_terms.h).
std::tuple<at::Tensor, at::Tensor> attention_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                   at::TensorList terms, const detail::TermSpecArg& spec,
                                                   bool causal, const c10::optional<at::Tensor>& key_padding_mask,
                                                   c10::optional<double> scale, bool return_weights);
// spec: TermSpec::describe()'s text; (out, weights, logsumexp).
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_streamed(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::TensorList terms, c10::string_view spec,
    bool causal, const c10::optional<at::Tensor>& key_padding_mask, c10::optional<double> scale,
    bool return_weights);
std::vector<at::Tensor> attention_streamed_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                    const at::Tensor& k, const at::Tensor& v, at::TensorList terms,
                                                    c10::string_view spec, bool causal,
                                                    const c10::optional<at::Tensor>& key_padding_mask, double scale,
                                                    const at::Tensor& out, const at::Tensor& logsumexp,
                                                    const c10::List<bool>& needs);

}  // namespace posenc::nn::dispatch

namespace posenc::nn::detail {

// The checks both attention paths share (c10::ValueError / TypeError, "[attention] ..."):
// q, k, v, the call's mask, scale and dropout, and every term's shape and dtype.
void check_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const AttentionTerms& terms,
                     const AttentionCall& call);

}  // namespace posenc::nn::detail
