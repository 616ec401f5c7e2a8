// Attention biases (H, Tq, Tk): ALiBi from its slopes, T5 from the bucket
// table stored beside the bias; hypotheses transposed (built for (Tk, Tq) and
// transposed), the offset's sign flipped, the query offset off by one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "plan.h"
#include "posenc/error.h"
#include "posenc/kernels/alibi.h"
#include "posenc/kernels/t5.h"

namespace posenc::check::detail {
namespace {

struct BiasShape {
  int64_t heads = 0, q_len = 0, k_len = 0;
};

// out[h, i, j] = value(h, i, j) over (heads, q_len, k_len).
template <class F>
std::vector<double> fill(const BiasShape& s, F value) {
  std::vector<double> out(static_cast<size_t>(s.heads * s.q_len * s.k_len));
  for (int64_t h = 0; h < s.heads; ++h) {
    for (int64_t i = 0; i < s.q_len; ++i) {
      for (int64_t j = 0; j < s.k_len; ++j) out[(h * s.q_len + i) * s.k_len + j] = value(h, i, j);
    }
  }
  return out;
}

// A bias built for (heads, k_len, q_len), read as (heads, q_len, k_len).
std::vector<double> transposed(const BiasShape& s, const std::vector<double>& swapped) {
  return fill(s, [&](int64_t h, int64_t i, int64_t j) { return swapped[(h * s.k_len + j) * s.q_len + i]; });
}

Plan alibi(const CheckRequest& request, const BiasShape& s, int64_t offset, bool offset_given) {
  const bool causal = request.bias.causal;
  const std::vector<double> slopes =
      request.bias.alibi_slopes.empty() ? kernels::alibi_slopes(s.heads, "check") : request.bias.alibi_slopes;
  if (static_cast<int64_t>(slopes.size()) != s.heads) {
    fail_argument("check", "the bias has ", s.heads, " heads but the config lists ", slopes.size(), " slopes");
  }
  auto build = [=](BiasShape shape, int64_t query_offset, std::vector<double> m) {
    kernels::AlibiParams p{shape.heads, shape.q_len, shape.k_len, query_offset, causal};
    kernels::validate(p, "check");
    std::vector<double> out(static_cast<size_t>(shape.heads * shape.q_len * shape.k_len));
    kernels::alibi_bias<double>(p, m.data(), out.data(), "check");
    return out;
  };
  // m_h * sign * (j - i'), -inf above the diagonal when causal.
  auto signed_form = [=](double sign) {
    return [=]() {
      return fill(s, [&](int64_t h, int64_t i, int64_t j) {
        const int64_t rel = j - (i + offset);
        if (causal && rel > 0) return -std::numeric_limits<double>::infinity();
        return slopes[h] * sign * static_cast<double>(rel);
      });
    };
  };
  Plan plan;
  plan.reference = "alibi " + std::to_string(s.heads) + " heads, bias -m_h*|j - i'|, i' = i + " +
                   std::to_string(offset) + (causal ? ", causal" : "");
  plan.baseline = {"baseline", plan.reference, [=] { return build(s, offset, slopes); }};
  const BiasShape swapped{s.heads, s.k_len, s.q_len};
  const int64_t swapped_offset = offset_given ? offset : s.q_len - s.k_len;
  plan.hypotheses.push_back({"transposed", "the bias transposed: built for (Tk, Tq) and stored as (Tq, Tk)",
                             [=] { return transposed(s, build(swapped, swapped_offset, slopes)); }});
  plan.hypotheses.push_back({"signed-offset", "signed offset m_h*(j - i') (no absolute value)", signed_form(1.0)});
  plan.hypotheses.push_back({"offset-sign", "offset sign flipped: m_h*(i' - j)", signed_form(-1.0)});
  for (int64_t shift : {1, -1}) {
    plan.hypotheses.push_back({shift > 0 ? "positions+1" : "positions-1",
                               "query positions off by one: i' = i + " + std::to_string(offset + shift),
                               [=] { return build(s, offset + shift, slopes); }});
  }
  std::vector<double> reversed(slopes.rbegin(), slopes.rend());
  plan.hypotheses.push_back({"slopes-reversed", "the slopes in reverse head order",
                             [=] { return build(s, offset, reversed); }});
  return plan;
}

Plan t5(const CheckRequest& request, const BiasShape& s, int64_t offset, bool offset_given) {
  require(request.input.has_value(), "check",
          "kind 't5' needs its bucket table [num_buckets, heads] beside the bias: --input NAME "
          "(relative_attention_bias.weight) or --input-file FILE");
  const DumpedTensor& table = *request.input;
  if (table.shape.size() != 2 || table.shape[1] != s.heads) {
    fail_argument("check", "the bucket table ", table.label, " must be [num_buckets, ", s.heads,
                  "] (heads from the bias), got ", shape_text(table.shape));
  }
  kernels::T5BucketParams params = request.bias.t5;
  if (params.num_buckets == 0) params.num_buckets = table.shape[0];
  if (params.num_buckets != table.shape[0]) {
    fail_argument("check", "num_buckets must be the bucket table's rows ", table.shape[0], ", got ",
                  params.num_buckets);
  }
  kernels::validate(params, "check");
  const std::vector<double>* values = &table.values;
  auto build = [=](kernels::T5BucketParams p, BiasShape shape, int64_t query_offset) {
    const kernels::T5BiasShape t5_shape{shape.heads, shape.q_len, shape.k_len, query_offset};
    kernels::validate(p, t5_shape, "check");
    std::vector<double> out(static_cast<size_t>(shape.heads * shape.q_len * shape.k_len));
    kernels::t5_bias<double>(p, t5_shape, values->data(), out.data(), "check");
    return out;
  };
  Plan plan;
  plan.reference = "t5 " + std::to_string(s.heads) + " heads, table[bucket(j - i'), h], i' = i + " +
                   std::to_string(offset) + ", " + std::to_string(params.num_buckets) + " buckets, max_distance " +
                   std::to_string(params.max_distance) + (params.bidirectional ? ", bidirectional" : ", causal");
  plan.baseline = {"baseline", plan.reference, [=] { return build(params, s, offset); }};
  const BiasShape swapped{s.heads, s.k_len, s.q_len};
  const int64_t swapped_offset = offset_given ? offset : s.q_len - s.k_len;
  plan.hypotheses.push_back({"transposed", "the bias transposed: built for (Tk, Tq) and stored as (Tq, Tk)",
                             [=] { return transposed(s, build(params, swapped, swapped_offset)); }});
  plan.hypotheses.push_back({"offset-sign", "offset sign flipped: bucket(i' - j) instead of bucket(j - i')", [=] {
                               return fill(s, [&](int64_t h, int64_t i, int64_t j) {
                                 const int64_t b = kernels::t5_bucket(params, (i + offset) - j);
                                 return (*values)[b * s.heads + h];
                               });
                             }});
  for (int64_t shift : {1, -1}) {
    plan.hypotheses.push_back({shift > 0 ? "positions+1" : "positions-1",
                               "query positions off by one: i' = i + " + std::to_string(offset + shift),
                               [=] { return build(params, s, offset + shift); }});
  }
  kernels::T5BucketParams other = params;
  other.bidirectional = !params.bidirectional;
  plan.hypotheses.push_back({"other-direction",
                             other.bidirectional ? "bidirectional buckets instead of causal"
                                                 : "causal (unidirectional) buckets instead of bidirectional",
                             [=] { return build(other, s, offset); }});
  return plan;
}

}  // namespace

Plan bias_plan(const CheckRequest& request) {
  std::vector<int64_t> shape = request.tensor.shape;
  if (shape.size() == 4 && shape[0] == 1) shape.erase(shape.begin());
  if (shape.size() != 3) {
    fail_argument("check", "--what bias needs a tensor (heads, q_len, k_len) or (1, heads, q_len, k_len), got ",
                  shape_text(request.tensor.shape));
  }
  const BiasShape s{shape[0], shape[1], shape[2]};
  if (request.bias.heads != 0 && s.heads != request.bias.heads) {
    fail_argument("check", "the bias must have ", request.bias.heads, " heads (the config's), got ", s.heads);
  }
  const bool given = request.bias.query_offset.has_value();
  const int64_t offset = given ? *request.bias.query_offset : s.k_len - s.q_len;
  Plan plan = request.kind == "alibi" ? alibi(request, s, offset, given) : t5(request, s, offset, given);
  plan.what = What::kBias;
  // Bands by the distance |j - i'| of each (i, j); the heads repeat it.
  plan.key.resize(static_cast<size_t>(s.q_len * s.k_len));
  for (int64_t i = 0; i < s.q_len; ++i) {
    for (int64_t j = 0; j < s.k_len; ++j) plan.key[i * s.k_len + j] = std::abs(j - (i + offset));
  }
  plan.inner = 1;
  plan.first_position = offset;
  plan.last_position = offset + s.q_len - 1;
  return plan;
}

}  // namespace posenc::check::detail
