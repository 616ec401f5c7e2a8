#include "config_fields.h"

#include <cmath>
#include <limits>

namespace posenc::hf::detail {

std::string show(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

Fields::Fields(const Json& object, std::string_view source, std::string path)
    : object_(&object), source_(source), path_(std::move(path)) {}

const Json* Fields::find(std::string_view key) const {
  const auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

bool Fields::has(std::string_view key) const { return find(key) != nullptr; }

std::string Fields::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::optional<double> Fields::number(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail(key, "must be a number, got ", show(*v));
  return v->get<double>();
}

std::optional<int64_t> Fields::integer(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(key, "must be an integer below 2^63, got ", show(*v));
    }
    return v->get<int64_t>();
  }
  // 4096.0 is accepted as Python's int(4096.0) would be read.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9.0e15) return static_cast<int64_t>(d);
  }
  fail(key, "must be an integer, got ", show(*v));
}

std::optional<bool> Fields::boolean(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) fail(key, "must be true or false, got ", show(*v));
  return v->get<bool>();
}

std::optional<std::string> Fields::string(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) fail(key, "must be a string, got ", show(*v));
  return v->get<std::string>();
}

std::vector<double> Fields::numbers(std::string_view key) const {
  const Json* v = find(key);
  std::vector<double> out;
  if (v == nullptr) return out;
  if (!v->is_array()) fail(key, "must be a list of numbers, got ", show(*v));
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number()) fail(key, "must be a list of numbers, got ", show((*v)[i]), " at index ", i);
    out.push_back((*v)[i].get<double>());
  }
  return out;
}

std::vector<int64_t> Fields::integers(std::string_view key) const {
  const Json* v = find(key);
  std::vector<int64_t> out;
  if (v == nullptr) return out;
  if (!v->is_array()) fail(key, "must be a list of integers, got ", show(*v));
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number_integer()) fail(key, "must be a list of integers, got ", show((*v)[i]), " at index ", i);
    out.push_back((*v)[i].get<int64_t>());
  }
  return out;
}

std::optional<Fields> Fields::object(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) fail(key, "must be an object, got ", show(*v));
  return Fields(*v, source_, path_of(key));
}

}  // namespace posenc::hf::detail
