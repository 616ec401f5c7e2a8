// Identical-word probing on tiny runs trained here (1 layer, seq_len 16, a
// few steps each; about a second in all):
//  * properties: rows sum to 1, shape [T, T]; without any positional
//    information every row is exactly uniform (identical tokens cannot be
//    told apart), causally uniform (1/(i+1) over j <= i) for a decoder; a
//    learned or a rotary model is not uniform;
//  * the value itself: for a learned table, against a float64 reference
//    written out from the checkpoint's parameters (embedding + table, LayerNorm,
//    q/k projections, softmax per head), averaged over the word ids the
//    header promises (spread evenly over the fillers, all of them when fewer
//    than asked);
//  * bad input: exact messages.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "posenc/analysis/identical_word.h"
#include "posenc/training/trainer.h"

namespace posenc::analysis {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kSeqLen = 16;

fs::path scratch_root() {
  return fs::temp_directory_path() / ("posenc_identical_word_" + std::to_string(::getpid()));
}

// A run of `steps` steps in root/name; trained once per test binary.
fs::path trained_run(const std::string& task, const std::string& encoding) {
  static std::map<std::string, fs::path> runs;
  const std::string key = task + "_" + encoding;
  if (const auto it = runs.find(key); it != runs.end()) return it->second;
  nn::TrainConfig c;
  c.task = task;
  c.encoding = encoding;
  c.layers = 1;
  c.dim = 16;
  c.heads = 2;
  c.seq_len = kSeqLen;
  c.batch = 8;
  c.steps = 4;
  c.warmup = 1;
  c.lr = 3e-3;
  c.checkpoint_every = 4;
  c.log_every = 4;
  c.threads = 1;
  const fs::path dir = scratch_root() / key;
  fs::remove_all(dir);
  nn::train(c, dir);
  return runs[key] = dir;
}

class IdenticalWordTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { fs::remove_all(scratch_root()); }
};

double max_row_sum_error(const Matrix& a) {
  double worst = 0;
  for (int64_t i = 0; i < a.rows; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < a.cols; ++j) sum += a(i, j);
    worst = std::max(worst, std::abs(sum - 1.0));
  }
  return worst;
}

// max |A[i, j] - u(i, j)| for the uniform map: 1/T, or 1/(i+1) over j <= i when causal.
double distance_from_uniform(const Matrix& a, bool causal) {
  double worst = 0;
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t j = 0; j < a.cols; ++j) {
      const double u = causal ? (j <= i ? 1.0 / static_cast<double>(i + 1) : 0.0) : 1.0 / static_cast<double>(a.cols);
      worst = std::max(worst, std::abs(a(i, j) - u));
    }
  }
  return worst;
}

template <class E>
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    if constexpr (std::is_base_of_v<c10::Error, E>) {
      return e.what_without_backtrace();
    } else {
      return e.what();
    }
  }
  return "(no exception)";
}

TEST_F(IdenticalWordTest, WithoutPositionsEveryRowIsUniform) {
  const IdenticalWordResult r = identical_word_attention(trained_run("order", "none"));
  ASSERT_EQ(r.attention.rows, kSeqLen);
  ASSERT_EQ(r.attention.cols, kSeqLen);
  // 1e-6: float32 softmax of T equal logits, averaged in float64.
  EXPECT_LT(distance_from_uniform(r.attention, /*causal=*/false), 1e-6);
  EXPECT_LT(max_row_sum_error(r.attention), 1e-6);
  EXPECT_EQ(r.model.encoding, "none");
  EXPECT_EQ(r.model.task, "order");
  EXPECT_EQ(r.model.step, 4);
  EXPECT_EQ(r.model.seq_len, kSeqLen);
  EXPECT_EQ(r.model.checkpoint.filename(), "step-00000004");
}

TEST_F(IdenticalWordTest, CausalDecoderWithoutPositionsIsUniformOverThePast) {
  const IdenticalWordResult r = identical_word_attention(trained_run("lookback", "none"), {.length = 12, .words = 5});
  ASSERT_EQ(r.attention.rows, 12);
  EXPECT_LT(distance_from_uniform(r.attention, /*causal=*/true), 1e-6);  // as above
}

