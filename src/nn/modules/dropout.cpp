// Dropout with a per-thread generator (dropout.h).
#include "posenc/nn/dropout.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

namespace posenc::nn::detail {
namespace {

thread_local at::Generator* thread_generator = nullptr;

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (thread_generator == nullptr) return at::dropout(x, p, train);
  if (!train || p == 0 || x.numel() == 0) return x;
  if (p == 1) return x * at::zeros({}, x.options());
  // As at::dropout on the CPU: keep with probability 1 - p, scale the kept by 1 / (1 - p).
  at::Tensor noise = at::empty_like(x);
  noise.bernoulli_(1 - p, *thread_generator);
  noise.div_(1 - p);
  return x * noise;
}

ThreadDropoutGenerator::ThreadDropoutGenerator(uint64_t seed)
    : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)), previous_(thread_generator) {
  thread_generator = &generator_;
}

ThreadDropoutGenerator::~ThreadDropoutGenerator() { thread_generator = previous_; }

}  // namespace posenc::nn::detail
