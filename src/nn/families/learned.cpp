// The trainable input encodings on the contract (input point): LearnedEncoding
// (a table, BERT and GPT-2) and LearnableSinusoidalEncoding (trainable
// frequencies, Wang et al., ICLR 2021), their typed C++ front ends and the
// registry's descriptors. Gradients reach the tensors through the ops'
// Autograd kernels (learned wrt the table, learnable_sinusoidal wrt omega).
#include <ATen/ATen.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/ops.h"

namespace posenc::nn {
namespace {

// A positional int whose rules the family's check states in the C++ modules' words.
SettingSpec plain_size(std::string name, std::string meaning) {
  SettingSpec s = size_setting(std::move(name), std::move(meaning));
  s.minimum = kAnyInteger;
  return s;
}

at::Tensor embed_positions(const char* op, const EmbedCall& call) {
  if (call.positions) return *call.positions;
  TORCH_CHECK_VALUE(call.count, "[", op, "] needs positions or a count");
  return detail::range_positions(op, call.start, *call.count);
}

// ---------------------------------------------------------------------------
// LearnedEncoding: parameter "table" [max_positions, dim] ~ N(0, init_std^2) (`weight` in Python).

constexpr const char* kLearned = "LearnedEncoding";

void learned_check(const FamilySettings& s) {
  const int64_t rows = s.integer("max_positions"), dim = s.integer("dim");
  const double init_std = s.real("init_std");
  TORCH_CHECK_VALUE(rows >= 1, "[", kLearned, "] max_positions must be at least 1, got ", rows);
  TORCH_CHECK_VALUE(dim >= 1, "[", kLearned, "] dim must be positive, got ", dim);
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", kLearned, "] init_std must be finite and >= 0, got ",
                    init_std);
  TORCH_CHECK_VALUE(rows <= kernels::kMaxTableValues / dim, "[", kLearned, "] max_positions x dim must be at most ",
                    kernels::kMaxTableValues, " values, got ", rows, " x ", dim);
}

FamilyContract learned_contract() {
  FamilyContract c;
  c.module = kLearned;
  c.summary =
      "Learned absolute table (BERT, GPT-2): parameter weight [max_positions, dim] ~ N(0, init_std^2). "
      "forward(positions) -> weight[positions] (an int N: rows 0 .. N-1); a position outside the table raises "
      "\"[learned] position P is outside the table of R rows (valid 0..R-1)\".";
  c.settings = {plain_size("max_positions", "rows of the table"), plain_size("dim", "features of a row"),
                real_setting("init_std", 0.02, "N(0, init_std^2) initialisation")};
  c.state = {{"table", true, "", "weight"}};
  c.check = learned_check;
  c.shapes = [](const FamilySettings& s) {
    return std::vector<std::vector<int64_t>>{{s.integer("max_positions"), s.integer("dim")}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].normal_(0.0, s.real("init_std")); };
  c.positions_count = true;
  c.embed = [](const FamilySettings&, const FamilyState& t, const EmbedCall& call) {
    return ops::learned(t[0], embed_positions("learned", call)).to(call.dtype);
  };
  c.pretrained_tensor = "table";
  c.pretrained = [](const at::Tensor& weight, FamilySettings given) {
    TORCH_CHECK_VALUE(weight.dim() == 2 && weight.is_floating_point(), "[", kLearned,
                      "] weight must be a 2-D floating tensor (max_positions, dim), got ", weight.dim(), "-D torch.",
                      detail::dtype_name(weight.scalar_type()));
    return given.set("max_positions", weight.size(0)).set("dim", weight.size(1)).set("init_std", 0.0);
  };
  c.shown = {"max_positions", "dim", "init_std"};
  return c;
}

// ---------------------------------------------------------------------------
// LearnableSinusoidalEncoding: parameter "omega" [dim/2], initialised to base^(-2i/dim).

constexpr const char* kLearnable = "LearnableSinusoidalEncoding";

kernels::SinusoidalParams learnable_params(const FamilySettings& s) {
  kernels::SinusoidalParams p;
  detail::translate_errors([&] {
    p = {s.integer("dim"), s.real("base"), s.real("scale"),
         kernels::parse_layout(s.word("layout"), "learnable-sinusoidal")};
  });
  return p;
}

