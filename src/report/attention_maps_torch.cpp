// Identical-word attention through the torch layer (posenc::nn).
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "attention_maps.h"
#include "posenc/analysis/identical_word.h"
#include "posenc/error.h"
#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/multihead_attention.h"
#include "posenc/nn/relative_encodings.h"

namespace posenc::report::detail {
namespace {

// at::set_num_threads for a scope: one thread makes the projections' sums run
// in one fixed order, so the map is the same on every machine.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads) : saved_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~ThreadsScope() { at::set_num_threads(saved_); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

analysis::Matrix to_matrix(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  analysis::Matrix m(c.size(0), c.size(1));
  const double* p = c.data_ptr<double>();
  std::copy(p, p + c.numel(), m.values.begin());
  return m;
}

}  // namespace

bool torch_layer_available() noexcept { return true; }

std::vector<RegistryFamily> registry_families() {
  std::vector<RegistryFamily> out;
  for (const nn::EncodingFamily& f : nn::encoding_families()) {
    const std::string section = !f.in_report ? "" : f.report_section.empty() ? f.name : f.report_section;
    out.push_back({f.name, nn::encoding_point_name(f.point), f.description, section});
  }
  return out;
}

AttentionMap fresh_relative_attention(std::string_view family, int64_t length, int64_t grid_side, int64_t words,
                                      uint64_t seed) {
  const ThreadsScope threads(1);
  torch::NoGradGuard no_grad;
  nn::EncodingConfig config;  // the registry's defaults: D = 64, 4 heads, Shaw k = 16
  const int64_t head_dim = config.dim / config.num_heads;
  torch::manual_seed(seed);
  nn::AttentionEncodings encodings;
  nn::InputEncoding input = nullptr;
  std::string registry_name;
  if (family == "2d-relative") {
    length = grid_side * grid_side;
    encodings.relative = nn::Relative2d(nn::Relative2dOptions(grid_side, grid_side, head_dim).init_std(config.real("init_std")));
    registry_name = "Relative2d (BoTNet), " + std::to_string(grid_side) + " x " + std::to_string(grid_side) + " grid";
  } else {
    registry_name = family == "sinusoidal-relative" ? "shaw-sinusoidal" : std::string(family);
    const nn::EncodingPlan plan = nn::parse_encoding(registry_name);
    for (const std::string& part : plan.parts) config.causal = config.causal || nn::find_encoding_family(part)->needs.causal;
    config.max_positions = std::max(config.max_positions, length);
    encodings = nn::make_attention_encodings(plan, config);
    input = nn::make_input_encoding(plan, config);
  }
  nn::MultiheadAttention layer(nn::MultiheadAttentionOptions(config.dim, config.num_heads).causal(config.causal),
                               encodings);
  layer->eval();
  // Each word is one N(0, 1) embedding repeated at every position: only the
  // positions tell the tokens apart.
  const at::Tensor embeddings = torch::randn({words, 1, config.dim}, at::kFloat);
  at::Tensor x = embeddings.expand({words, length, config.dim}).contiguous();
  if (input) x = input->forward(x);
  const auto [out, weights] = layer->attend(x, x, {}, /*return_weights=*/true);
  AttentionMap map;
  map.attention = to_matrix(weights.to(at::kDouble).mean(at::IntArrayRef{0, 1}));
  std::ostringstream d;
  d << "identical-word attention of a fresh one-layer attention (D = " << config.dim << ", " << config.num_heads
    << " heads, posenc::nn " << registry_name << ", seed " << seed << "), averaged over " << words
    << " words and the heads";
  map.description = d.str();
  map.details = {{"model", "fresh one-layer attention"},
                 {"encoding", registry_name},
                 {"dim", config.dim},
                 {"heads", config.num_heads},
                 {"length", length},
                 {"words", words},
                 {"seed", seed}};
  return map;
}

AttentionMap trained_attention(const std::filesystem::path& run_dir) {
  const analysis::IdenticalWordResult r = analysis::identical_word_attention(run_dir);
  AttentionMap map;
  map.attention = r.attention;
  std::ostringstream d;
  d << "identical-word attention of the first layer of " << r.model.encoding << " trained on " << r.model.task
    << " (step " << r.model.step << ", trained length " << r.model.seq_len << "), averaged over words and heads";
  map.description = d.str();
  map.details = {{"run", run_dir.string()},
                 {"encoding", r.model.encoding},
                 {"task", r.model.task},
                 {"step", r.model.step},
                 {"seq_len", r.model.seq_len},
                 {"checkpoint", r.model.checkpoint.string()}};
  return map;
}

}  // namespace posenc::report::detail
