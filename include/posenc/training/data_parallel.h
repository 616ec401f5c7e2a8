// Data-parallel gradient of one training step within one process: the
// batch's rows are cut into shards that `workers` threads take in turn, each
// shard's forward and backward single-threaded (posenc's kernels, libtorch
// and OpenBLAS alike), and the gradients summed in shard order. The threads
// meet once per step instead of at every op, so on a machine where another
// process is busy a thread that loses its core takes fewer shards instead of
// stalling every op (docs/training.md#threads). What `posenc train` runs with
// more than one thread.
//
// The gradient of the batch's mean loss is sum_s (count_s / N) grad loss_s
// with loss_s the mean over shard s's count_s scored items. Dropout in
// posenc's modules draws from a generator per shard seeded dropout_seed + s,
// so the result depends on the shard count, never on the workers or how the
// threads interleave.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace posenc::nn {

// A shard's mean loss (differentiable), its count of scored items and of right answers.
struct ShardLoss {
  at::Tensor loss;
  int64_t count = 0;
  int64_t correct = 0;
};

// shard_loss(begin, count) scores rows [begin, begin + count) of the batch;
// it is called concurrently from the worker threads (it must not share
// mutable state). Sets each parameter's grad (a parameter no shard reaches
// keeps its grad) to the gradient of the batch's loss and returns that loss
// (detached) with the summed counts. Throws std::invalid_argument
// "[data_parallel] shards must be in 1..rows (7), got 9" (likewise workers >= 1);
// an exception in a shard is rethrown here after every thread has stopped.
ShardLoss data_parallel_gradient(const std::function<ShardLoss(int64_t begin, int64_t count)>& shard_loss,
                                 int64_t rows, const std::vector<at::Tensor>& parameters, int shards, int workers,
                                 uint64_t dropout_seed);

}  // namespace posenc::nn
