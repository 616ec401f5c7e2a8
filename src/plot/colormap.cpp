#include <algorithm>
#include <cmath>

#include "layout.h"
#include "posenc/plot/figures.h"

namespace posenc::plot {
namespace {

struct Anchor {
  double r, g, b;
};

// viridis (van der Walt, Smith and Firing, 2015; matplotlib's _cm_listed.py,
// CC0): entries 0, 5, 10, ..., 255 of its 256-entry table. Linear
// interpolation between these 52 anchors stays within 0.7 of 255 of every
// entry of the full table.
constexpr Anchor kViridis[] = {
    {0.267004, 0.004874, 0.329415}, {0.273809, 0.031497, 0.358853},
    {0.278791, 0.062145, 0.386592}, {0.281924, 0.089666, 0.412415},
    {0.283197, 0.115680, 0.436115}, {0.282623, 0.140926, 0.457517},
    {0.280255, 0.165693, 0.476498}, {0.276194, 0.190074, 0.493001},
    {0.270595, 0.214069, 0.507052}, {0.263663, 0.237631, 0.518762},
    {0.255645, 0.260703, 0.528312}, {0.246811, 0.283237, 0.535941},
    {0.237441, 0.305202, 0.541921}, {0.227802, 0.326594, 0.546532},
    {0.218130, 0.347432, 0.550038}, {0.208623, 0.367752, 0.552675},
    {0.199430, 0.387607, 0.554642}, {0.190631, 0.407061, 0.556089},
    {0.182256, 0.426184, 0.557120}, {0.174274, 0.445044, 0.557792},
    {0.166617, 0.463708, 0.558119}, {0.159194, 0.482237, 0.558073},
    {0.151918, 0.500685, 0.557587}, {0.144759, 0.519093, 0.556572},
    {0.137770, 0.537492, 0.554906}, {0.131172, 0.555899, 0.552459},
    {0.125394, 0.574318, 0.549086}, {0.121148, 0.592739, 0.544641},
    {0.119423, 0.611141, 0.538982}, {0.121380, 0.629492, 0.531973},
    {0.128087, 0.647749, 0.523491}, {0.140210, 0.665859, 0.513427},
    {0.157851, 0.683765, 0.501686}, {0.180653, 0.701402, 0.488189},
    {0.208030, 0.718701, 0.472873}, {0.239374, 0.735588, 0.455688},
    {0.274149, 0.751988, 0.436601}, {0.311925, 0.767822, 0.415586},
    {0.352360, 0.783011, 0.392636}, {0.395174, 0.797475, 0.367757},
    {0.440137, 0.811138, 0.340967}, {0.487026, 0.823929, 0.312321},
    {0.535621, 0.835785, 0.281908}, {0.585678, 0.846661, 0.249897},
    {0.636902, 0.856542, 0.216620}, {0.688944, 0.865448, 0.182725},
    {0.741388, 0.873449, 0.149561}, {0.793760, 0.880678, 0.120005},
    {0.845561, 0.887322, 0.099702}, {0.896320, 0.893616, 0.096335},
    {0.945636, 0.899815, 0.112838}, {0.993248, 0.906157, 0.143936},
};

// ColorBrewer RdBu (11 classes) reversed, blue to red, with its centre
// #f7f7f7 replaced by pure white so that white means exactly the middle.
constexpr Anchor kDiverging[] = {
    {0x05 / 255.0, 0x30 / 255.0, 0x61 / 255.0}, {0x21 / 255.0, 0x66 / 255.0, 0xac / 255.0},
    {0x43 / 255.0, 0x93 / 255.0, 0xc3 / 255.0}, {0x92 / 255.0, 0xc5 / 255.0, 0xde / 255.0},
    {0xd1 / 255.0, 0xe5 / 255.0, 0xf0 / 255.0}, {1.0, 1.0, 1.0},
    {0xfd / 255.0, 0xdb / 255.0, 0xc7 / 255.0}, {0xf4 / 255.0, 0xa5 / 255.0, 0x82 / 255.0},
    {0xd6 / 255.0, 0x60 / 255.0, 0x4d / 255.0}, {0xb2 / 255.0, 0x18 / 255.0, 0x2b / 255.0},
    {0x67 / 255.0, 0x00 / 255.0, 0x1f / 255.0},
};

template <size_t N>
Rgb interpolate(const Anchor (&table)[N], double t) noexcept {
  const double x = t * static_cast<double>(N - 1);
  const size_t i = std::min(static_cast<size_t>(x), N - 2);
  const double f = x - static_cast<double>(i);
  auto channel = [f](double a, double b) {
    return static_cast<unsigned char>(std::lround(255.0 * (a + f * (b - a))));
  };
  const Anchor& a = table[i];
  const Anchor& b = table[i + 1];
  return {channel(a.r, b.r), channel(a.g, b.g), channel(a.b, b.b)};
}

}  // namespace

Rgb colormap_color(ColorMap map, double t) noexcept {
  if (std::isnan(t)) return detail::kNonFiniteColor;
  t = std::clamp(t, 0.0, 1.0);
  return map == ColorMap::kDiverging ? interpolate(kDiverging, t) : interpolate(kViridis, t);
}

}  // namespace posenc::plot
