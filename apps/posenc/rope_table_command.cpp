#include "rope_table_command.h"

#include "posenc/error.h"
#include "posenc/hf/hf_config.h"
#include "posenc/kernels/rope_range.h"

namespace posenc::cli {

void RopeTableOptions::add_to(CLI::App& table) {
  const std::string group = "RoPE scaling (kind rope; Hugging Face rope_scaling keys, see docs/rope.md)";
  type_opt_ = table.add_option("--scaling", type_, "rope_type: default, linear, ntk, dynamic, yarn, longrope, llama3, proportional")
                  ->group(group);
  factor_opt_ = table.add_option("--factor", factor_, "factor (linear, ntk, dynamic, yarn, longrope, llama3, proportional)")
                    ->group(group);
  original_max_opt_ = table.add_option("--original-max-position-embeddings", original_max_,
                                       "L0, the trained length (dynamic, yarn, longrope, llama3)")
                          ->group(group);
  max_positions_opt_ = table.add_option("--max-position-embeddings", max_positions_,
                                        "extended length; factor = this / L0 when --factor is absent (yarn, longrope)")
                           ->group(group);
  beta_fast_opt_ = table.add_option("--beta-fast", beta_fast_, "yarn (default 32)")->group(group);
  beta_slow_opt_ = table.add_option("--beta-slow", beta_slow_, "yarn (default 1)")->group(group);
  mscale_opt_ = table.add_option("--mscale", mscale_, "yarn")->group(group);
  mscale_all_dim_opt_ = table.add_option("--mscale-all-dim", mscale_all_dim_, "yarn")->group(group);
  no_truncate_opt_ =
      table.add_flag("--no-truncate", no_truncate_, "yarn: truncate = false (unrounded ramp ends)")->group(group);
  attention_factor_opt_ =
      table.add_option("--attention-factor", attention_factor_, "yarn, longrope: overrides the computed one")
          ->group(group);
  // One argument per use, split at commas, so a list never swallows the KIND positional.
  short_factor_opt_ = table.add_option("--short-factor", short_factor_, "longrope: D/2 comma-separated values")
                          ->delimiter(',')
                          ->allow_extra_args(false)
                          ->group(group);
  long_factor_opt_ = table.add_option("--long-factor", long_factor_, "longrope: D/2 comma-separated values")
                         ->delimiter(',')
                         ->allow_extra_args(false)
                         ->group(group);
  low_freq_factor_opt_ = table.add_option("--low-freq-factor", low_freq_factor_, "llama3")->group(group);
  high_freq_factor_opt_ = table.add_option("--high-freq-factor", high_freq_factor_, "llama3")->group(group);
  partial_rotary_factor_opt_ =
      table.add_option("--partial-rotary-factor", partial_rotary_factor_,
                       "proportional: the share of pairs that turn (the rest have frequency 0)")
          ->group(group);
  seq_len_opt_ = table.add_option("--seq-len", seq_len_,
                                  "current length: selects the dynamic / longrope regime; "
                                  "default: max position + 1")
                     ->group(group);
  const std::string hf_group = "Hugging Face config (kind rope; docs/hf_configs.md)";
  hf_config_opt_ = table.add_option("--hf-config", hf_config_,
                                    "A model's config.json: the rotary dimension, base and scaling of that model "
                                    "(instead of --dim, --base and the scaling options)")
                       ->group(hf_group);
  layer_opt_ = table.add_option("--layer", layer_, "With --hf-config: the layer whose rotary to use (models whose "
                                                   "layer types differ, e.g. Gemma 3); default 0")
                   ->group(hf_group);
}

void RopeTableOptions::refuse_for(std::string_view op, std::string_view what) const {
  for (const CLI::Option* o :
       {type_opt_, factor_opt_, original_max_opt_, max_positions_opt_, beta_fast_opt_, beta_slow_opt_, mscale_opt_,
        mscale_all_dim_opt_, no_truncate_opt_, attention_factor_opt_, short_factor_opt_, long_factor_opt_,
        low_freq_factor_opt_, high_freq_factor_opt_, partial_rotary_factor_opt_, seq_len_opt_, hf_config_opt_,
        layer_opt_}) {
    if (o->count() > 0) fail_argument(op, o->get_name(), " does not apply to ", what);
  }
}

RopeTableOptions::Resolved RopeTableOptions::resolve(std::string_view op, const CLI::Option* dim_opt, int64_t dim,
                                                     const CLI::Option* base_opt, double base) const {
  if (!has_hf_config()) {
    if (layer_opt_->count() > 0) fail_argument(op, "--layer needs --hf-config");
    return {dim, base, scaling()};
  }
  for (const CLI::Option* o :
       {type_opt_, factor_opt_, original_max_opt_, max_positions_opt_, beta_fast_opt_, beta_slow_opt_, mscale_opt_,
        mscale_all_dim_opt_, no_truncate_opt_, attention_factor_opt_, short_factor_opt_, long_factor_opt_,
        low_freq_factor_opt_, high_freq_factor_opt_, partial_rotary_factor_opt_}) {
    if (o->count() > 0) fail_argument(op, o->get_name(), " conflicts with --hf-config (the config gives the scaling)");
  }
  if (dim_opt->count() > 0) {
    fail_argument(op, "--dim conflicts with --hf-config (the config gives the rotary dimension)");
  }
  if (base_opt->count() > 0) fail_argument(op, "--base conflicts with --hf-config (the config gives rope_theta)");
  const hf::HfScheme scheme = hf::read_hf_config_file(hf_config_);
  const hf::HfLayerScheme& layer = scheme.for_layer(layer_);
  if (!layer.rotary) {
    const char* uses = layer.bias ? (layer.bias->kind == hf::HfBias::Kind::kAlibi ? "ALiBi" : "a T5 bias")
                       : layer.absolute ? "a learned absolute table"
                       : layer.relative ? "relative position vectors"
                       : layer.query_temperature ? "only a query temperature by position"
                                                 : "no positional encoding";
    if (!scheme.layer_types.empty()) {
      fail_argument(op, hf_config_, ": layer ", layer_, " of model_type '", scheme.model_type, "' (",
                    scheme.layer_types[static_cast<size_t>(layer_)], ") has no rotary embedding (it uses ", uses,
                    "): choose a layer with one (--layer)");
    }
    fail_argument(op, hf_config_, ": model_type '", scheme.model_type, "' has no rotary embedding (it uses ", uses,
                  "): --hf-config needs a rotary model here");
  }
  return {layer.rotary->rotary_dim, layer.rotary->base, layer.rotary->scaling};
}

kernels::RopeScaling RopeTableOptions::scaling() const {
  kernels::RopeScaling s;
  if (type_opt_->count() > 0) s.type = kernels::parse_rope_type(type_, "rope");
  if (factor_opt_->count() > 0) s.factor = factor_;
  if (original_max_opt_->count() > 0) s.original_max_position_embeddings = original_max_;
  if (max_positions_opt_->count() > 0) s.max_position_embeddings = max_positions_;
  if (beta_fast_opt_->count() > 0) s.beta_fast = beta_fast_;
  if (beta_slow_opt_->count() > 0) s.beta_slow = beta_slow_;
  if (mscale_opt_->count() > 0) s.mscale = mscale_;
  if (mscale_all_dim_opt_->count() > 0) s.mscale_all_dim = mscale_all_dim_;
  if (no_truncate_opt_->count() > 0) s.truncate = false;
  if (attention_factor_opt_->count() > 0) s.attention_factor = attention_factor_;
  s.short_factor = short_factor_;
  s.long_factor = long_factor_;
  if (low_freq_factor_opt_->count() > 0) s.low_freq_factor = low_freq_factor_;
  if (high_freq_factor_opt_->count() > 0) s.high_freq_factor = high_freq_factor_;
  if (partial_rotary_factor_opt_->count() > 0) s.partial_rotary_factor = partial_rotary_factor_;
  return s;
}

std::optional<int64_t> RopeTableOptions::seq_len() const {
  return seq_len_opt_->count() > 0 ? std::optional<int64_t>(seq_len_) : std::nullopt;
}

Table make_rope_table(std::string_view kind, int64_t dim, double base, const kernels::RopeScaling& scaling,
                      std::optional<int64_t> seq_len, kernels::Precision precision, int64_t start,
                      int64_t positions) {
  const kernels::RopeConfig config{dim, base, scaling, precision};
  return Table{kind, positions, dim, kernels::rope_range_rows<float>(config, seq_len, start, positions).values};
}

}  // namespace posenc::cli
