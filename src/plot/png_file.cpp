// write_png_file: checks the bytes are a PNG, then writes them atomically
// (io::write_file_atomically), so a reader never sees half a figure.
#include <cstring>
#include <string>

#include "canvas.h"
#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/plot/figures.h"

namespace posenc::plot {
namespace {

constexpr unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

}  // namespace

void write_png_file(const std::string& path, std::span<const unsigned char> png) {
  require(!path.empty(), detail::kOp, "path must not be empty, got an empty string");
  require(png.size() >= sizeof kSignature, detail::kOp, "png must start with the 8-byte PNG signature, got ",
          png.size(), " bytes");
  require(std::memcmp(png.data(), kSignature, sizeof kSignature) == 0, detail::kOp,
          "png must start with the 8-byte PNG signature, got other bytes");
  io::write_file_atomically(detail::kOp, path, std::as_bytes(png));
}

}  // namespace posenc::plot
