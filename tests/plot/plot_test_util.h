// Helpers for the plot tests: PNG chunks read byte by byte (independent of
// libpng), the pixels decoded back through Cairo, colour comparisons and
// pixel counts over rectangles.
#pragma once

#include <cairo.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "layout.h"
#include "posenc/plot/figures.h"

namespace posenc::plot {
// So that EXPECT_EQ / EXPECT_PRED print colours readably.
inline std::ostream& operator<<(std::ostream& out, Rgb c) {
  return out << "rgb(" << int{c.r} << ", " << int{c.g} << ", " << int{c.b} << ")";
}
inline bool operator==(Rgb a, Rgb b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
}  // namespace posenc::plot

namespace posenc::plot::testing {

using detail::Rect;

inline uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// CRC-32 of the PNG specification (ISO 3309), bit by bit.
inline uint32_t crc32(std::span<const unsigned char> bytes) {
  uint32_t c = 0xffffffffu;
  for (const unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
  }
  return c ^ 0xffffffffu;
}

struct Chunk {
  std::string type;
  std::span<const unsigned char> data;
  bool crc_ok = false;
};

// The chunks after the signature; throws if a length runs past the end.
inline std::vector<Chunk> png_chunks(const std::vector<unsigned char>& png) {
  std::vector<Chunk> chunks;
  size_t at = 8;
  while (at < png.size()) {
    if (png.size() - at < 12) throw std::runtime_error("truncated chunk header");
    const uint32_t length = big_endian32(&png[at]);
    if (png.size() - at - 12 < length) throw std::runtime_error("chunk runs past the end");
    Chunk c;
    c.type.assign(reinterpret_cast<const char*>(&png[at + 4]), 4);
    c.data = std::span<const unsigned char>(&png[at + 8], length);
    c.crc_ok = crc32(std::span<const unsigned char>(&png[at + 4], length + 4)) == big_endian32(&png[at + 8 + length]);
    chunks.push_back(c);
    at += 12 + length;
  }
  return chunks;
}

// Pixels decoded by Cairo from the PNG bytes (through a read stream).
class Image {
 public:
  explicit Image(const std::vector<unsigned char>& png) {
    Reader reader{png, 0};
    surface_ = cairo_image_surface_create_from_png_stream(read, &reader);
    if (cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS) {
      cairo_surface_destroy(surface_);
      throw std::runtime_error("Cairo could not decode the PNG");
    }
    cairo_surface_flush(surface_);
  }
  ~Image() { cairo_surface_destroy(surface_); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;

  int width() const { return cairo_image_surface_get_width(surface_); }
  int height() const { return cairo_image_surface_get_height(surface_); }
  cairo_format_t format() const { return cairo_image_surface_get_format(surface_); }
  Rgb at(int x, int y) const {
    if (x < 0 || y < 0 || x >= width() || y >= height()) throw std::out_of_range("pixel outside the image");
    const unsigned char* row = cairo_image_surface_get_data(surface_) +
                               static_cast<ptrdiff_t>(y) * cairo_image_surface_get_stride(surface_);
    uint32_t p;
    std::memcpy(&p, row + 4 * x, 4);
    return {static_cast<unsigned char>(p >> 16), static_cast<unsigned char>(p >> 8), static_cast<unsigned char>(p)};
  }
  // Pixels of r for which pred(colour) holds.
  template <class Pred>
  int count(Rect r, Pred pred) const {
    int n = 0;
    for (int y = r.y; y < r.y + r.h; ++y)
      for (int x = r.x; x < r.x + r.w; ++x) n += pred(at(x, y)) ? 1 : 0;
    return n;
  }

 private:
  struct Reader {
    const std::vector<unsigned char>& bytes;
    size_t at;
  };
  static cairo_status_t read(void* closure, unsigned char* data, unsigned int length) {
    auto* r = static_cast<Reader*>(closure);
    if (r->bytes.size() - r->at < length) return CAIRO_STATUS_READ_ERROR;
    std::memcpy(data, r->bytes.data() + r->at, length);
    r->at += length;
    return CAIRO_STATUS_SUCCESS;
  }

  cairo_surface_t* surface_ = nullptr;
};

inline int channel_distance(Rgb a, Rgb b) {
  return std::max({std::abs(a.r - b.r), std::abs(a.g - b.g), std::abs(a.b - b.b)});
}

// gtest predicate: every channel within `tolerance`.
inline bool near_color(Rgb actual, Rgb expected, int tolerance) {
  return channel_distance(actual, expected) <= tolerance;
}

// Text and axes are drawn in black; anti-aliased edges are lighter, so "dark"
// counts only glyph cores. No colour map colour is this dark in all channels
// (viridis' darkest, #440154, has red 68 and blue 84).
inline bool dark(Rgb c) { return c.r < 60 && c.g < 60 && c.b < 60; }

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "posenc_plot_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(std::string_view name) const { return (path_ / name).string(); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::filesystem::path path_;
};

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

// Runs f, expects std::invalid_argument with exactly `message`.
template <class F>
std::string argument_error(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "no exception";
}

}  // namespace posenc::plot::testing
