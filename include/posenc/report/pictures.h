// The three pictures of an encoding, as PNG bytes (drawn by posenc::plot):
//
//   encoding    the table PE [positions, dim] as a heatmap, position down the
//               rows and dimension along the columns, diverging colours
//               centred on 0 (as the tutorials draw the sinusoid);
//   similarity  a matrix S [n, n] indexed by positions (proximity, bias,
//               attention) as a heatmap, sequential colours;
//   decay       S[P, j] against j for the reference position P, with a dashed
//               marker at j = P (the classic: sinusoidal, D = 128, 256
//               positions, P = 128).
// Sizes default to plot's (720 x 600 heatmaps, 720 x 480 line plots).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/analysis/matrix.h"
#include "posenc/analysis/proximity.h"

namespace posenc::report {

enum class Picture { kEncoding, kSimilarity, kDecay };

// "encoding" | "similarity" | "decay"; throws
// "[op] figure must be one of encoding, similarity, decay, got 'x'".
Picture parse_picture(std::string_view name, std::string_view op);
std::string_view picture_name(Picture picture) noexcept;

struct PictureSize {
  int width = 0;   // 0: plot's default for the picture
  int height = 0;
};
// The size a picture gets for `size` (its defaults filled in).
PictureSize picture_size(Picture picture, PictureSize size = {});

// Values of any finite magnitude draw the picture of the same table scaled
// down: a table beyond 1e300 in magnitude (plot's limit) is drawn divided by
// 10^k (k: the decimal exponent of its largest |value|) and its colour bar
// labelled "value / 1e300".
//
// `name` titles the figure ("sinusoidal"); `matrix_label` says what S is
// ("dot proximity", "mean ALiBi bias", "identical-word attention").
std::vector<unsigned char> encoding_picture(const analysis::Matrix& table, std::string_view name,
                                            PictureSize size = {});
std::vector<unsigned char> similarity_picture(const analysis::Matrix& s, std::string_view name,
                                              std::string_view matrix_label, PictureSize size = {});
// Throws "[op] reference must be in [0, 255] for 256 positions, got 300" (op "plot").
std::vector<unsigned char> decay_picture(const analysis::Matrix& s, int64_t reference, std::string_view name,
                                         std::string_view matrix_label, PictureSize size = {});
// The same picture from the one row it draws, row[j] = S[reference, j]
// (analysis::proximity_row: O(n d), where S itself is n x n).
// S (or its row `reference`) of a table for a picture, with its label ("dot
// proximity"): the table's own when float64 holds S comfortably, else (dot
// proximity of a table beyond 1e150 or below 1e-150, whose S over- or
// underflows) that of the table divided by 10^k, labelled "dot proximity / 1e600".
struct PictureMatrix {
  analysis::Matrix s;
  std::string label;
};
struct PictureRow {
  std::vector<double> row;
  std::string label;
};
PictureMatrix picture_proximity(const analysis::Matrix& table, analysis::ProximityKind kind);
PictureRow picture_proximity_row(const analysis::Matrix& table, int64_t reference, analysis::ProximityKind kind);

std::vector<unsigned char> decay_picture_row(std::span<const double> row, int64_t reference, std::string_view name,
                                             std::string_view matrix_label, PictureSize size = {});

}  // namespace posenc::report
