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

  const std::string label = std::string(analysis::proximity_kind_name(kind)) + " proximity";
  std::vector<unsigned char> png;
  if (picture == report::Picture::kEncoding) {
    png = report::encoding_picture(source.table, source.name);
  } else {
    const analysis::Matrix s = analysis::proximity(source.table, kind);
    if (picture == report::Picture::kSimilarity) {
      png = report::similarity_picture(s, source.name, label);
    } else {
      const int64_t reference = reference_opt_->count() > 0 ? reference_ : s.rows / 2;
      png = report::decay_picture(s, reference, source.name, label);
    }
  }
  plot::write_png_file(out_, png);
  const report::PictureSize size = report::picture_size(picture);
  std::cout << "wrote " << out_ << ": " << report::picture_name(picture) << " figure of " << source.name << " ["
            << source.table.rows << ", " << source.table.cols << "], " << size.width << " x " << size.height
            << " PNG\n";
}

}  // namespace posenc::cli
