// The rotary families of several position axes, on the contract: axial 2D/3D
// RoPE (RotaryEmbeddingAxial, Heo et al. 2024) and M-RoPE
// (MultimodalRotaryEmbedding, Qwen2-VL; interleaved: Qwen3-VL). Each rotates q
// and k by tables the ops compute from the coordinates of every call.
#include <ATen/ATen.h>

#include <sstream>
#include <string>
#include <vector>

#include "op_support.h"
#include "ops/rope/support.h"
#include "posenc/kernels/rope_axes.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/rotary_embedding.h"
#include "rope_scaling_setting.h"

namespace posenc::nn {
namespace {

constexpr const char* kAxial = "RotaryEmbeddingAxial";
constexpr const char* kMrope = "MultimodalRotaryEmbedding";

// The settings both share after head_dim (and M-RoPE's sections).
std::vector<SettingSpec> rotary_settings(const char* scaling_meaning, SettingSpec seq_len) {
  return {
      optional_integer_setting("rotary_dim", "R, even (None: head_dim); channels R .. D-1 stay", kAnyInteger),
      real_setting("base", 10000.0, "frequencies base^(-2i/R), per block"),
      word_setting("layout", {"half", "interleaved"}, "pairs (i, i + R/2) or (2i, 2i + 1)"),
      mapping_setting("scaling", scaling_meaning),
      std::move(seq_len),
      word_setting("precision", {"exact", "fp32"}, "angles in float64 modulo 2 pi, or the common float32 formula"),
  };
}

SettingSpec head_dim_setting() {
  SettingSpec s = size_setting("head_dim", "D of q and k");
  s.minimum = kAnyInteger;  // "head_dim must be positive"
  return s;
}

std::string shape_text(const FamilySettings& s, const char* name) {
  if (!s.has(name)) return "None";
  std::ostringstream out;
  out << at::IntArrayRef(s.integers(name));
  return out.str();
}

// ---------------------------------------------------------------------------
// RotaryEmbeddingAxial

ops::RopeAxialOptions axial_options(const FamilySettings& s) {
  ops::RopeAxialOptions o;
  o.dims_per_axis = s.integers("dims_per_axis");
  o.base = s.real("base");
  o.scaling = families::scalings_setting(s.mapping("scaling"));
  o.seq_len = s.integers("seq_len");
  o.precision = kernels::parse_precision(s.word("precision"));
  return o;
}

void check_axial(const FamilySettings& s) {
  const int64_t r = families::checked_rotary_dim(kAxial, s);
  const std::vector<int64_t> dims = s.integers("dims_per_axis");
  if (dims.empty()) return;
  detail::translate_errors([&] { kernels::validate_axial_dims(dims, r, kAxial); });
  // One table of the op checks the axes, the scaling and the precision now.
  const at::Tensor coords = at::zeros({1, static_cast<int64_t>(dims.size())}, at::kLong);
  ops::rope_axial_cos_sin(coords, r, axial_options(s), at::kFloat);
}

std::vector<at::Tensor> rotate_axial(const FamilySettings& s, const FamilyState&, const RotateCall& call) {
  const at::Tensor& q = call.inputs[0];
  const at::Tensor& k = call.inputs[1];
  const int64_t head_dim = s.integer("head_dim");
  families::check_qk(kAxial, q, k, head_dim);
  TORCH_CHECK_VALUE(call.positions, "[", kAxial, "] coords must be a tensor, got None");
  const at::Tensor c = detail::int64_positions(kAxial, *call.positions);
  const std::string n_axes = c.dim() >= 2 ? std::to_string(c.size(-1)) : "n_axes";
  const detail::RowsShape shape("coords", "", ", n_axes", ", " + n_axes);
  const at::IntArrayRef rows = c.dim() >= 2 ? c.sizes().slice(0, c.dim() - 1) : at::IntArrayRef();
  detail::rows_batch(kAxial, shape, q, rows, c.sizes());
  detail::rows_batch(kAxial, shape, k, rows, c.sizes());
  const int64_t r = s.optional_integer("rotary_dim").value_or(head_dim);
  const ops::RopeAxialOptions o = axial_options(s);
  return families::rotate_both(q, k, kernels::parse_rope_layout(s.word("layout")),
                               [&](at::ScalarType compute) { return ops::rope_axial_cos_sin(c, r, o, compute); });
}

FamilyContract axial_contract() {
  FamilyContract c;
  c.module = kAxial;
  c.summary =
      "Axial 2D/3D RoPE (Heo et al. 2024): forward(q, k, coords) -> (q', k'), coords int64 (T, n_axes) or (B, T, "
      "n_axes). The rotary frequencies split into one block per axis (dims_per_axis, default an even split of "
      "rotary_dim), block a with its own spectrum base^(-2i/dims_per_axis[a]), rotated by coordinate a.";
  c.settings = {head_dim_setting(), integers_setting("dims_per_axis", "R per axis, summing to R (None: even split)")};
  for (SettingSpec& spec : rotary_settings("a rope_scaling dict shared by the axes, or a list with one per axis",
                                           integers_setting("seq_len", "per axis, the regime's length (None: max "
                                                                       "coordinate + 1)"))) {
    c.settings.push_back(std::move(spec));
  }
  c.derive = families::derive_rotary_dim;
  c.check = check_axial;
  c.rotate_inputs = {"q", "k"};
  c.positions_argument = "coords";
  c.rotate = rotate_axial;
  c.shown_with = [](const FamilySettings& s, const char*, const char*) {
    std::ostringstream out;
    out << "head_dim=" << s.integer("head_dim")
        << ", rotary_dim=" << s.optional_integer("rotary_dim").value_or(s.integer("head_dim"))
        << ", dims_per_axis=" << shape_text(s, "dims_per_axis") << ", base=" << s.real("base")
        << ", layout=" << s.word("layout");
    return out.str();
  };
  return c;
}

// ---------------------------------------------------------------------------
// MultimodalRotaryEmbedding

ops::MRopeOptions mrope_options(const FamilySettings& s) {
  ops::MRopeOptions o;
  o.mrope_section = s.integers("mrope_section");
  o.interleaved = s.flag("interleaved");
  o.base = s.real("base");
  o.scaling = families::scaling_setting(s.mapping("scaling"));
  o.seq_len = s.optional_integer("seq_len");
  o.precision = kernels::parse_precision(s.word("precision"));
  return o;
}

void check_mrope(const FamilySettings& s) {
  const int64_t r = families::checked_rotary_dim(kMrope, s);
  const ops::MRopeOptions o = mrope_options(s);
  detail::translate_errors([&] {
    kernels::mrope_frequencies(r, o.base, o.scaling, o.mrope_section, o.interleaved, o.seq_len, kMrope);
  });
  ops::mrope_cos_sin(at::zeros({3, 1}, at::kLong), r, o, at::kFloat);  // the precision, with the op's words
}

std::vector<at::Tensor> rotate_mrope(const FamilySettings& s, const FamilyState&, const RotateCall& call) {
  const at::Tensor& q = call.inputs[0];
  const at::Tensor& k = call.inputs[1];
  const int64_t head_dim = s.integer("head_dim");
  families::check_qk(kMrope, q, k, head_dim);
  TORCH_CHECK_VALUE(call.positions, "[", kMrope, "] positions3 must be a tensor, got None");
  const at::Tensor p = detail::int64_positions(kMrope, *call.positions);
  const bool three = p.dim() >= 2 && p.size(0) == 3;
  const detail::RowsShape shape("positions", "3, ");
  detail::rows_batch(kMrope, shape, q, three ? p.sizes().slice(1) : at::IntArrayRef(), p.sizes());
  detail::rows_batch(kMrope, shape, k, three ? p.sizes().slice(1) : at::IntArrayRef(), p.sizes());
  const int64_t r = s.optional_integer("rotary_dim").value_or(head_dim);
  const ops::MRopeOptions o = mrope_options(s);
  return families::rotate_both(q, k, kernels::parse_rope_layout(s.word("layout")),
                               [&](at::ScalarType compute) { return ops::mrope_cos_sin(p, r, o, compute); });
}

FamilyContract mrope_contract() {
  FamilyContract c;
  c.module = kMrope;
  c.summary =
      "M-RoPE (Qwen2-VL): forward(q, k, positions3) -> (q', k'), positions3 int64 (3, T) or (3, B, T), the t, h, w "
      "positions. mrope_section (three sizes summing to rotary_dim/2) gives the first section[0] frequencies to t, "
      "the next section[1] to h, the last to w; interleaved=True is Qwen3-VL's assignment.";
  SettingSpec sections = integers_setting("mrope_section", "t, h, w frequency counts, summing to rotary_dim/2");
  sections.positional = true;
  c.settings = {head_dim_setting(), sections,
                flag_setting("interleaved", false, "Qwen3-VL's assignment (h on j % 3 == 1, w on j % 3 == 2)")};
  for (SettingSpec& spec : rotary_settings("a Hugging Face rope_scaling dict (None: plain RoPE)",
                                           optional_integer_setting("seq_len", "the regime's length (None: max "
                                                                               "position + 1)", kAnyInteger))) {
    c.settings.push_back(std::move(spec));
  }
  c.derive = families::derive_rotary_dim;
  c.check = check_mrope;
  c.rotate_inputs = {"q", "k"};
  c.positions_argument = "positions3";
  c.rotate = rotate_mrope;
  c.shown_with = [](const FamilySettings& s, const char* true_word, const char* false_word) {
    std::ostringstream out;
    out << "head_dim=" << s.integer("head_dim")
        << ", rotary_dim=" << s.optional_integer("rotary_dim").value_or(s.integer("head_dim"))
        << ", mrope_section=" << shape_text(s, "mrope_section")
        << ", interleaved=" << (s.flag("interleaved") ? true_word : false_word) << ", base=" << s.real("base")
        << ", layout=" << s.word("layout");
    return out.str();
  };
  return c;
}

const FamilyContractRegistration registered_axial(axial_contract());
const FamilyContractRegistration registered_mrope(mrope_contract());

FamilySettings common(int64_t head_dim, int64_t rotary_dim, double base, kernels::RopeLayout layout,
                      kernels::Precision precision) {
  FamilySettings s;
  s.set("head_dim", head_dim);
  if (rotary_dim != 0) s.set("rotary_dim", rotary_dim);
  s.set("base", base).set("layout", std::string(kernels::rope_layout_name(layout)));
  s.set("precision", std::string(kernels::precision_name(precision)));
  return s;
}

FamilySettings settings_of(const RotaryEmbeddingAxialOptions& o) {
  FamilySettings s = common(o.head_dim(), o.rotary_dim(), o.base(), o.layout(), o.precision());
  if (!o.dims_per_axis().empty()) s.set("dims_per_axis", o.dims_per_axis());
  s.set("scaling", families::scalings_value(o.scaling()));
  if (!o.seq_len().empty()) s.set("seq_len", o.seq_len());
  return s;
}

FamilySettings settings_of(const MultimodalRotaryEmbeddingOptions& o) {
  FamilySettings s = common(o.head_dim(), o.rotary_dim(), o.base(), o.layout(), o.precision());
  s.set("mrope_section", o.mrope_section()).set("interleaved", o.interleaved());
  s.set("scaling", families::scaling_value(o.scaling()));
  if (o.seq_len()) s.set("seq_len", *o.seq_len());
  return s;
}

}  // namespace

RotaryEmbeddingAxialImpl::RotaryEmbeddingAxialImpl(const RotaryEmbeddingAxialOptions& options)
    : FamilyTransformImpl(kAxial, settings_of(options)), options_(options) {}

std::tuple<at::Tensor, at::Tensor> RotaryEmbeddingAxialImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                     const at::Tensor& coords) {
  std::vector<at::Tensor> out = rotate({q, k}, coords);
  return {out[0], out[1]};
}

MultimodalRotaryEmbeddingImpl::MultimodalRotaryEmbeddingImpl(const MultimodalRotaryEmbeddingOptions& options)
    : FamilyTransformImpl(kMrope, settings_of(options)), options_(options) {}

std::tuple<at::Tensor, at::Tensor> MultimodalRotaryEmbeddingImpl::forward(const at::Tensor& q, const at::Tensor& k,
                                                                          const at::Tensor& positions3) {
  std::vector<at::Tensor> out = rotate({q, k}, positions3);
  return {out[0], out[1]};
}

}  // namespace posenc::nn
