// The torch layer from the installed package: RotaryEmbedding keeps norms and
// makes q.k depend on the offset only.
#include <ATen/ATen.h>

#include "posenc/nn/rotary_embedding.h"

bool nn_works() {
  posenc::nn::RotaryEmbedding rope(posenc::nn::RotaryEmbeddingOptions(8));
  const at::Tensor q = at::randn({1, 1, 6, 8}, at::kDouble), k = at::randn({1, 1, 6, 8}, at::kDouble);
  const auto [rq, rk] = rope->forward(q, k, at::arange(6, at::kLong));
  const bool norms = at::allclose(rq.norm(2, -1), q.norm(2, -1), 1e-12, 1e-12);
  // The same q and k at positions shifted by 5 give the same score.
  const auto [sq, sk] = rope->forward(q, k, at::arange(5, 11, at::kLong));
  const bool offsets = at::allclose(at::matmul(rq, rk.transpose(-1, -2)), at::matmul(sq, sk.transpose(-1, -2)),
                                    1e-10, 1e-10);
  return norms && offsets;
}
