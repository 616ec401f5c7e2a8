// The report library: every family present in --quick, the matrices it shows
// against plain references (ALiBi's mean slope times |i - j|, xPos's
// zeta^((i-j)/512) cos((i-j) w) sum), the JSON's keys, the HTML's self-
// containment, the files written, and parse_table_file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "attention_maps.h"
#include "posenc/report/report.h"

#include "report_test_support.h"

namespace posenc::report {
namespace {

using test::message_of;

const Report& quick_report() {
  static const Report r = [] {
    ReportOptions options;
    options.quick = true;
    return build_report(options);
  }();
  return r;
}

// const char*, not a std::string temporary: GCC 14 warns (-Wdangling-reference) on a reference
// returned from a call with a temporary argument.
const Section& section(const char* name) {
  for (const Section& s : quick_report().sections) {
    if (s.name == name) return s;
  }
  throw std::runtime_error(std::string("no section ") + name);
}

TEST(Report, QuickHasEveryFamilyInOrder) {
  std::vector<std::string> names;
  for (const Section& s : quick_report().sections) names.push_back(s.name);
  // The sections with a figure of their own, then one for each registry family shown by none of them (the
  // identical-word attention of a fresh layer), in the registry's order.
  const std::vector<std::string> dedicated = {
      "sinusoidal", "index", "normalized", "binary", "signed-binary", "sine-binary", "sine-only", "learned",
      "sinusoidal-2d", "sinusoidal-3d", "rope", "p-rope", "rope-axial-2d", "rope-xpos", "alibi", "t5", "kerple",
      "kerple-power", "shaw", "sinusoidal-relative", "xl", "2d-relative"};
  std::vector<std::string> expected = dedicated;
  for (const detail::RegistryFamily& f : detail::registry_families()) {
    if (f.report_section.empty()) continue;
    if (std::find(dedicated.begin(), dedicated.end(), f.report_section) == dedicated.end()) expected.push_back(f.name);
  }
  EXPECT_EQ(names, expected);
  // Every family of the registry is shown somewhere.
  for (const detail::RegistryFamily& f : detail::registry_families()) {
    if (f.report_section.empty()) continue;
    const std::string shown = std::find(dedicated.begin(), dedicated.end(), f.report_section) != dedicated.end()
                                  ? f.report_section
                                  : f.name;
    EXPECT_NE(std::find(names.begin(), names.end(), shown), names.end()) << f.name;
  }
  EXPECT_EQ(quick_report().positions, 64);
  for (const Section& s : quick_report().sections) {
    const bool available = s.table || s.matrix;
    EXPECT_EQ(available, s.note.empty()) << s.name;
    EXPECT_EQ(s.s.rows, available ? 64 : 0) << s.name;
  }
}

// The generic section's map, for any registry name: rows are probabilities, a causal family's map is causal.
TEST(Report, FreshAttentionOfAnyRegistryFamily) {
  if (!detail::torch_layer_available()) GTEST_SKIP() << "built without the torch layer";
  for (const std::string name : {"kerple", "nope", "learned"}) {
    SCOPED_TRACE(name);
    const detail::AttentionMap map = detail::fresh_relative_attention(name, 12, 0, 3, 7);
    ASSERT_EQ(map.attention.rows, 12);
    for (int64_t i = 0; i < 12; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < 12; ++j) sum += map.attention.values[static_cast<size_t>(i * 12 + j)];
      EXPECT_NEAR(sum, 1.0, 1e-6);  // float32 softmax rows, averaged: a few ulps of 1 per term
      if (name == "nope") {
        EXPECT_EQ(map.attention.values[11], 0.0);  // needs a decoder: built causal
      }
    }
  }
}

TEST(Report, AlibiMatrixIsMeanSlopeTimesDistance) {
  // 8 heads: slopes 2^(-k), k = 1 .. 8 (Press et al.).
  long double mean_slope = 0;
  for (int k = 1; k <= 8; ++k) mean_slope += std::pow(2.0L, -k) / 8;
  const Section& s = section("alibi");
  for (int64_t i = 0; i < 64; ++i) {
    for (int64_t j = 0; j < 64; ++j) {
      EXPECT_NEAR(s.s(i, j), static_cast<double>(-mean_slope * std::abs(i - j)), 1e-12) << i << " " << j;
    }
  }
  EXPECT_EQ(s.matrix->monotone.range, 63);
  EXPECT_TRUE(s.matrix->monotone.all_censored);
  EXPECT_DOUBLE_EQ(s.matrix->indicators.monotonicity, 1.0);
}

TEST(Report, XposMatrixMatchesItsFormula) {
  // S[i, j] = sum_k zeta_k^((i - j)/512) cos((i - j) w_k), w_k = 10000^(-2k/D),
  // zeta_k = (2k/D + 0.4)/1.4 (Sun et al. 2022), D = 32 in --quick.
  const int64_t d = 32;
  const Section& s = section("rope-xpos");
  for (int64_t i = 0; i < 64; i += 3) {
    for (int64_t j = 0; j < 64; j += 5) {
      long double ref = 0;
      for (int64_t k = 0; k < d / 2; ++k) {
        const long double omega = std::pow(10000.0L, -2.0L * k / d);
        const long double zeta = (2.0L * k / d + 0.4L) / 1.4L;
        ref += std::pow(zeta, (i - j) / 512.0L) * std::cos((i - j) * omega);
      }
      EXPECT_NEAR(s.s(i, j), static_cast<double>(ref), 1e-12) << i << " " << j;
    }
  }
}

TEST(Report, T5MatrixIsToeplitz) {
  const Section& s = section("t5");
  EXPECT_TRUE(s.untrained);
  for (int64_t i = 1; i < 64; ++i) {
    for (int64_t j = 1; j < 64; ++j) EXPECT_EQ(s.s(i, j), s.s(i - 1, j - 1));  // a function of j - i
  }
  EXPECT_NEAR(s.matrix->indicators.translation_invariance, 1.0, 1e-12);
}

TEST(Report, JsonHasEveryKeyAndNullsForNotApplicable) {
  const nlohmann::ordered_json j = report_json(quick_report());
  ASSERT_EQ(j["encodings"].size(), quick_report().sections.size());
  for (const auto& e : j["encodings"]) {
    for (const char* key : {"name", "group", "description", "untrained", "shape", "matrix", "available", "note",
                            "monotonicity", "translation_invariance", "symmetry", "window", "monotone_range",
                            "monotone_range_distribution", "proximity", "translation_residual", "translation",
                            "absolute_mae", "relative_error", "probe", "figures", "details"}) {
      EXPECT_TRUE(e.contains(key)) << e["name"] << " " << key;
    }
  }
  const auto& alibi = j["encodings"][14];
  EXPECT_EQ(alibi["name"], "alibi");
  EXPECT_TRUE(alibi["translation_residual"].is_null());
  EXPECT_TRUE(alibi["absolute_mae"].is_null());
  EXPECT_EQ(alibi["monotone_range"], 63);
  const auto& sinusoidal = j["encodings"][0];
  EXPECT_EQ(sinusoidal["translation"]["method"], "exact");
  EXPECT_EQ(sinusoidal["figures"].size(), 3u);
}

TEST(Report, HtmlIsSelfContained) {
  const std::string html = report_html(quick_report());
  size_t images = 0;
  for (size_t at = html.find("<img "); at != std::string::npos; at = html.find("<img ", at + 1)) {
    ++images;
    const size_t src = html.find(" src=\"", at);
    ASSERT_NE(src, std::string::npos);
    EXPECT_EQ(html.compare(src + 6, 22, "data:image/png;base64,"), 0);
  }
  size_t figures = 0;
  for (const Section& s : quick_report().sections) figures += s.figures.size();
  EXPECT_EQ(images, figures);
  EXPECT_GT(images, 0u);
  EXPECT_EQ(html.find("http:"), std::string::npos);
  EXPECT_EQ(html.find("https:"), std::string::npos);
  EXPECT_EQ(html.find("file:"), std::string::npos);
}

TEST(Report, WritesFiles) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("posenc_report_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const ReportFiles files = write_report(quick_report(), dir);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "report.html"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "report.json"));
  int64_t pngs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "figures")) pngs += entry.path().extension() == ".png";
  EXPECT_EQ(pngs, files.figures);
  std::ifstream json(dir / "report.json");
  std::stringstream text;
  text << json.rdbuf();
  EXPECT_EQ(nlohmann::ordered_json::parse(text.str()), report_json(quick_report()));
  std::filesystem::remove_all(dir);
}

