#include "encodings_command.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "posenc/nn/encoding_registry.h"

namespace posenc::cli {

EncodingsCommand::EncodingsCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("encodings", "List the encodings `posenc train --encoding` accepts");
  app_->add_flag("--json", json_, "Print a JSON array instead of a table");
}

void EncodingsCommand::run() const {
  const std::vector<nn::EncodingFamily>& catalog = nn::encoding_families();
  // "10000 (frequencies base^(-2i/dim))": the default, then what it means.
  auto shown = [](const nn::EncodingParameter& p) {
    return p.default_text() + (p.meaning.empty() ? "" : " (" + p.meaning + ")");
  };
  if (json_) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const nn::EncodingFamily& e : catalog) {
      nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
      for (const nn::EncodingParameter& p : e.parameters) parameters[p.name] = shown(p);
      out.push_back({{"name", e.name},
                     {"point", nn::encoding_point_name(e.point)},
                     {"description", e.description},
                     {"parameters", parameters}});
    }
    std::cout << out.dump(2) << '\n';
    return;
  }
  size_t name_width = 4, point_width = 5;
  for (const nn::EncodingFamily& e : catalog) {
    name_width = std::max(name_width, e.name.size());
    point_width = std::max(point_width, std::string(nn::encoding_point_name(e.point)).size());
  }
  auto pad = [](const std::string& s, size_t width) { return s + std::string(width + 2 - s.size(), ' '); };
  std::cout << pad("NAME", name_width) << pad("POINT", point_width) << "DESCRIPTION\n";
  for (const nn::EncodingFamily& e : catalog) {
    std::cout << pad(e.name, name_width) << pad(nn::encoding_point_name(e.point), point_width) << e.description
              << '\n';
    for (const nn::EncodingParameter& p : e.parameters) {
      std::cout << std::string(name_width + point_width + 4, ' ') << p.name << " = " << shown(p) << '\n';
    }
  }
  std::cout << "Combine at most one name per point with '+', e.g. learned+shaw, sinusoidal+rope, learned+alibi.\n";
}

}  // namespace posenc::cli
