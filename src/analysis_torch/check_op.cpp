// Kernel of check (schemas.cpp): posenc::check on a tensor handed over by
// Python or read from a file, the report returned as its JSON text (the
// Python wrapper parses it into the dict `posenc check --json` prints).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

#include "op_support.h"
#include "posenc/check/check.h"

namespace posenc::analysis_torch {
namespace {

constexpr const char* kOp = "check";

// float16 / bfloat16 / float32 / float64 only: the dtype sets the tolerance.
check::DumpedTensor dumped_of(const at::Tensor& t, const std::string& label) {
  const at::ScalarType type = t.scalar_type();
  TORCH_CHECK_TYPE(type == at::kHalf || type == at::kBFloat16 || type == at::kFloat || type == at::kDouble, "[",
                   kOp, "] ", label, " must be float16, bfloat16, float32 or float64, got ", dtype_name(type));
  const at::Tensor d = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
  check::DumpedTensor out;
  out.label = label;
  out.dtype = dtype_name(type);
  out.shape.assign(t.sizes().begin(), t.sizes().end());
  out.values.assign(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
  return out;
}

std::optional<std::string> opt(const c10::optional<c10::string_view>& s) {
  return s ? std::optional<std::string>(std::string(to_std(*s))) : std::nullopt;
}

std::string check_op(const c10::optional<at::Tensor>& tensor, c10::optional<c10::string_view> path,
                     c10::optional<c10::string_view> tensor_name, const c10::optional<at::Tensor>& input,
                     c10::optional<c10::string_view> input_path, c10::optional<c10::string_view> input_name,
                     c10::string_view kind, c10::optional<c10::string_view> what, at::OptionalIntArrayRef positions,
                     c10::string_view options) {
  return translate_errors([&] {
    check::CheckRequest request;
    request.kind = std::string(to_std(kind));
    if (tensor.has_value() && tensor->defined()) {
      request.tensor = dumped_of(*tensor, "tensor");
    } else {
      TORCH_CHECK_VALUE(path.has_value(), "[", kOp, "] give a tensor or the path of a .npy / .safetensors file");
      request.tensor = check::load_dumped(*opt(path), opt(tensor_name));
    }
    if (input.has_value() && input->defined()) {
      request.input = dumped_of(*input, "input");
    } else if (input_path) {
      request.input = check::load_dumped(*opt(input_path), opt(input_name));
    } else if (input_name) {
      TORCH_CHECK_VALUE(path.has_value(), "[", kOp, "] input given by name needs the tensor's file (or input_file)");
      request.input = check::load_dumped(*opt(path), opt(input_name));
    }
    if (what) request.what = check::parse_what(to_std(*what));
    if (positions.has_value()) request.positions = std::vector<int64_t>(positions->begin(), positions->end());
    check::apply_options_json(std::string(to_std(options)), request);
    return check::report_json(check::run_check(request));
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) { m.impl("check", check_op); }

}  // namespace posenc::analysis_torch
