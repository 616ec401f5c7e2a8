// posenc command line: parses arguments, calls the library, prints, and turns
// exceptions into one line on stderr and an exit code:
//   0 success (and --help), 2 bad arguments, 1 runtime failure.
#include <CLI/CLI.hpp>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>

#include "demo_command.h"
#include "table_command.h"

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
  try {
    app.parse(argc, argv);
    if (table.selected()) table.run();
    if (demo.selected()) demo.run();
    return 0;
  } catch (const CLI::Success& e) {  // --help
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return report(e.what(), 2);
  } catch (const std::invalid_argument& e) {
    return report(e.what(), 2);
  } catch (const std::bad_alloc&) {
    return report("out of memory (try a smaller table)", 1);
  } catch (const std::exception& e) {
    return report(e.what(), 1);
  }
}
