// Kernels of load_tensors, load_tensor and save_tensors (schemas.cpp): the
// strict readers and the atomic writers of posenc::io, with their element
// types mapped to torch dtypes exactly.
//
//   file -> torch: bool, uint8, int8, int16, int32, int64, float16, bfloat16,
//                  float32, float64 as themselves (bit for bit); uint16 ->
//                  int32 and uint32 -> int64 (widened, exact); uint64 -> int64
//                  when every value fits, else an error (torch has no uint64).
//   torch -> file: the ten dtypes above; the tensor may have any strides and
//                  live on any device (copied to contiguous CPU memory first).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "op_support.h"
#include "posenc/io/safetensors.h"
#include "posenc/io/tensor_file.h"

namespace posenc::analysis_torch {
namespace {

static_assert(std::endian::native == std::endian::little, "io keeps data little-endian; torch uses host order");

constexpr const char* kOp = "tensor file";

using io::ElementType;

std::string describe(const std::string& name) { return name.empty() ? "the array" : "tensor '" + name + "'"; }

// The torch dtype of a stored element type (after widening).
at::ScalarType torch_dtype(ElementType type) {
  switch (type) {
    case ElementType::kBool: return at::kBool;
    case ElementType::kUInt8: return at::kByte;
    case ElementType::kInt8: return at::kChar;
    case ElementType::kInt16: return at::kShort;
    case ElementType::kUInt16:  // widened
    case ElementType::kInt32: return at::kInt;
    case ElementType::kUInt32:  // widened
    case ElementType::kUInt64:  // checked
    case ElementType::kInt64: return at::kLong;
    case ElementType::kFloat16: return at::kHalf;
    case ElementType::kBFloat16: return at::kBFloat16;
    case ElementType::kFloat32: return at::kFloat;
    case ElementType::kFloat64: return at::kDouble;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown io element type");
}

template <class From, class To>
void widen(const std::byte* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * static_cast<int64_t>(sizeof(From)), sizeof(From));
    out[i] = static_cast<To>(v);
  }
}

at::Tensor to_torch(const std::string& path, const io::NamedTensor& named) {
  const io::StoredTensor& s = named.tensor;
  const int64_t n = s.numel();
  TORCH_INTERNAL_ASSERT(static_cast<int64_t>(s.data.size()) == n * io::element_size(s.type));
  at::Tensor t = at::empty(s.shape, at::TensorOptions().dtype(torch_dtype(s.type)));
  const std::byte* in = s.data.data();
  switch (s.type) {
    case ElementType::kUInt16: widen<uint16_t>(in, t.data_ptr<int32_t>(), n); break;
    case ElementType::kUInt32: widen<uint32_t>(in, t.data_ptr<int64_t>(), n); break;
    case ElementType::kUInt64:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t v;
        std::memcpy(&v, in + i * 8, 8);
        TORCH_CHECK_VALUE(v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "[", kOp, "] ", path,
                          ": ", describe(named.name), " is uint64 and holds ", v, " (flat index ", i,
                          "), above the int64 range; torch has no uint64");
        t.data_ptr<int64_t>()[i] = static_cast<int64_t>(v);
      }
      break;
    case ElementType::kBool: {
      // A bool byte other than 0 / 1 would be undefined behaviour in torch: read it as true.
      bool* out = t.data_ptr<bool>();
      for (int64_t i = 0; i < n; ++i) out[i] = in[i] != std::byte{0};
      break;
    }
    default:
      if (n > 0) std::memcpy(t.data_ptr(), in, s.data.size());
  }
  return t;
}

std::optional<ElementType> element_type(at::ScalarType t) {
  switch (t) {
    case at::kBool: return ElementType::kBool;
    case at::kByte: return ElementType::kUInt8;
    case at::kChar: return ElementType::kInt8;
    case at::kShort: return ElementType::kInt16;
    case at::kInt: return ElementType::kInt32;
    case at::kLong: return ElementType::kInt64;
    case at::kHalf: return ElementType::kFloat16;
    case at::kBFloat16: return ElementType::kBFloat16;
    case at::kFloat: return ElementType::kFloat32;
    case at::kDouble: return ElementType::kFloat64;
    default: return std::nullopt;
  }
}

io::NamedTensor from_torch(const std::string& name, const at::Tensor& tensor) {
  TORCH_CHECK_VALUE(tensor.defined(), "[", kOp, "] ", describe(name), " must be a tensor, got None");
  const std::optional<ElementType> type = element_type(tensor.scalar_type());
  TORCH_CHECK_TYPE(type.has_value(), "[", kOp, "] ", describe(name), " has dtype ", dtype_name(tensor.scalar_type()),
                   "; supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64");
  const at::Tensor c = tensor.detach().to(at::kCPU).contiguous();
  io::NamedTensor out;
  out.name = name;
  out.tensor.type = *type;
  out.tensor.shape.assign(c.sizes().begin(), c.sizes().end());
  out.tensor.data.resize(static_cast<size_t>(c.numel() * c.element_size()));
  if (!out.tensor.data.empty()) std::memcpy(out.tensor.data.data(), c.data_ptr(), out.tensor.data.size());
  return out;
}

std::tuple<std::vector<std::string>, std::vector<at::Tensor>> load_tensors(c10::string_view path) {
  return translate_errors([&] {
    const std::string p(to_std(path));
    std::vector<std::string> names;
    std::vector<at::Tensor> tensors;
    for (const io::NamedTensor& named : io::load_tensors(p)) {
      tensors.push_back(to_torch(p, named));
      names.push_back(named.name);
    }
    return std::make_tuple(std::move(names), std::move(tensors));
  });
}

std::tuple<std::string, at::Tensor> load_tensor(c10::string_view path, c10::optional<c10::string_view> name) {
  return translate_errors([&] {
    const std::string p(to_std(path));
    const io::NamedTensor named =
        io::load_tensor(p, name ? std::optional<std::string>(std::string(to_std(*name))) : std::nullopt);
    return std::make_tuple(named.name, to_torch(p, named));
  });
}

void save_tensors(c10::string_view path, c10::ArrayRef<std::string> names, at::TensorList tensors,
                  const c10::optional<c10::Dict<std::string, std::string>>& metadata) {
  translate_errors([&] {
    const std::string p(to_std(path));
    TORCH_CHECK_VALUE(names.size() == tensors.size(), "[", kOp, "] names and tensors must have the same length, got ",
                      names.size(), " names and ", tensors.size(), " tensors");
    std::vector<io::NamedTensor> named;
    named.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) named.push_back(from_torch(names[i], tensors[i]));
    if (!metadata.has_value() || metadata->empty()) {
      io::save_tensors(p, named);
      return;
    }
    TORCH_CHECK_VALUE(p.ends_with(".safetensors"), "[", kOp, "] ", p,
                      ": metadata applies to .safetensors files only");
    std::map<std::string, std::string> m;
    for (const auto& entry : *metadata) m[entry.key()] = entry.value();
    io::write_safetensors(p, named, m);
  });
}

}  // namespace

// No tensor to dispatch on (or a list that may be empty): one kernel for every backend.
TORCH_LIBRARY_IMPL(posenc, CompositeExplicitAutograd, m) {
  m.impl("load_tensors", load_tensors);
  m.impl("load_tensor", load_tensor);
  m.impl("save_tensors", save_tensors);
}

}  // namespace posenc::analysis_torch
