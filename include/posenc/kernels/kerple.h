// KERPLE (Chi et al., NeurIPS 2022, "KERPLE: Kernelized Relative Positional
// Embedding for Length Extrapolation"): head h adds a conditionally positive
// definite kernel of the distance |d|, d = j - i' (i' = i + k_len - q_len), to
// the logits:
//   logarithmic  b_h(d) = -r1_h * log(1 + r2_h * |d|)
//   power        b_h(d) = -r1_h * |d|^r2_h,   r2_h in (0, 2]
// r1, r2 > 0 are learned per head. The bias depends on the offset only, so it
// is written as offset rows [num_heads, q_len + k_len - 1], element d + k_len - 1
// (the fused attention's offset_bias layout); a causal model masks d > 0.
// Gradients (d/dr2 of |d|^r2 is |d|^r2 log|d|, 0 at d = 0):
//   log    db/dr1 = -log(1 + r2|d|),  db/dr2 = -r1 |d| / (1 + r2|d|)
//   power  db/dr1 = -|d|^r2,          db/dr2 = -r1 |d|^r2 log|d|
#pragma once

#include <cstdint>
#include <string_view>

namespace posenc::kernels {

enum class KerpleKind { kLog, kPower };

// "log" | "power"; else "[op] kind must be \"log\" or \"power\", got \"x\"".
KerpleKind parse_kerple_kind(std::string_view name, const char* op = "kerple");
std::string_view kerple_kind_name(KerpleKind kind) noexcept;

struct KerpleParams {
  KerpleKind kind = KerpleKind::kLog;
  int64_t num_heads = 0;           // >= 1
  int64_t q_len = 0, k_len = 0;    // >= 0
};

// q_len + k_len - 1 offsets, 0 when either length is 0.
int64_t kerple_columns(const KerpleParams& params) noexcept;

// "[op] num_heads must be >= 1, got 0", "[op] q_len must be >= 0, got -1",
// "[op] k_len must be >= 0, got -1".
void validate(const KerpleParams& params, const char* op = "kerple");

// r1, r2: [num_heads]. "[op] r1 must be > 0, got 0 (head 0)", "[op] r2 must be
// > 0, got -1 (head 2)", power: "[op] r2 must be <= 2, got 2.5 (head 1)"
// (NaN and infinity fail the same checks).
template <class T>
void validate_kerple_values(const KerpleParams& params, const T* r1, const T* r2, const char* op = "kerple");

// out: [num_heads, kerple_columns] contiguous, overwritten; formed in double
// and rounded once. T is float or double. Validates params and values.
template <class T>
void kerple_offset_bias(const KerpleParams& params, const T* r1, const T* r2, T* out, const char* op = "kerple");

// grad: [num_heads, kerple_columns] -> grad_r1, grad_r2: [num_heads],
// overwritten; each a sum over the row accumulated in double.
template <class T>
void kerple_offset_bias_backward(const KerpleParams& params, const T* r1, const T* r2, const T* grad, T* grad_r1,
                                 T* grad_r2, const char* op = "kerple");

}  // namespace posenc::kernels
