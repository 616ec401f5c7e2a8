#include "posenc/report/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "attention_maps.h"
#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/kernels/alibi.h"
#include "posenc/kernels/kerple.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_axes.h"
#include "posenc/kernels/t5.h"
#include "posenc/plot/figures.h"
#include "posenc/report/pictures.h"
#include "random_normal.h"

#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif

namespace posenc::report {
namespace {

constexpr const char* kOp = "report";

// The sizes of the two runs (docs/report.md): the classic figure by default;
// --quick trades resolution for a run of a few seconds.
struct Settings {
  bool quick = false;
  int64_t positions = 256;
  int64_t dim = 128;
  int64_t grid_side = 16;           // sinusoidal-2d and 2d-relative: side^2 = positions
  int64_t grid3d_frames = 4, grid3d_side = 8;
  int64_t grid3d_dim = 126;         // the multiple of 6 nearest 128
  int64_t heads = 8;                // ALiBi and T5
  int64_t words = 64;               // identical-word probing
  analysis::ProbeOptions probe;     // folds 5, 4096 pairs
  PictureSize heatmap, line;        // 0: plot's defaults
  uint64_t seed = 0;
};

Settings settings_for(const ReportOptions& options) {
  Settings s;
  s.seed = options.seed;
  if (options.quick) {
    s.quick = true;
    s.positions = 64;
    s.dim = 32;
    s.grid_side = 8;
    s.grid3d_frames = 4, s.grid3d_side = 4;
    s.grid3d_dim = 30;
    s.probe.pairs = 1024;
    s.heatmap = {360, 300};
    s.line = {360, 240};
  }
  return s;
}

// ceil(log2(n)): the bits that tell n positions apart.
int64_t bit_width(int64_t n) {
  int64_t bits = 1;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

bool is_bit_kind(kernels::AbsoluteKind kind) {
  using enum kernels::AbsoluteKind;
  return kind == kBinary || kind == kSignedBinary || kind == kSineBinary;
}

// File names and anchors: lower-case letters, digits and '-'.
std::string slug(std::string_view name) {
  std::string s;
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    const bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (keep) {
      s += c;
    } else if (!s.empty() && s.back() != '-') {
      s += '-';
    }
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "encoding" : s;
}

std::vector<int64_t> shape_of(const analysis::Matrix& m) { return {m.rows, m.cols}; }

class Builder {
 public:
  explicit Builder(const Settings& settings) : s_(settings) {}

  // Full analysis of a table: 3 pictures, indicators, monotone range, translation, probes.
  Section table_section(const TableSource& source, SectionGroup group) {
    Section sec = start(source.name, group);
    sec.description = source.description;
    sec.untrained = source.untrained;
    sec.shape = shape_of(source.table);
    sec.matrix_label = "dot proximity";
    TableAnalysisOptions options;
    options.seed = s_.seed;
    options.probes = true;
    options.probe = s_.probe;
    try {
      sec.table = analyze_table(source, options);
    } catch (const std::invalid_argument& e) {
      // A degenerate table (all zeros, constant rows) has no indicators: the
      // section says why instead of failing the whole report.
      sec.note = e.what();
      add_figure(sec, Picture::kEncoding, encoding_picture(source.table, sec.name, s_.heatmap),
                 "the table PE[position, dimension]");
      return sec;
    }
    sec.s = sec.table->similarity;
    add_figure(sec, Picture::kEncoding, encoding_picture(source.table, sec.name, s_.heatmap),
               "the table PE[position, dimension]");
    add_matrix_figures(sec, sec.table->similarity);
    return sec;
  }

  // A matrix indexed by positions (bias, attention): 2 pictures, indicators, monotone range.
  Section matrix_section(Section sec, const analysis::Matrix& s) {
    sec.shape = shape_of(s);
    sec.matrix = analyze_matrix(s);
    add_matrix_figures(sec, s);
    sec.s = s;
    return sec;
  }

  Section start(std::string_view name, SectionGroup group) {
    Section sec;
    sec.name = std::string(name);
    sec.group = group;
    sec.id = unique_id(slug(name));
    return sec;
  }

  // base, or base-2, base-3, ...: the first not taken by a section or an experiment.
  std::string unique_id(const std::string& base) {
    std::string id = base;
    for (int k = 2; !ids_.insert(id).second; ++k) id = base + "-" + std::to_string(k);
    return id;
  }

 private:
  void add_matrix_figures(Section& sec, const analysis::Matrix& s) {
    const int64_t reference = s.rows / 2;
    add_figure(sec, Picture::kSimilarity, similarity_picture(s, sec.name, sec.matrix_label, s_.heatmap),
               "S[i, j], " + sec.matrix_label);
    add_figure(sec, Picture::kDecay, decay_picture(s, reference, sec.name, sec.matrix_label, s_.line),
               "S[" + std::to_string(reference) + ", j] against j (dashed: j = " + std::to_string(reference) + ")");
  }

  void add_figure(Section& sec, Picture picture, std::vector<unsigned char> png, std::string caption) {
    sec.figures.push_back({"figures/" + sec.id + "-" + std::string(picture_name(picture)) + ".png",
                           std::move(caption), std::move(png)});
  }

  const Settings& s_;
  std::set<std::string> ids_;
};

// S = the bias [heads, n, n] averaged over heads.
analysis::Matrix mean_over_heads(const std::vector<double>& bias, int64_t heads, int64_t n) {
  analysis::Matrix s(n, n);
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t k = 0; k < n * n; ++k) s.values[static_cast<size_t>(k)] += bias[static_cast<size_t>(h * n * n + k)];
  }
  for (double& v : s.values) v /= static_cast<double>(heads);
  return s;
}

analysis::Matrix alibi_matrix(const Settings& s) {
  kernels::AlibiParams p;
  p.num_heads = s.heads;
  p.q_len = p.k_len = s.positions;
  const std::vector<double> slopes = kernels::alibi_slopes(s.heads, kOp);
  std::vector<double> bias(static_cast<size_t>(s.heads * s.positions * s.positions));
  kernels::alibi_bias<double>(p, slopes.data(), bias.data(), kOp);
  return mean_over_heads(bias, s.heads, s.positions);
}

analysis::Matrix t5_matrix(const Settings& s, uint64_t seed) {
  const kernels::T5BucketParams buckets;  // bidirectional, 32 buckets, max distance 128
  kernels::T5BiasShape shape;
  shape.heads = s.heads;
  shape.q_len = shape.k_len = s.positions;
  const std::vector<double> table = detail::normal_values(static_cast<size_t>(buckets.num_buckets * s.heads), 0.02, seed);
  std::vector<double> bias(static_cast<size_t>(s.heads * s.positions * s.positions));
  kernels::t5_bias<double>(buckets, shape, table.data(), bias.data(), kOp);
  return mean_over_heads(bias, s.heads, s.positions);
}

// KERPLE at r1 = 1, r2 = 0.5, the means of the authors' U(0, 2), U(0, 1)
// initialisation: one head (every head alike), offset rows read at j - i + N - 1.
analysis::Matrix kerple_matrix(const Settings& s, kernels::KerpleKind kind) {
  const kernels::KerpleParams p{kind, 1, s.positions, s.positions};
  const double r1 = 1.0, r2 = 0.5;
  std::vector<double> rows(static_cast<size_t>(kernels::kerple_columns(p)));
  kernels::kerple_offset_bias(p, &r1, &r2, rows.data(), kOp);
  analysis::Matrix m(s.positions, s.positions);
  for (int64_t i = 0; i < s.positions; ++i) {
    for (int64_t j = 0; j < s.positions; ++j) m(i, j) = rows[static_cast<size_t>(j - i + s.positions - 1)];
  }
  return m;
}

// S[i, j] = Q_i . K_j, Q and K the cos/sin tables [N, D] of xPos's queries
// (zeta^(+p/scale_base)) and keys (zeta^(-p/scale_base)): a pair's terms sum to
// zeta^((i - j)/scale_base) cos((i - j) omega).
constexpr double kXposScaleBase = 512.0;

analysis::Matrix xpos_matrix(const Settings& s) {
  const int64_t n = s.positions, half = s.dim / 2;
  const kernels::RopeFrequencies f = kernels::rope_frequencies(s.dim, 10000.0, {}, std::nullopt, kOp);
  const std::vector<double> zeta = kernels::xpos_zeta(s.dim);
  auto table = [&](double power) {
    kernels::RopeTableSpec spec;
    spec.omega = f.inv_freq;
    spec.xpos_zeta = zeta;
    spec.xpos_power = power;
    std::vector<double> cos(static_cast<size_t>(n * half)), sin(cos.size());
    kernels::rope_cos_sin_range<double>(spec, 0, n, cos.data(), sin.data());
    return std::pair{std::move(cos), std::move(sin)};
  };
  const auto [qc, qs] = table(1.0 / kXposScaleBase);
  const auto [kc, ks] = table(-1.0 / kXposScaleBase);
  analysis::Matrix m(n, n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < half; ++k) {
        const size_t a = static_cast<size_t>(i * half + k), b = static_cast<size_t>(j * half + k);
        sum += qc[a] * kc[b] + qs[a] * ks[b];
      }
      m(i, j) = sum;
    }
  }
  return m;
}

