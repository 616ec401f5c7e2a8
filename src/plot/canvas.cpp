#include "canvas.h"

#include <cstdio>
#include <string>

#include "posenc/error.h"

namespace posenc::plot::detail {
namespace {

constexpr int kMinSize = 200;
constexpr int kMaxSize = 8192;

void require_cairo(cairo_status_t status) {
  if (status != CAIRO_STATUS_SUCCESS) fail_runtime(kOp, "Cairo failed: ", cairo_status_to_string(status));
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  auto* out = static_cast<std::vector<unsigned char>*>(closure);
  try {
    out->insert(out->end(), data, data + length);
  } catch (...) {  // must not unwind through Cairo's C frames
    return CAIRO_STATUS_NO_MEMORY;
  }
  return CAIRO_STATUS_SUCCESS;
}

// Offset of the first byte that breaks UTF-8 (or is NUL), or npos.
size_t invalid_utf8_offset(std::string_view s) noexcept {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t extra = 0;
    uint32_t code = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      extra = 1, code = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2, code = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3, code = c & 0x07u;
    } else {
      return i;
    }
    for (size_t k = 1; k <= extra; ++k) {
      if (i + k >= s.size()) return i;  // cut short
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0u) != 0x80u) return i + k;
      code = (code << 6) | (d & 0x3fu);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    const bool overlong = (extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000);
    if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return i;
    i += extra + 1;
  }
  return std::string_view::npos;
}

}  // namespace

Canvas::Canvas(int width, int height) {
  // RGB24: opaque, written as an 8-bit RGB PNG (no alpha channel to carry).
  surface_ = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cr_ = cairo_create(surface_);
  if (const cairo_status_t status = cairo_status(cr_); status != CAIRO_STATUS_SUCCESS) {
    cairo_destroy(cr_);  // the destructor does not run for a throwing constructor
    cairo_surface_destroy(surface_);
    require_cairo(status);
  }
  // Unhinted grey-scale text: the same pixels whatever the host's font settings.
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_OFF);
  cairo_set_font_options(cr_, options);
  cairo_font_options_destroy(options);
  cairo_set_source_rgb(cr_, 1, 1, 1);
  cairo_paint(cr_);
}

Canvas::~Canvas() {
  cairo_destroy(cr_);
  cairo_surface_destroy(surface_);
}

void Canvas::set_color(Rgb c) noexcept { cairo_set_source_rgb(cr_, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

void Canvas::select_font(double size, bool bold) {
  cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, size);
}

double Canvas::text_width(std::string_view s, double size, bool bold) {
  select_font(size, bold);
  const std::string z(s);
  cairo_text_extents_t extents;
  cairo_text_extents(cr_, z.c_str(), &extents);
  return extents.x_advance;
}

void Canvas::text(std::string_view s, double x, double y, Align along, Align across, double size, bool bold,
                  double angle) {
  if (s.empty()) return;
  const double width = text_width(s, size, bold);  // selects the font too
  cairo_font_extents_t font;
  cairo_font_extents(cr_, &font);
  const double dx = along == Align::kStart ? 0 : along == Align::kCentre ? -width / 2 : -width;
  const double dy = across == Align::kStart    ? font.ascent
                    : across == Align::kCentre ? (font.ascent - font.descent) / 2
                                               : -font.descent;
  const std::string z(s);
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, angle);
  cairo_move_to(cr_, dx, dy);
  cairo_show_text(cr_, z.c_str());
  cairo_restore(cr_);
}

void Canvas::hline(double x0, double x1, int y) {
  cairo_set_line_width(cr_, 1);
  cairo_move_to(cr_, x0, y + 0.5);
  cairo_line_to(cr_, x1, y + 0.5);
  cairo_stroke(cr_);
}

void Canvas::vline(int x, double y0, double y1) {
  cairo_set_line_width(cr_, 1);
  cairo_move_to(cr_, x + 0.5, y0);
  cairo_line_to(cr_, x + 0.5, y1);
  cairo_stroke(cr_);
}

void Canvas::frame(int x, int y, int w, int h) {
  cairo_set_line_width(cr_, 1);
  cairo_rectangle(cr_, x - 0.5, y - 0.5, w + 1, h + 1);
  cairo_stroke(cr_);
}

std::vector<unsigned char> Canvas::png() {
  require_cairo(cairo_status(cr_));
  cairo_surface_flush(surface_);
  std::vector<unsigned char> bytes;
  require_cairo(cairo_surface_write_to_png_stream(surface_, append_bytes, &bytes));
  return bytes;
}

void require_figure_size(std::string_view name, int value) {
  require(value >= kMinSize && value <= kMaxSize, kOp, name, " must be in [", kMinSize, ", ", kMaxSize, "], got ",
          value);
}

void require_text(std::string_view name, std::string_view text) {
  const size_t at = invalid_utf8_offset(text);
  if (at == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[at])));
  fail_argument(kOp, name, " must be valid UTF-8 without NUL bytes, got byte ", byte, " at offset ", at);
}

}  // namespace posenc::plot::detail
