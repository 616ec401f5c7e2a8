// The pictures of a table at extreme scales, pixel by pixel: a table of
// values near +-1e300 must draw what the same table scaled down draws (its
// colour bar labelled with the scale), where its dot proximity overflowed to
// inf (grey, non-finite cells) or plot refused the values outright. And the
// decay picture from one row of S is the picture from the whole matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "plot_test_util.h"  // tests/plot: PNG decoding
#include "posenc/analysis/proximity.h"
#include "posenc/report/pictures.h"

namespace posenc::report {
namespace {

using plot::testing::Image;
using plot::detail::Rect;

// A sinusoid-like table with both signs: rows p, columns sin / cos of p w_k.
analysis::Matrix wave_table(int64_t n, int64_t d) {
  analysis::Matrix t(n, d);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t k = 0; k < d; ++k) {
      const double w = std::pow(100.0, -static_cast<double>(k / 2 * 2) / static_cast<double>(d));
      t(p, k) = k % 2 == 0 ? std::sin(p * w) : std::cos(p * w);
    }
  return t;
}

analysis::Matrix times(analysis::Matrix m, double c) {
  for (double& v : m.values) v *= c;
  return m;
}

// Pixels of r that differ between the two images.
int differing(const Image& a, const Image& b, Rect r) {
  int count = 0;
  for (int y = r.y; y < r.y + r.h; ++y)
    for (int x = r.x; x < r.x + r.w; ++x) count += a.at(x, y) == b.at(x, y) ? 0 : 1;
  return count;
}

bool grey(plot::Rgb c) { return c == plot::detail::kNonFiniteColor; }

TEST(Pictures, SimilarityNear1e300IsTheScaledDownPicture) {
  const analysis::Matrix table = wave_table(40, 8);
  const Rect cells = plot::detail::heatmap_layout(720, 600).plot;
  const Image want(similarity_picture(analysis::proximity(table, analysis::ProximityKind::kDot), "t", "dot proximity"));
  for (double scale : {1e300, -1e300, 1e-300}) {
    const PictureMatrix s = picture_proximity(times(table, scale), analysis::ProximityKind::kDot);
    const Image got(similarity_picture(s.s, "t", s.label));
    EXPECT_EQ(got.count(cells, grey), 0) << scale;
    EXPECT_EQ(differing(got, want, cells), 0) << scale;  // colours are 8-bit; 10^k rounds values by 1 ulp
  }
  EXPECT_EQ(picture_proximity(times(table, 1e300), analysis::ProximityKind::kDot).label, "dot proximity / 1e600");
  EXPECT_EQ(picture_proximity(times(table, 3e-200), analysis::ProximityKind::kDot).label, "dot proximity / 1e-400");
  EXPECT_EQ(picture_proximity(table, analysis::ProximityKind::kDot).label, "dot proximity");
  EXPECT_EQ(picture_proximity(times(table, 1e300), analysis::ProximityKind::kCosine).label, "cosine proximity");
}

TEST(Pictures, EncodingBeyond1e300IsTheScaledDownPicture) {
  const analysis::Matrix table = wave_table(30, 12);
  const Rect cells = plot::detail::heatmap_layout(720, 600).plot;
  const Image want(encoding_picture(table, "t"));
  for (double scale : {1e300, 1.7e308, 5e302}) {
    const Image got(encoding_picture(times(table, scale), "t"));  // plot alone refuses values beyond 1e300
    EXPECT_EQ(differing(got, want, cells), 0) << scale;
  }
}

TEST(Pictures, DecayFromOneRowIsTheDecayFromTheMatrix) {
  const analysis::Matrix table = wave_table(50, 8);
  for (analysis::ProximityKind kind : {analysis::ProximityKind::kDot, analysis::ProximityKind::kCosine}) {
    const analysis::Matrix s = analysis::proximity(table, kind);
    const std::vector<unsigned char> whole = decay_picture(s, 17, "t", "S");
    const PictureRow row = picture_proximity_row(table, 17, kind);
    EXPECT_EQ(decay_picture_row(row.row, 17, "t", "S"), whole);  // same bytes
  }
  const PictureRow huge = picture_proximity_row(times(table, 1e300), 17, analysis::ProximityKind::kDot);
  EXPECT_EQ(huge.label, "dot proximity / 1e600");
  const PictureRow plain = picture_proximity_row(table, 17, analysis::ProximityKind::kDot);
  for (size_t j = 0; j < plain.row.size(); ++j) EXPECT_NEAR(huge.row[j], plain.row[j], 1e-13) << j;
}

}  // namespace
}  // namespace posenc::report
