// The report behind `posenc report` (docs/report.md): every family with its
// default parameters, tables given as files and models trained with
// `posenc train`, each analysed and drawn, side by side.
//
//   input tables      every kind of kernels::absolute_kinds() (bit kinds at
//                     their natural width ceil(log2 N)), learned (its N(0, 0.02)
//                     initialisation, untrained), sinusoidal-2d (16 x 16),
//                     sinusoidal-3d (4 x 8 x 8, D = 126): 3 pictures,
//                     indicators, monotone range, translation residual,
//                     probes; N = 256 positions, D = 128
//   query/key         rope, p-rope (p = 0.25) and rope-axial-2d (16 x 16) as their cos/sin tables
//                     (full analysis, rope with its exact rotation); rope-xpos:
//                     S[i, j] = Q_i . K_j of xPos's query and key tables
//                     (scale base 512), pictures and indicators
//   attention biases  alibi (8 heads), t5 (32 buckets, 8 heads, its seeded
//                     N(0, 0.02) table, untrained): S = the bidirectional bias
//                     averaged over heads; similarity and decay pictures,
//                     indicators, monotone range (table metrics n/a);
//                     kerple and kerple-power at r1 = 1, r2 = 0.5 (the means
//                     of the authors' initialisation), one head
//   relative vectors  shaw, sinusoidal-relative, xl, 2d-relative: the
//                     identical-word attention of a fresh seeded one-layer
//                     attention (needs the torch layer; skipped by --quick)
//   table files       as input tables
//   trained models    identical-word attention of a `posenc train` run
//                     (analysis::identical_word_attention; needs the torch layer)
//   experiments       --experiments DIR: a suite's summary.json as its own
//                     section (experiments.h), after the encodings
// Deterministic: the same options give the same numbers and figures.
// The library never prints: progress goes to a callback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/report/experiments.h"
#include "posenc/report/figure.h"
#include "posenc/report/table_analysis.h"

namespace posenc::report {

struct TableFile {
  std::string path;                   // .npy or .safetensors
  std::optional<std::string> tensor;  // the tensor's name (FILE:NAME on the command line)
};

// "FILE" or "FILE:NAME", split after ".npy" / ".safetensors" (a ':' in the
// name stays). Throws "[report] --table must be FILE.npy or FILE.safetensors[:NAME], got 'x'".
TableFile parse_table_file(std::string_view text);

struct ReportOptions {
  bool quick = false;  // 64 positions, small pictures, no model building for the relative families
  std::vector<TableFile> tables;
  std::vector<std::filesystem::path> models;  // `posenc train --out` directories
  // Experiment suite directories holding a summary.json (`posenc experiment
  // report DIR`): one section each, after the encodings (experiments.h).
  std::vector<std::filesystem::path> experiments;
  uint64_t seed = 0;   // learned / t5 initialisations, fresh models, probes
};

enum class SectionGroup { kInputTable, kQueryKey, kAttentionBias, kRelativeVectors, kTableFile, kTrainedModel };
// "input table" | "query/key transform" | "attention bias" | "relative vectors" | "table file" | "trained model"
std::string_view section_group_name(SectionGroup group) noexcept;

struct Section {
  std::string name;         // "sinusoidal", "alibi", "run out/runs/rope"
  std::string id;           // unique, [a-z0-9-]: figure file names and the HTML anchor
  SectionGroup group = SectionGroup::kInputTable;
  std::string description;  // formula and paper, one or two sentences
  std::string matrix_label; // what S is: "dot proximity", "ALiBi bias averaged over 8 heads", ...
  bool untrained = false;   // an initialisation, not a trained table
  std::vector<int64_t> shape;  // the table's [n, d], or S's [n, n]
  std::string note;         // what is missing and why (empty when complete)
  std::optional<TableAnalysis> table;    // tables: full analysis (S is table->similarity)
  std::optional<MatrixAnalysis> matrix;  // biases and attention maps: indicators and monotone range of s
  analysis::Matrix s;                    // the matrix S shown, [n, n]; empty when the section is unavailable
  std::vector<Figure> figures;
  nlohmann::ordered_json details = nlohmann::ordered_json::object();  // e.g. the model's task and step
};

struct Report {
  ReportOptions options;
  std::string version;       // posenc's
  int64_t positions = 0;     // N of the built-in families
  int64_t dim = 0;           // D of the built-in tables
  bool torch_layer = false;  // built with posenc::nn
  std::vector<Section> sections;
  std::vector<ExperimentSection> experiments;  // one per options.experiments, in order
  double seconds = 0;        // wall time of build_report (not in report.json: not deterministic)
};

struct ReportProgress {
  int64_t index = 0;  // 1-based
  int64_t total = 0;
  std::string name;   // the section being built
};

// Builds every section. Bad files and runs throw (their own messages) before
// anything is built; so does an experiment directory without a summary.json:
// "[report] --experiments DIR: no summary.json (run posenc experiment report DIR first)".
Report build_report(const ReportOptions& options,
                    const std::function<void(const ReportProgress&)>& progress = {});

// report.json's object and report.html's text (self-contained: figures as
// data: URIs, inline CSS, no external reference).
nlohmann::ordered_json report_json(const Report& report);
std::string report_html(const Report& report);

struct ReportFiles {
  std::filesystem::path html, json, figures_dir;
  int64_t figures = 0;
};

// Writes DIR/report.html, DIR/report.json and DIR/figures/*.png (the
// experiments' figures too, as figures/experiment-NAME-*.png) (creating
// DIR). Throws std::runtime_error "[report] cannot create directory 'x': ...".
ReportFiles write_report(const Report& report, const std::filesystem::path& dir);

}  // namespace posenc::report
