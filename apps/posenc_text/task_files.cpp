#include "task_files.h"

#include <nlohmann/json.hpp>

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#include "posenc/io/atomic_file.h"
#include "posenc/io/npy.h"
#include "posenc/io/tensor_file.h"
#include "posenc/text/task_format.h"

namespace posenc::cli {
namespace {

static_assert(std::endian::native == std::endian::little, "StoredTensor data is little-endian");

void write_int32_npy(const std::filesystem::path& path, const std::vector<int32_t>& values,
                     std::vector<int64_t> shape) {
  io::StoredTensor t;
  t.type = io::ElementType::kInt32;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(int32_t));
  if (!values.empty()) std::memcpy(t.data.data(), values.data(), t.data.size());
  io::write_npy(path.string(), t);
}

}  // namespace

void write_task_files(const std::filesystem::path& dir, const text::TaskDataset& task) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("[corpus] " + dir.string() + ": cannot create the directory: " + ec.message());
  std::filesystem::remove(dir / "task.json", ec);
  if (ec) throw std::runtime_error("[corpus] " + (dir / "task.json").string() + ": cannot remove: " + ec.message());
  nlohmann::ordered_json examples, truncated, unused;
  for (int split = 0; split < 3; ++split) {
    const text::TaskSplit& s = task.splits[static_cast<size_t>(split)];
    const std::string name(text::split_name(static_cast<text::Split>(split)));
    write_int32_npy(dir / (name + ".tokens.npy"), s.tokens, {s.rows, task.seq_len});
    if (task.kind == text::TaskKind::kSpan) {
      write_int32_npy(dir / (name + ".labels.npy"), s.labels, {s.rows, 2});
    } else {
      write_int32_npy(dir / (name + ".labels.npy"), s.labels, {s.rows});
    }
    examples[name] = s.rows;
    truncated[name] = s.truncated;
    unused[name] = s.unused_documents;
  }
  nlohmann::ordered_json j;
  j["format"] = text::kTaskFormat;
  j["task"] = task.name;
  j["kind"] = std::string(text::task_kind_name(task.kind));
  j["source"] = task.source;
  j["seq_len"] = task.seq_len;
  if (task.kind == text::TaskKind::kClassification) j["classes"] = task.classes;
  j["description"] = task.description;
  j["examples"] = examples;
  j["truncated"] = truncated;  // rows whose content was cut to fit seq_len
  if (task.kind == text::TaskKind::kSpan) j["unused_documents"] = unused;
  j["pad_id"] = text::kPadId;
  j["bos_id"] = text::kBosId;
  if (task.kind == text::TaskKind::kSpan) j["sep_id"] = text::kSepId, j["eos_id"] = text::kEosId;
  io::write_file_atomically("corpus", (dir / "task.json").string(), j.dump(2) + "\n");
}

}  // namespace posenc::cli
