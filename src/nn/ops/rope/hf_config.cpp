// torch.ops.posenc.hf_config: a Hugging Face config.json's text -> the
// normalized scheme as JSON (posenc::hf, docs/hf_configs.md), for
// python/posenc/hf.py. hf_misplaced_scaling_key: the "goes to" message for an
// HF key given in a rope_scaling dict, or "" (python/posenc/rope.py).
// No tensor argument: registered under CompositeExplicitAutograd.
#include <torch/library.h>

#include <string>

#include "op_support.h"
#include "posenc/hf/hf_config.h"

namespace posenc::nn {
namespace {

std::string hf_config(c10::string_view text, c10::string_view source) {
  return detail::translate_errors([&] {
    return hf::to_json(hf::read_hf_config(std::string_view(text.data(), text.size()),
                                          std::string_view(source.data(), source.size())));
  });
}

std::string hf_misplaced_scaling_key(c10::string_view key, c10::string_view op) {
  return hf::misplaced_scaling_key(std::string_view(key.data(), key.size()), std::string_view(op.data(), op.size()))
      .value_or("");
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("hf_config", hf_config);
  m.impl("hf_misplaced_scaling_key", hf_misplaced_scaling_key);
}

}  // namespace posenc::nn
