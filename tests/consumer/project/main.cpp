// A downstream program: builds a sinusoidal table through the installed package.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "posenc/kernels/sinusoidal.h"

int main() {
  using namespace posenc::kernels;
  std::vector<float> table(16 * 8);
  sinusoidal_table<float>({8}, Positions::range(0, 16), table);
  // Row 3, column 0 is sin(3 * omega_0) = sin(3).
  const bool ok = std::abs(table[3 * 8] - std::sin(3.0f)) < 1e-6f;
  try {
    sinusoidal_table<float>({7}, Positions::range(0, 16), table);
    return 1;
  } catch (const std::invalid_argument& e) {
    std::printf("consumer: %s; error reporting works: %s\n", ok ? "table ok" : "table WRONG", e.what());
  }
  return ok ? 0 : 1;
}
