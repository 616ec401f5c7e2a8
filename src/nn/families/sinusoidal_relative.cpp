// NEZHA's relative sinusoids (Wei et al. 2019) on the family contract
// (relative-vectors point), with trainable frequencies as an option (Wang et
// al., ICLR 2021): the typed C++ front end SinusoidalRelative and the
// registry's descriptors "shaw-sinusoidal" and "shaw-learnable-sinusoidal".
// One table shared by the heads serves the keys and the values.
#include <ATen/ATen.h>

#include <ostream>
#include <string>
#include <vector>

#include "families/families.h"
#include "families/relative_support.h"
#include "op_support.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/nn/ops.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kSinusoidalRelative = "SinusoidalRelative";

// [2K+1, Dh] in `compute`, differentiable wrt omega: fixed and learnable read the same omega, so they agree
// at initialisation.
at::Tensor nezha_table(const FamilySettings& s, const at::Tensor& omega, at::ScalarType compute) {
  return ops::sinusoidal_relative_table(s.integer("max_distance"), s.integer("head_dim"), s.real("base"),
                                        omega.to(compute), compute);
}

void nezha_check(const FamilySettings& s) {
  const int64_t head_dim = s.integer("head_dim");
  TORCH_CHECK_VALUE(head_dim % 2 == 0, "[", kSinusoidalRelative, "] head_dim must be even, got ", head_dim);
  detail::translate_errors(
      [&] { kernels::validate(kernels::SinusoidalParams{head_dim, s.real("base")}, kSinusoidalRelative); });
  families::check_table_size(kSinusoidalRelative, "the table ((2*max_distance+1) x head_dim)", 1,
                             families::rows_for(s.integer("max_distance")), head_dim);
}

at::Tensor nezha_logits(const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
  check_relative_qk(kSinusoidalRelative, 0, s.integer("head_dim"), q, k);
  const at::ScalarType compute = relative_compute_dtype(q, t[0]);
  const int64_t q_len = q.size(2), k_len = k.size(2);
  return ops::relative_logits(q.to(compute), nezha_table(s, t[0], compute), {s.integer("max_distance"), k_len - q_len},
                              k_len)
      .to(q.scalar_type());
}

at::Tensor nezha_values(const FamilySettings& s, const FamilyState& t, const at::Tensor& probs) {
  check_relative_probs(kSinusoidalRelative, 0, probs);
  const at::ScalarType compute = relative_compute_dtype(probs, t[0]);
  const int64_t q_len = probs.size(2), k_len = probs.size(3);
  return ops::relative_values(probs.to(compute), nezha_table(s, t[0], compute),
                              {s.integer("max_distance"), k_len - q_len})
      .to(probs.scalar_type());
}

void nezha_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t, int64_t,
                 at::ScalarType compute) {
  const at::Tensor table = nezha_table(s, t[0], compute);  // one table for keys and values (NEZHA)
  terms.rel_k = table;
  if (s.flag("values")) terms.rel_v = table;
  terms.max_distance = s.integer("max_distance");
}

FamilyContract nezha_contract() {
  FamilyContract c;
  c.module = kSinusoidalRelative;
  c.summary =
      "NEZHA: one table shared by the heads, row r the sinusoid of offset r - K with frequencies omega "
      "(interleaved sin, cos; posenc.sinusoidal_relative_table), used as ShawRelative uses its tables, for the "
      "keys and (values=True) the values. omega [Dh/2] float32 = base^(-2i/Dh): a parameter when learnable "
      "(Wang et al., ICLR 2021), else a buffer. forward(q, k) = logits(q, k), unscaled.";
  c.settings = {families::max_distance_setting(), size_setting("head_dim", "features of a query head (even)"),
                real_setting("base", 10000.0, "frequencies base^(-2i/head_dim)"),
                families::values_setting(true, "the same table for the values (NEZHA)"),
                flag_setting("learnable", false, "omega a parameter, else a buffer")};
  StateSpec omega{"omega"};
  omega.parameter_when = "learnable";
  c.state = {omega};
  c.check = nezha_check;
  c.shapes = [](const FamilySettings& s) { return std::vector<std::vector<int64_t>>{{s.integer("head_dim") / 2}}; };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    t[0].copy_(ops::sinusoidal_frequencies(s.integer("head_dim"), s.real("base")));
  };
  c.relative_logits = nezha_logits;
  c.relative_values = nezha_values;
  c.has_values = [](const FamilySettings& s) { return s.flag("values"); };
  c.terms = nezha_terms;
  c.methods = {{"table", {"dtype"}, [](const FamilySettings& s, const FamilyState& t, const MethodCall& call) {
                  return nezha_table(s, t[0], call.dtype.value_or(at::kFloat));
                }}};
  c.shown = {"max_distance", "head_dim", "base", "learnable", "values"};
  return c;
}

const FamilyContractRegistration registered_contract(nezha_contract());

void add_sinusoidal_relative(std::vector<EncodingFamily>& out) {
  for (const bool learnable : {false, true}) {
    EncodingFamily f;
    f.name = learnable ? "shaw-learnable-sinusoidal" : "shaw-sinusoidal";
    f.point = EncodingPoint::kRelativeVectors;
    f.description = learnable ? "NEZHA's relative sinusoids with trainable frequencies (Wang et al., ICLR 2021)"
                              : "fixed sinusoids of the clipped offset as relative key and value vectors (NEZHA, Wei "
                                "et al. 2019)";
    f.parameters = {families::max_distance_parameter(),
                    families::base_parameter(learnable ? "initial frequencies base^(-2i/head_dim)"
                                                       : "frequencies base^(-2i/head_dim)")};
    f.needs.even_head_dim = true;
    f.report_section = "sinusoidal-relative";  // the learnable one equals the fixed one until trained
    f.module = kSinusoidalRelative;
    f.preset = [learnable](const EncodingConfig& c) {
      return FamilySettings()
          .set("max_distance", c.integer("max_distance"))
          .set("head_dim", c.dim / c.num_heads)
          .set("base", c.real("base"))
          .set("values", true)
          .set("learnable", learnable);
    };
    f.make_attention = [learnable](const EncodingConfig& c, AttentionEncodings& slots) {
      slots.relative = SinusoidalRelative(SinusoidalRelativeOptions(c.integer("max_distance"), c.dim / c.num_heads)
                                              .base(c.real("base"))
                                              .values(true)
                                              .learnable(learnable));
    };
    out.push_back(std::move(f));
  }
}

const families::Registration registered(91, add_sinusoidal_relative);

}  // namespace

SinusoidalRelativeImpl::SinusoidalRelativeImpl(const SinusoidalRelativeOptions& options)
    : FamilyRelativeImpl(kSinusoidalRelative, FamilySettings()
                                                  .set("max_distance", options.max_distance())
                                                  .set("head_dim", options.head_dim())
                                                  .set("base", options.base())
                                                  .set("values", options.values())
                                                  .set("learnable", options.learnable())),
      options_(options) {}

at::Tensor SinusoidalRelativeImpl::table(at::ScalarType compute) const {
  return nezha_table(settings(), omega(), compute);
}

void SinusoidalRelativeImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::SinusoidalRelative(max_distance=" << options_.max_distance() << ", head_dim=" << head_dim()
         << ", base=" << options_.base() << ", learnable=" << (options_.learnable() ? "true" : "false")
         << ", values=" << (options_.values() ? "true" : "false") << ")";
}

}  // namespace posenc::nn
