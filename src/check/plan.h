// Private to posenc::check: what one comparison recomputes. A plan holds the
// baseline (posenc's values under the request) and the hypotheses (posenc's
// values under one usual porting mistake each), built lazily so only the
// ones needed are computed, and where each element sits (its position, for
// the bands; its channel, for partial rotary).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "posenc/check/check.h"

namespace posenc::check::detail {

struct Variant {
  std::string name;
  std::string description;
  std::function<std::vector<double>()> build;  // same shape as the tensor, C order
};

struct Plan {
  What what = What::kTable;
  std::string reference;  // one line: what the baseline is
  Variant baseline;
  std::vector<Variant> hypotheses;
  // Element e sits at position key[(e / inner) % key.size()] (its |p|, or
  // for a bias the distance |j - i'|).
  std::vector<int64_t> key;
  int64_t inner = 1;
  int64_t first_position = 0, last_position = 0;
  // Rotated: element e is channel e % channels; [0, rotary_dim) rotate and
  // carry the attention factor (the constant-factor fit uses only those).
  int64_t channels = 0;
  int64_t rotary_dim = 0;
};

// The row positions: request.positions (count checked against `rows`) or
// start, start + 1, ...; "[check] --positions must list N positions (the tensor's
// rows), got M".
std::vector<int64_t> row_positions(const CheckRequest& request, int64_t rows, const char* axis);
// The shape without its leading 1s.
std::vector<int64_t> squeezed(const std::vector<int64_t>& shape);
// "[2, 3, 4]".
std::string shape_text(const std::vector<int64_t>& shape);

Plan rope_plan(const CheckRequest& request, What what);  // rope_plan.cpp
Plan bias_plan(const CheckRequest& request);             // bias_plan.cpp
Plan table_plan(const CheckRequest& request);            // table_plan.cpp

}  // namespace posenc::check::detail