TEST_F(IdenticalWordTest, LearnedAndRotaryModelsAreNotUniform) {
  for (const char* encoding : {"learned", "rope"}) {
    SCOPED_TRACE(encoding);
    const IdenticalWordResult r = identical_word_attention(trained_run("order", encoding));
    ASSERT_EQ(r.attention.rows, kSeqLen);
    ASSERT_EQ(r.attention.cols, kSeqLen);
    EXPECT_LT(max_row_sum_error(r.attention), 1e-5);  // float32 rows of 16 weights, summed in float64
    // Positions make a visible difference: far above the 1e-6 of the model without them.
    EXPECT_GT(distance_from_uniform(r.attention, /*causal=*/false), 1e-3);
  }
}

TEST_F(IdenticalWordTest, RotaryModelsProbeLongerThanTrained) {
  const IdenticalWordResult r = identical_word_attention(trained_run("order", "rope"), {.length = 24, .words = 3});
  ASSERT_EQ(r.attention.rows, 24);
  ASSERT_EQ(r.attention.cols, 24);
  EXPECT_LT(max_row_sum_error(r.attention), 1e-5);  // as above, 24 weights
}

// A parameter as float64 values, row-major.
std::vector<double> values_of(const at::Tensor& t) {
  const at::Tensor d = t.detach().to(at::kDouble).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

// The learned model's first-layer map, computed in float64 from the checkpoint's parameters.
Matrix reference_map(const fs::path& run, const std::vector<int64_t>& word_ids, int64_t length) {
  nn::LoadedRun loaded;
  nn::TaskModel model = nn::load_task_model(run, &loaded);
  std::map<std::string, std::vector<double>> p;
  for (const auto& item : model.module().named_parameters()) p[item.key()] = values_of(item.value());
  const std::vector<double>&embed = p.at("embed.weight"), &table = p.at("input_encoding.table"),
                            &gamma = p.at("blocks.0.norm1.weight"), &beta = p.at("blocks.0.norm1.bias"),
                            &wq = p.at("blocks.0.attention.q_proj.weight"), &bq = p.at("blocks.0.attention.q_proj.bias"),
                            &wk = p.at("blocks.0.attention.k_proj.weight"), &bk = p.at("blocks.0.attention.k_proj.bias");
  const int64_t dim = loaded.config.dim, heads = loaded.config.heads, dh = dim / heads;
  Matrix sum(length, length);
  for (const int64_t w : word_ids) {
    // h[t] = LayerNorm(embed[w] + table[t]) (population variance, eps 1e-5); q = Wq h + bq, k likewise
    std::vector<std::vector<double>> q(length, std::vector<double>(dim)), k = q;
    for (int64_t t = 0; t < length; ++t) {
      std::vector<double> x(dim), h(dim);
      double mean = 0, var = 0;
      for (int64_t c = 0; c < dim; ++c) {
        x[c] = embed[w * dim + c] + table[t * dim + c];
        mean += x[c] / static_cast<double>(dim);
      }
      for (int64_t c = 0; c < dim; ++c) var += (x[c] - mean) * (x[c] - mean) / static_cast<double>(dim);
      for (int64_t c = 0; c < dim; ++c) h[c] = (x[c] - mean) / std::sqrt(var + 1e-5) * gamma[c] + beta[c];
      for (int64_t o = 0; o < dim; ++o) {
        q[t][o] = bq[o];
        k[t][o] = bk[o];
        for (int64_t c = 0; c < dim; ++c) {
          q[t][o] += wq[o * dim + c] * h[c];
          k[t][o] += wk[o * dim + c] * h[c];
        }
      }
    }
    // softmax_j(q_i . k_j / sqrt(dh)) per head
    for (int64_t head = 0; head < heads; ++head) {
      for (int64_t i = 0; i < length; ++i) {
        std::vector<double> logits(length, 0.0);
        for (int64_t j = 0; j < length; ++j) {
          for (int64_t c = head * dh; c < (head + 1) * dh; ++c) logits[j] += q[i][c] * k[j][c];
          logits[j] /= std::sqrt(static_cast<double>(dh));
        }
        const double top = *std::max_element(logits.begin(), logits.end());
        double z = 0;
        for (const double l : logits) z += std::exp(l - top);
        for (int64_t j = 0; j < length; ++j) sum(i, j) += std::exp(logits[j] - top) / z;
      }
    }
  }
  for (double& v : sum.values) v /= static_cast<double>(word_ids.size() * heads);
  return sum;
}

double max_abs_diff(const Matrix& a, const Matrix& b) {
  EXPECT_EQ(a.values.size(), b.values.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.values.size(), b.values.size()); ++i) {
    worst = std::max(worst, std::abs(a.values[i] - b.values[i]));
  }
  return worst;
}

