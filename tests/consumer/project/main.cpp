// A downstream program: builds a sinusoidal table through the installed
// package and draws it as a PNG with the installed posenc::plot.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "posenc/kernels/sinusoidal.h"
#include "posenc/plot/figures.h"

namespace {

// The table as a heatmap: PNG bytes start with the 8-byte PNG signature.
bool plots(const std::vector<float>& table) {
  const std::vector<double> values(table.begin(), table.end());
  posenc::plot::HeatmapFigure figure;
  figure.values = values;
  figure.rows = 16;
  figure.cols = 8;
  figure.colormap = posenc::plot::ColorMap::kDiverging;
  const std::vector<unsigned char> png = posenc::plot::render_heatmap(figure);
  const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  return png.size() > 8 && std::equal(signature, signature + 8, png.begin());
}

}  // namespace

int main() {
  using namespace posenc::kernels;
  std::vector<float> table(16 * 8);
  sinusoidal_table<float>({8}, Positions::range(0, 16), table);
  // Row 3, column 0 is sin(3 * omega_0) = sin(3).
  const bool ok = std::abs(table[3 * 8] - std::sin(3.0f)) < 1e-6f;
  const bool png_ok = plots(table);
  try {
    sinusoidal_table<float>({7}, Positions::range(0, 16), table);
    return 1;
  } catch (const std::invalid_argument& e) {
    std::printf("consumer: %s, %s; error reporting works: %s\n", ok ? "table ok" : "table WRONG",
                png_ok ? "png ok" : "png WRONG", e.what());
  }
  return ok && png_ok ? 0 : 1;
}
