#include "experiment_report.h"

#include "posenc/report/experiments.h"

namespace posenc::cli {

void write_experiment_html(const std::string& dir, std::ostream& out) {
  // No directory lock: the report may be read while `posenc experiment run`
  // (which holds DIR's lock) goes on; every file is written atomically.
  const report::ExperimentSection section = report::read_experiment(dir, "experiment");
  const report::ExperimentFiles files = report::write_experiment_report(section, dir);
  out << "wrote " << files.html.string() << " and " << files.figures << " figures in " << files.figures_dir.string()
      << "/\n";
}

}  // namespace posenc::cli
