// posenc command line: parses arguments, calls the library, prints, and turns
// exceptions into one line on stderr and an exit code:
//   0 success (and --help), 2 bad arguments, 1 runtime failure.
// analyze, plot and probe take a SOURCE (a kind or a .npy / .safetensors
// file); report writes the HTML report (posenc::report).
// train, eval, encodings and doctor exist when posenc is built with the torch layer
// (POSENC_BUILD_NN, which defines POSENC_WITH_NN here).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "allocation_policy.h"
#include "analyze_command.h"
#include "check_command.h"
#include "posenc/kernels/build_info.h"
#include "decimal_options.h"
#include "error_line.h"
#include "interrupt.h"
#include "demo_command.h"
#include "plot_command.h"
#include "probe_command.h"
#include "report_command.h"
#include "table_command.h"
#include "text_tool.h"
#ifdef POSENC_WITH_NN
#include <c10/util/Exception.h>

#include "blas_kernels.h"
#include "doctor_command.h"
#include "encodings_command.h"
#include "eval_command.h"
#include "experiment_command.h"
#include "train_command.h"
#endif

namespace {

using posenc::cli::report_error;

// The command that ran ("table", "train", ...), or "posenc" before one was parsed.
std::string command_name(const CLI::App& app) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  return parsed.empty() ? app.get_name() : parsed.front()->get_name();
}

#ifdef POSENC_WITH_NN
// libtorch's allocation failure, e.g. "[enforce fail at alloc_cpu.cpp:75] err == 0.
// DefaultCPUAllocator: can't allocate memory: you tried to allocate 1234 bytes. Error code 12 (...)".
constexpr std::string_view kTorchAllocFailure = "[enforce fail at alloc_cpu.cpp";
constexpr std::string_view kTorchAllocSize = "you tried to allocate ";

// "[eval] out of memory: needed 1.2 GB more" (decimal units), or without the
// size when the message has none.
std::string torch_out_of_memory(std::string_view command, std::string_view message) {
  std::string line = "[" + std::string(command) + "] out of memory";
  const size_t at = message.find(kTorchAllocSize);
  if (at == std::string_view::npos) return line;
  const std::string digits(message.substr(at + kTorchAllocSize.size()));
  char* end = nullptr;
  double size = std::strtod(digits.c_str(), &end);
  if (end == digits.c_str()) return line;
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  int unit = 0;
  while (size >= 1000.0 && unit < 6) size /= 1000.0, ++unit;
  char text[64];
  if (unit == 0) {
    std::snprintf(text, sizeof text, ": needed %.0f bytes more", size);
  } else {
    std::snprintf(text, sizeof text, ": needed %.1f %s more", size, units[unit]);
  }
  return line + text;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  if (posenc::cli::is_text_command(argc, argv)) return report_error(posenc::cli::run_text_tool(argv), 1);
  posenc::cli::remove_partial_files_on_signals();
  posenc::cli::keep_freed_memory_for_reuse();
  CLI::App app{"posenc: positional encodings for transformers", "posenc"};
  app.require_subcommand(1);
  // The version and what the kernels were compiled for (a speed figure depends on it).
  const posenc::kernels::KernelBuild build = posenc::kernels::kernel_build();
  app.set_version_flag("--version", std::string("posenc ") + POSENC_VERSION + ", kernels " +
                                        (build.native ? "native (-march=native)" : "portable (-march=x86-64)") +
                                        ": " + build.vector_isa);
  const posenc::cli::TableCommand table(app);
  const posenc::cli::DemoCommand demo(app);
  const posenc::cli::AnalyzeCommand analyze(app);
  const posenc::cli::PlotCommand plot(app);
  const posenc::cli::ProbeCommand probe(app);
  const posenc::cli::ReportCommand report_command(app);
  const posenc::cli::CheckCommand check(app);
  posenc::cli::add_text_commands(app);
#ifdef POSENC_WITH_NN
  const posenc::cli::TrainCommand train(app);
  const posenc::cli::EvalCommand evaluate(app);
  const posenc::cli::EncodingsCommand encodings(app);
  const posenc::cli::DoctorCommand doctor(app);
  const posenc::cli::ExperimentCommand experiment(app);
#endif
  posenc::cli::require_decimal_integers(app);  // after every command: it walks their options
  try {
    app.parse(argc, argv);
#ifdef POSENC_WITH_NN
    // Before anything is written: the commands whose speed and last bits depend on libtorch's GEMMs.
    if (train.selected() || evaluate.selected() || experiment.selected() || doctor.selected()) {
      posenc::cli::use_avx512_blas_kernels(argv);
    }
#endif
    if (table.selected()) table.run();
    if (demo.selected()) demo.run();
    if (analyze.selected()) analyze.run();
    if (plot.selected()) plot.run();
    if (probe.selected()) probe.run();
    if (report_command.selected()) report_command.run();
    if (check.selected()) return check.run();
#ifdef POSENC_WITH_NN
    if (train.selected()) return train.run();
    if (evaluate.selected()) return evaluate.run();
    if (encodings.selected()) encodings.run();
    if (doctor.selected()) doctor.run();
    if (experiment.selected()) return experiment.run();
#endif
    return 0;
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_error(e.what(), 2);
  } catch (const std::invalid_argument& e) {
    return report_error(e.what(), 2);
#ifdef POSENC_WITH_NN
  } catch (const c10::ValueError& e) {  // torch-layer argument errors; what() would add a backtrace
    return report_error(e.what_without_backtrace(), 2);
  } catch (const c10::Error& e) {
    const std::string_view message = e.what_without_backtrace();
    if (message.starts_with(kTorchAllocFailure)) {
      return report_error(torch_out_of_memory(command_name(app), message), 1);
    }
    return report_error(std::string(message), 1);
#endif
  } catch (const std::bad_alloc&) {  // no guess at the cause: any command can run out
    return report_error("[" + command_name(app) + "] out of memory", 1);
  } catch (const std::exception& e) {
    return report_error(e.what(), 1);
  }
}
