// Data-parallel gradient of one training step (sharded_step.h).
#include "sharded_step.h"

#include <ATen/ATen.h>
#include <omp.h>
#include <torch/csrc/autograd/autograd.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "dropout.h"

namespace posenc::nn::detail {
namespace {

at::Tensor rows_of(const at::Tensor& t, int64_t begin, int64_t count) {
  return t.defined() ? t.narrow(0, begin, count) : t;
}

struct ShardResult {
  TaskScore score;
  std::vector<at::Tensor> grads;
  std::exception_ptr error;
};

}  // namespace

Batch batch_rows(const Batch& batch, int64_t begin, int64_t count) {
  return {rows_of(batch.tokens, begin, count), rows_of(batch.key_padding_mask, begin, count),
          rows_of(batch.labels, begin, count), rows_of(batch.loss_mask, begin, count)};
}

TaskScore sharded_gradient(TaskModel& model, const Batch& batch, const std::vector<at::Tensor>& parameters,
                           int shards, int workers, uint64_t dropout_seed) {
  const int64_t rows = batch.tokens.size(0);
  std::vector<ShardResult> results(static_cast<size_t>(shards));
  const auto run = [&](int s) {
    ShardResult& r = results[static_cast<size_t>(s)];
    try {
      omp_set_num_threads(1);  // this thread's OpenMP (posenc's kernels, OpenBLAS, ATen) stays on it
      const ThreadDropoutGenerator generator(dropout_seed + static_cast<uint64_t>(s));
      const int64_t begin = rows * s / shards, end = rows * (s + 1) / shards;
      r.score = model.score(batch_rows(batch, begin, end - begin));
      r.grads = torch::autograd::grad({r.score.loss}, parameters, {}, /*retain_graph=*/false,
                                      /*create_graph=*/false, /*allow_unused=*/true);
      r.score.loss = r.score.loss.detach();
    } catch (...) {
      r.error = std::current_exception();
    }
  };
  // Shards are taken in turn by `workers` threads: one that loses its core to
  // another process takes fewer. The sum below is in shard order whoever ran them.
  std::atomic<int> next{0};
  const auto work = [&] {
    for (int s = next++; s < shards; s = next++) run(s);
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const ShardResult& r : results) {
    if (r.error) std::rethrow_exception(r.error);
  }

  // Each shard's loss is a mean over its count of scored items: weight by count / N.
  int64_t total = 0;
  TaskScore score;
  for (const ShardResult& r : results) total += r.score.count, score.correct += r.score.correct;
  score.count = total;
  at::Tensor loss = at::zeros({}, results[0].score.loss.options());
  for (const ShardResult& r : results) {
    const double w = total > 0 ? static_cast<double>(r.score.count) / static_cast<double>(total) : 0.0;
    loss = loss + r.score.loss * w;
  }
  score.loss = loss;
  for (size_t i = 0; i < parameters.size(); ++i) {
    at::Tensor sum;
    for (const ShardResult& r : results) {
      const at::Tensor& g = r.grads[i];
      if (!g.defined()) continue;
      const double w = total > 0 ? static_cast<double>(r.score.count) / static_cast<double>(total) : 0.0;
      sum = sum.defined() ? sum + g * w : g * w;
    }
    if (sum.defined()) const_cast<at::Tensor&>(parameters[i]).mutable_grad() = sum;
  }
  return score;
}

}  // namespace posenc::nn::detail
