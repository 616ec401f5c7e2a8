// `posenc corpus ...` runs in its own executable, posenc-text, beside posenc:
// SentencePiece (libsentencepiece) carries its own copy of protobuf-lite whose
// exported symbols clash with the protobuf libtorch loads, and a process that
// loads both crashes while starting. posenc therefore never links it and
// replaces itself with posenc-text for the text commands.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// Lists the text commands in `posenc --help` (they are never parsed here).
void add_text_commands(CLI::App& app);

// True when argv names a text command ("corpus").
bool is_text_command(int argc, char** argv);

// Replaces this process with posenc-text, same arguments. Returns only when
// it cannot be started, with the one-line reason (the caller prints it).
std::string run_text_tool(char** argv);

}  // namespace posenc::cli
