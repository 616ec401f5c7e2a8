// T5's torch layer (posenc/nn/attention_biases.h), in 1D and on image grids:
// the two contracts (posenc/nn/family_contract.h; learned tables, the bucket
// options checked by the kernel's validator under the module's name), the
// typed C++ front ends and the registry's descriptor. The kernels and the
// tables' gradients are the shared bias ops (src/nn/ops/bias/).
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "families/families.h"
#include "op_support.h"
#include "posenc/nn/attention_biases.h"
#include "posenc/kernels/t5.h"
#include "posenc/nn/bias_ops.h"

namespace posenc::nn {
namespace {

using families::accumulate;
using families::axis_offsets;
using families::check_grid_lengths;

void check_init_std(const char* module, double init_std) {
  TORCH_CHECK_VALUE(std::isfinite(init_std) && init_std >= 0, "[", module, "] init_std must be finite and >= 0, got ",
                    init_std);
}

kernels::T5BucketParams buckets_of(const FamilySettings& s) {
  return {s.flag("bidirectional"), s.integer("num_buckets"), s.integer("max_distance")};
}

std::vector<SettingSpec> bucket_settings() {
  return {integer_setting("num_buckets", 32, "buckets; half per direction when bidirectional", 2),
          // Checked by the bucket validator: "must be > num_buckets/2".
          integer_setting("max_distance", 128, "offsets beyond share the last bucket", kAnyInteger),
          flag_setting("bidirectional", true, "False: the decoder's causal buckets"),
          real_setting("init_std", 0.02, "the tables' N(0, init_std^2) draws")};
}

// ---------------------------------------------------------------------------
// T5Bias: parameter "table" [num_buckets, H] (Hugging Face's relative_attention_bias.weight).

constexpr const char* kT5 = "T5Bias";

FamilyContract t5_contract() {
  FamilyContract c;
  c.module = kT5;
  c.summary =
      "T5 relative bias (Raffel et al. 2020): bias[h, i, j] = table[bucket(j - i'), h], parameter table "
      "[num_buckets, num_heads] ~ N(0, init_std^2): Hugging Face's relative_attention_bias.weight layout. "
      "bidirectional=False gives the decoder's causal buckets. T5's attention has no 1/sqrt(Dh): use "
      "posenc.attention(..., scale=1.0) to match it.";
  c.settings = {size_setting("num_heads", "H")};
  for (SettingSpec& s : bucket_settings()) c.settings.push_back(std::move(s));
  c.state = {{"table"}};
  c.check = [](const FamilySettings& s) {
    detail::translate_errors([&] { kernels::validate(buckets_of(s), kT5); });
    check_init_std(kT5, s.real("init_std"));
  };
  c.shapes = [](const FamilySettings& s) {
    return std::vector<std::vector<int64_t>>{{s.integer("num_buckets"), s.integer("num_heads")}};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) { t[0].normal_(0.0, s.real("init_std")); };
  c.dense = [](const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
    return ops::t5_bias(t[0], q_len, k_len, s.flag("bidirectional"), s.integer("max_distance"));
  };
  c.terms = [](const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    accumulate(out.offset_bias, ops::t5_offset_bias(t[0].to(compute), q_len, k_len, s.flag("bidirectional"),
                                                    s.integer("max_distance")));
  };
  c.keyword_names = [](const FamilySettings& s) {
    FamilyKeywords k;
    k.tensors = {"t5_table"};
    k.values.set("t5_num_buckets", s.integer("num_buckets")).set("t5_max_distance", s.integer("max_distance"));
    k.values.set("t5_bidirectional", s.flag("bidirectional"));
    return k;
  };
  c.keywords = [](const FamilySettings&, const FamilyState& t, int64_t, int64_t, at::ScalarType dtype) {
    return std::vector<at::Tensor>{t[0].to(dtype)};
  };
  c.pretrained_tensor = "table";
  c.pretrained = [](const at::Tensor& weight, FamilySettings given) {
    TORCH_CHECK_VALUE(weight.dim() == 2 && weight.is_floating_point(), "[", kT5,
                      "] weight must be a 2-D floating tensor (num_buckets, num_heads), got ", weight.dim(), "-D torch.",
                      detail::dtype_name(weight.scalar_type()));
    return given.set("num_heads", weight.size(1)).set("num_buckets", weight.size(0));
  };
  c.shown = {"num_heads", "num_buckets", "max_distance", "bidirectional"};
  return c;
}

// ---------------------------------------------------------------------------
// T5Bias2d: parameters "table_h" (row offsets) and "table_w" (column offsets), [num_buckets, H] each.

constexpr const char* kT52d = "T5Bias2d";

at::Tensor t5_2d_dense(const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len) {
  check_grid_lengths(kT52d, s, q_len, k_len);
  return ops::t5_bias_2d(t[0], t[1], s.integer("height"), s.integer("width"), s.flag("bidirectional"),
                         s.integer("max_distance"));
}

FamilyContract t5_2d_contract() {
  FamilyContract c;
  c.module = kT52d;
  c.summary =
      "T5 buckets on a grid: table_h[bucket(y' - y), h] + table_w[bucket(x' - x), h], parameters table_h and "
      "table_w [num_buckets, num_heads]; q_len = k_len = height*width.";
  c.settings = {size_setting("num_heads", "H"), size_setting("height", "the grid's rows"),
                size_setting("width", "the grid's columns")};
  for (SettingSpec& s : bucket_settings()) c.settings.push_back(std::move(s));
  c.state = {{"table_h"}, {"table_w"}};
  c.check = [](const FamilySettings& s) {
    detail::translate_errors([&] {
      kernels::validate(buckets_of(s),
                        kernels::T5Bias2dShape{s.integer("num_heads"), s.integer("height"), s.integer("width")},
                        kT52d);
    });
    check_init_std(kT52d, s.real("init_std"));
  };
  c.shapes = [](const FamilySettings& s) {
    const std::vector<int64_t> table{s.integer("num_buckets"), s.integer("num_heads")};
    return std::vector<std::vector<int64_t>>{table, table};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    t[0].normal_(0.0, s.real("init_std"));
    t[1].normal_(0.0, s.real("init_std"));
  };
  c.dense = t5_2d_dense;
  c.terms = [](const FamilySettings& s, const FamilyState& t, AttentionTerms& out, int64_t q_len, int64_t k_len,
               at::ScalarType compute) {
    check_grid_lengths(kT52d, s, q_len, k_len);
    const kernels::T5BucketParams params = buckets_of(s);
    // [H, 2*height-1] and [H, 2*width-1], summed into [H, 2*height-1, 2*width-1]
    const at::Tensor rows = t[0].to(compute).index_select(0, ops::t5_bucket(axis_offsets(s.integer("height")), params)).t();
    const at::Tensor cols = t[1].to(compute).index_select(0, ops::t5_bucket(axis_offsets(s.integer("width")), params)).t();
    accumulate(out.grid_bias, rows.unsqueeze(2) + cols.unsqueeze(1));
    out.grid_height = s.integer("height"), out.grid_width = s.integer("width");
  };
  c.keyword_names = [](const FamilySettings&) { return FamilyKeywords{{"bias"}, {}}; };
  c.keywords = [](const FamilySettings& s, const FamilyState& t, int64_t q_len, int64_t k_len, at::ScalarType dtype) {
    return std::vector<at::Tensor>{t5_2d_dense(s, t, q_len, k_len).to(dtype)};
  };
  c.shown = {"num_heads", "height", "width", "num_buckets", "max_distance", "bidirectional"};
  return c;
}

const FamilyContractRegistration registered_t5(t5_contract());
const FamilyContractRegistration registered_t5_2d(t5_2d_contract());

}  // namespace

T5BiasImpl::T5BiasImpl(const T5BiasOptions& o)
    : FamilyBiasImpl(kT5, FamilySettings()
                              .set("num_heads", o.num_heads())
                              .set("num_buckets", o.num_buckets())
                              .set("max_distance", o.max_distance())
                              .set("bidirectional", o.bidirectional())
                              .set("init_std", o.init_std())),
      options_(o) {}

T5Bias2dImpl::T5Bias2dImpl(const T5Bias2dOptions& o)
    : FamilyBiasImpl(kT52d, FamilySettings()
                                .set("num_heads", o.num_heads())
                                .set("height", o.height())
                                .set("width", o.width())
                                .set("num_buckets", o.num_buckets())
                                .set("max_distance", o.max_distance())
                                .set("bidirectional", o.bidirectional())
                                .set("init_std", o.init_std())),
      options_(o) {}

}  // namespace posenc::nn