struct RelativeFamily {
  const char* name;
  const char* description;
};

constexpr RelativeFamily kRelativeFamilies[] = {
    {"shaw", "learned key and value vectors per clipped offset j - i, |j - i| <= 16 (Shaw et al. 2018)"},
    {"sinusoidal-relative", "fixed sinusoids of the clipped offset used as Shaw's vectors (NEZHA, Wei et al. 2019)"},
    {"xl", "(q_i + u) . k_j + (q_i + v) . W_R R_{i-j}, R a sinusoid of the offset (Transformer-XL, Dai et al. 2019)"},
    {"2d-relative", "row and column offset tables on an image grid (BoTNet, Srinivas et al. 2021)"},
};

// Seeds of the initialisations: one stream per family, all from options.seed.
constexpr uint64_t kLearnedStream = 0, kT5Stream = 1, kFreshModelStream = 2;

}  // namespace

std::string_view section_group_name(SectionGroup group) noexcept {
  switch (group) {
    case SectionGroup::kInputTable: return "input table";
    case SectionGroup::kQueryKey: return "query/key transform";
    case SectionGroup::kAttentionBias: return "attention bias";
    case SectionGroup::kRelativeVectors: return "relative vectors";
    case SectionGroup::kTableFile: return "table file";
    case SectionGroup::kTrainedModel: return "trained model";
  }
  return "?";
}

