// The experiments' section of a report (docs/report.md, "Experiments"): a
// suite directory's summary.json (written by `posenc experiment report DIR`)
// rendered as one HTML <section> with its figures, for DIR/report.html and
// for `posenc report --experiments DIR`. Torch-free: it reads JSON only.
//
//   "extrapolation"  test perplexity mean +- sd per encoding and evaluation
//                    length (n/a cells with their reason), and the figure of
//                    perplexity against length (log2 x, log y): one line and
//                    +-1 sd band per encoding, coloured by family, the
//                    training length marked (Press et al., ICLR 2022).
//   "properties"     per task: score mean +- sd by encoding, grouped by the
//                    encoding's group, best in bold, beside the pretraining
//                    perplexity; a dot plot with +-1 sd bars; the paired
//                    t-test p-values of every pair (p < 0.05 marked). Then the
//                    property indicators per encoding and their correlations
//                    with the scores (Wang et al., ICLR 2021).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/plot/figures.h"
#include "posenc/report/figure.h"

namespace posenc::report {

struct ExperimentSection {
  std::string source;  // what errors name: "out/experiments/extrapolation/summary.json"
  std::string suite;   // "extrapolation" | "properties"
  std::string id;      // [a-z0-9-]: the HTML anchor and the start of the figures' names
  std::string title;   // the section's heading
  std::string html;    // <section id="ID"> ... </section>, figures inlined as data: URIs
  std::vector<Figure> figures;     // "figures/ID-perplexity.png", "figures/ID-lexname.png", ...
  nlohmann::ordered_json summary;  // the summary as read
};

// Renders a parsed summary. Throws std::runtime_error naming the source:
//   "[report] DIR/summary.json: unknown suite 'x'"
//   "[report] DIR/summary.json: missing or invalid field 'rows'"
// (a nested field by its path: 'rows[2].scores[0].mean'). Deterministic.
ExperimentSection render_experiment(const nlohmann::ordered_json& summary, std::string_view source,
                                    std::string_view id, std::string_view title);

// DIR/summary.json read and rendered, titled "SUITE: DIR". Throws as
// render_experiment, and "[report] DIR/summary.json: not valid JSON (...)"
// or io's message when the file cannot be read.
ExperimentSection read_experiment(const std::filesystem::path& dir, std::string_view id);

// DIR/report.html of `posenc experiment report`: one self-contained page
// holding the section.
std::string experiment_page(const ExperimentSection& section);

struct ExperimentFiles {
  std::filesystem::path html, figures_dir;
  int64_t figures = 0;
};
// Writes DIR/report.html and DIR/figures/*.png atomically (each through a
// temporary file and a rename). Throws "[report] cannot create directory 'x': ...".
ExperimentFiles write_experiment_report(const ExperimentSection& section, const std::filesystem::path& dir);

// The figures' colours: a hue per family, a shade per member, so that lines
// of one family read as related and still apart. The family of an
// extrapolation row is that of its first '+'-part ("rope+yarn": rotary):
// "none", "absolute", "rotary", "bias", "relative", or "other".
std::string_view encoding_family(std::string_view encoding) noexcept;
// family: the above, or a properties group ("absolute+relative"); member 0, 1, ...
plot::Rgb family_color(std::string_view family, int member) noexcept;

}  // namespace posenc::report