// The family's descriptor: what `posenc encodings`, the registry and the report read. The C++
// registry builds the typed module (make_attention); the preset gives the Python class its settings.
namespace posenc::nn::families {
namespace {

void add_t5(std::vector<EncodingFamily>& out) {
  EncodingFamily t5;
  t5.name = "t5";
  t5.point = EncodingPoint::kLogitBias;
  t5.description =
      "a learned scalar per (log-bucketed offset, head) (Raffel et al. 2020); T5 shares one table across layers, "
      "here each layer owns one (a shared submodule would be listed and stepped twice)";
  t5.parameters = {integer("t5_num_buckets", 32,
                           "buckets; bidirectional in the encoder, causal in the decoder", 2),
                   integer("t5_max_distance", 128,
                           "offsets beyond share the last bucket", 1),
                   init_std_parameter()};
  t5.make_attention = [](const EncodingConfig& c, AttentionEncodings& slots) {
    slots.bias = T5Bias(T5BiasOptions(c.num_heads)
                            .num_buckets(c.integer("t5_num_buckets"))
                            .max_distance(c.integer("t5_max_distance"))
                            .bidirectional(!c.causal)
                            .init_std(c.real("init_std")));
  };
  t5.module = "T5Bias";
  t5.preset = [](const EncodingConfig& c) {
    FamilySettings s;
    s.set("num_heads", c.num_heads).set("num_buckets", c.integer("t5_num_buckets")).set("max_distance", c.integer("t5_max_distance"));
    return s.set("bidirectional", !c.causal).set("init_std", c.real("init_std"));
  };
  out.push_back(std::move(t5));
}

const Registration registered(41, add_t5);

}  // namespace
}  // namespace posenc::nn::families
