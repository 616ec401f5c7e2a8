// A per-tile family written entirely here, to show that a new kind of tile
// term needs no attention file: a scratch bias b(h, i', j) = w_h (i' - j) for
// j <= i' (a learned linear distance penalty), registered as the tile kind
// "scratch-linear" and run by the fused attention forward and backward,
// against the composed path and a plain float64 reference.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "posenc/kernels/tile_bias.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/tile_kind.h"

namespace posenc::nn::test {
namespace {

// The kernel's term: w [H] contiguous.
template <class T>
class LinearTileBias final : public kernels::TileBias<T> {
 public:
  explicit LinearTileBias(const T* w) : w_(w) {}
  const char* name() const noexcept override { return "scratch-linear"; }
  bool needs_causal() const noexcept override { return true; }
  int64_t scratch_size(int64_t, int64_t) const noexcept override { return 0; }
  void add(int64_t, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols, T* s, int64_t stride_r,
           int64_t stride_n, T*) const noexcept override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = 0; n < cols && col0 + n <= row0 + r; ++n) {
        s[r * stride_r + n * stride_n] += w_[head] * static_cast<T>(row0 + r - (col0 + n));
      }
    }
  }
  int64_t gradient_size() const noexcept override { return heads_; }
  void accumulate_gradient(int64_t, int64_t head, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                           const T* ds, int64_t stride_r, int64_t stride_n, double* partial,
                           T*) const noexcept override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t n = 0; n < cols && col0 + n <= row0 + r; ++n) {
        partial[head] += static_cast<double>(ds[r * stride_r + n * stride_n]) * static_cast<double>(row0 + r - (col0 + n));
      }
    }
  }
  void set_heads(int64_t heads) { heads_ = heads; }

 private:
  const T* w_;
  int64_t heads_ = 0;
};

class LinearTileKind final : public TileKind {
 public:
  std::string name() const override { return "scratch-linear"; }
  std::string display_name() const override { return "scratch"; }
  std::vector<std::string> tensor_names() const override { return {"scratch_w"}; }
  bool needs_causal() const override { return true; }
  void check(const std::vector<at::Tensor>& t, const at::Tensor& q) const override {
    TORCH_CHECK_VALUE(t[0].dim() == 1 && t[0].size(0) == q.size(1), "[attention] scratch_w must be [H], got ",
                      t[0].sizes());
  }
  std::shared_ptr<const kernels::TileBias<float>> fused_float(const TileInputs& in) const override {
    return make<float>(in);
  }
  std::shared_ptr<const kernels::TileBias<double>> fused_double(const TileInputs& in) const override {
    return make<double>(in);
  }
  std::vector<at::Tensor> gradients(const at::Tensor& buffer, const std::vector<at::Tensor>&,
                                    const std::vector<bool>& needs, at::ScalarType compute) const override {
    return {needs[0] ? buffer.to(compute) : at::Tensor()};
  }
  at::Tensor dense(const std::vector<at::Tensor>& t, const at::Tensor& q, const at::Tensor& k, double,
                   const std::optional<at::Tensor>&) const override {
    const int64_t q_len = q.size(2), k_len = k.size(2);
    const at::Tensor i = at::arange(q_len, at::kLong).unsqueeze(1) + (k_len - q_len);
    const at::Tensor d = (i - at::arange(k_len, at::kLong).unsqueeze(0)).clamp_min(0).to(t[0].scalar_type());
    return t[0].view({-1, 1, 1}) * d.unsqueeze(0);  // [H, Tq, Tk], 0 after the query (masked anyway)
  }

 private:
  template <class T>
  static std::shared_ptr<const kernels::TileBias<T>> make(const TileInputs& in) {
    auto term = std::make_shared<LinearTileBias<T>>(in.tensors[0].data_ptr<T>());
    term->set_heads(in.tensors[0].size(0));
    return term;
  }
};

const TileKindRegistration kScratch{std::make_unique<LinearTileKind>()};

