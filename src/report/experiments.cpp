// The experiments' section: summary.json read and checked, dispatched by
// suite, and the page of `posenc experiment report` (DIR/report.html).
#include "posenc/report/experiments.h"

#include <cmath>
#include <cstdio>
#include <system_error>

#include "experiments_internal.h"
#include "html_text.h"
#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif

namespace posenc::report {
namespace detail {
namespace {

constexpr const char* kOp = "report";

}  // namespace

void SummaryReader::invalid(const std::string& path) const {
  fail_runtime(kOp, source_, ": missing or invalid field '", path, "'");
}

const Json& SummaryReader::field(const Json& object, std::string_view key, const std::string& path) const {
  const std::string at = field_path(path, key);
  if (!object.is_object()) invalid(at);
  const auto it = object.find(std::string(key));
  if (it == object.end()) invalid(at);
  return *it;
}

const Json& SummaryReader::array(const Json& object, std::string_view key, const std::string& path) const {
  const Json& v = field(object, key, path);
  if (!v.is_array()) invalid(field_path(path, key));
  return v;
}

const Json& SummaryReader::object(const Json& object, std::string_view key, const std::string& path) const {
  const Json& v = field(object, key, path);
  if (!v.is_object()) invalid(field_path(path, key));
  return v;
}

double SummaryReader::number(const Json& object, std::string_view key, const std::string& path) const {
  const Json& v = field(object, key, path);
  if (!v.is_number()) invalid(field_path(path, key));
  return v.get<double>();
}

std::optional<double> SummaryReader::number_or_null(const Json& object, std::string_view key,
                                                    const std::string& path, bool optional) const {
  if (optional && object.is_object() && !object.contains(std::string(key))) return std::nullopt;
  const Json& v = field(object, key, path);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) invalid(field_path(path, key));
  return v.get<double>();
}

std::optional<double> SummaryReader::probability_or_null(const Json& object, std::string_view key,
                                                         const std::string& path, bool optional) const {
  const std::optional<double> p = number_or_null(object, key, path, optional);
  if (p && !(*p >= 0 && *p <= 1)) invalid(field_path(path, key));
  return p;
}

int64_t SummaryReader::count(const Json& object, std::string_view key, const std::string& path) const {
  const Json& v = field(object, key, path);
  if (!v.is_number_integer() || v.get<int64_t>() < 0) invalid(field_path(path, key));
  return v.get<int64_t>();
}

std::string SummaryReader::text(const Json& object, std::string_view key, const std::string& path) const {
  const Json& v = field(object, key, path);
  if (!v.is_string()) invalid(field_path(path, key));
  return v.get<std::string>();
}

std::string field_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string item_path(const std::string& array_path, size_t index) {
  return array_path + "[" + std::to_string(index) + "]";
}

Stat read_stat(const SummaryReader& r, const Json& object, const std::string& path) {
  Stat s;
  // null, or an object with neither seeds nor mean: nothing was measured.
  if (object.is_null()) return s;
  if (object.is_object() && !object.contains("seeds") && !object.contains("mean")) return s;
  s.seeds = r.count(object, "seeds", path);
  if (s.seeds == 0) return s;  // nothing was measured: mean and sd mean nothing
  s.mean = r.number(object, "mean", path);
  s.sd = r.number_or_null(object, "sd", path, true);
  if (s.seeds == 1) s.sd.reset();
  return s;
}

std::string fixed_text(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string p_text(double p) { return p < 0.001 ? std::string("&lt;0.001") : fixed_text(p, 3); }

std::string p_cell(std::optional<double> p, std::optional<double> p_holm, const std::string& title) {
  if (!p) return "<td class=\"na\" title=\"p undefined\">n/a</td>";
  const bool significant = *p < 0.05, after_holm = p_holm && *p_holm < 0.05;
  const std::string holm = p_holm ? ", Holm&#39;s adjusted p = " + fixed_text(*p_holm, 3) : "";
  const char* cls = after_holm ? " class=\"holm\"" : significant ? " class=\"significant\"" : "";
  return std::string("<td") + cls + " title=\"" + title + holm + "\">" + p_text(*p) +
         (after_holm ? " &dagger;" : significant ? " *" : "") + "</td>";
}

std::string stat_text(const Stat& s, int decimals) {
  if (s.seeds == 0) return "n/a";
  std::string t = fixed_text(s.mean, decimals);
  if (s.sd) t += " &plusmn; " + fixed_text(*s.sd, decimals);
  return t;
}

int perplexity_decimals(double v) noexcept {
  const double a = std::abs(v);
  return a < 100 ? 2 : a < 10000 ? 1 : 0;
}

std::string css_color(plot::Rgb c) {
  char text[8];
  std::snprintf(text, sizeof text, "#%02x%02x%02x", c.r, c.g, c.b);
  return text;
}

std::string figure_html(const Figure& figure, std::string_view alt) {
  return "<figure class=\"wide\"><img alt=\"" + escape_html(alt) + "\" src=\"" + png_data_uri(figure.png) +
         "\"><figcaption>" + escape_html(figure.caption) + "</figcaption></figure>\n";
}

const char* const kExperimentStyle = R"(
section.experiment figure.wide { display: block; width: auto; max-width: 100%; margin: 0.8em 0; }
section.experiment figure.wide img { width: auto; max-width: 100%; }
section.experiment table { margin: 0.6em 0; }
section.experiment tr.group th { background: #fafafa; text-align: left; font-style: italic; }
section.experiment td.na { color: #888; cursor: help; }
section.experiment td.best { font-weight: bold; }
section.experiment td.significant { background: #fde2c8; font-weight: bold; }
section.experiment td.holm { background: #f9b87a; font-weight: bold; }
section.experiment td.self { color: #bbb; }
section.experiment .swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.4em; border-radius: 2px; vertical-align: -0.05em; }
section.experiment ol.footnotes { font-size: 0.85em; color: #555; }
section.experiment .how { background: #f7f7f7; border-left: 4px solid #aaa; padding: 0.4em 0.8em; }
)";

}  // namespace detail

namespace {

using detail::escape_html;

constexpr const char* kOp = "report";

// A hue per family (ColorBrewer's sequential ramps, darkest usable shade
// first): members of a family read as related and still apart.
struct Ramp {
  std::string_view family;
  plot::Rgb shades[6];
};
constexpr Ramp kRamps[] = {
    {"none", {{82, 82, 82}, {150, 150, 150}, {37, 37, 37}, {189, 189, 189}, {115, 115, 115}, {204, 204, 204}}},
    {"absolute", {{33, 113, 181}, {107, 174, 214}, {8, 48, 107}, {66, 146, 198}, {158, 202, 225}, {8, 81, 156}}},
    {"rotary", {{217, 72, 1}, {253, 141, 60}, {127, 39, 4}, {241, 105, 19}, {253, 174, 107}, {166, 54, 3}}},
    {"bias", {{35, 139, 69}, {116, 196, 118}, {0, 68, 27}, {65, 171, 93}, {161, 217, 155}, {0, 109, 44}}},
    {"relative", {{106, 81, 163}, {158, 154, 200}, {63, 0, 125}, {128, 125, 186}, {188, 189, 220}, {84, 39, 143}}},
    {"absolute+relative",
     {{1, 133, 113}, {90, 180, 172}, {1, 70, 54}, {53, 151, 143}, {128, 205, 193}, {1, 102, 94}}},
    {"other", {{140, 81, 10}, {191, 129, 45}, {84, 48, 5}, {223, 194, 125}, {166, 97, 26}, {201, 148, 71}}},
};

}  // namespace

std::string_view encoding_family(std::string_view encoding) noexcept {
  const std::string_view first = encoding.substr(0, encoding.find('+'));
  // The torch-free report cannot ask nn's registry for an encoding's point, so
  // the families of docs/experiments.md are named here by their prefixes.
  if (first == "none") return "none";
  if (first == "sinusoidal" || first == "learned" || first == "learnable-sinusoidal") return "absolute";
  if (first.starts_with("rope")) return "rotary";
  if (first == "alibi" || first == "t5" || first == "fire" || first == "cope") return "bias";
  if (first.starts_with("shaw") || first == "xl" || first == "sinusoidal-relative") return "relative";
  return "other";
}

plot::Rgb family_color(std::string_view family, int member) noexcept {
  const Ramp* ramp = &kRamps[std::size(kRamps) - 1];
  for (const Ramp& r : kRamps) {
    if (r.family == family) ramp = &r;
  }
  const int n = static_cast<int>(std::size(ramp->shades));
  return ramp->shades[((member % n) + n) % n];
}

ExperimentSection render_experiment(const nlohmann::ordered_json& summary, std::string_view source,
                                    std::string_view id, std::string_view title) {
  const detail::SummaryReader reader{std::string(source)};
  const std::string suite = reader.text(summary, "suite", "");
  ExperimentSection section;
  section.source = std::string(source);
  section.suite = suite;
  section.id = std::string(id);
  section.title = std::string(title);
  section.summary = summary;
  if (suite == "extrapolation") return detail::render_extrapolation(summary, reader, std::move(section));
  if (suite == "properties") return detail::render_properties(summary, reader, std::move(section));
  fail_runtime(kOp, source, ": unknown suite '", suite, "'");
}

ExperimentSection read_experiment(const std::filesystem::path& dir, std::string_view id) {
  const std::string source = (dir / "summary.json").string();
  const std::string text = io::read_regular_file(kOp, source);
  nlohmann::ordered_json summary;
  try {
    summary = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail_runtime(kOp, source, ": not valid JSON (", e.what(), ")");
  }
  const std::string suite = summary.is_object() && summary.contains("suite") && summary["suite"].is_string()
                                ? summary["suite"].get<std::string>()
                                : std::string("experiment");
  return render_experiment(summary, source, id, suite + ": " + dir.string());
}

std::string experiment_page(const ExperimentSection& section) {
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>posenc experiment: " +
       escape_html(section.title) + "</title>\n<style>";
  h += R"(
body { font-family: sans-serif; margin: 2em auto; max-width: 1240px; color: #222; line-height: 1.45; padding: 0 1em; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.55em; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; }
td.name, th.name { text-align: left; }
.meta { color: #555; }
figcaption { font-size: 0.85em; color: #555; }
figure img { border: 1px solid #ddd; }
)";
  h += detail::kExperimentStyle;
  h += "</style>\n</head>\n<body>\n<h1>posenc experiment report</h1>\n<p class=\"meta\">posenc " +
       escape_html(POSENC_VERSION) + "; from " + escape_html(section.source) +
       " (docs/experiments.md explains the suites)</p>\n";
  h += section.html;
  h += detail::kImagesLoadedScript;
  h += "</body>\n</html>\n";
  return h;
}

ExperimentFiles write_experiment_report(const ExperimentSection& section, const std::filesystem::path& dir) {
  ExperimentFiles files;
  files.html = dir / "report.html";
  files.figures_dir = dir / "figures";
  std::error_code error;
  std::filesystem::create_directories(files.figures_dir, error);
  if (error) fail_runtime(kOp, "cannot create directory '", files.figures_dir.string(), "': ", error.message());
  for (const Figure& f : section.figures) {
    plot::write_png_file((dir / f.file).string(), f.png);
    ++files.figures;
  }
  io::write_file_atomically(kOp, files.html.string(), experiment_page(section));
  return files;
}

}  // namespace posenc::report