TableFile parse_table_file(std::string_view text) {
  for (std::string_view ext : {std::string_view(".safetensors"), std::string_view(".npy")}) {
    const size_t at = text.find(ext);
    if (at == std::string_view::npos) continue;
    const size_t end = at + ext.size();
    if (end == text.size()) return {std::string(text), std::nullopt};
    if (text[end] == ':' && end + 1 < text.size()) {
      return {std::string(text.substr(0, end)), std::string(text.substr(end + 1))};
    }
  }
  fail_argument(kOp, "--table must be FILE.npy or FILE.safetensors[:NAME], got '", text, "'");
}

Report build_report(const ReportOptions& options, const std::function<void(const ReportProgress&)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  const Settings s = settings_for(options);
  Report report;
  report.options = options;
  report.version = POSENC_VERSION;
  report.positions = s.positions;
  report.dim = s.dim;
  report.torch_layer = detail::torch_layer_available();

  // Inputs first, so a bad file or run fails before minutes of work.
  std::vector<TableSource> files;
  for (const TableFile& f : options.tables) files.push_back(file_source(kOp, f.path, f.tensor));
  for (const std::filesystem::path& run : options.models) {
    require(std::filesystem::is_regular_file(run / "config.json"), kOp, "--model ", run.string(),
            " is not a posenc run (no config.json)");
  }

  for (const std::filesystem::path& dir : options.experiments) {
    std::error_code error;
    require(std::filesystem::is_regular_file(dir / "summary.json", error), kOp, "--experiments ", dir.string(),
            ": no summary.json (run posenc experiment report ", dir.string(), " first)");
  }
  Builder b(s);
  // Rendered now (a moment each), so that a malformed summary fails before the sections' work.
  for (const std::filesystem::path& dir : options.experiments) {
    // "out/experiments/extrapolation/" names its section by "extrapolation".
    const std::filesystem::path named = dir.filename().empty() ? dir.parent_path() : dir;
    report.experiments.push_back(
        read_experiment(dir, b.unique_id("experiment-" + slug(named.filename().string()))));
  }

  // Every section as a job, so progress knows the total.
  std::vector<std::pair<std::string, std::function<Section()>>> jobs;
  const kernels::Positions positions = kernels::Positions::range(0, s.positions);
  for (const kernels::AbsoluteKindInfo& info : kernels::absolute_kinds()) {
    jobs.emplace_back(std::string(info.name), [&, info] {
      kernels::AbsoluteParams p;
      p.kind = info.kind;
      p.dim = is_bit_kind(info.kind) ? bit_width(s.positions) : s.dim;
      return b.table_section(absolute_source(info.name, p, positions), SectionGroup::kInputTable);
    });
  }
  jobs.emplace_back("learned", [&] {
    return b.table_section(learned_init_source("learned", s.positions, s.dim, 0.02, s.seed + kLearnedStream),
                           SectionGroup::kInputTable);
  });
  jobs.emplace_back("sinusoidal-2d", [&] {
    kernels::SinusoidalGridParams p;
    p.height = p.width = s.grid_side;
    p.dim = s.dim;
    return b.table_section(grid_source("sinusoidal-2d", false, p), SectionGroup::kInputTable);
  });
  jobs.emplace_back("sinusoidal-3d", [&] {
    kernels::SinusoidalGridParams p;
    p.frames = s.grid3d_frames;
    p.height = p.width = s.grid3d_side;
    p.dim = s.grid3d_dim;
    return b.table_section(grid_source("sinusoidal-3d", true, p), SectionGroup::kInputTable);
  });
  jobs.emplace_back("rope", [&] {
    return b.table_section(rope_source("rope", s.dim, 10000.0, {}, std::nullopt, kernels::Precision::kExact, 0,
                                       s.positions),
                           SectionGroup::kQueryKey);
  });
  jobs.emplace_back("p-rope", [&] {
    // p-RoPE at its registry default p = 0.25: Hugging Face's "proportional" type at factor 1.
    kernels::RopeScaling p;
    p.type = kernels::RopeType::kProportional;
    p.partial_rotary_factor = 0.25;
    TableSource source =
        rope_source("p-rope", s.dim, 10000.0, p, std::nullopt, kernels::Precision::kExact, 0, s.positions);
    source.description =
        "p-RoPE cache at p = 0.25: the fastest quarter of RoPE's pairs turn, the others keep cos 1, sin 0 "
        "(Barbero et al. 2024)";
    return b.table_section(std::move(source), SectionGroup::kQueryKey);
  });
  jobs.emplace_back("rope-axial-2d", [&] {
    return b.table_section(rope_axial_source("rope-axial-2d", s.grid_side, s.grid_side, s.dim, 10000.0),
                           SectionGroup::kQueryKey);
  });
  jobs.emplace_back("rope-xpos", [&] {
    Section sec = b.start("rope-xpos", SectionGroup::kQueryKey);
    sec.description =
        "RoPE with xPos scaling: queries carry zeta_k^(p/512) and keys zeta_k^(-p/512), zeta_k = (2k/D + 0.4)/1.4, "
        "so q . k decays with i - j one way and grows the other (Sun et al. 2022)";
    sec.matrix_label = "xPos q.k of cos/sin tables";
    sec.details = {{"scale_base", kXposScaleBase}, {"gamma", 0.4}};
    return b.matrix_section(std::move(sec), xpos_matrix(s));
  });
  jobs.emplace_back("alibi", [&] {
    Section sec = b.start("alibi", SectionGroup::kAttentionBias);
    sec.description = "head h adds -m_h |i - j| to the logits, geometric slopes m_h = 2^(-8h/H) (Press et al. 2022)";
    sec.matrix_label = "ALiBi bias, mean of " + std::to_string(s.heads) + " heads";
    sec.details = {{"heads", s.heads}, {"bidirectional", true}};
    return b.matrix_section(std::move(sec), alibi_matrix(s));
  });
  jobs.emplace_back("t5", [&] {
    Section sec = b.start("t5", SectionGroup::kAttentionBias);
    sec.description =
        "a learned scalar per (bucket of j - i, head), 32 log-spaced buckets up to distance 128 (Raffel et al. 2020)";
    sec.matrix_label = "T5 bias, mean of " + std::to_string(s.heads) + " heads";
    sec.untrained = true;
    sec.details = {{"heads", s.heads}, {"num_buckets", 32}, {"max_distance", 128}, {"bidirectional", true},
                   {"init", "N(0, 0.02^2)"}, {"seed", s.seed + kT5Stream}};
    return b.matrix_section(std::move(sec), t5_matrix(s, s.seed + kT5Stream));
  });
  for (const auto kind : {kernels::KerpleKind::kLog, kernels::KerpleKind::kPower}) {
    const bool power = kind == kernels::KerpleKind::kPower;
    const std::string name = power ? "kerple-power" : "kerple";
    jobs.emplace_back(name, [&, kind, power, name] {
      Section sec = b.start(name, SectionGroup::kAttentionBias);
      sec.description = std::string(power ? "head h adds -r1_h |i - j|^r2_h, r2 in (0, 2]"
                                          : "head h adds -r1_h log(1 + r2_h |i - j|)") +
                        " to the logits, r1, r2 > 0 learned per head (Chi et al. 2022, KERPLE)";
      sec.matrix_label = "KERPLE bias at r1 = 1, r2 = 0.5";
      sec.untrained = true;
      sec.details = {{"r1", 1.0}, {"r2", 0.5}, {"init", "the means of U(0, 2) and U(0, 1)"}, {"bidirectional", true}};
      return b.matrix_section(std::move(sec), kerple_matrix(s, kind));
    });
  }
  for (const RelativeFamily& family : kRelativeFamilies) {
    jobs.emplace_back(family.name, [&, family] {
      Section sec = b.start(family.name, SectionGroup::kRelativeVectors);
      sec.description = family.description;
      sec.matrix_label = "identical-word attention";
      sec.untrained = true;
      if (!report.torch_layer) {
        sec.note = "Needs the torch layer (posenc::nn) to build a model: this posenc was built without it "
                   "(-DPOSENC_BUILD_NN=OFF).";
        return sec;
      }
      if (s.quick) {
        sec.note = "Skipped by --quick (no model is built); run posenc report without --quick.";
        return sec;
      }
      detail::AttentionMap map = detail::fresh_relative_attention(family.name, s.positions, s.grid_side, s.words,
                                                                  s.seed + kFreshModelStream);
      sec.description += ". Shown: the " + map.description + ".";
      sec.details = std::move(map.details);
      return b.matrix_section(std::move(sec), map.attention);
    });
  }
  // Every registry family without a section of its own above (FIRE, DPB, ... as they are added): the
  // identical-word attention of a fresh layer, read from the families' descriptors.
  for (const detail::RegistryFamily& family : detail::registry_families()) {
    if (family.report_section.empty()) continue;
    const bool shown = std::any_of(jobs.begin(), jobs.end(), [&](const auto& job) {
      return job.first == family.report_section;
    });
    if (shown) continue;
    jobs.emplace_back(family.name, [&, family] {
      Section sec = b.start(family.name, family.point == "input"       ? SectionGroup::kInputTable
                                         : family.point == "query/key" ? SectionGroup::kQueryKey
                                         : family.point == "logit bias" ? SectionGroup::kAttentionBias
                                                                        : SectionGroup::kRelativeVectors);
      sec.description = family.description;
      sec.matrix_label = "identical-word attention";
      sec.untrained = true;
      if (s.quick) {
        sec.note = "Skipped by --quick (no model is built); run posenc report without --quick.";
        return sec;
      }
      detail::AttentionMap map =
          detail::fresh_relative_attention(family.name, s.positions, s.grid_side, s.words, s.seed + kFreshModelStream);
      sec.description += ". Shown: the " + map.description + ".";
      sec.details = std::move(map.details);
      return b.matrix_section(std::move(sec), map.attention);
    });
  }
  for (TableSource& file : files) {
    jobs.emplace_back(file.name, [&, f = std::move(file)] { return b.table_section(f, SectionGroup::kTableFile); });
  }
  for (const std::filesystem::path& run : options.models) {
    jobs.emplace_back("run " + run.string(), [&, run] {
      Section sec = b.start("run " + run.string(), SectionGroup::kTrainedModel);
      sec.matrix_label = "identical-word attention";
      sec.description = "a model trained with posenc train";
      if (!report.torch_layer) {
        sec.note = "Needs the torch layer (posenc::nn) to load the model: this posenc was built without it "
                   "(-DPOSENC_BUILD_NN=OFF).";
        return sec;
      }
      detail::AttentionMap map = detail::trained_attention(run);
      sec.description = "The " + map.description + ".";
      sec.details = std::move(map.details);
      return b.matrix_section(std::move(sec), map.attention);
    });
  }

  const int64_t total = static_cast<int64_t>(jobs.size());
  for (int64_t k = 0; k < total; ++k) {
    if (progress) progress({k + 1, total, jobs[static_cast<size_t>(k)].first});
    report.sections.push_back(jobs[static_cast<size_t>(k)].second());
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

nlohmann::ordered_json report_json(const Report& report) {
  nlohmann::ordered_json j;
  j["posenc_version"] = report.version;
  j["quick"] = report.options.quick;
  j["positions"] = report.positions;
  j["dim"] = report.dim;
  j["seed"] = report.options.seed;
  j["torch_layer"] = report.torch_layer;
  nlohmann::ordered_json sections = nlohmann::ordered_json::array();
  for (const Section& sec : report.sections) {
    nlohmann::ordered_json e;
    e["name"] = sec.name;
    e["group"] = std::string(section_group_name(sec.group));
    e["description"] = sec.description;
    e["untrained"] = sec.untrained;
    e["shape"] = sec.shape;
    e["matrix"] = sec.matrix_label;
    e["available"] = sec.table.has_value() || sec.matrix.has_value();
    e["note"] = sec.note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(sec.note);
    // Every key in every section; null where it does not apply (n/a) or is missing.
    nlohmann::ordered_json metrics = {{"monotonicity", nullptr},
                                      {"translation_invariance", nullptr},
                                      {"symmetry", nullptr},
                                      {"window", nullptr},
                                      {"monotone_range", nullptr},
                                      {"monotone_range_distribution", nullptr},
                                      {"proximity", nullptr},
                                      {"translation_residual", nullptr},
                                      {"translation", nullptr},
                                      {"absolute_mae", nullptr},
                                      {"relative_error", nullptr},
                                      {"probe", nullptr}};
    const nlohmann::ordered_json known = sec.table    ? table_json(*sec.table)
                                         : sec.matrix ? matrix_json(*sec.matrix)
                                                      : nlohmann::ordered_json::object();
    for (const auto& [key, value] : known.items()) metrics[key] = value;
    for (const auto& [key, value] : metrics.items()) e[key] = value;
    nlohmann::ordered_json figures = nlohmann::ordered_json::array();
    for (const Figure& f : sec.figures) figures.push_back(f.file);
    e["figures"] = std::move(figures);
    e["details"] = sec.details;
    sections.push_back(std::move(e));
  }
  j["encodings"] = std::move(sections);
  nlohmann::ordered_json experiments = nlohmann::ordered_json::array();
  for (const ExperimentSection& e : report.experiments) {
    nlohmann::ordered_json figures = nlohmann::ordered_json::array();
    for (const Figure& f : e.figures) figures.push_back(f.file);
    experiments.push_back({{"source", e.source}, {"suite", e.suite}, {"id", e.id}, {"title", e.title},
                           {"figures", std::move(figures)}, {"summary", e.summary}});
  }
  j["experiments"] = std::move(experiments);
  return j;
}

ReportFiles write_report(const Report& report, const std::filesystem::path& dir) {
  ReportFiles files;
  files.html = dir / "report.html";
  files.json = dir / "report.json";
  files.figures_dir = dir / "figures";
  std::error_code error;
  std::filesystem::create_directories(files.figures_dir, error);
  if (error) fail_runtime(kOp, "cannot create directory '", files.figures_dir.string(), "': ", error.message());
  auto write_figures = [&](const std::vector<Figure>& figures) {
    for (const Figure& f : figures) {
      plot::write_png_file((dir / f.file).string(), f.png);
      ++files.figures;
    }
  };
  for (const Section& sec : report.sections) write_figures(sec.figures);
  for (const ExperimentSection& e : report.experiments) write_figures(e.figures);
  // Through a temporary file and a rename, as the figures: a reader never sees half a report.
  auto write_text = [](const std::filesystem::path& path, const std::string& text) {
    io::write_file_atomically(kOp, path.string(), text);
  };
  write_text(files.json, report_json(report).dump(2) + "\n");
  write_text(files.html, report_html(report));
  return files;
}

}  // namespace posenc::report