TEST(Report, ParseTableFile) {
  EXPECT_EQ(parse_table_file("a.npy").path, "a.npy");
  EXPECT_FALSE(parse_table_file("a.npy").tensor);
  const TableFile t = parse_table_file("dir/m.safetensors:bert.embeddings.position_embeddings.weight");
  EXPECT_EQ(t.path, "dir/m.safetensors");
  EXPECT_EQ(t.tensor, "bert.embeddings.position_embeddings.weight");
  EXPECT_EQ(parse_table_file("m.safetensors:a:b").tensor, "a:b");
  EXPECT_EQ(message_of([] { parse_table_file("m.pt"); }),
            "[report] --table must be FILE.npy or FILE.safetensors[:NAME], got 'm.pt'");
  EXPECT_EQ(message_of([] { parse_table_file("m.npyx"); }),
            "[report] --table must be FILE.npy or FILE.safetensors[:NAME], got 'm.npyx'");
}

TEST(Report, BadInputsFailBeforeBuilding) {
  ReportOptions options;
  options.quick = true;
  options.models = {"/nonexistent/run"};
  int calls = 0;
  EXPECT_EQ(message_of([&] { build_report(options, [&](const ReportProgress&) { ++calls; }); }),
            "[report] --model /nonexistent/run is not a posenc run (no config.json)");
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace posenc::report
