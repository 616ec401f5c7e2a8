#include "text_tool.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <stdexcept>

#include "processes.h"

namespace posenc::cli {
namespace {

constexpr const char* kTextCommands[] = {"corpus"};

}  // namespace

void add_text_commands(CLI::App& app) {
  app.add_subcommand("corpus",
                     "The experiments' English corpus and its SentencePiece tokenizer (runs posenc-text corpus; "
                     "posenc-text corpus --help)")
      ->allow_extras()
      ->prefix_command();
}

bool is_text_command(int argc, char** argv) {
  if (argc < 2) return false;
  for (const char* name : kTextCommands) {
    if (std::strcmp(argv[1], name) == 0) return true;
  }
  return false;
}

std::string run_text_tool(char** argv) {
  std::string tool;
  try {
    tool = (own_executable(argv[1]).parent_path() / "posenc-text").string();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  argv[0] = const_cast<char*>("posenc-text");
  ::execv(tool.c_str(), argv);
  return "[" + std::string(argv[1]) + "] " + tool + ": cannot run (" + std::strerror(errno) +
         "): the text commands run in posenc-text, built beside posenc (cmake --build build --target posenc-text)";
}

}  // namespace posenc::cli
