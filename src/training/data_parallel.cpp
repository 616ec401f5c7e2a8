// Data-parallel gradient of one training step (posenc/training/data_parallel.h).
#include "posenc/training/data_parallel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <omp.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "posenc/nn/dropout.h"
#include "posenc/error.h"

namespace posenc::nn {
namespace {

struct ShardResult {
  ShardLoss score;
  std::vector<at::Tensor> grads;
  std::exception_ptr error;
};

}  // namespace

ShardLoss data_parallel_gradient(const std::function<ShardLoss(int64_t begin, int64_t count)>& shard_loss,
                                 int64_t rows, const std::vector<at::Tensor>& parameters, int shards, int workers,
                                 uint64_t dropout_seed) {
  require(shards >= 1 && shards <= rows, "data_parallel", "shards must be in 1..rows (", rows, "), got ", shards);
  require(workers >= 1, "data_parallel", "workers must be >= 1, got ", workers);
  std::vector<ShardResult> results(static_cast<size_t>(shards));
  const auto run = [&](int s) {
    ShardResult& r = results[static_cast<size_t>(s)];
    try {
      // This thread's OpenMP (posenc's kernels, OpenBLAS, ATen) stays on it. libtorch sets a new thread's
      // OpenMP count once, at its first parallel call (torch 2: to the process's count, which made layer
      // norm's gradient sum in another order); at::get_num_threads makes that call inside libtorch first.
      (void)at::get_num_threads();
      omp_set_num_threads(1);
      const detail::ThreadDropoutGenerator generator(dropout_seed + static_cast<uint64_t>(s));
      const int64_t begin = rows * s / shards, end = rows * (s + 1) / shards;
      r.score = shard_loss(begin, end - begin);
      r.grads = torch::autograd::grad({r.score.loss}, parameters, {}, /*retain_graph=*/false,
                                      /*create_graph=*/false, /*allow_unused=*/true);
      r.score.loss = r.score.loss.detach();
    } catch (...) {
      r.error = std::current_exception();
    }
  };
  // Shards are taken in turn: one thread that loses its core to another
  // process takes fewer. The sums below are in shard order whoever ran them.
  std::atomic<int> next{0};
  const auto work = [&] {
    for (int s = next++; s < shards; s = next++) run(s);
  };
  const int caller_threads = omp_get_max_threads();  // the calling thread runs shards too: restored after
  std::vector<std::thread> threads;
  for (int w = 1; w < std::min(workers, shards); ++w) threads.emplace_back(work);
  work();
  omp_set_num_threads(caller_threads);
  for (std::thread& t : threads) t.join();
  for (const ShardResult& r : results) {
    if (r.error) std::rethrow_exception(r.error);
  }

  // Each shard's loss is a mean over its count of scored items: weight by count / N.
  ShardLoss total;
  for (const ShardResult& r : results) total.count += r.score.count, total.correct += r.score.correct;
  const auto weight = [&](const ShardResult& r) {
    return total.count > 0 ? static_cast<double>(r.score.count) / static_cast<double>(total.count) : 0.0;
  };
  total.loss = at::zeros({}, results[0].score.loss.options());
  for (const ShardResult& r : results) total.loss = total.loss + r.score.loss * weight(r);
  for (size_t i = 0; i < parameters.size(); ++i) {
    at::Tensor sum;
    for (const ShardResult& r : results) {
      const at::Tensor& g = r.grads[i];
      if (g.defined()) sum = sum.defined() ? sum + g * weight(r) : g * weight(r);
    }
    if (sum.defined()) const_cast<at::Tensor&>(parameters[i]).mutable_grad() = sum;
  }
  return total;
}

}  // namespace posenc::nn