TEST_F(IdenticalWordTest, LearnedMapMatchesAFloat64Reference) {
  const fs::path run = trained_run("order", "learned");
  // 26 fillers 6..31 (vocab 32), 3 words: 6 + floor(k * 26 / 3) = 6, 14, 23.
  const Matrix expected = reference_map(run, {6, 14, 23}, 12);
  const IdenticalWordResult r = identical_word_attention(run, {.length = 12, .words = 3});
  ASSERT_EQ(r.attention.rows, 12);
  EXPECT_LT(max_abs_diff(r.attention, expected), 1e-5);  // float32 forward (LayerNorm, projections, softmax)
  // The choice of words matters: another word gives another map, so the check above can fail.
  EXPECT_GT(max_abs_diff(reference_map(run, {7, 14, 23}, 12), expected), 1e-4);
}

TEST_F(IdenticalWordTest, WordsAreCappedAtTheTasksOrdinaryTokens) {
  // vocab 32: an encoder task has 26 fillers (ids 6..31), a decoder task uses all 32 ids.
  EXPECT_EQ(identical_word_attention(trained_run("order", "none"), {.words = 64}).words, 26);
  EXPECT_EQ(identical_word_attention(trained_run("order", "none"), {.words = 26}).words, 26);
  EXPECT_EQ(identical_word_attention(trained_run("order", "none"), {.words = 5}).words, 5);
  EXPECT_EQ(identical_word_attention(trained_run("lookback", "none"), {.words = 64}).words, 32);
  // 64 words on 26 fillers is every filler once: the reference over ids 6..31.
  const fs::path run = trained_run("order", "learned");
  std::vector<int64_t> fillers;
  for (int64_t id = 6; id < 32; ++id) fillers.push_back(id);
  EXPECT_LT(max_abs_diff(identical_word_attention(run, {.length = 8}).attention, reference_map(run, fillers, 8)),
            1e-5);  // float32 forward against float64
}

TEST_F(IdenticalWordTest, LongProbesAreAveragedInChunks) {
  // T = 1024, 2 heads: 8 MiB of float32 weights per word, so the 64 MiB bound takes 8 words at a
  // time and 10 words run in two chunks; their mean is the mean of the words probed one by one.
  const fs::path run = trained_run("order", "rope");
  const int64_t length = 1024, words = 10;
  const IdenticalWordResult r = identical_word_attention(run, {.length = length, .words = words});
  nn::TaskModel model = nn::load_task_model(run);
  at::NoGradGuard no_grad;
  at::Tensor sum = at::zeros({length, length}, at::kDouble);
  for (int64_t k = 0; k < words; ++k) {
    const int64_t id = 6 + k * 26 / words;
    sum += model.first_layer_attention(at::full({1, length}, id, at::kLong)).to(at::kDouble).sum(at::IntArrayRef{0, 1});
  }
  Matrix expected(length, length);
  sum = (sum / static_cast<double>(words * 2)).contiguous();
  std::copy(sum.data_ptr<double>(), sum.data_ptr<double>() + sum.numel(), expected.values.begin());
  EXPECT_LT(max_abs_diff(r.attention, expected), 1e-6);  // float32 weights; batching may change their rounding
  EXPECT_LT(max_row_sum_error(r.attention), 1e-4);  // float32 rows of 1024 weights, summed in float64
}

TEST_F(IdenticalWordTest, BadArgumentsAreRefusedWithExactMessages) {
  const fs::path run = trained_run("order", "none");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { identical_word_attention(run, {.length = -1}); }),
            "[identical word] length must be >= 1, got -1");
  EXPECT_EQ(message_of<std::invalid_argument>([&] { identical_word_attention(run, {.words = 0}); }),
            "[identical word] words must be >= 1, got 0");
  // A learned table has no row past its end.
  EXPECT_EQ(message_of<c10::Error>(
                [&] { identical_word_attention(trained_run("order", "learned"), {.length = 17, .words = 1}); }),
            "[learned] position 16 is outside the table of 16 rows (valid 0..15)");
  const fs::path nowhere = scratch_root() / "nowhere";
  EXPECT_EQ(message_of<std::runtime_error>([&] { identical_word_attention(nowhere); }),
            "[checkpoint] " + nowhere.string() + " is not a posenc run (no config.json)");
}

}  // namespace
}  // namespace posenc::analysis
