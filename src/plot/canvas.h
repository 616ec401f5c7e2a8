// Internal to posenc::plot: a white Cairo image surface with the few drawing
// helpers the figures share (text placement, crisp lines, colours), the PNG
// encoding, and the argument checks both figures make.
#pragma once

#include <cairo.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/plot/figures.h"

namespace posenc::plot::detail {

inline constexpr std::string_view kOp = "plot";

// Sizes of text, in pixels (Cairo's toy font API, "sans-serif").
inline constexpr double kTitleSize = 15;
inline constexpr double kLabelSize = 13;
inline constexpr double kTickSize = 11.5;

enum class Align { kStart, kCentre, kEnd };

class Canvas {
 public:
  Canvas(int width, int height);  // white
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  cairo_t* cr() const noexcept { return cr_; }
  cairo_surface_t* surface() const noexcept { return surface_; }

  void set_color(Rgb c) noexcept;
  // Text whose anchor (x, y) is at the given horizontal alignment along the
  // text and the given vertical alignment across it (kStart: the top of the
  // font's ascent, kCentre: the middle of ascent + descent, kEnd: the bottom
  // of the descent), turned by `angle` radians (-pi/2: reading upwards).
  void text(std::string_view s, double x, double y, Align along, Align across, double size, bool bold = false,
            double angle = 0);
  double text_width(std::string_view s, double size, bool bold = false);
  // A 1-pixel line between pixel centres, horizontal or vertical.
  void hline(double x0, double x1, int y);
  void vline(int x, double y0, double y1);
  // A 1-pixel frame just outside r: r's own pixels stay untouched.
  void frame(int x, int y, int w, int h);

  // The PNG file bytes; throws std::runtime_error if any Cairo call failed.
  std::vector<unsigned char> png();

 private:
  void select_font(double size, bool bold);

  cairo_surface_t* surface_ = nullptr;
  cairo_t* cr_ = nullptr;
};

// [plot] name must be in [200, 8192], got v
void require_figure_size(std::string_view name, int value);
// [plot] name must be valid UTF-8 without NUL bytes, got byte 0xff at offset 3
void require_text(std::string_view name, std::string_view text);

}  // namespace posenc::plot::detail
