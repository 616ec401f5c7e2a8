// Dynamic (MLP-generated) position biases: a small MLP maps a relative
// position to one logit bias per head.
//
// DPB, 1D: x-transformers' DynamicPositionBias (lucidrains/x-transformers,
// after the CrossFormer / Swin V2 idea). For query i (at key position
// i' = i + k_len - q_len) and key j the MLP reads r = i' - j (x-transformers'
// sign: its distance matrix is query minus key), optionally log-spaced:
//   phi(r) = r,  or  sign(r) log(1 + |r|)                    (log_distance)
//   a_0 = SiLU(LN_0(W_in phi + b_in))                         W_in [hidden, 1]
//   a_l = SiLU(LN_l(W_l a_{l-1} + b_l)),  l = 1 .. depth-1    W_l  [hidden, hidden]
//   b_h = (W_out a_{depth-1} + b_out)_h                        W_out [num_heads, hidden]
// LN_l(z) = gamma_l (z - mean z) / sqrt(var z + 1e-5) + beta_l over the hidden
// units (torch.nn.LayerNorm) when norm is set, the identity otherwise. The
// bias depends on the offset only, so it is written as offset rows
// [num_heads, q_len + k_len - 1], element d + k_len - 1 for d = j - i' = -r
// (the fused attention's offset_bias layout): O(T * hidden^2) work, no T x T.
//
// CPB, 2D: Swin Transformer V2's continuous position bias (Liu et al., CVPR
// 2022). On a height x width grid, the relative coordinate of query (y, x) to
// key (y', x') is (dy, dx) = (y - y', x - x') (Swin's sign), log-spaced per axis
//   c(t, n) = sign(8 t / (n - 1)) log2(1 + |8 t / (n - 1)|) / log2(8)
// with n the grid's extent (or the pretrained window's, when given; c = 0 on
// an axis of extent 1, where Swin would divide by 0), then
//   b_h = 16 sigmoid((W_2 ReLU(W_1 (c_y, c_x) + b_1))_h)    W_1 [hidden, 2], W_2 [num_heads, hidden]
// written as the fused attention's grid_bias [num_heads, 2H-1, 2W-1], element
// (y' - y + H - 1, x' - x + W - 1), i.e. at (dy, dx) = (H-1-row, W-1-col).
//
// Both are formed in double from T weights and rounded once; the backward
// passes give the gradient of every weight and bias from dL/d(rows | grid),
// accumulated in double.
#pragma once

#include <cstdint>
#include <vector>

