// A downstream program using every installed posenc target: a sinusoidal
// table (kernels), saved and read back as .npy (io), its proximity
// indicators (analysis), a heatmap PNG (plot), a Llama 3 config.json's rotary
// scheme (hf), a dumped cos/sin cache checked (check), and, when posenc has
// the torch layer, a RotaryEmbedding (nn, nn_part.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "posenc/analysis/indicators.h"
#include "posenc/analysis/proximity.h"
#include "posenc/check/check.h"
#include "posenc/hf/hf_config.h"
#include "posenc/io/npy.h"
#include "posenc/kernels/sinusoidal.h"
#include "posenc/plot/figures.h"

#ifdef CONSUMER_WITH_NN
bool nn_works();  // nn_part.cpp
#endif

namespace {

constexpr int kRows = 16, kCols = 8;

bool check(bool ok, const char* what) {
  std::printf("consumer: %s %s\n", what, ok ? "ok" : "WRONG");
  return ok;
}

// The table as a heatmap: PNG bytes start with the 8-byte PNG signature.
bool plots(const std::vector<float>& table) {
  const std::vector<double> values(table.begin(), table.end());  // the figure views, never owns
  posenc::plot::HeatmapFigure figure;
  figure.values = values;
  figure.rows = kRows;
  figure.cols = kCols;
  figure.colormap = posenc::plot::ColorMap::kDiverging;
  const std::vector<unsigned char> png = posenc::plot::render_heatmap(figure);
  const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return png.size() > 8 && std::equal(signature, signature + 8, png.begin());
}

// Written and read back bit for bit.
bool round_trips(const std::vector<float>& table) {
  const std::string path = (std::filesystem::temp_directory_path() / "posenc_consumer_table.npy").string();
  posenc::io::write_npy(path, table, {kRows, kCols});
  const posenc::io::NpyArray back = posenc::io::read_npy(path);
  std::filesystem::remove(path);
  const auto* values = std::get_if<std::vector<float>>(&back.data);
  return back.shape == std::vector<int64_t>{kRows, kCols} && values != nullptr && *values == table;
}

// The sinusoid's dot-product proximity falls off with |i - j| (Wang et al.): symmetric, translation invariant.
bool analyses(const std::vector<float>& table) {
  posenc::analysis::Matrix m(kRows, kCols);
  std::copy(table.begin(), table.end(), m.values.begin());
  const posenc::analysis::Indicators ind =
      posenc::analysis::indicators(posenc::analysis::proximity(m, posenc::analysis::ProximityKind::kDot));
  return std::abs(ind.symmetry - 1.0) < 1e-9 && ind.translation_invariance > 0.99;
}

// Llama 3.1's rope_scaling, as its config.json has it.
bool reads_hf_config() {
  const posenc::hf::HfScheme s = posenc::hf::read_hf_config(R"({
    "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  const auto& r = s.scheme.rotary;
  return r && r->head_dim == 128 && r->rotary_dim == 128 && r->base == 500000.0 &&
         r->scaling.type == posenc::kernels::RopeType::kLlama3;
}

// A cos/sin cache computed the common float32 way at positions 0..4095 is diagnosed as such.
bool checks_a_port() {
  constexpr int n = 4096, r = 8;
  posenc::check::CheckRequest request;
  request.kind = "rope";
  request.tensor.label = "cache";
  request.tensor.dtype = "float32";
  request.tensor.shape = {n, r};
  request.tensor.values.resize(n * r);
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < r / 2; ++j) {
      const float omega = static_cast<float>(std::pow(10000.0, -2.0 * j / r));
      const float angle = static_cast<float>(p) * omega;  // float32 angles, as many ports compute them
      request.tensor.values[p * r + j] = std::cos(angle);
      request.tensor.values[p * r + r / 2 + j] = std::sin(angle);
    }
  }
  const posenc::check::CheckReport report = posenc::check::run_check(request);
  bool named = false;
  for (const auto& h : report.hypotheses) named = named || (h.name == "fp32-angles" && h.explains);
  return !report.matches && named;
}

}  // namespace

int main() {
  using namespace posenc::kernels;
  std::vector<float> table(kRows * kCols);
  sinusoidal_table<float>({kCols}, Positions::range(0, kRows), table);
  // Row 3, column 0 is sin(3 * omega_0) = sin(3).
  bool ok = check(std::abs(table[3 * kCols] - std::sin(3.0f)) < 1e-6f, "kernels: sinusoidal table");
  ok = check(round_trips(table), "io: .npy round trip") && ok;
  ok = check(analyses(table), "analysis: indicators") && ok;
  ok = check(plots(table), "plot: heatmap png") && ok;
  ok = check(reads_hf_config(), "hf: Llama 3.1 config") && ok;
  ok = check(checks_a_port(), "check: float32 angles diagnosed") && ok;
#ifdef CONSUMER_WITH_NN
  ok = check(nn_works(), "nn: RotaryEmbedding") && ok;
#endif
  try {
    sinusoidal_table<float>({7}, Positions::range(0, kRows), table);
    return 1;
  } catch (const std::invalid_argument& e) {
    std::printf("consumer: error reporting works: %s\n", e.what());
  }
  return ok ? 0 : 1;
}
