// colormap_color against published values: the viridis hex codes matplotlib
// documents and entries of its 256-entry table (_cm_listed.py), the
// ColorBrewer RdBu ends; and the maps' shape as properties.
#include <gtest/gtest.h>

#include <cmath>

#include "plot_test_util.h"

namespace posenc::plot {
namespace {

using testing::channel_distance;
using testing::near_color;

Rgb hex(unsigned v) {
  return {static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
}

double luma(Rgb c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b; }

TEST(Colormap, ViridisMatchesThePublishedFiveColourPalette) {
  // The five-colour viridis palette: t = 0, 0.25, 0.5, 0.75, 1.
  // 2 levels: these hex codes are table entries 0, 64, 128, 192, 255, and our
  // t sits between two neighbouring entries (127.5 for t = 0.5).
  const struct {
    double t;
    unsigned rgb;
  } cases[] = {{0.0, 0x440154}, {0.25, 0x3b528b}, {0.5, 0x21918c}, {0.75, 0x5ec962}, {1.0, 0xfde725}};
  for (const auto& c : cases) {
    EXPECT_PRED3(near_color, colormap_color(ColorMap::kSequential, c.t), hex(c.rgb), 2) << "t = " << c.t;
  }
}

TEST(Colormap, ViridisMatchesMatplotlibTableEntries) {
  // Entries k = 1, 6, ..., 251 and 254 of matplotlib's _viridis_data (float
  // RGB), at t = k / 255: each one entry from an anchor (5 apart), so 4/5 of
  // any error in that anchor shows.
  // 1 level: the 52 anchors reproduce the full table within 0.7 of 255, plus rounding.
  const struct {
    int k;
    double r, g, b;
  } entries[] = {
      {1, 0.268510, 0.009605, 0.335427}, {6, 0.274952, 0.037752, 0.364543},
      {11, 0.279566, 0.067836, 0.391917}, {16, 0.282327, 0.094955, 0.417331},
      {21, 0.283229, 0.120777, 0.440584}, {26, 0.282290, 0.145912, 0.461510},
      {31, 0.279574, 0.170599, 0.479997}, {36, 0.275191, 0.194905, 0.496005},
      {41, 0.269308, 0.218818, 0.509577}, {46, 0.262138, 0.242286, 0.520837},
      {51, 0.253935, 0.265254, 0.529983}, {56, 0.244972, 0.287675, 0.537260},
      {61, 0.235526, 0.309527, 0.542944}, {66, 0.225863, 0.330805, 0.547314},
      {71, 0.216210, 0.351535, 0.550627}, {76, 0.206756, 0.371758, 0.553117},
      {81, 0.197636, 0.391528, 0.554969}, {86, 0.188923, 0.410910, 0.556326},
      {91, 0.180629, 0.429975, 0.557282}, {96, 0.172719, 0.448791, 0.557885},
      {101, 0.165117, 0.467423, 0.558141}, {106, 0.157729, 0.485932, 0.558013},
      {111, 0.150476, 0.504369, 0.557430}, {116, 0.143343, 0.522773, 0.556295},
      {121, 0.136408, 0.541173, 0.554483}, {126, 0.129933, 0.559582, 0.551864},
      {131, 0.124395, 0.578002, 0.548287}, {136, 0.120565, 0.596422, 0.543611},
      {141, 0.119483, 0.614817, 0.537692}, {146, 0.122312, 0.633153, 0.530398},
      {151, 0.130067, 0.651384, 0.521608}, {156, 0.143303, 0.669459, 0.511215},
      {161, 0.162016, 0.687316, 0.499129}, {166, 0.185783, 0.704891, 0.485273},
      {171, 0.214000, 0.722114, 0.469588}, {176, 0.246070, 0.738910, 0.452024},
      {181, 0.281477, 0.755203, 0.432552}, {186, 0.319809, 0.770914, 0.411152},
      {191, 0.360741, 0.785964, 0.387814}, {196, 0.404001, 0.800275, 0.362552},
      {201, 0.449368, 0.813768, 0.335384}, {206, 0.496615, 0.826376, 0.306377},
      {211, 0.545524, 0.838039, 0.275626}, {216, 0.595839, 0.848717, 0.243329},
      {221, 0.647257, 0.858400, 0.209861}, {226, 0.699415, 0.867117, 0.175971},
      {231, 0.751884, 0.874951, 0.143228}, {236, 0.804182, 0.882046, 0.114965},
      {241, 0.855810, 0.888601, 0.097452}, {246, 0.906311, 0.894855, 0.098125},
      {251, 0.955300, 0.901065, 0.118128}, {254, 0.983868, 0.904867, 0.136897},
  };
  for (const auto& e : entries) {
    const Rgb expected{static_cast<unsigned char>(std::lround(e.r * 255)),
                       static_cast<unsigned char>(std::lround(e.g * 255)),
                       static_cast<unsigned char>(std::lround(e.b * 255))};
    EXPECT_PRED3(near_color, colormap_color(ColorMap::kSequential, e.k / 255.0), expected, 1) << "entry " << e.k;
  }
}

TEST(Colormap, ViridisGetsLighterAndChangesSmoothly) {
  // Lightness rises monotonically along viridis (its design goal); every 1/50
  // step covers ~5 table entries, ~3 luma levels, more than 8-bit rounding.
  for (int i = 0; i < 50; ++i) {
    EXPECT_LT(luma(colormap_color(ColorMap::kSequential, i / 50.0)),
              luma(colormap_color(ColorMap::kSequential, (i + 1) / 50.0)))
        << "i = " << i;
  }
  // No jumps: neighbouring table entries differ by at most ~1.4 levels, and a
  // 1/1000 step is a quarter of one.
  for (int i = 0; i < 1000; ++i) {
    const Rgb a = colormap_color(ColorMap::kSequential, i / 1000.0);
    const Rgb b = colormap_color(ColorMap::kSequential, (i + 1) / 1000.0);
    EXPECT_LE(channel_distance(a, b), 1) << "i = " << i;
  }
}

TEST(Colormap, DivergingIsBlueWhiteRedCentredOnTheMiddle) {
  EXPECT_EQ(colormap_color(ColorMap::kDiverging, 0.5), (Rgb{255, 255, 255}));
  // ColorBrewer RdBu's ends, reversed: dark blue at 0, dark red at 1.
  EXPECT_EQ(colormap_color(ColorMap::kDiverging, 0.0), hex(0x053061));
  EXPECT_EQ(colormap_color(ColorMap::kDiverging, 1.0), hex(0x67001f));
  for (int i = 0; i < 50; ++i) {
    const double t = i / 100.0;  // the blue half, then its mirror on the red half
    const Rgb blue = colormap_color(ColorMap::kDiverging, t);
    const Rgb red = colormap_color(ColorMap::kDiverging, 1 - t);
    EXPECT_GT(blue.b, blue.r) << "t = " << t;
    EXPECT_GT(red.r, red.b) << "t = " << 1 - t;
    // Lighter towards the centre on both sides.
    EXPECT_LT(luma(blue), luma(colormap_color(ColorMap::kDiverging, t + 0.01))) << "t = " << t;
    EXPECT_LT(luma(red), luma(colormap_color(ColorMap::kDiverging, 0.99 - t))) << "t = " << 1 - t;
  }
}

TEST(Colormap, ClampsOutOfRangeAndGreysNaN) {
  for (const ColorMap map : {ColorMap::kSequential, ColorMap::kDiverging}) {
    EXPECT_EQ(colormap_color(map, -3.0), colormap_color(map, 0.0));
    EXPECT_EQ(colormap_color(map, -INFINITY), colormap_color(map, 0.0));
    EXPECT_EQ(colormap_color(map, 7.0), colormap_color(map, 1.0));
    EXPECT_EQ(colormap_color(map, INFINITY), colormap_color(map, 1.0));
    EXPECT_EQ(colormap_color(map, NAN), (Rgb{128, 128, 128}));
  }
}

}  // namespace
}  // namespace posenc::plot
