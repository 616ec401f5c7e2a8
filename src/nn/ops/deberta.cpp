// torch.ops.posenc.deberta_row_index: DeBERTa's bucket rows (kernels/deberta.h) for
// the attention's rel_index, so Python builds the terms from the kernel's buckets.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>

#include "op_support.h"
#include "posenc/kernels/deberta.h"

namespace posenc::nn {
namespace {

// [2K+1] int64: element c is the row of offset d = j - i' = c - K (delta = i' - j = K - c).
at::Tensor deberta_row_index(int64_t max_distance, int64_t position_buckets, int64_t max_relative_positions) {
  const kernels::DebertaParams params{position_buckets, max_relative_positions};
  detail::translate_errors([&] { kernels::validate_deberta(params, "deberta_row_index"); });
  TORCH_CHECK_VALUE(max_distance >= 0 && max_distance <= (int64_t{1} << 40), "[deberta_row_index] max_distance "
                    "must be in [0, 2^40], got ", max_distance);
  at::Tensor index = at::empty({2 * max_distance + 1}, at::kLong);
  kernels::deberta_row_index(params, max_distance, index.data_ptr<int64_t>());
  return index;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(posenc, m) {
  m.def("deberta_row_index(int max_distance, int position_buckets=256, int max_relative_positions=512) -> Tensor",
        &deberta_row_index);
}

}  // namespace posenc::nn
