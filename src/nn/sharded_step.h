// Private: a training step's gradient from shards of the batch on their own
// threads (data parallel within one process). Each shard runs its forward
// and backward single-threaded, so the threads meet once per step instead of
// at every op: on a machine where another process is busy, a thread that
// loses its core delays the step by its shard's share, not every op of it.
// The gradient of the batch's mean loss is sum_s (count_s / N) grad loss_s,
// summed in shard order: results are deterministic for a given shard count.
// Dropout draws from a generator per (step, shard) (dropout.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "posenc/nn/tasks.h"
#include "posenc/nn/trainer.h"

namespace posenc::nn::detail {

// The rows [begin, begin + count) of every tensor of the batch.
Batch batch_rows(const Batch& batch, int64_t begin, int64_t count);

// Sets each parameter's grad (as backward() after zero_grad() would: a
// parameter no shard reaches keeps its grad) to the gradient of the whole
// batch's loss over `shards` slices of its rows (1 <= shards <= rows), run by
// `workers` threads taking shards in turn; returns the batch's loss (a
// detached scalar) and counts. dropout_seed seeds shard s's dropout generator
// with dropout_seed + s. The result depends on shards, not on workers.
TaskScore sharded_gradient(TaskModel& model, const Batch& batch, const std::vector<at::Tensor>& parameters,
                           int shards, int workers, uint64_t dropout_seed);

}  // namespace posenc::nn::detail
