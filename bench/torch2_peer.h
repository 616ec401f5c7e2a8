// A torch 2 peer of the benchmarks: a script of bench/peers (SDPA for the
// attention benchmarks, a torch.nn encoder for training) in a process of its own, in the torch 2
// environment (scripts/torch2-run, or this process's own torch when it is
// torch 2), spoken to over pipes. Its calls are timed inside that process, so
// the pipe's cost is not in them; the benchmark times posenc's side between.
#pragma once

#include <ATen/ATen.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace posenc::bench {

class Torch2Peer {
 public:
  // Starts the peer with `threads` threads; null with `why_not` set when no
  // torch 2 environment is at hand (no root made: make build-torch2).
  // `script`: a file of bench/peers ("torch2_attention.py").
  static std::unique_ptr<Torch2Peer> start(const std::string& script, int threads, std::string& why_not);
  ~Torch2Peer();
  Torch2Peer(const Torch2Peer&) = delete;
  Torch2Peer& operator=(const Torch2Peer&) = delete;

  // The peer: its torch version, CPU capability and float32 GEMM rate (measured as it starts).
  const std::string& describe() const { return banner_; }
  // Sends a float32 tensor, kept there under `name`.
  void send(const std::string& name, const at::Tensor& t);
  // Defines case `id`: "q=NAME k=NAME v=NAME [mask= cos= sin= grad=] causal=0|1 scale=S".
  void define(const std::string& id, const std::string& fields);
  // One call of case `id`: out, then dq, dk, dv when it has a grad.
  std::vector<at::Tensor> result(const std::string& id);
  // Sends a command line; returns the rest of the reply line, which must start with `reply`.
  std::string command(const std::string& line, const std::string& reply);
  // Seconds of one call of case `id`, measured by the peer.
  double seconds(const std::string& id);
  // Drops every tensor and case the peer holds.
  void forget();

 private:
  Torch2Peer(int pid, std::FILE* to, std::FILE* from) : pid_(pid), to_(to), from_(from) {}
  std::string read_line();
  std::string expect(const std::string& word);  // the rest of a reply line starting with `word`
  at::Tensor read_tensor();

  int pid_;
  std::FILE* to_;
  std::FILE* from_;
  std::string banner_;
};

}  // namespace posenc::bench
