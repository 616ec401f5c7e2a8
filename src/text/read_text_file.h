// A corpus file that a Debian package installs: read whole, or a one-line
// error naming the file and the package that provides it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace posenc::text::detail {

// "[corpus] /usr/share/wordnet/data.noun: not found; install Debian's
// wordnet-base (bash scripts/setup.sh)"; other failures name the file and the error.
std::string read_package_file(const std::filesystem::path& path, std::string_view package);

// The same for a gzip (or dictzip) file, decompressed whole.
std::string read_package_gzip(const std::filesystem::path& path, std::string_view package);

}  // namespace posenc::text::detail
