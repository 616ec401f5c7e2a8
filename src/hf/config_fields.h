// Typed, path-aware access to one JSON object of a config.json, so every
// message names the file and the key path: "[hf] config.json:
// rope_scaling.factor must be a number, got \"8\"". Private to posenc::hf.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/error.h"

namespace posenc::hf::detail {

using Json = nlohmann::json;

// "[hf] " + source + ": " + parts...
template <class... Parts>
[[noreturn]] void fail_config(std::string_view source, const Parts&... parts) {
  fail_argument("hf", source, ": ", parts...);
}
template <class... Parts>
[[noreturn]] void refuse_config(std::string_view source, const Parts&... parts) {
  fail_runtime("hf", source, ": ", parts...);
}

// A value for messages: JSON text, cut to 60 characters.
std::string show(const Json& value);

class Fields {
 public:
  // `object` must be a JSON object; `path` is its key path ("" at the top, else "rope_scaling").
  Fields(const Json& object, std::string_view source, std::string path);

  bool has(std::string_view key) const;  // present and not null
  // Present and not null, each checked for its type; nullopt when absent or null.
  std::optional<double> number(std::string_view key) const;
  std::optional<int64_t> integer(std::string_view key) const;  // an integral number
  std::optional<bool> boolean(std::string_view key) const;
  std::optional<std::string> string(std::string_view key) const;
  std::vector<double> numbers(std::string_view key) const;   // a list of numbers (empty when absent)
  std::vector<int64_t> integers(std::string_view key) const;
  // A nested object's fields, or nullopt when absent or null.
  std::optional<Fields> object(std::string_view key) const;

  // "rope_scaling.factor" (or "factor" at the top).
  std::string path_of(std::string_view key) const;
  const std::string& path() const noexcept { return path_; }
  std::string_view source() const noexcept { return source_; }
  const Json& json() const noexcept { return *object_; }

  // "[hf] source: path.key must be WHAT, got VALUE".
  template <class... Parts>
  [[noreturn]] void fail(std::string_view key, const Parts&... parts) const {
    fail_config(source_, path_of(key), " ", parts...);
  }

 private:
  const Json* find(std::string_view key) const;

  const Json* object_;
  std::string_view source_;
  std::string path_;
};

}  // namespace posenc::hf::detail
