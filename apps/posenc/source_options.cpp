#include "source_options.h"

#include <optional>

#include "posenc/error.h"

namespace posenc::cli {

void SourceOptions::add_source(CLI::App& app) {
  app.add_option("SOURCE", source_, "A kind (posenc table --list), or a .npy / .safetensors file");
  tensor_opt_ = app.add_option("--tensor", tensor_,
                               "Tensor of a .safetensors file, e.g. bert.embeddings.position_embeddings.weight "
                               "(default: the only one, or the one named like a position table)");
}

void SourceOptions::add_table(CLI::App& app) {
  table_.add_shared(app);
  table_.add_rope(app);
}

report::TableSource SourceOptions::load(std::string_view op) const {
  if (source_.empty()) {
    fail_argument(op, "SOURCE is required: a kind (posenc table --list) or a .npy / .safetensors file");
  }
  if (report::is_file_source(source_)) {
    table_.refuse_all(op, "a file source");
    const std::optional<std::string> tensor =
        tensor_opt_->count() > 0 ? std::optional<std::string>(tensor_) : std::nullopt;
    return report::file_source(op, source_, tensor);
  }
  const TableKind kind = parse_source_kind(source_, op);
  if (tensor_opt_->count() > 0) fail_argument(op, "--tensor applies only to a .npy or .safetensors SOURCE");
  return table_.analysis_source(kind, op);
}

}  // namespace posenc::cli
