// posenc-text: the text commands (today `corpus`), in a process without
// libtorch (see apps/posenc/text_tool.h for why). `posenc corpus ...` runs
// this binary with the same arguments; exit codes and one-line errors as
// posenc's: 0 success, 2 bad arguments, 1 runtime failure.
#include <CLI/CLI.hpp>
#include <new>
#include <stdexcept>
#include <string>

#include "../posenc/error_line.h"
#include "../posenc/interrupt.h"
#include "corpus_command.h"

using posenc::cli::report_error;

int main(int argc, char** argv) {
  posenc::cli::remove_partial_files_on_signals();
  CLI::App app{"posenc-text: the experiments' corpus and tokenizer (also reached as `posenc corpus`)", "posenc"};
  app.require_subcommand(1);
  const posenc::cli::CorpusCommand corpus(app);
  try {
    app.parse(argc, argv);
    if (corpus.selected()) corpus.run();
    return 0;
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report_error(e.what(), 2);
  } catch (const std::invalid_argument& e) {
    return report_error(e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report_error("[corpus] out of memory", 1);
  } catch (const std::exception& e) {
    return report_error(e.what(), 1);
  }
}
