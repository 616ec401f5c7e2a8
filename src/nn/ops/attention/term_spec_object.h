// Private: torch.classes.posenc.TermSpec, the typed specification of a term
// list (posenc/nn/attention_terms.h) as the ops take it.
#pragma once

#include <torch/custom_class.h>

#include <cstdint>
#include <string>
#include <utility>

#include "posenc/nn/attention_terms.h"

namespace posenc::nn::detail {

struct TermSpecObject : torch::CustomClassHolder {
  TermSpecObject() = default;
  explicit TermSpecObject(TermSpec s) : spec(std::move(s)) {}
  TermSpec spec;
};

using TermSpecArg = c10::intrusive_ptr<TermSpecObject>;

// The builder methods' step: one entry appended, the spec returned for chaining.
inline TermSpecArg append(const TermSpecArg& self, TermKind kind, int64_t max_distance = 0, int64_t grid_height = 0,
                          int64_t grid_width = 0, std::string tile = {}) {
  TermEntry entry;
  entry.kind = kind, entry.max_distance = max_distance;
  entry.grid_height = grid_height, entry.grid_width = grid_width, entry.tile = std::move(tile);
  self->spec.entries.push_back(std::move(entry));
  return self;
}

}  // namespace posenc::nn::detail
