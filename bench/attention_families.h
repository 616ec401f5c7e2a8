// The attention families the attention benchmarks compare (bench_attention,
// bench_attention_backward): the inputs, the libtorch eager composition
// users write for each family, and the same computation through posenc's op.
//
// B=1, H=8, T=2048, Dh=64, float32 (2d-relative: a 45x45 grid, T=2025).
// Families: none; causal (none with the causal mask); rope (both sides rotate q and k, HF rotate_half style
// eagerly); alibi (-m_h|i-j| built eagerly, MPT/BLOOM); t5 (HF compute_bias,
// scale 1 as T5); shaw with keys and values, K = 16 (Shaw et al.: gather
// (T, T, Dh) then einsum); 2d-relative (BoTNet: q.table_h^T and q.table_w^T
// expanded by index to (T, T)).
// Newer families (attention_families_newer.cpp; ours from posenc's modules,
// eager from the reference code on the module's parameters): kerple (log
// kernel, encoder: -r1 log(1 + r2|i-j|) as (H, T, T)); dpb (x-transformers'
// DynamicPositionBias, encoder: MLP over the 2T-1 offsets, indexed to
// (H, T, T)); fire (the paper's code, causal: MLP over the (T, T) normalized
// log distances); cope (the authors' code, causal: sigmoid gates, reversed
// cumsum, q.e interpolated); deberta (HF DebertaV2, encoder: c2p and p2c
// gathered at the bucket rows, over sqrt(3 Dh)). Their target is parity with
// eager; issue 14's 3x / 2x targets are for the original six.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc::bench {

constexpr int64_t kB = 1, kH = 8, kT = 2048, kDh = 64, kK = 16, kGrid = 45;
inline const double kScale = 1.0 / std::sqrt(double(kDh));

// A family as F.scaled_dot_product_attention (SDPA) takes it, for the torch 2
// peer (torch2_peer.h): the same inputs, the terms as SDPA's additive float
// mask where they are a bias (the strongest form a user would pick: built
// once, not per call, and held whole, H*T^2 floats).
struct SdpaForm {
  at::Tensor q, k, v;
  at::Tensor mask;      // (1, H, T, T), -inf where masked; undefined: none
  at::Tensor cos, sin;  // (T, Dh): q and k rotated first, HF's rotate_half
  bool causal = false;  // SDPA's is_causal (with no mask)
  double scale = 0;     // 0: 1/sqrt(Dh)
};

struct AttentionFamily {
  const char* name;
  at::Tensor (*ours)();   // posenc's op (ops::attention: fused, with a backward when the inputs need one)
  at::Tensor (*eager)();  // eager libtorch
  int64_t length;         // T (2025 for 2d-relative)
  bool parity = false;    // a newer family: target kParityTarget, not the bench's own
  // Tolerances of the checks where eager's own float32 error is measured to be
  // larger than the bench's (the reason beside the family); 0: the bench's.
  double forward_tol = 0, gradient_tol = 0;
  // The family for SDPA; null where a term reads q or k (Shaw, 2D relative, CoPE, DeBERTa): no mask holds it.
  SdpaForm (*sdpa)() = nullptr;
};

// The speed target of the newer families: at least as fast as eager.
constexpr double kParityTarget = 1.0;

// The original six, then the newer five (parity set).
const std::vector<AttentionFamily>& attention_families();

// Registers "PREFIX/ours_NAME" and "PREFIX/eager_NAME" for every family, each
// iteration calling run(the side's function) once, timed in real time.
void register_family_benchmarks(const char* prefix, void (*run)(at::Tensor (*)()), int repetitions);

// One family's measurements in a run.
struct FamilyTiming {
  double ours_seconds = 0, eager_seconds = 0;  // fastest repetitions
  double paired = 0;                           // paired median of eager / ours
  int64_t ours_bytes = -1, eager_bytes = -1;   // peak extra memory (-1: not measurable)
  double gflop = 0;                            // ours' napkin flops
};

// Prints the family's line (times, GFLOP/s, ratios, memory) and a BELOW
// TARGET line for a paired ratio under speed_target or ours' memory above a
// quarter of eager's; returns whether both hold.
bool report_family(const AttentionFamily& family, const FamilyTiming& t, double speed_target);

// (n, n) int64 key - query offsets j - i.
at::Tensor offsets(int64_t n);
// Hugging Face T5 _relative_position_bucket (bidirectional, 32 buckets, max distance 128) of key - query.
at::Tensor hf_t5_buckets(at::Tensor rel);

// Every input tensor a family differentiates (q, k, v, slopes, tables) made
// to require grad or not; their gradients cleared.
void require_grad(bool on);
// Those tensors' gradients (q, k, v of the family's length, then its tables), for checks.
std::vector<at::Tensor> family_gradients(const AttentionFamily& family);

// attention_families_newer.cpp: the newer five, and the two functions above
// for their inputs (q, k, v, then the module's parameters in order, less
// those whose gradient is 0 by the softmax's shift invariance).
const std::vector<AttentionFamily>& newer_attention_families();
void newer_require_grad(bool on);
std::vector<at::Tensor> newer_family_gradients(const AttentionFamily& family);

}  // namespace posenc::bench
