// posenc command line: parses arguments, calls the library, prints, and turns
// exceptions into one line on stderr and an exit code:
//   0 success (and --help), 2 bad arguments, 1 runtime failure.
// analyze, plot and probe take a SOURCE (a kind or a .npy / .safetensors
// file); report writes the HTML report (posenc::report).
// train, eval and encodings exist when posenc is built with the torch layer
// (POSENC_BUILD_NN, which defines POSENC_WITH_NN here).
#include <CLI/CLI.hpp>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "analyze_command.h"
#include "demo_command.h"
#include "plot_command.h"
#include "probe_command.h"
#include "report_command.h"
#include "table_command.h"
#ifdef POSENC_WITH_NN
#include <c10/util/Exception.h>

#include "encodings_command.h"
#include "eval_command.h"
#include "train_command.h"
#endif

namespace {

int report(const std::string& message, int code) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::cout.flush();
  std::cerr << "posenc: " << line << '\n';
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for transformers", "posenc"};
  app.require_subcommand(1);
  const posenc::cli::TableCommand table(app);
  const posenc::cli::DemoCommand demo(app);
  const posenc::cli::AnalyzeCommand analyze(app);
  const posenc::cli::PlotCommand plot(app);
  const posenc::cli::ProbeCommand probe(app);
  const posenc::cli::ReportCommand report_command(app);
#ifdef POSENC_WITH_NN
  const posenc::cli::TrainCommand train(app);
  const posenc::cli::EvalCommand evaluate(app);
  const posenc::cli::EncodingsCommand encodings(app);
#endif
  try {
    app.parse(argc, argv);
    if (table.selected()) table.run();
    if (demo.selected()) demo.run();
    if (analyze.selected()) analyze.run();
    if (plot.selected()) plot.run();
    if (probe.selected()) probe.run();
    if (report_command.selected()) report_command.run();
#ifdef POSENC_WITH_NN
    if (train.selected()) return train.run();
    if (evaluate.selected()) return evaluate.run();
    if (encodings.selected()) encodings.run();
#endif
    return 0;
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(e.what(), 2);
  } catch (const std::invalid_argument& e) {
    return report(e.what(), 2);
#ifdef POSENC_WITH_NN
  } catch (const c10::ValueError& e) {  // torch-layer argument errors; what() would add a backtrace
    return report(e.what_without_backtrace(), 2);
  } catch (const c10::Error& e) {
    return report(e.what_without_backtrace(), 1);
#endif
  } catch (const std::bad_alloc&) {
    return report("out of memory (try a smaller table)", 1);
  } catch (const std::exception& e) {
    return report(e.what(), 1);
  }
}