// s = q.k / sqrt(Dh) + w_h (i' - j), causal; plain float64 loops.
at::Tensor reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& w) {
  const int64_t b_n = q.size(0), h_n = q.size(1), tq = q.size(2), tk = k.size(2), dh = q.size(3);
  at::Tensor out = at::zeros({b_n, h_n, tq, v.size(3)}, at::kDouble);
  for (int64_t b = 0; b < b_n; ++b) {
    for (int64_t h = 0; h < h_n; ++h) {
      for (int64_t i = 0; i < tq; ++i) {
        const int64_t ip = i + tk - tq;
        std::vector<double> s(static_cast<size_t>(ip + 1));
        double top = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j <= ip; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < dh; ++c) dot += q[b][h][i][c].item<double>() * k[b][h][j][c].item<double>();
          s[j] = dot / std::sqrt(double(dh)) + w[h].item<double>() * double(ip - j);
          top = std::max(top, s[j]);
        }
        for (int64_t j = 0; j <= ip; ++j) sum += std::exp(s[j] - top);
        for (int64_t j = 0; j <= ip; ++j) out[b][h][i] += std::exp(s[j] - top) / sum * v[b][h][j];
      }
    }
  }
  return out;
}

TEST(TileKind, AScratchKindRunsInTheFusedAttentionWithoutAnAttentionFile) {
  at::manual_seed(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q = at::randn({2, 3, 5, 4}, f64), k = at::randn({2, 3, 7, 4}, f64), v = at::randn({2, 3, 7, 4}, f64);
  const at::Tensor w = at::randn({3}, f64);
  AttentionTerms terms;
  terms.tiles = {TileTerm{"scratch-linear", {w}}};
  AttentionCall call;
  call.causal = true;
  const at::Tensor fused = std::get<0>(ops::attention_fused(q, k, v, terms, call));
  const at::Tensor composed = std::get<0>(ops::attention_composed(q, k, v, terms, call));
  // 1e-12: float64 sums of 7 terms in another order.
  EXPECT_TRUE(at::allclose(fused, reference(q, k, v, w), 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(composed, fused, 1e-12, 1e-12));

  // The parameter's gradient comes back through the kind's buffer, as the composed path's.
  std::vector<at::Tensor> grads[2];
  for (int path = 0; path < 2; ++path) {
    const at::Tensor wq = q.clone().requires_grad_(), ww = w.clone().requires_grad_();
    AttentionTerms t;
    t.tiles = {TileTerm{"scratch-linear", {ww}}};
    const at::Tensor out = std::get<0>(path == 0 ? ops::attention_fused(wq, k, v, t, call)
                                                 : ops::attention_composed(wq, k, v, t, call));
    grads[path] = torch::autograd::grad({(out * out).sum()}, {wq, ww});
  }
  EXPECT_TRUE(at::allclose(grads[0][0], grads[1][0], 1e-11, 1e-11));
  EXPECT_TRUE(at::allclose(grads[0][1], grads[1][1], 1e-11, 1e-11));
}

TEST(TileKind, ItsChecksAndTheRegistryNameIt) {
  const at::Tensor q = at::randn({1, 3, 4, 4});
  AttentionTerms terms;
  terms.tiles = {TileTerm{"scratch-linear", {at::zeros({2})}}};
  AttentionCall call;
  call.causal = true;
  try {
    ops::attention_fused(q, q, q, terms, call);
    FAIL() << "no error";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()), "[attention] scratch_w must be [H], got [2]");
  }
  terms.tiles = {TileTerm{"scratch-linear", {at::zeros({3})}}};
  try {
    ops::attention_fused(q, q, q, terms);
    FAIL() << "no error";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()),
              "[attention] the scratch term needs causal attention (scratch is defined for decoders), got causal "
              "false");
  }
  terms.tiles = {TileTerm{"scratch-quadratic", {at::zeros({3})}}};
  try {
    ops::attention_fused(q, q, q, terms, call);
    FAIL() << "no error";
  } catch (const c10::ValueError& e) {
    EXPECT_EQ(std::string(e.what_without_backtrace()),
              "[attention] unknown tile kind 'scratch-quadratic' (known: cope, fire, scratch-linear)");
  }
}

}  // namespace
}  // namespace posenc::nn::test
