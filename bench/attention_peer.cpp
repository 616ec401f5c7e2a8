// The attention benchmarks against torch 2's SDPA (attention_peer.h).
#include "attention_peer.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "bench_report.h"
#include "torch2_peer.h"

namespace posenc::bench {
namespace {

constexpr int kRounds = 5;

double target_for(const SdpaForm& form, bool backward) {
  if (form.mask.defined()) return 3.0;
  if (form.causal) return backward ? 1.5 : 1.6;
  return 1.3;
}

// The peer's case for the family: its tensors sent, its SDPA call defined.
void define_case(Torch2Peer& peer, const AttentionFamily& f, const SdpaForm& form, const at::Tensor& grad) {
  peer.forget();
  std::string fields = "q=q k=k v=v";
  peer.send("q", form.q), peer.send("k", form.k), peer.send("v", form.v);
  if (form.mask.defined()) peer.send("mask", form.mask), fields += " mask=mask";
  if (form.cos.defined()) peer.send("cos", form.cos), peer.send("sin", form.sin), fields += " cos=cos sin=sin";
  if (grad.defined()) peer.send("grad", grad), fields += " grad=grad";
  char scale[64];
  std::snprintf(scale, sizeof scale, " causal=%d scale=%.17g", form.causal ? 1 : 0,
                form.scale > 0 ? form.scale : kScale);
  peer.define(f.name, fields + scale);
}

// The output's max |ours - SDPA|, and (backward) the worst gradient's
// relative to its largest entry (SDPA's flash kernel sums in its own order).
std::pair<double, double> differences(const std::vector<at::Tensor>& ours, const std::vector<at::Tensor>& sdpa) {
  if (ours.size() != sdpa.size() || ours.empty()) return {INFINITY, INFINITY};
  auto max_abs = [](const at::Tensor& t) { return t.abs().max().item<double>(); };
  double gradients = 0;
  for (size_t n = 1; n < ours.size(); ++n) {
    gradients = std::max(gradients, max_abs(ours[n].to(at::kFloat) - sdpa[n]) / std::max(max_abs(sdpa[n]), 1e-30));
  }
  return {max_abs(ours[0].detach().to(at::kFloat) - sdpa[0]), gradients};
}

}  // namespace

int compare_with_torch2(const PeerComparison& how) {
  std::string why_not;
  const std::unique_ptr<Torch2Peer> peer = Torch2Peer::start("torch2_attention.py", at::get_num_threads(), why_not);
  if (!peer) {
    std::printf("\ntorch 2 peer (F.scaled_dot_product_attention): not measured: %s\n", why_not.c_str());
    return 0;
  }
  std::printf("\nagainst torch 2's F.scaled_dot_product_attention (%s), same inputs, %d threads; paired median of "
              "SDPA / ours over %d turns:\n",
              peer->describe().c_str(), at::get_num_threads(), kRounds);
  bool wrong = false, below = false;
  for (const AttentionFamily& f : attention_families()) {
    if (!how.selected(f)) continue;
    if (!f.sdpa) {
      std::printf("  %-12s no SDPA form (its term reads q or k: no mask holds it)\n", f.name);
      continue;
    }
    const SdpaForm form = f.sdpa();
    const std::vector<at::Tensor> ours = how.ours_outputs(f);
    define_case(*peer, f, form, how.backward ? how.grad(f) : at::Tensor());
    const double out_tol = f.forward_tol > 0 ? f.forward_tol : 2e-5;
    const double grad_tol = f.gradient_tol > 0 ? f.gradient_tol : 1e-4;
    const auto [out_diff, grad_diff] = differences(ours, peer->result(f.name));
    if (!(out_diff <= out_tol && grad_diff <= grad_tol)) {
      std::printf("WRONG: %s differs from SDPA: output %.2e (tol %.0e), gradients %.2e relative (tol %.0e)\n", f.name,
                  out_diff, out_tol, grad_diff, grad_tol);
      wrong = true;
      continue;
    }
    const double ratio = paired_ratio_of([&] { return peer->seconds(f.name); },
                                         [&] { return seconds_of_call([&] { how.ours_call(f); }); }, kRounds);
    const double target = target_for(form, how.backward);
    const double len = double(form.q.size(2));
    std::printf("  %-12s %-6s %s %.1e: %5.2fx (target >= %.1fx)%s\n", f.name,
                form.mask.defined() ? "mask" : form.causal ? "causal" : form.cos.defined() ? "rotary" : "plain",
                how.backward ? "gradients vs SDPA (relative)" : "|ours - SDPA|", how.backward ? grad_diff : out_diff,
                ratio, target,
                form.mask.defined()
                    ? (", SDPA holds the mask: " + std::to_string(int(4.0 * kH * len * len / 1048576.0)) + " MiB")
                          .c_str()
                    : "");
    if (ratio < target) {
      std::printf("BELOW TARGET: %s vs SDPA\n", f.name);
      below = true;
    }
  }
  return wrong ? 1 : below ? 3 : 0;
}

}  // namespace posenc::bench
