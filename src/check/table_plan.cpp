// Position tables [N, D]: the absolute kinds (kernels::absolute_table) and the
// 2D / 3D sinusoidal grids (kernels::sinusoidal_2d / _3d), in float64, and
// under the usual mistakes: float32 angles, the other sin/cos layouts,
// positions off by one, the table transposed, the grid's axes swapped.
#include <algorithm>
#include <string>
#include <utility>

#include "plan.h"
#include "posenc/error.h"

namespace posenc::check::detail {
namespace {

using kernels::Precision;
using kernels::SinusoidalLayout;

std::vector<double> transpose(const std::vector<double>& m, int64_t rows, int64_t cols) {
  std::vector<double> out(m.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = m[r * cols + c];
  }
  return out;
}

std::string layout_text(SinusoidalLayout layout) {
  switch (layout) {
    case SinusoidalLayout::kInterleaved: return "interleaved (sin, cos, sin, cos, ...)";
    case SinusoidalLayout::kHalf: return "half (all sines, then all cosines)";
    case SinusoidalLayout::kCosSin: return "cos-sin (cos, sin, cos, sin, ...)";
  }
  return "";
}

// The float32-angle and layout hypotheses of the sinusoidal families.
template <class Params, class Build>
void sinusoid_hypotheses(const Params& base, Build build, Plan& plan) {
  Params other = base;
  other.precision = base.precision == Precision::kExact ? Precision::kFp32 : Precision::kExact;
  plan.hypotheses.push_back(
      {base.precision == Precision::kExact ? "fp32-angles" : "exact-angles",
       base.precision == Precision::kExact
           ? "float32 angles: omega and p rounded to float32, p*omega in float32 (precision=fp32)"
           : "exact angles (precision=exact) instead of the float32 formula",
       [=] { return build(other); }});
  for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kHalf, SinusoidalLayout::kCosSin}) {
    if (layout == base.layout) continue;
    other = base;
    other.layout = layout;
    plan.hypotheses.push_back({"layout-" + std::string(kernels::layout_name(layout)),
                               "the other sin/cos layout: " + layout_text(layout), [=] { return build(other); }});
  }
}

Plan absolute(const CheckRequest& request, int64_t rows, int64_t dim) {
  kernels::AbsoluteParams params = request.absolute;
  params.kind = kernels::parse_absolute_kind(request.kind);
  params.dim = dim;
  Plan plan;
  plan.key = row_positions(request, rows, "rows");
  const std::vector<int64_t> positions = plan.key;
  auto build = [=](kernels::AbsoluteParams p, int64_t shift) {
    std::vector<int64_t> pos(positions);
    for (int64_t& v : pos) v += shift;
    const kernels::Positions list = kernels::Positions::list(pos);
    kernels::validate(p, list);
    std::vector<double> out(static_cast<size_t>(rows * p.dim));
    kernels::absolute_table<double>(p, list, out);
    return out;
  };
  kernels::validate(params, kernels::Positions::list(positions));
  const bool sinusoidal = params.kind == kernels::AbsoluteKind::kSinusoidal;
  plan.reference = std::string(kernels::absolute_kind_name(params.kind)) + " table, dim " + std::to_string(dim);
  if (sinusoidal) {
    plan.reference += ", base " + std::to_string(params.base) + ", scale " + std::to_string(params.scale) +
                      ", layout " + std::string(kernels::layout_name(params.layout)) + ", precision " +
                      std::string(kernels::precision_name(params.precision));
  }
  plan.baseline = {"baseline", plan.reference, [=] { return build(params, 0); }};
  if (sinusoidal) sinusoid_hypotheses(params, [=](kernels::AbsoluteParams p) { return build(p, 0); }, plan);
  for (int64_t shift : {1, -1}) {
    plan.hypotheses.push_back({shift > 0 ? "positions+1" : "positions-1",
                               shift > 0 ? "positions off by one: p+1 used for row p" : "positions off by one: p-1 used for row p",
                               [=] { return build(params, shift); }});
  }
  if (request.positions == std::nullopt) {
    // Stored [D, N]: the kernel's table for positions start .. start+D-1 of width N, transposed.
    const int64_t start = request.start;
    plan.hypotheses.push_back({"transposed", "the table transposed: [dim, positions] stored as [positions, dim]", [=] {
                                 kernels::AbsoluteParams p = params;
                                 p.dim = rows;
                                 const kernels::Positions range = kernels::Positions::range(start, dim);
                                 kernels::validate(p, range);
                                 std::vector<double> t(static_cast<size_t>(rows * dim));
                                 kernels::absolute_table<double>(p, range, t);
                                 return transpose(t, dim, rows);
                               }});
  }
  return plan;
}

