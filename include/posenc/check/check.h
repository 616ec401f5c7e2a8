// `posenc check`: is a tensor dumped from another implementation (a port to
// C++, JAX, a custom kernel) what posenc computes, and if not, why?
//
// The tensor is compared element by element with posenc's exact values (the
// kernels' float64 path), the error reported per band of position ([0, 1),
// [1, 2), [2, 4), ...). When it does not match, each usual porting mistake is
// tested by recomputing posenc's values under that mistake: float32 angles
// (precision fp32), the other RoPE layout, a missing attention factor or
// scaling, positions off by one, partial rotary on the wrong channels, a
// transposed bias, the offset sign flipped, the other sin/cos layout of a
// table, a constant factor. The diagnosis names every hypothesis that brings
// the error down to rounding level, with the numbers (docs/check.md).
//
// What is compared (--what):
//   cos-sin  RoPE cache [N, R]: cos(p w_j) in columns [0, R/2), sin in [R/2, R),
//            both times the attention factor (the layout of `posenc table rope`)
//   rotated  q or k after RoPE, (..., T, D), against rope(x) for the unrotated
//            input x (same shape) stored beside it
//   bias     ALiBi or T5 bias (H, Tq, Tk) or (1, H, Tq, Tk); T5 needs its
//            bucket table [num_buckets, H] beside it
//   table    an absolute table [N, D] (sinusoidal, the naive kinds) or a 2D /
//            3D sinusoidal grid [H*W, D] / [F*H*W, D]
// Tolerance (dtype of the dumped tensor, times the value range max|ref|):
//   float64 2^-40, float32 2^-21 (8 ulp), float16 2^-9, bfloat16 2^-6.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/absolute.h"
#include "posenc/kernels/rope.h"
#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal_nd.h"
#include "posenc/kernels/t5.h"

namespace posenc::check {

enum class What { kCosSin, kRotated, kBias, kTable };

// "cos-sin" | "rotated" | "bias" | "table"; throws
// "[check] --what must be one of cos-sin, rotated, bias, table, got 'x'".
What parse_what(std::string_view name);
std::string_view what_name(What what) noexcept;

// A tensor as read from a file or handed over by Python: float64 values, the
// element type it was stored in (it sets the tolerance) and a label.
struct DumpedTensor {
  std::string label;                 // "f.safetensors:q", "tensor"
  std::string dtype;                 // "float32", "bfloat16", ...
  std::vector<int64_t> shape;
  std::vector<double> values;        // C order
};

// One tensor of a .npy / .safetensors file (io::load_tensor's choice and
// messages); floating element types only. Throws "[check] no such file: x.npy",
// "[check] tensor 'q' of x.safetensors must be floating point (float16, bfloat16,
// float32, float64), got int64".
DumpedTensor load_dumped(const std::string& path, const std::optional<std::string>& name);

struct RopeReference {
  int64_t head_dim = 0;    // rotated: 0, or the head_dim the tensor must have (a config's)
  int64_t rotary_dim = 0;  // 0: cos-sin: the tensor's last dim; rotated: head_dim
  double base = 10000.0;
  kernels::RopeLayout layout = kernels::RopeLayout::kHalf;  // rotated only
  kernels::RopeScaling scaling;
  std::optional<int64_t> seq_len;  // unset: max position + 1
  kernels::Precision precision = kernels::Precision::kExact;
};

struct BiasReference {
  std::optional<int64_t> query_offset;  // unset: k_len - q_len (queries are the last positions)
  bool causal = false;                  // alibi: -inf above the diagonal
  kernels::T5BucketParams t5;           // t5; num_buckets 0: the bucket table's rows
  int64_t heads = 0;                    // 0, or the heads the bias must have (a config's)
  std::vector<double> alibi_slopes;     // empty: kernels::alibi_slopes (MPT's configs give their own)
};

struct CheckRequest {
  // "rope", "alibi", "t5", an absolute kind ("sinusoidal", "index", ...),
  // "sinusoidal-2d", "sinusoidal-3d".
  std::string kind;
  std::optional<What> what;  // unset: rotated for rope with an input, cos-sin for rope, bias, table
  DumpedTensor tensor;
  std::optional<DumpedTensor> input;  // rotated: x before rotation; t5: [num_buckets, heads]
  std::optional<std::vector<int64_t>> positions;  // of the rows / the T axis; unset: start, start+1, ...
  int64_t start = 0;
  RopeReference rope;
  BiasReference bias;
  kernels::AbsoluteParams absolute;      // dim is the tensor's
  kernels::SinusoidalGridParams grid;    // dim is the tensor's; height, width (frames) required
  std::string reference_label;           // set by the caller for a Hugging Face config: its path
};

struct Band {
  int64_t lo = 0, hi = 0;  // positions |p| in [lo, hi)
  int64_t count = 0;       // elements
  double max_abs = 0.0;
  double max_rel = 0.0;    // max_abs / value range
};

struct Hypothesis {
  std::string name;         // "fp32-angles", "other-layout", "positions+1", ...
  std::string description;  // what was recomputed
  double max_abs = 0.0;
  double max_rel = 0.0;
  bool explains = false;    // max_abs <= tolerance
  std::vector<Band> bands;
};

struct ChannelGroup {
  std::string name;  // "rotated", "pass-through"
  int64_t first = 0, count = 0;
  double max_abs = 0.0;
};

struct CheckReport {
  std::string what, kind, reference, tensor, dtype;
  std::vector<int64_t> shape;
  int64_t first_position = 0, last_position = 0;
  double value_range = 0.0;  // max |reference|
  double tolerance = 0.0;
  std::string tolerance_rule;
  double max_abs = 0.0, max_rel = 0.0;
  bool matches = false;
  std::vector<Band> bands;
  std::optional<double> ratio;  // least-squares c with tensor ~ c * reference (unset when ill-defined)
  std::vector<ChannelGroup> channels;
  std::vector<Hypothesis> hypotheses;  // empty when the tensor matches
  std::vector<std::string> diagnosis;  // sentences with the evidence
};

// Validates (messages "[check] ..." and the kernels'), compares, diagnoses.
CheckReport run_check(const CheckRequest& request);

// Sets kind and the reference from a Hugging Face config.json (posenc::hf,
// read_hf_config_file), the scheme of layer `layer` (HfScheme::for_layer): its rotary (rope: head_dim, rotary_dim, base, layout,
// scaling), else its bias (alibi, t5), else a sinusoidal absolute table.
// Throws "[check] config.json: M-RoPE (mrope_section) is not supported by check",
// "[check] config.json: the position table is learned: no formula to compare with",
// "[check] config.json: no positional scheme posenc can check", and hf's errors.
void apply_hf_config(const std::string& path, int64_t layer, CheckRequest& request);

// The report as JSON (the `--json` output and Python's dict).
std::string report_json(const CheckReport& report);

// Options given by name (Python's **options), as a JSON object, applied to
// `request`: hf_config and layer (first: apply_hf_config, the others then override), start, base, rotary_dim, layout, precision, scale, length,
// height, width, frames, normalize, normalize_scale, query_offset, causal,
// num_buckets, max_distance, bidirectional, seq_len, and the RoPE scaling keys
// of Hugging Face (rope_type or scaling, factor, original_max_position_embeddings, ...).
// Throws "[check] unknown option 'x'; known: ..." and "[check] option 'x' must be a number, got ...".
void apply_options_json(const std::string& json, CheckRequest& request);

}  // namespace posenc::check
