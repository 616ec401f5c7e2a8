// The HTML half of `posenc experiment report DIR`: DIR/summary.json (just
// written) rendered by posenc::report (experiments.h) into DIR/report.html
// and DIR/figures/*.png, and one line saying so.
#pragma once

#include <ostream>
#include <string>

namespace posenc::cli {

// Writes the files atomically and prints "wrote DIR/report.html and N
// figures in DIR/figures/" to `out` (stderr under --json, whose stdout is the JSON).
void write_experiment_html(const std::string& dir, std::ostream& out);

}  // namespace posenc::cli
