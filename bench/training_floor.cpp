#include "training_floor.h"

#include <torch/optim/adamw.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <tuple>

namespace posenc::bench {

double between_gemms_seconds(int64_t tokens, int64_t dim, int64_t ffn, int64_t layers,
                             const std::vector<at::Tensor>& parameters, int rounds) {
  at::manual_seed(0);
  const at::Tensor x = at::randn({tokens, dim}), dy = at::randn({tokens, dim});
  const at::Tensor h = at::randn({tokens, ffn}), dh = at::randn({tokens, ffn});
  const at::Tensor dqkv = at::randn({tokens, 3 * dim});
  const at::Tensor w = at::ones({dim}), b = at::zeros({dim});
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : parameters) {
    at::Tensor q = at::randn_like(p, at::TensorOptions().requires_grad(false));
    q.mutable_grad() = at::randn_like(p);
    params.push_back(q);
  }
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(1e-4));
  const std::array<bool, 3> all{true, true, true};
  const auto step = [&] {
    for (int64_t l = 0; l < layers; ++l) {
      // forward: x + attention(ln1(x)), then s + ffn(ln2(s)) with GELU between the FFN's GEMMs
      const auto ln1 = at::native_layer_norm(x, {dim}, w, b, 1e-5);
      const at::Tensor s = x + std::get<0>(ln1);
      const auto ln2 = at::native_layer_norm(s, {dim}, w, b, 1e-5);
      const at::Tensor g = at::gelu(h);
      const at::Tensor out = s + std::get<0>(ln2);
      // backward: GELU's and the layer norms' gradients, the residual branches' sums, the biases' row sums
      const at::Tensor dg = at::gelu_backward(dh, h);
      at::native_layer_norm_backward(dy, s, {dim}, std::get<1>(ln2), std::get<2>(ln2), w, b, all);
      const at::Tensor ds = dy + dy;
      at::native_layer_norm_backward(ds, x, {dim}, std::get<1>(ln1), std::get<2>(ln1), w, b, all);
      const at::Tensor dx = ds + dy;
      for (const at::Tensor* grad : {&dqkv, &dy, &dh, &dy}) (void)grad->sum(0);
    }
    optimizer.step();
  };
  step();  // warm-up: allocations, AdamW state
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    step();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace posenc::bench