FamilyContract learnable_contract() {
  FamilyContract c;
  c.module = kLearnable;
  c.summary =
      "Sinusoids with trainable frequencies (Wang et al., ICLR 2021): parameter omega [dim/2], initialised to "
      "base^(-2i/dim). forward(positions) -> positions.shape + [dim] in omega's dtype (an int N: 0 .. N-1).";
  SettingSpec layout;
  layout.name = "layout", layout.type = SettingType::kWord, layout.default_value = std::string("interleaved");
  layout.meaning = "channel order: interleaved (sin, cos pairs), half or cos-sin";
  c.settings = {plain_size("dim", "features of the table (even)"),
                real_setting("base", 10000.0, "the initial frequencies base^(-2i/dim)"), layout,
                real_setting("scale", 1.0, "amplitude")};
  c.state = {{"omega"}};
  c.check = [](const FamilySettings& s) {
    const kernels::SinusoidalParams p = learnable_params(s);
    detail::translate_errors([&] { kernels::validate(p, "learnable-sinusoidal"); });
  };
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("dim") / 2}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    t[0].copy_(ops::sinusoidal_frequencies(s.integer("dim"), s.real("base")));
  };
  c.positions_count = true;
  c.embed = [](const FamilySettings& s, const FamilyState& t, const EmbedCall& call) {
    const kernels::SinusoidalParams p = learnable_params(s);
    // omega in the call's dtype first: a float64 call gets a float64 table.
    return ops::learnable_sinusoidal(embed_positions("learnable-sinusoidal", call), t[0].to(call.dtype),
                                     {p.layout, p.scale});
  };
  c.shown = {"dim", "base", "layout", "scale"};
  return c;
}

const FamilyContractRegistration registered_learned(learned_contract());
const FamilyContractRegistration registered_learnable(learnable_contract());

// ---------------------------------------------------------------------------
// The registry's descriptors.

void add_trainable(std::vector<EncodingFamily>& out) {
  EncodingFamily learned;
  learned.name = "learned";
  learned.point = EncodingPoint::kInput;
  learned.description = "a trainable table of one vector per position, added to the embeddings (BERT, GPT-2)";
  EncodingParameter rows = families::integer("max_positions", 512,
                                             "rows; the model's max_positions, positions beyond it are an error", 1);
  rows.model_size = &EncodingConfig::max_positions;
  rows.training_option = false;
  learned.parameters = {rows, families::init_std_parameter()};
  learned.module = kLearned;
  learned.preset = [](const EncodingConfig& c) {
    return FamilySettings().set("max_positions", c.max_positions).set("dim", c.dim).set("init_std", c.real("init_std"));
  };
  learned.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return LearnedEncoding(LearnedEncodingOptions(c.max_positions, c.dim).init_std(c.real("init_std")));
  };
  out.push_back(std::move(learned));

  EncodingFamily learnable;
  learnable.name = "learnable-sinusoidal";
  learnable.point = EncodingPoint::kInput;
  learnable.description =
      "sinusoids with trainable frequencies, initialised to the fixed ones (Wang et al., ICLR 2021)";
  learnable.parameters = {families::base_parameter("initial frequencies base^(-2i/dim)"),
                          families::input_scale_parameter()};
  learnable.needs.even_dim = true;
  learnable.report_section = "sinusoidal";  // equal to the fixed table until trained
  learnable.module = kLearnable;
  learnable.preset = [](const EncodingConfig& c) {
    return FamilySettings().set("dim", c.dim).set("base", c.real("base")).set("scale", c.real("input_scale"));
  };
  learnable.make_input = [](const EncodingConfig& c) -> InputEncoding {
    return LearnableSinusoidalEncoding(LearnableSinusoidalEncodingOptions(c.dim).base(c.real("base")).scale(c.real("input_scale")));
  };
  out.push_back(std::move(learnable));
}

const families::Registration registered(21, add_trainable);

}  // namespace

// ---------------------------------------------------------------------------
// The typed front ends.

LearnedEncodingImpl::LearnedEncodingImpl(const LearnedEncodingOptions& options)
    : FamilyInputImpl(kLearned,
                      FamilySettings()
                          .set("max_positions", options.max_positions())
                          .set("dim", options.dim())
                          .set("init_std", options.init_std()),
                      options.mode()),
      options_(options) {}

void LearnedEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::LearnedEncoding(max_positions=" << options_.max_positions() << ", dim=" << options_.dim()
         << ", init_std=" << options_.init_std() << ", mode=" << input_mode_name(options_.mode()) << ")";
}

LearnableSinusoidalEncodingImpl::LearnableSinusoidalEncodingImpl(const LearnableSinusoidalEncodingOptions& options)
    : FamilyInputImpl(kLearnable,
                      FamilySettings()
                          .set("dim", options.dim())
                          .set("base", options.base())
                          .set("layout", std::string(kernels::layout_name(options.layout())))
                          .set("scale", options.scale()),
                      options.mode()),
      options_(options) {}

void LearnableSinusoidalEncodingImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::LearnableSinusoidalEncoding(dim=" << options_.dim() << ", base=" << options_.base()
         << ", scale=" << options_.scale() << ", layout=" << kernels::layout_name(options_.layout())
         << ", mode=" << input_mode_name(options_.mode()) << ")";
}

}  // namespace posenc::nn
