// result.json of a properties run, written and read back.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "posenc/experiments/properties.h"

namespace posenc::experiments {

inline constexpr const char* kPropertiesResultFormat = "posenc-properties-run-1";

// The parsed file; "[experiment] PATH: not valid JSON" or "...: not a properties run result (format ...)".
nlohmann::json read_result(const std::filesystem::path& path);
// The format check of read_result, for a file already parsed.
void check_result_format(const nlohmann::json& j, const std::filesystem::path& path);
// "[experiment] PATH: not a properties run result (<what is missing>)".
PropertiesOutcome outcome_from_result(const nlohmann::json& j, const std::filesystem::path& path);
std::string result_text(const PropertiesOutcome& o, int64_t order, const nlohmann::json& identity);

}  // namespace posenc::experiments
