// Writing a whole file so that a reader never sees half of it: the bytes go
// to a temporary file in the target's directory, which is synced and renamed
// onto the target; on failure the old file stays and the temporary goes.
// Failures throw std::runtime_error "[op] path: what failed: strerror", e.g.
//   "[plot] out/x.png: cannot create a file in 'out': No such file or directory".
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace posenc::io {

void write_file_atomically(std::string_view op, const std::string& path, std::span<const std::byte> bytes);

}  // namespace posenc::io
