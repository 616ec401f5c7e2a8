// The fixed sinusoidal input encodings on the contract (input point): the 1D
// table of Vaswani et al. and the 2D / 3D grids of DETR, MAE and ViViT, their
// typed C++ front ends and the registry's descriptor. The kernels are the
// shared src/kernels/sinusoidal*.cpp; options are validated by them, with the
// ops' messages ("[sinusoidal] dim must be even, got 7").
#include <ATen/ATen.h>

#include <ostream>
#include <string>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/sinusoidal_encoding.h"
#include "posenc/nn/sinusoidal_grid_encoding.h"

namespace posenc::nn {
namespace {

// A word setting whose admissible values the kernels check (their message lists them).
SettingSpec kernel_word(std::string name, std::string default_value, std::string meaning) {
  SettingSpec s;
  s.name = std::move(name), s.type = SettingType::kWord, s.default_value = std::move(default_value);
  s.meaning = std::move(meaning);
  return s;
}

std::vector<SettingSpec> sinusoid_settings() {
  SettingSpec dim;
  dim.name = "dim", dim.type = SettingType::kInteger, dim.positional = true, dim.minimum = kAnyInteger;
  dim.meaning = "features of the table (even; grids: divisible by 4 in 2D, by 6 in 3D)";
  return {dim,
          real_setting("base", 10000.0, "frequencies base^(-2i/d)"),
          kernel_word("layout", "interleaved", "channel order: interleaved (sin, cos pairs), half or cos-sin"),
          kernel_word("precision", "exact", "exact (angles reduced in double) or fp32 (the common float32 formula)"),
          real_setting("scale", 1.0, "amplitude")};
}

kernels::SinusoidalParams sinusoid_params(const FamilySettings& s) {
  kernels::SinusoidalParams p;
  detail::translate_errors([&] {
    p = {s.integer("dim"), s.real("base"), s.real("scale"), kernels::parse_layout(s.word("layout"), "sinusoidal"),
         kernels::parse_precision(s.word("precision"), "sinusoidal")};
  });
  return p;
}

// ---------------------------------------------------------------------------
// SinusoidalEncoding: no tensors.

constexpr const char* kSinusoidal = "SinusoidalEncoding";

at::Tensor sinusoidal_embed(const FamilySettings& s, const FamilyState&, const EmbedCall& call) {
  const kernels::SinusoidalParams p = sinusoid_params(s);
  if (call.positions) return ops::sinusoidal(*call.positions, p, call.dtype);
  TORCH_CHECK_VALUE(call.count, "[", kSinusoidal, "] needs positions or a count");
  return ops::sinusoidal_range(call.start, *call.count, p, call.dtype);
}

FamilyContract sinusoidal_contract() {
  FamilyContract c;
  c.module = kSinusoidal;
  c.summary =
      "Fixed sinusoids (Vaswani et al. 2017): PE[p, 2i] = scale sin(p omega_i), PE[p, 2i+1] = scale cos(p omega_i), "
      "omega_i = base^(-2i/dim) (interleaved layout; half and cos-sin reorder the channels). forward(positions): an "
      "int N (positions 0 .. N-1, [N, dim]) or an integer tensor of shape S (S + [dim]); float32, float64 after "
      ".to(torch.float64).";
  c.settings = sinusoid_settings();
  c.check = [](const FamilySettings& s) {
    const kernels::SinusoidalParams p = sinusoid_params(s);
    detail::translate_errors([&] { kernels::validate(p, "sinusoidal"); });
  };
  c.positions_count = true;
  c.embed = sinusoidal_embed;
  c.shown = {"dim", "base", "layout", "precision", "scale"};
  return c;
}

// ---------------------------------------------------------------------------
// SinusoidalEncoding2d / 3d: no tensors; forward(height, width) / forward(frames, height, width).

constexpr const char* kGrid2d = "SinusoidalEncoding2d";
constexpr const char* kGrid3d = "SinusoidalEncoding3d";

kernels::SinusoidalGridParams grid_params(const FamilySettings& s, const std::vector<int64_t>& sizes) {
  const kernels::SinusoidalParams p = sinusoid_params(s);
  const bool three_d = sizes.size() == 3;
  return {three_d ? sizes[0] : 1, sizes[three_d ? 1 : 0], sizes[three_d ? 2 : 1], p.dim, p.base, p.scale, p.layout,
          p.precision, s.flag("normalize"), s.real("normalize_scale")};
}

// Rows start .. start+count-1 of a grid table (cells, dim).
at::Tensor grid_rows(const char* module, const at::Tensor& grid, int64_t start, int64_t count) {
  const int64_t cells = grid.size(0);
  TORCH_CHECK_VALUE(start >= 0 && count >= 0 && start <= cells - count, "[", module, "] cells ", start, "..",
                    start + count - 1, " must lie in the grid of ", cells, " cells (0..", cells - 1, ")");
  return grid.narrow(0, start, count);
}

// Rows at integer positions of shape S of a grid table -> S + (dim).
at::Tensor grid_rows_at(const char* module, const at::Tensor& grid, const at::Tensor& positions) {
  const at::Tensor p = detail::int64_positions(module, positions);
  const int64_t cells = grid.size(0);
  if (p.numel() > 0) {
    const int64_t lo = p.min().item<int64_t>();
    const int64_t hi = p.max().item<int64_t>();
    TORCH_CHECK_VALUE(lo >= 0 && hi < cells, "[", module, "] position ", lo < 0 ? lo : hi,
                      " is outside the grid of ", cells, " cells (valid 0..", cells - 1, ")");
  }
  return grid.index_select(0, p.reshape(-1)).reshape(detail::table_sizes(p.sizes(), grid.size(1)));
}

template <bool kThreeD>
at::Tensor grid_embed(const FamilySettings& s, const FamilyState&, const EmbedCall& call) {
  const char* module = kThreeD ? kGrid3d : kGrid2d;
  TORCH_CHECK_VALUE(call.sizes.size() == (kThreeD ? 3u : 2u), "[", module, "] takes ", kThreeD ? 3 : 2,
                    " grid sizes, got ", call.sizes.size());
  const kernels::SinusoidalGridParams p = grid_params(s, call.sizes);
  const at::Tensor grid = kThreeD ? ops::sinusoidal_3d(p, call.dtype) : ops::sinusoidal_2d(p, call.dtype);
  if (call.positions) return grid_rows_at(module, grid, *call.positions);
  if (call.count) return grid_rows(module, grid, call.start, *call.count);
  return grid;
}

template <bool kThreeD>
FamilyContract grid_contract() {
  FamilyContract c;
  c.module = kThreeD ? kGrid3d : kGrid2d;
  c.summary = kThreeD
                  ? "3D sinusoidal grid (video, ViViT): forward(frames, height, width) -> [frames*height*width, dim], "
                    "row (t*height + y)*width + x; dim/3 channels each for t, y, x; dim divisible by 6."
                  : "2D sinusoidal grid (DETR, MAE): forward(height, width) -> [height*width, dim], row y*width + x. "
                    "Channels [0, dim/2) encode y and [dim/2, dim) encode x; dim divisible by 4.";
  c.settings = sinusoid_settings();
  c.settings.push_back(flag_setting("normalize", false, "coordinates c/(S-1) * normalize_scale on an axis of size S"));
  c.settings.push_back(real_setting("normalize_scale", 6.283185307179586, "the normalised coordinates' range"));
  c.check = [](const FamilySettings& s) {
    const kernels::SinusoidalGridParams p = grid_params(s, kThreeD ? std::vector<int64_t>{1, 1, 1}
                                                                    : std::vector<int64_t>{1, 1});
    detail::translate_errors([&] { kernels::validate(p, kThreeD); });
  };
  c.embed_sizes = kThreeD ? std::vector<std::string>{"frames", "height", "width"}
                          : std::vector<std::string>{"height", "width"};
  c.embed = grid_embed<kThreeD>;
  c.shown = {"dim", "base", "layout", "normalize"};
  return c;
}

const FamilyContractRegistration registered_sinusoidal(sinusoidal_contract());
const FamilyContractRegistration registered_grid_2d(grid_contract<false>());
const FamilyContractRegistration registered_grid_3d(grid_contract<true>());

FamilySettings common_settings(int64_t dim, double base, double scale, kernels::SinusoidalLayout layout,
                               kernels::Precision precision) {
  return FamilySettings()
      .set("dim", dim)
      .set("base", base)
      .set("scale", scale)
      .set("layout", std::string(kernels::layout_name(layout)))
      .set("precision", std::string(kernels::precision_name(precision)));
}

void print_common(std::ostream& stream, double base, double scale, kernels::SinusoidalLayout layout,
                  kernels::Precision precision, InputMode mode) {
  stream << ", base=" << base << ", scale=" << scale << ", layout=" << kernels::layout_name(layout)
         << ", precision=" << kernels::precision_name(precision) << ", mode=" << input_mode_name(mode) << ")";
}

// ---------------------------------------------------------------------------
// The registry's descriptor.

void add_sinusoidal(std::vector<EncodingFamily>& out) {
  EncodingFamily sinusoidal;
  sinusoidal.name = "sinusoidal";
  sinusoidal.point = EncodingPoint::kInput;
  sinusoidal.description =
      "fixed sinusoids added to the token embeddings, interleaved (sin, cos) (Vaswani et al. 2017)";
  sinusoidal.parameters = {families::base_parameter("frequencies base^(-2i/dim)"), families::input_scale_parameter()};
  sinusoidal.needs.even_dim = true;
  sinusoidal.module = kSinusoidal;
  sinusoidal.preset = [](const EncodingConfig& c) {
    return FamilySettings().set("dim", c.dim).set("base", c.real("base")).set("scale", c.real("input_scale"));
  };
  sinusoidal.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return SinusoidalEncoding(SinusoidalEncodingOptions(c.dim).base(c.real("base")).scale(c.real("input_scale")));
  };
  out.push_back(std::move(sinusoidal));
}

const families::Registration registered(20, add_sinusoidal);

}  // namespace

