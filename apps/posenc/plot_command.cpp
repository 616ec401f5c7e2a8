#include "plot_command.h"

#include <iostream>

#include "analyze_command.h"  // parse_proximity_option
#include "posenc/analysis/proximity.h"
#include "posenc/error.h"
#include "posenc/plot/figures.h"
#include "posenc/report/pictures.h"

namespace posenc::cli {

PlotCommand::PlotCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("plot", "Draw one table as a PNG: its values, its proximity matrix, or its decay");
  app_->footer(
      "encoding: the table, position x dimension (720 x 600); similarity: S[i, j] (720 x 600); decay: S[P, j] "
      "against j with a marker at P (720 x 480). SOURCE as for posenc analyze.");
  source_.add_source(*app_);
  app_->add_option("--figure", figure_, "encoding | similarity | decay");
  reference_opt_ = app_->add_option("--reference", reference_, "decay: the reference position P (default N/2)");
  proximity_opt_ =
      app_->add_option("--proximity", proximity_, "similarity, decay: dot | cosine")->capture_default_str();
  app_->add_option("--out", out_, "Output file, .png");
  resources_.add(*app_);
  source_.add_table(*app_);
}

void PlotCommand::run() const {
  const char* op = "plot";
  if (figure_.empty()) fail_argument(op, "--figure is required: encoding, similarity or decay");
  const report::Picture picture = report::parse_picture(figure_, op);
  if (out_.empty()) fail_argument(op, "--out FILE.png is required");
  require(out_.ends_with(".png"), op, "output file must end in .png, got '", out_, "'");
  if (reference_opt_->count() > 0 && picture != report::Picture::kDecay) {
    fail_argument(op, "--reference applies only to --figure decay");
  }
  if (proximity_opt_->count() > 0 && picture == report::Picture::kEncoding) {
    fail_argument(op, "--proximity does not apply to --figure encoding");
  }
  const analysis::ProximityKind kind = parse_proximity_option(proximity_, op);
  const report::TableSource source = source_.load(op);
  const int64_t n = source.table.rows;
  if (reference_opt_->count() > 0) {
    require(reference_ >= 0 && reference_ < n, op, "reference must be in [0, ", n - 1, "] for ", n,
            " positions, got ", reference_);
  }

  std::vector<unsigned char> png;
  if (picture == report::Picture::kEncoding) {
    png = report::encoding_picture(source.table, source.name);
  } else if (picture == report::Picture::kSimilarity) {
    // S is n x n: refused up front when the heatmap cannot hold it (plot's own
    // check, made before S is computed) or when it would not fit in memory.
    require(n <= 32767, op, "rows must be <= 32767 (Cairo's largest image), got ", n);
    const double nn = static_cast<double>(n), d = static_cast<double>(source.table.cols);
    const double s_bytes = 8.0 * nn * nn;
    resources_.check(op, s_bytes + 16.0 * nn * d, 0.5 * nn * nn * d,
                     "S alone: " + memory_text(s_bytes) + " for " + std::to_string(n) + " positions");
    const report::PictureMatrix s = report::picture_proximity(source.table, kind);
    png = report::similarity_picture(s.s, source.name, s.label);
  } else {
    // One row of S: O(n D) time and memory, never the n x n matrix.
    const int64_t reference = reference_opt_->count() > 0 ? reference_ : n / 2;
    const report::PictureRow r = report::picture_proximity_row(source.table, reference, kind);
    png = report::decay_picture_row(r.row, reference, source.name, r.label);
  }
  plot::write_png_file(out_, png);
  const report::PictureSize size = report::picture_size(picture);
  std::cout << "wrote " << out_ << ": " << report::picture_name(picture) << " figure of " << source.name << " ["
            << source.table.rows << ", " << source.table.cols << "], " << size.width << " x " << size.height
            << " PNG\n";
}

}  // namespace posenc::cli