namespace posenc::kernels {

inline constexpr double kDpbNormEps = 1e-5;  // torch.nn.LayerNorm's default

struct DpbParams {
  int64_t num_heads = 0;         // >= 1
  int64_t hidden = 0;            // >= 1 (x-transformers: model dim / 4)
  int64_t depth = 2;             // >= 1 linear + SiLU layers before the output layer (x-transformers: 2)
  bool log_distance = false;     // phi(r) = sign(r) log(1 + |r|)
  bool norm = false;             // LayerNorm before each SiLU
  int64_t q_len = 0, k_len = 0;  // >= 0
};

// Row-major, torch.nn.Linear's [out, in] layout. norm_* only with params.norm.
template <class T>
struct DpbWeights {
  const T* in_weight = nullptr;      // [hidden] (Linear(1, hidden).weight [hidden, 1])
  const T* in_bias = nullptr;        // [hidden]
  const T* hidden_weight = nullptr;  // [depth-1, hidden, hidden]
  const T* hidden_bias = nullptr;    // [depth-1, hidden]
  const T* norm_weight = nullptr;    // [depth, hidden]: gamma_l
  const T* norm_bias = nullptr;      // [depth, hidden]: beta_l
  const T* out_weight = nullptr;     // [num_heads, hidden]
  const T* out_bias = nullptr;       // [num_heads]
};

// The same layout, written (overwritten) by the backward.
template <class T>
struct DpbGradients {
  T* in_weight = nullptr;
  T* in_bias = nullptr;
  T* hidden_weight = nullptr;
  T* hidden_bias = nullptr;
  T* norm_weight = nullptr;
  T* norm_bias = nullptr;
  T* out_weight = nullptr;
  T* out_bias = nullptr;
};

// phi(r): the MLP's input for r = i' - j.
double dpb_input(int64_t r, bool log_distance) noexcept;
// q_len + k_len - 1 offsets, 0 when either length is 0.
int64_t dpb_columns(const DpbParams& params) noexcept;

// "[op] num_heads must be >= 1, got 0", "[op] hidden must be >= 1, got 0",
// "[op] depth must be >= 1, got 0", "[op] q_len must be >= 0, got -1",
// "[op] k_len must be >= 0, got -1".
void validate(const DpbParams& params, const char* op = "dpb");

// out: [num_heads, dpb_columns] contiguous, overwritten. T is float or double.
// Validates params and refuses null weights ("[op] out_weight must not be null").
template <class T>
void dpb_offset_bias(const DpbParams& params, const DpbWeights<T>& weights, T* out, const char* op = "dpb");

// grad: [num_heads, dpb_columns] -> every gradient of `grads` (norm_* only
// with params.norm), overwritten; zeros when there is no column.
template <class T>
void dpb_offset_bias_backward(const DpbParams& params, const DpbWeights<T>& weights, const T* grad,
                              const DpbGradients<T>& grads, const char* op = "dpb");

// ---------------------------------------------------------------------------

struct CpbParams {
  int64_t num_heads = 0;          // >= 1
  int64_t hidden = 512;           // >= 1 (Swin V2: 512)
  int64_t height = 0, width = 0;  // >= 1: the grid (Swin's window)
  // The window the coordinates are normalised by: 0 = the grid's own; else >= 2
  // (Swin V2's pretrained_window_size, for fine-tuning at another window).
  int64_t pretrained_height = 0, pretrained_width = 0;
};

template <class T>
struct CpbWeights {
  const T* fc1_weight = nullptr;  // [hidden, 2]: columns (c_y, c_x)
  const T* fc1_bias = nullptr;    // [hidden]
  const T* fc2_weight = nullptr;  // [num_heads, hidden] (no bias, as Swin V2)
};

template <class T>
struct CpbGradients {
  T* fc1_weight = nullptr;
  T* fc1_bias = nullptr;
  T* fc2_weight = nullptr;
};

// c(t, n) above for the offset t along an axis normalised by extent n >= 1.
double cpb_coordinate(int64_t t, int64_t extent) noexcept;
// Rows and columns of the grid bias: 2*height - 1, 2*width - 1.
int64_t cpb_rows(const CpbParams& params) noexcept;
int64_t cpb_cols(const CpbParams& params) noexcept;

// "[op] num_heads must be >= 1, got 0", "[op] hidden must be >= 1, got 0",
// "[op] height must be >= 1, got 0", "[op] width must be >= 1, got 0",
// "[op] pretrained_height must be 0 (the grid's) or >= 2, got 1", same for width.
void validate(const CpbParams& params, const char* op = "cpb");

// out: [num_heads, 2*height-1, 2*width-1] contiguous, overwritten.
template <class T>
void cpb_grid_bias(const CpbParams& params, const CpbWeights<T>& weights, T* out, const char* op = "cpb");

// grad: [num_heads, 2*height-1, 2*width-1] -> the three gradients, overwritten.
template <class T>
void cpb_grid_bias_backward(const CpbParams& params, const CpbWeights<T>& weights, const T* grad,
                            const CpbGradients<T>& grads, const char* op = "cpb");

// ---------------------------------------------------------------------------
// Slow references for tests: the MLP run once per (query, key) pair in long
// double, sharing no code with the kernels above, as dense biases.
namespace reference {

// [num_heads, q_len, k_len].
std::vector<double> dpb_bias(const DpbParams& params, const DpbWeights<double>& weights);
// [num_heads, height*width, height*width], cells flattened as y*width + x.
std::vector<double> cpb_bias(const CpbParams& params, const CpbWeights<double>& weights);

}  // namespace reference
}  // namespace posenc::kernels
