// Internal to posenc::report: what the two suites' renderers share — a
// reader that names the field a malformed summary lacks, the numbers' text,
// figure markup, and the style sheet of the experiments' tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "posenc/report/experiments.h"

namespace posenc::report::detail {

using Json = nlohmann::ordered_json;

// Typed access to a summary's fields. Every failure is one message,
// "[report] SOURCE: missing or invalid field 'PATH'", PATH as "rows[2].scores[0].mean".
class SummaryReader {
 public:
  explicit SummaryReader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const noexcept { return source_; }

  [[noreturn]] void invalid(const std::string& path) const;
  const Json& field(const Json& object, std::string_view key, const std::string& path) const;
  const Json& array(const Json& object, std::string_view key, const std::string& path) const;
  const Json& object(const Json& object, std::string_view key, const std::string& path) const;
  double number(const Json& object, std::string_view key, const std::string& path) const;
  // null (or absent when `optional`) reads as nothing: a number JSON cannot hold (NaN).
  std::optional<double> number_or_null(const Json& object, std::string_view key, const std::string& path,
                                       bool optional = false) const;
  // number_or_null, and when present in [0, 1] (a p-value).
  std::optional<double> probability_or_null(const Json& object, std::string_view key, const std::string& path,
                                            bool optional = false) const;
  int64_t count(const Json& object, std::string_view key, const std::string& path) const;  // integer >= 0
  std::string text(const Json& object, std::string_view key, const std::string& path) const;

 private:
  std::string source_;
};

// "rows" + "mean" -> "rows.mean"; "" + "rows" -> "rows".
std::string field_path(const std::string& parent, std::string_view key);
// "rows" + 2 -> "rows[2]".
std::string item_path(const std::string& array_path, size_t index);

// A mean over seeds: sd absent with one seed (or when the summary writes null).
struct Stat {
  double mean = 0;
  std::optional<double> sd;
  int64_t seeds = 0;
};
// {"mean": .., "sd": .., "seeds": ..}; with seeds 0, mean and sd may be null;
// null, or an object with neither seeds nor mean, reads as seeds 0.
Stat read_stat(const SummaryReader& r, const Json& object, const std::string& path);

// v with `decimals` decimals; "n/a" for a non-finite v.
std::string fixed_text(double v, int decimals);
// A p-value as the tables show it: "&lt;0.001", else 3 decimals.
std::string p_text(double p);
// A paired test's p as a table cell: "<td class=\"significant\" title=\"...\">0.012 *</td>"; * marks p < 0.05, † also
// Holm's adjusted p < 0.05 (class "holm"), whose value joins the title; "n/a" for a p that is not defined.
std::string p_cell(std::optional<double> p, std::optional<double> p_holm, const std::string& title);
// "218.44 ± 1.20"; "218.44" with one seed (no spread to show); "n/a" with none.
std::string stat_text(const Stat& s, int decimals);
// Decimals that show a perplexity to about 4 significant digits.
int perplexity_decimals(double v) noexcept;
// "#1f77b4"
std::string css_color(plot::Rgb c);

// <figure> with the PNG inlined and its caption.
std::string figure_html(const Figure& figure, std::string_view alt);

// The style sheet of the experiments' sections (added to both pages).
extern const char* const kExperimentStyle;

ExperimentSection render_extrapolation(const Json& summary, const SummaryReader& reader, ExperimentSection section);
ExperimentSection render_properties(const Json& summary, const SummaryReader& reader, ExperimentSection section);

}  // namespace posenc::report::detail