Plan grid(const CheckRequest& request, bool three_d, int64_t rows, int64_t dim) {
  kernels::SinusoidalGridParams params = request.grid;
  params.dim = dim;
  if (!three_d) params.frames = 1;
  if (params.height == 0 || params.width == 0 || (three_d && params.frames == 0)) {
    fail_argument("check", "kind '", request.kind, "' needs ", three_d ? "--frames, " : "",
                  "--height and --width (the tensor has ", rows, " rows)");
  }
  if (params.frames * params.height * params.width != rows) {
    fail_argument("check", "kind '", request.kind, "' of ", three_d ? std::to_string(params.frames) + " x " : "",
                  params.height, " x ", params.width, " cells needs ", params.frames * params.height * params.width,
                  " rows, got ", rows);
  }
  require(!request.positions.has_value(), "check", "--positions does not apply to kind '", request.kind,
          "' (rows are grid cells)");
  auto build = [=](kernels::SinusoidalGridParams p) {
    kernels::validate(p, three_d);
    std::vector<double> out(static_cast<size_t>(rows * dim));
    if (three_d) {
      kernels::sinusoidal_3d<double>(p, out);
    } else {
      kernels::sinusoidal_2d<double>(p, out);
    }
    return out;
  };
  kernels::validate(params, three_d);
  Plan plan;
  plan.reference = request.kind + " grid " + (three_d ? std::to_string(params.frames) + " x " : "") +
                   std::to_string(params.height) + " x " + std::to_string(params.width) + ", dim " +
                   std::to_string(dim) + ", layout " + std::string(kernels::layout_name(params.layout));
  plan.baseline = {"baseline", plan.reference, [=] { return build(params); }};
  sinusoid_hypotheses(params, build, plan);
  {
    // y and x exchanged: the cell (y, x) holds the row the kernel gives (x, y) of a W x H grid.
    plan.hypotheses.push_back({"axes-swapped", "the grid's y and x exchanged (rows x*H + y)", [=] {
                                 kernels::SinusoidalGridParams p = params;
                                 std::swap(p.height, p.width);
                                 const std::vector<double> t = build(p);
                                 std::vector<double> out(t.size());
                                 const int64_t cells = params.height * params.width;
                                 for (int64_t f = 0; f < params.frames; ++f) {
                                   for (int64_t y = 0; y < params.height; ++y) {
                                     for (int64_t x = 0; x < params.width; ++x) {
                                       const int64_t to = f * cells + y * params.width + x;
                                       const int64_t from = f * cells + x * params.height + y;
                                       std::copy_n(t.begin() + from * dim, dim, out.begin() + to * dim);
                                     }
                                   }
                                 }
                                 return out;
                               }});
  }
  plan.key.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) plan.key[r] = r;
  return plan;
}

}  // namespace

Plan table_plan(const CheckRequest& request) {
  const std::vector<int64_t> shape = squeezed(request.tensor.shape);
  if (shape.size() != 2) {
    fail_argument("check", "--what table needs a 2-D tensor [positions, dim] (leading 1s are squeezed), got ",
                  shape_text(request.tensor.shape));
  }
  const bool three_d = request.kind == "sinusoidal-3d";
  Plan plan = request.kind == "sinusoidal-2d" || three_d ? grid(request, three_d, shape[0], shape[1])
                                                         : absolute(request, shape[0], shape[1]);
  plan.what = What::kTable;
  plan.inner = shape[1];
  return plan;
}

}  // namespace posenc::check::detail
