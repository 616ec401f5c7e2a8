// Whole files, written so that a reader never sees half of one and read so
// that nothing but a regular file is ever opened.
//
// write_file_atomically: the bytes go to a temporary file in the target's
// directory, named ".<file>.tmp-<pid>-<n>-<random>" and created with
// O_CREAT | O_EXCL | O_NOFOLLOW (a link planted anywhere is never followed),
// synced, renamed onto the target (replacing a link there, never writing
// through it), and the directory is synced. On any failure the old file stays
// and the temporary file is removed (also on a signal, through
// remove_temporary_files).
// read_regular_file: refuses FIFOs, devices and directories without blocking.
// Failures throw std::runtime_error "[op] path: what failed: strerror", e.g.
//   "[plot] out/x.png: cannot create a file in 'out': No such file or directory",
//   "[checkpoint] run/config.json: not a regular file".
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace posenc::io {

void write_file_atomically(std::string_view op, const std::string& path, std::span<const std::byte> bytes);
void write_file_atomically(std::string_view op, const std::string& path, std::string_view text);

std::string read_regular_file(std::string_view op, const std::string& path);

// Unlinks the temporary files of the writes in progress in this process, so
// that a process ended by a signal leaves no partial file behind (the targets
// keep their previous contents). Async-signal-safe: meant for a SIGINT /
// SIGTERM handler that then ends the process; the library installs none.
void remove_temporary_files() noexcept;

}  // namespace posenc::io
