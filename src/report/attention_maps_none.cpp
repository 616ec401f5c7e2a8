// Built without the torch layer: the report says those sections need it.
#include "attention_maps.h"

#include "posenc/error.h"

namespace posenc::report::detail {

bool torch_layer_available() noexcept { return false; }

std::vector<RegistryFamily> registry_families() { return {}; }

AttentionMap fresh_relative_attention(std::string_view family, int64_t, int64_t, int64_t, uint64_t) {
  fail_runtime("report", family, " needs the torch layer (build with -DPOSENC_BUILD_NN=ON)");
}

AttentionMap trained_attention(const std::filesystem::path& run_dir) {
  fail_runtime("report", run_dir.string(), " needs the torch layer (build with -DPOSENC_BUILD_NN=ON)");
}

}  // namespace posenc::report::detail
