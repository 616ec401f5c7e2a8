// `posenc table rope`: the RoPE cos/sin table [N, D] for positions S .. S+N-1,
// cos(p*omega_i) in columns 0 .. D/2-1 and sin(p*omega_i) in D/2 .. D-1, both
// times the scaling's attention factor. The scaling options carry the Hugging
// Face rope_scaling keys; the kernels validate them (docs/rope.md). Or
// --hf-config reads them, with the dimension and base, from a model's
// config.json (posenc::hf, docs/hf_configs.md).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/rope_scaling.h"
#include "posenc/kernels/sinusoidal.h"  // Precision
#include "tables.h"

namespace posenc::cli {

// The rope-only options of `posenc table` (and analyze / plot / probe), registered on that subcommand.
class RopeTableOptions {
 public:
  RopeTableOptions() = default;
  RopeTableOptions(const RopeTableOptions&) = delete;  // CLI11 holds pointers into the members
  RopeTableOptions& operator=(const RopeTableOptions&) = delete;

  // Registers --scaling, --factor, ... --seq-len on a subcommand (once).
  void add_to(CLI::App& table);

  // "[op] --factor does not apply to WHAT" (e.g. "kind 'k'") for the first one given.
  void refuse_for(std::string_view op, std::string_view what) const;

  // --hf-config FILE [--layer I]: the rotary of a Hugging Face config.json (posenc::hf).
  bool has_hf_config() const { return hf_config_opt_ != nullptr && hf_config_opt_->count() > 0; }
  // The --hf-config path and --layer as given (posenc check maps any scheme, not only a rotary).
  const std::string& hf_config_path() const { return hf_config_; }
  int64_t layer() const { return layer_; }
  struct Resolved {
    int64_t dim = 0;  // the rotary dimension R: the table has R columns
    double base = 0.0;
    kernels::RopeScaling scaling;
  };
  // With --hf-config: the config's rotary of layer --layer (default 0), refusing
  //   "[op] --factor conflicts with --hf-config (the config gives the scaling)" and likewise
  //   --dim / --base (dim_opt / base_opt, the shared options); without: dim, base and the
  //   scaling options as given ("[op] --layer needs --hf-config").
  Resolved resolve(std::string_view op, const CLI::Option* dim_opt, int64_t dim, const CLI::Option* base_opt,
                   double base) const;

  // The scaling as given (unset keys stay unset, so the kernel names misplaced ones).
  kernels::RopeScaling scaling() const;
  std::optional<int64_t> seq_len() const;

 private:
  std::string type_;
  double factor_ = 0.0;
  int64_t original_max_ = 0;
  int64_t max_positions_ = 0;
  double beta_fast_ = 0.0;
  double beta_slow_ = 0.0;
  double mscale_ = 0.0;
  double mscale_all_dim_ = 0.0;
  bool no_truncate_ = false;
  double attention_factor_ = 0.0;
  std::vector<double> short_factor_;
  std::vector<double> long_factor_;
  double low_freq_factor_ = 0.0;
  double high_freq_factor_ = 0.0;
  double partial_rotary_factor_ = 0.0;
  int64_t seq_len_ = 0;
  std::string hf_config_;
  int64_t layer_ = 0;

  CLI::Option* type_opt_ = nullptr;
  CLI::Option* factor_opt_ = nullptr;
  CLI::Option* original_max_opt_ = nullptr;
  CLI::Option* max_positions_opt_ = nullptr;
  CLI::Option* beta_fast_opt_ = nullptr;
  CLI::Option* beta_slow_opt_ = nullptr;
  CLI::Option* mscale_opt_ = nullptr;
  CLI::Option* mscale_all_dim_opt_ = nullptr;
  CLI::Option* no_truncate_opt_ = nullptr;
  CLI::Option* attention_factor_opt_ = nullptr;
  CLI::Option* short_factor_opt_ = nullptr;
  CLI::Option* long_factor_opt_ = nullptr;
  CLI::Option* low_freq_factor_opt_ = nullptr;
  CLI::Option* high_freq_factor_opt_ = nullptr;
  CLI::Option* partial_rotary_factor_opt_ = nullptr;
  CLI::Option* seq_len_opt_ = nullptr;
  CLI::Option* hf_config_opt_ = nullptr;
  CLI::Option* layer_opt_ = nullptr;
};

// [positions, dim] float32: cos then sin of each position, attention factor
// included; seq_len unset: max position + 1. Validates before allocating.
Table make_rope_table(std::string_view kind, int64_t dim, double base, const kernels::RopeScaling& scaling,
                      std::optional<int64_t> seq_len, kernels::Precision precision, int64_t start,
                      int64_t positions);

}  // namespace posenc::cli
