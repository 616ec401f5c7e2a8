// `posenc check (--hf-config config.json | KIND [options]) TENSOR_FILE
// [--tensor NAME] [--input NAME | --input-file FILE [--input NAME]]
// [--what cos-sin|rotated|bias|table] [--positions LIST] [--json]`:
// compares a tensor dumped from another implementation with posenc's exact
// values and diagnoses the usual porting mistakes (posenc::check,
// docs/check.md). Exit 0 when it matches, 1 when it does not (after the
// report), 2 for bad usage.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "rope_table_command.h"

namespace posenc::cli {

class CheckCommand {
 public:
  explicit CheckCommand(CLI::App& parent);
  CheckCommand(const CheckCommand&) = delete;  // CLI11 holds pointers into the members
  CheckCommand& operator=(const CheckCommand&) = delete;

  bool selected() const { return app_->parsed(); }
  int run() const;

 private:
  CLI::App* app_;
  std::string kind_, file_, tensor_, input_, input_file_, what_, positions_, layout_, precision_;
  int64_t start_ = 0, rotary_dim_ = 0, length_ = 0, height_ = 0, width_ = 0, frames_ = 0;
  int64_t query_offset_ = 0, num_buckets_ = 0, max_distance_ = 0;
  double base_ = 0.0, scale_ = 0.0, normalize_scale_ = 0.0;
  bool json_ = false, normalize_ = false, causal_ = false, unidirectional_ = false;
  CLI::Option *tensor_opt_ = nullptr, *input_opt_ = nullptr, *what_opt_ = nullptr, *positions_opt_ = nullptr;
  CLI::Option *base_opt_ = nullptr, *scale_opt_ = nullptr, *layout_opt_ = nullptr, *precision_opt_ = nullptr;
  CLI::Option *length_opt_ = nullptr, *normalize_scale_opt_ = nullptr, *query_offset_opt_ = nullptr;
  CLI::Option *num_buckets_opt_ = nullptr, *max_distance_opt_ = nullptr, *frames_opt_ = nullptr;
  CLI::Option *rotary_dim_opt_ = nullptr, *height_opt_ = nullptr, *width_opt_ = nullptr, *normalize_opt_ = nullptr;
  CLI::Option *causal_opt_ = nullptr, *unidirectional_opt_ = nullptr;
  // "[check] --base does not apply to kind 'alibi'" for an option the kind does not read.
  void refuse_options(const std::string& kind) const;
  RopeTableOptions rope_;
};

// "0,1,2", "0:64" (half-open), "0:64,1024,65536:65600"; else
// "[check] --positions must be integers or ranges a:b separated by commas, got 'x'".
std::vector<int64_t> parse_position_list(const std::string& text);

}  // namespace posenc::cli
