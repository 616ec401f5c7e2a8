// RoPE frequencies and the context-extension scalings, with the parameters
// (and names) of Hugging Face `rope_scaling` configs.
//
//   default  omega_i = base^(-2i/d), i = 0 .. d/2-1 (Su et al. 2021, RoFormer)
//   linear   omega_i / factor                      (position interpolation, Chen et al. 2023)
//   ntk      (base * factor^(d/(d-2)))^(-2i/d)     (static NTK-aware base change, bloc97 2023)
//   dynamic  ntk with factor' = factor*L/L0 - (factor-1) when L > L0, else default
//            (L = seq_len, L0 = original_max_position_embeddings; Qwen / HF "dynamic")
//   yarn     per-frequency ramp between omega_i/factor and omega_i by wavelength
//            (beta_fast, beta_slow, truncate) and attention factor
//            0.1*ln(factor)*mscale + 1 (Peng et al. 2023, YaRN)
//   longrope omega_i / ext_i with ext = long_factor when L > L0 else short_factor;
//            attention factor sqrt(1 + ln(s)/ln(L0)), s = max_position_embeddings/L0
//            (Ding et al. 2024, LongRoPE; Phi-3)
//   llama3   omega_i kept above high-frequency wavelength L0/high_freq_factor, divided by
//            factor below L0/low_freq_factor, smoothly interpolated between (Llama 3.1)
//   proportional  omega_i = base^(-2i/d) / factor for i < floor(p*d/2), 0 after
//            (p = partial_rotary_factor): the head's last pairs do not turn, and the
//            exponent stays over the whole head d (Gemma 4's global layers)
// The exact formulas, defaults and their sources are in docs/rope.md.
//
// Frequencies are computed in long double and rounded once to double; the
// attention factor multiplies both cos and sin, as those implementations do.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace posenc::kernels {

enum class RopeType { kDefault, kLinear, kNtk, kDynamic, kYarn, kLongrope, kLlama3, kProportional };

// "default" | "linear" | "ntk" | "dynamic" | "yarn" | "longrope" | "llama3" | "proportional";
// throws "[op] rope_type must be one of default, linear, ntk, dynamic, yarn, longrope, llama3,
// proportional, got 'x'".
RopeType parse_rope_type(std::string_view name, const char* op = "rope");
std::string_view rope_type_name(RopeType type) noexcept;

// One field per Hugging Face key. Fields a type does not use must be left
// unset (validate refuses them, so a misspelt config never passes silently);
// unset optional fields take the Hugging Face defaults documented in docs/rope.md.
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  std::optional<double> factor;                              // linear, ntk, dynamic, yarn, llama3; longrope, proportional (optional)
  std::optional<int64_t> original_max_position_embeddings;   // dynamic, yarn, longrope, llama3
  std::optional<int64_t> max_position_embeddings;            // yarn, longrope: factor = max/original when unset
  std::optional<double> beta_fast;                           // yarn (default 32)
  std::optional<double> beta_slow;                           // yarn (default 1)
  std::optional<double> mscale;                              // yarn
  std::optional<double> mscale_all_dim;                      // yarn
  std::optional<bool> truncate;                              // yarn (default true)
  std::optional<double> attention_factor;                    // yarn, longrope: overrides the computed one
  std::vector<double> short_factor;                          // longrope: d/2 values
  std::vector<double> long_factor;                           // longrope: d/2 values
  std::optional<double> low_freq_factor;                     // llama3 (required)
  std::optional<double> high_freq_factor;                    // llama3 (required)
  std::optional<double> partial_rotary_factor;               // proportional: share of pairs that turn (default 1)
};

// True when the type is default and no key is set: the plain RoPE spectrum,
// as given (an explicit "default" with keys is not unscaled; validate refuses it).
bool is_unscaled(const RopeScaling& scaling) noexcept;

// Throws std::invalid_argument naming the key: a key the type does not use,
// a missing required key, factor <= 0 or not finite, longrope factors whose
// length is not d/2, beta_fast < beta_slow (equal is accepted, as HF does), low_freq_factor >= high_freq_factor, ...
// dim is the rotary dimension d (even, > 0), base finite and > 0.
void validate(const RopeScaling& scaling, int64_t dim, double base, const char* op = "rope");

struct RopeFrequencies {
  std::vector<double> inv_freq;     // d/2 values
  double attention_factor = 1.0;    // multiplies cos and sin
};

// The frequencies for rotary dimension d. seq_len (> 0 when given) is the
// current length, max position + 1: it selects the regime of dynamic and
// longrope as Hugging Face does; unset means the original length. Validates.
RopeFrequencies rope_frequencies(int64_t dim, double base, const RopeScaling& scaling,
                                 std::optional<int64_t> seq_len = std::nullopt, const char* op = "rope");

}  // namespace posenc::kernels