// ---------------------------------------------------------------------------
// The typed front ends.

SinusoidalEncodingImpl::SinusoidalEncodingImpl(const SinusoidalEncodingOptions& options)
    : FamilyInputImpl(kSinusoidal,
                      common_settings(options.dim(), options.base(), options.scale(), options.layout(),
                                      options.precision()),
                      options.mode()),
      options_(options) {}

void SinusoidalEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding(dim=" << options_.dim();
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

SinusoidalEncoding2dImpl::SinusoidalEncoding2dImpl(const SinusoidalEncoding2dOptions& options)
    : FamilyInputImpl(kGrid2d,
                      common_settings(options.dim(), options.base(), options.scale(), options.layout(),
                                      options.precision())
                          .set("normalize", options.normalize())
                          .set("normalize_scale", options.normalize_scale()),
                      options.mode(), {options.height(), options.width()}),
      options_(options) {
  grid(at::kFloat);  // validates the grid's sizes, with the op's messages
}

at::Tensor SinusoidalEncoding2dImpl::grid(at::ScalarType compute) const {
  EmbedCall call;
  call.sizes = grid_sizes(), call.dtype = compute;
  return embed(call);
}

void SinusoidalEncoding2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding2d(height=" << options_.height() << ", width=" << options_.width()
         << ", dim=" << options_.dim() << ", normalize=" << (options_.normalize() ? "true" : "false");
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

SinusoidalEncoding3dImpl::SinusoidalEncoding3dImpl(const SinusoidalEncoding3dOptions& options)
    : FamilyInputImpl(kGrid3d,
                      common_settings(options.dim(), options.base(), options.scale(), options.layout(),
                                      options.precision())
                          .set("normalize", options.normalize())
                          .set("normalize_scale", options.normalize_scale()),
                      options.mode(), {options.frames(), options.height(), options.width()}),
      options_(options) {
  grid(at::kFloat);
}

at::Tensor SinusoidalEncoding3dImpl::grid(at::ScalarType compute) const {
  EmbedCall call;
  call.sizes = grid_sizes(), call.dtype = compute;
  return embed(call);
}

void SinusoidalEncoding3dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalEncoding3d(frames=" << options_.frames() << ", height=" << options_.height()
         << ", width=" << options_.width() << ", dim=" << options_.dim()
         << ", normalize=" << (options_.normalize() ? "true" : "false");
  print_common(stream, options_.base(), options_.scale(), options_.layout(), options_.precision(), options_.mode());
}

}  // namespace posenc::nn
