#include "report_command.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "posenc/io/directory_lock.h"
#include "posenc/report/report.h"
#include "posenc/report/sources.h"
#include "posenc/report/table_analysis.h"

namespace posenc::cli {

ReportCommand::ReportCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("report", "Analyse every encoding family side by side: DIR/report.html and report.json");
  app_->footer(
      "Every family with default parameters (256 positions, dim 128), plus --table files and --model runs of "
      "posenc train, and --experiments suites. Writes DIR/report.html (self-contained), DIR/report.json and "
      "DIR/figures/*.png. docs/report.md explains the numbers.");
  app_->add_option("--out", out_, "Output directory")->capture_default_str();
  app_->add_flag("--quick", quick_, "64 positions, small figures, no model building (a few seconds)");
  app_->add_option("--table", tables_, "A table file to analyse too: FILE.npy or FILE.safetensors[:NAME] (repeat)")
      ->allow_extra_args(false);
  app_->add_option("--model", models_, "A posenc train run directory to probe (repeat)")->allow_extra_args(false);
  app_->add_option("--experiments", experiments_,
                   "An experiment suite directory with a summary.json (posenc experiment report DIR) to include "
                   "(repeat)")
      ->allow_extra_args(false);
  app_->add_option("--seed", seed_, "Seed of the initialisations, fresh models and probes")->capture_default_str();
  resources_.add(*app_);
}

void ReportCommand::run() const {
  report::ReportOptions options;
  options.quick = quick_;
  options.seed = seed_;
  for (const std::string& t : tables_) options.tables.push_back(report::parse_table_file(t));
  // Each --table is analysed like posenc analyze's: its S is n x n, and the
  // report's section keeps a second copy of S for its figures. The largest
  // table bounds the memory (tables are analysed one after another); the work adds up.
  double bytes = 0, multiply_adds = 0;
  std::string largest;
  for (const report::TableFile& f : options.tables) {
    const report::TableSource source = report::file_source("report", f.path, f.tensor);
    const report::AnalysisCost cost = report::estimate_table_analysis(source.table.rows, source.table.cols, false);
    multiply_adds += cost.multiply_adds;
    if (cost.bytes + cost.similarity_bytes > bytes) {
      bytes = cost.bytes + cost.similarity_bytes;
      largest = "S alone: " + memory_text(cost.similarity_bytes) + " for the " + std::to_string(source.table.rows) +
                " positions of " + f.path;
    }
  }
  if (!options.tables.empty()) resources_.check("report", bytes, multiply_adds, largest);
  for (const std::string& m : models_) options.models.emplace_back(m);
  for (const std::string& e : experiments_) options.experiments.emplace_back(e);
  const report::Report r = report::build_report(options, [](const report::ReportProgress& p) {
    char text[64];
    std::snprintf(text, sizeof text, "[%2lld/%lld] ", static_cast<long long>(p.index),
                  static_cast<long long>(p.total));
    std::cerr << "posenc report: " << text << p.name << '\n';
  });
  // Held while the files are written: two reports never interleave their figures in DIR.
  const report::ReportFiles files = [&] {
    const io::DirectoryLock lock("report", out_);
    return report::write_report(r, out_);
  }();
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", r.seconds);
  std::cout << "wrote " << files.html.string() << ", " << files.json.string() << " and " << files.figures
            << " figures in " << files.figures_dir.string() << "/ (" << r.sections.size() << " encodings, "
            << (r.experiments.empty() ? "" : std::to_string(r.experiments.size()) + " experiments, ") << seconds
            << " s)\n";
}

}  // namespace posenc::cli
