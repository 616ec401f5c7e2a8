#include "read_text_file.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

namespace posenc::text::detail {
namespace {

void require_present(const std::filesystem::path& path, std::string_view package) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    fail_runtime("corpus", path.string(), ": not found; install Debian's ", package, " (bash scripts/setup.sh)");
  }
}

}  // namespace

std::string read_package_file(const std::filesystem::path& path, std::string_view package) {
  require_present(path, package);
  return io::read_regular_file("corpus", path.string());
}

std::string read_package_gzip(const std::filesystem::path& path, std::string_view package) {
  require_present(path, package);
  // Through read_regular_file, so a FIFO or a directory is refused as everywhere else.
  const std::string packed = io::read_regular_file("corpus", path.string());
  z_stream z{};
  // 16 + MAX_WBITS: a gzip header (dictzip is gzip with an extra field).
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail_runtime("corpus", path.string(), ": zlib could not start");
  std::string out;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  char buffer[1 << 16];
  int status = Z_OK;
  while (status != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof buffer;
    status = inflate(&z, Z_NO_FLUSH);
    if (status != Z_OK && status != Z_STREAM_END) {
      const std::string why = z.msg ? z.msg : "truncated or not gzip";
      inflateEnd(&z);
      fail_runtime("corpus", path.string(), ": not a valid gzip file (", why, ")");
    }
    out.append(buffer, sizeof buffer - z.avail_out);
    if (status == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
      inflateEnd(&z);
      fail_runtime("corpus", path.string(), ": not a valid gzip file (truncated)");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace posenc::text::detail
