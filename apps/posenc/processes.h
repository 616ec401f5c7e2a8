// Where posenc runs from: posenc-text is built beside it (text_tool.h, and the
// corpus step of an experiment sweep), and a sweep's jobs are posenc itself.
// Errors throw std::runtime_error "[op] ...".
#pragma once

#include <filesystem>
#include <string_view>

namespace posenc::cli {

// The running executable's path (/proc/self/exe).
std::filesystem::path own_executable(std::string_view op);

}  // namespace posenc::cli
