// A figure of the report: its PNG bytes, the file it is saved as and its
// caption. Shared by the encodings' sections (report.h) and the experiments'
// (experiments.h).
#pragma once

#include <string>
#include <vector>

namespace posenc::report {

struct Figure {
  std::string file;     // "figures/sinusoidal-similarity.png" (relative to the report's directory)
  std::string caption;
  std::vector<unsigned char> png;
};

}  // namespace posenc::report
