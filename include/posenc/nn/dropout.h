// Private: the dropout of posenc's modules. Its noise comes from the calling
// thread's generator while a ThreadDropoutGenerator is alive on that thread
// (the shards of a training step run on their own threads, each with a
// generator seeded from the step and shard, so the result does not depend on
// how the threads interleave); otherwise it is at::dropout itself, on the
// default CPU generator.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace posenc::nn::detail {

at::Tensor dropout(const at::Tensor& x, double p, bool train);

// Installs a generator seeded with `seed` for this thread's dropout until destroyed.
class ThreadDropoutGenerator {
 public:
  explicit ThreadDropoutGenerator(uint64_t seed);
  ~ThreadDropoutGenerator();
  ThreadDropoutGenerator(const ThreadDropoutGenerator&) = delete;
  ThreadDropoutGenerator& operator=(const ThreadDropoutGenerator&) = delete;

 private:
  at::Generator generator_;
  at::Generator* previous_;
};

}  // namespace posenc::nn::detail
