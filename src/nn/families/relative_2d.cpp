// BoTNet's 2D relative encoding (Srinivas et al. 2021) on the family contract
// (relative-vectors point): row and column tables on an image grid, and the
// typed C++ front end Relative2d. No registry name: a model's grid is the
// caller's.
#include <ATen/ATen.h>

#include <algorithm>
#include <ostream>
#include <vector>

#include "families/relative_support.h"
#include "posenc/nn/relative_encodings.h"
#include "posenc/nn/relative_ops.h"

namespace posenc::nn {
namespace {

constexpr const char* kRelative2d = "Relative2d";

void check_cells(const FamilySettings& s, int64_t q_len, int64_t k_len) {
  const int64_t cells = s.integer("height") * s.integer("width");
  TORCH_CHECK_VALUE(q_len == cells && k_len == cells, "[", kRelative2d, "] q and k must both have height*width = ",
                    cells, " positions, got ", q_len, " and ", k_len);
}

void grid_check(const FamilySettings& s) {
  const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim");
  families::check_shared_heads(kRelative2d, heads);
  families::check_init_std(kRelative2d, s.real("init_std"));
  const int64_t tables = std::max<int64_t>(heads, 1);
  families::check_table_size(kRelative2d, "table_h (tables x (2*height-1) x head_dim)", tables,
                             2.0L * static_cast<long double>(s.integer("height")) - 1.0L, head_dim);
  families::check_table_size(kRelative2d, "table_w (tables x (2*width-1) x head_dim)", tables,
                             2.0L * static_cast<long double>(s.integer("width")) - 1.0L, head_dim);
}

// q, k (B, H, height*width, Dh) -> (B, H, HW, HW)
at::Tensor grid_logits(const FamilySettings& s, const FamilyState& t, const at::Tensor& q, const at::Tensor& k) {
  check_relative_qk(kRelative2d, s.integer("num_heads"), s.integer("head_dim"), q, k);
  check_cells(s, q.size(2), k.size(2));
  const at::ScalarType compute = relative_compute_dtype(q, t[0]);
  return ops::relative_logits_2d(q.to(compute), t[0].to(compute), t[1].to(compute),
                                 {s.integer("height"), s.integer("width")})
      .to(q.scalar_type());
}

void grid_terms(const FamilySettings& s, const FamilyState& t, AttentionTerms& terms, int64_t q_len, int64_t k_len,
                at::ScalarType compute) {
  check_cells(s, q_len, k_len);
  terms.grid_h = t[0].to(compute);
  terms.grid_w = t[1].to(compute);
  terms.grid_height = s.integer("height");
  terms.grid_width = s.integer("width");
}

FamilyContract grid_contract() {
  FamilyContract c;
  c.module = kRelative2d;
  c.summary =
      "BoTNet on a height x width grid flattened as y*width + x (Tq = Tk = height*width): "
      "logits[b,h,(y,x),(y',x')] = q_(y,x) . (table_h[y'-y+height-1] + table_w[x'-x+width-1]); parameters "
      "table_h [2*height-1, Dh] and table_w [2*width-1, Dh] (or [num_heads, ., Dh]) ~ N(0, init_std^2). "
      "forward(q, k) = logits(q, k), unscaled.";
  c.settings = {size_setting("height", "rows of the grid"), size_setting("width", "columns of the grid"),
                size_setting("head_dim", "features of a query head"), families::shared_heads_setting(),
                real_setting("init_std", 0.02, "N(0, init_std^2) initialisation")};
  c.state = {{"table_h"}, {"table_w"}};
  c.check = grid_check;
  c.shapes = [](const FamilySettings& s) {
    const int64_t heads = s.integer("num_heads"), head_dim = s.integer("head_dim");
    return std::vector<std::vector<int64_t>>{families::table_shape(heads, 2 * s.integer("height") - 1, head_dim),
                                             families::table_shape(heads, 2 * s.integer("width") - 1, head_dim)};
  };
  c.reset = [](const FamilySettings& s, FamilyState& t) {
    for (at::Tensor& table : t) table.normal_(0.0, s.real("init_std"));
  };
  c.relative_logits = grid_logits;
  c.terms = grid_terms;
  c.shown = {"height", "width", "head_dim", "num_heads", "init_std"};
  return c;
}

const FamilyContractRegistration registered_contract(grid_contract());

}  // namespace

Relative2dImpl::Relative2dImpl(const Relative2dOptions& options)
    : FamilyRelativeImpl(kRelative2d, FamilySettings()
                                          .set("height", options.height())
                                          .set("width", options.width())
                                          .set("head_dim", options.head_dim())
                                          .set("num_heads", options.num_heads())
                                          .set("init_std", options.init_std())),
      options_(options) {}

void Relative2dImpl::pretty_print(std::ostream& stream) const {
  stream << "posenc::nn::Relative2d(height=" << options_.height() << ", width=" << options_.width()
         << ", head_dim=" << head_dim() << ", num_heads=" << num_heads() << ", init_std=" << options_.init_std()
         << ")";
}

}  // namespace posenc::nn
