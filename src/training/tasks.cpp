#include "posenc/training/tasks.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/io/npy.h"
#include "posenc/io/tensor_file.h"
#include "posenc/nn/linear_cross_entropy.h"
#include "posenc/text/task_format.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "task";

// splitmix64 (Steele, Lea, Flood 2014): a bijective 64-bit mixer; chained over
// (seed, stream, index, row) it gives each row an independent generator.
uint64_t mix64(uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class RowRandom {
 public:
  RowRandom(uint64_t seed, DataStream stream, int64_t index, int64_t row) noexcept
      : state_(mix64(mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(stream)) + static_cast<uint64_t>(index)) +
                     static_cast<uint64_t>(row))) {}

  uint64_t next() noexcept {
    state_ += 0x9E3779B97F4A7C15ull;  // the splitmix64 sequence from the row's state
    return mix64(state_);
  }
  // Uniform in [0, n), n >= 1: Lemire's multiply-shift (bias below 2^-50 here, irrelevant for data).
  int64_t below(int64_t n) noexcept {
    return static_cast<int64_t>((static_cast<unsigned __int128>(next()) * static_cast<uint64_t>(n)) >> 64);
  }
  int64_t between(int64_t lo, int64_t hi) noexcept { return lo + below(hi - lo + 1); }  // inclusive

 private:
  uint64_t state_;
};

at::Tensor to_tensor(const std::vector<int64_t>& values, at::IntArrayRef shape) {
  return at::tensor(values, at::kLong).reshape(shape);
}

at::Tensor to_mask(const std::vector<uint8_t>& values, at::IntArrayRef shape) {
  return at::tensor(values, at::kByte).to(at::kBool).reshape(shape);
}

void check_logits(const at::Tensor& logits, const char* name, std::vector<int64_t> shape) {
  require(logits.defined(), kOp, name, " must be a tensor, got None");
  require(logits.sizes().vec() == shape, kOp, name, " must have shape ", at::IntArrayRef(shape), ", got ",
          logits.sizes());
}

constexpr const char* kTextFormat = "posenc-text-ids-1";
constexpr const char* kSplitNames[] = {"train", "validation", "test"};

}  // namespace

// The three splits of a text data directory, loaded once per process and path.
struct Task::TextData {
  int64_t vocab_size = 0;
  std::vector<int64_t> splits[3];  // train, validation, test

  const std::vector<int64_t>& split(std::string_view name) const {
    for (int i = 0; i < 3; ++i) {
      if (name == kSplitNames[i]) return splits[i];
    }
    return splits[0];
  }

  static std::shared_ptr<const TextData> load(const std::string& dir) {
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<const TextData>> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto cached = loaded[dir].lock()) return cached;
    auto data = std::make_shared<TextData>();
    const std::string meta_path = (std::filesystem::path(dir) / "corpus.json").string();
    std::error_code ec;
    if (!std::filesystem::exists(meta_path, ec)) {
      fail_argument(kOp, "data must be a directory written by posenc corpus --out (with corpus.json), got '", dir,
                    "'");
    }
    nlohmann::json meta;
    try {
      meta = nlohmann::json::parse(io::read_regular_file("task", meta_path));
    } catch (const nlohmann::json::exception&) {
      fail_runtime(kOp, meta_path, ": not valid JSON");
    }
    if (!meta.is_object() || meta.value("format", "") != kTextFormat || !meta.contains("vocab_size") ||
        !meta["vocab_size"].is_number_integer()) {
      fail_runtime(kOp, meta_path, ": not a posenc corpus --out description (format '", kTextFormat,
                   "' with vocab_size)");
    }
    data->vocab_size = meta["vocab_size"].get<int64_t>();
    if (data->vocab_size < 2) fail_runtime(kOp, meta_path, ": vocab_size must be >= 2, got ", data->vocab_size);
    for (int i = 0; i < 3; ++i) {
      const std::string path = (std::filesystem::path(dir) / (std::string(kSplitNames[i]) + ".ids.npy")).string();
      const io::NpyArray a = io::read_npy(path);
      if (a.shape.size() != 1 || a.dtype() != io::DType::kInt64) {
        fail_runtime(kOp, path, ": must hold a 1-D int64 array of token ids");
      }
      data->splits[i] = a.values<int64_t>();
      for (size_t k = 0; k < data->splits[i].size(); ++k) {
        const int64_t id = data->splits[i][k];
        if (id < 0 || id >= data->vocab_size) {
          fail_runtime(kOp, path, ": token id ", id, " at ", k, " is outside the vocabulary [0, ",
                       data->vocab_size, ")");
        }
      }
    }
    loaded[dir] = data;
    return data;
  }
};

int64_t text_data_vocab_size(const std::string& data_dir) { return Task::TextData::load(data_dir)->vocab_size; }

// A labelled set of DIR/tasks/NAME (posenc corpus --out), loaded once per process and path.
struct Task::LabelledData {
  std::string kind;  // "classification" or "span"
  int64_t seq_len = 0;
  int64_t vocab_size = 0;  // the corpus's (DIR/corpus.json two levels up)
  std::vector<std::string> classes;
  struct Part {
    int64_t rows = 0;
    std::vector<int64_t> tokens;  // rows x seq_len
    std::vector<int64_t> labels;  // rows (classes) or rows x 2 (spans)
  };
  Part splits[3];

  const Part& split(std::string_view name) const {
    for (int i = 0; i < 3; ++i) {
      if (name == kSplitNames[i]) return splits[i];
    }
    return splits[0];
  }

  static std::shared_ptr<const LabelledData> load(const std::string& dir) {
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<const LabelledData>> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto cached = loaded[dir].lock()) return cached;
    const std::filesystem::path root(dir);
    const std::string meta_path = (root / "task.json").string();
    std::error_code ec;
    if (!std::filesystem::exists(meta_path, ec)) {
      fail_argument(kOp, "data must be a task directory written by posenc corpus --out (DIR/tasks/NAME with task.json), got '",
                    dir, "'");
    }
    auto data = std::make_shared<LabelledData>();
    nlohmann::json meta;
    std::string format;
    try {
      meta = nlohmann::json::parse(io::read_regular_file("task", meta_path));
      format = meta.value("format", std::string());
      data->kind = meta.at("kind").get<std::string>();
      data->seq_len = meta.at("seq_len").get<int64_t>();
      if (data->kind == "classification") data->classes = meta.at("classes").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      fail_runtime(kOp, meta_path, ": not a posenc corpus task description (format, kind, seq_len, classes)");
    }
    if (format != text::kTaskFormat) {
      fail_runtime(kOp, meta_path, ": task format must be '", text::kTaskFormat, "', got '", format,
                   "' (written by an older posenc corpus --out; write the directory again)");
    }
    if (data->kind != "classification" && data->kind != "span") {
      fail_runtime(kOp, meta_path, ": kind must be 'classification' or 'span', got '", data->kind, "'");
    }
    if (data->seq_len < 2) fail_runtime(kOp, meta_path, ": seq_len must be >= 2, got ", data->seq_len);
    if (data->kind == "classification" && data->classes.size() < 2) {
      fail_runtime(kOp, meta_path, ": a classification task needs >= 2 classes, got ", data->classes.size());
    }
    data->vocab_size = TextData::load((root.parent_path().parent_path()).string())->vocab_size;
    const int64_t T = data->seq_len;
    for (int i = 0; i < 3; ++i) {
      Part& part = data->splits[i];
      const std::string stem = (root / kSplitNames[i]).string();
      part.tokens = integer_values(stem + ".tokens.npy");
      part.labels = integer_values(stem + ".labels.npy");
      part.rows = static_cast<int64_t>(part.tokens.size()) / T;
      const int64_t per_row = data->kind == "span" ? 2 : 1;
      if (part.rows < 1 || static_cast<int64_t>(part.tokens.size()) != part.rows * T ||
          static_cast<int64_t>(part.labels.size()) != part.rows * per_row) {
        fail_runtime(kOp, stem, ".{tokens,labels}.npy: must hold N >= 1 rows of ", T, " ids and N ",
                     per_row == 2 ? "(start, end) pairs" : "classes", ", got ", part.tokens.size(), " ids and ",
                     part.labels.size(), " labels");
      }
      for (size_t k = 0; k < part.tokens.size(); ++k) {
        const int64_t id = part.tokens[k];
        if (id < 0 || id >= data->vocab_size) {
          fail_runtime(kOp, stem, ".tokens.npy: token id ", id, " at ", k, " is outside the vocabulary [0, ",
                       data->vocab_size, ")");
        }
      }
      const int64_t bound = per_row == 2 ? T : static_cast<int64_t>(data->classes.size());
      for (size_t k = 0; k < part.labels.size(); ++k) {
        if (part.labels[k] < 0 || part.labels[k] >= bound) {
          fail_runtime(kOp, stem, ".labels.npy: label ", part.labels[k], " at ", k, " is outside [0, ", bound, ")");
        }
      }
      if (per_row == 2) {
        for (int64_t r = 0; r < part.rows; ++r) {
          if (part.labels[2 * r] > part.labels[2 * r + 1]) {
            fail_runtime(kOp, stem, ".labels.npy: row ", r, " has start ", part.labels[2 * r], " after end ",
                         part.labels[2 * r + 1]);
          }
        }
      }
    }
    loaded[dir] = data;
    return data;
  }

 private:
  // int64 or int32 values of an integer array, as int64.
  static std::vector<int64_t> integer_values(const std::string& path) {
    const io::StoredTensor t = io::read_npy_tensor(path);
    std::vector<int64_t> out(static_cast<size_t>(t.numel()));
    if (t.type == io::ElementType::kInt32) {
      std::vector<int32_t> narrow(out.size());
      std::memcpy(narrow.data(), t.data.data(), narrow.size() * sizeof(int32_t));  // little-endian, as x86 and ARM
      std::copy(narrow.begin(), narrow.end(), out.begin());
    } else if (t.type == io::ElementType::kInt64) {
      std::memcpy(out.data(), t.data.data(), out.size() * sizeof(int64_t));
    } else {
      fail_runtime(kOp, path, ": must hold int32 or int64 values, got ", io::element_type_name(t.type));
    }
    return out;
  }
};

Task::Task(TaskKind kind, TaskOptions options) : kind_(kind), options_(options) {
  if (kind_ == TaskKind::kTextClassify || kind_ == TaskKind::kTextSpan) {
    require(!options_.data.empty(), kOp, "data must name a task directory DIR/tasks/NAME of posenc corpus --out for '",
            name(), "', got none");
    require(options_.eval_split == "validation" || options_.eval_split == "test", kOp,
            "eval_split must be 'validation' or 'test', got '", options_.eval_split, "'");
    require(options_.eval_rows >= 0, kOp, "eval_rows must be >= 0 (0: every row), got ", options_.eval_rows);
    labelled_ = LabelledData::load(options_.data);
    const char* wanted = kind_ == TaskKind::kTextClassify ? "classification" : "span";
    require(labelled_->kind == wanted, kOp, "'", name(), "' needs a ", wanted, " task directory, ", options_.data,
            " holds a ", labelled_->kind, " task");
    if (options_.vocab_size == 0) options_.vocab_size = labelled_->vocab_size;
    require(options_.vocab_size == labelled_->vocab_size, kOp, "vocab_size must be the data's (",
            labelled_->vocab_size, ") for '", name(), "', got ", options_.vocab_size);
  }
  if (kind_ == TaskKind::kText || kind_ == TaskKind::kMaskedLm) {
    require(!options_.data.empty(), kOp, "data must name a directory written by posenc corpus --out for '", name(),
            "', got none");
    require(options_.eval_split == "validation" || options_.eval_split == "test", kOp,
            "eval_split must be 'validation' or 'test', got '", options_.eval_split, "'");
    text_ = TextData::load(options_.data);
    if (options_.vocab_size == 0) options_.vocab_size = text_->vocab_size;
    require(options_.vocab_size == text_->vocab_size, kOp, "vocab_size must be the data's (", text_->vocab_size,
            ", ", options_.data, "/corpus.json) for '", name(), "', got ", options_.vocab_size);
  }
  const bool synthetic_encoder = kind_ == TaskKind::kOrder || kind_ == TaskKind::kSpan;
  const int64_t min_vocab = synthetic_encoder ? kFirstFiller + 2 : kind_ == TaskKind::kMaskedLm ? kTextFirstPiece + 1 : 2;
  require(options_.vocab_size >= min_vocab, kOp, "vocab_size must be >= ", min_vocab, " for '", name(), "', got ",
          options_.vocab_size);
  require(options_.lookback >= 1, kOp, "lookback must be >= 1, got ", options_.lookback);
  require(options_.max_span >= 1, kOp, "max_span must be >= 1, got ", options_.max_span);
}

const std::vector<std::string>& Task::names() {
  // In TaskKind's order.
  static const std::vector<std::string> kNames = {"order", "span", "lookback", "copy", "text", "mlm",
                                                  "text-classify", "text-span"};
  return kNames;
}

Task Task::parse(std::string_view name, TaskOptions options) {
  const auto& known = names();
  for (size_t i = 0; i < known.size(); ++i) {
    if (name == known[i]) return Task(static_cast<TaskKind>(i), options);
  }
  std::string list;
  for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
  fail_argument(kOp, "unknown task '", name, "'; known: ", list);
}

std::string_view Task::name() const noexcept { return names()[static_cast<size_t>(kind_)]; }

ModelKind Task::model() const noexcept {
  return kind_ == TaskKind::kLookback || kind_ == TaskKind::kCopy || kind_ == TaskKind::kText ? ModelKind::kDecoder
                                                                                                : ModelKind::kEncoder;
}

int64_t Task::fixed_seq_len() const noexcept { return labelled_ ? labelled_->seq_len : 0; }

int64_t Task::num_classes() const noexcept {
  if (kind_ == TaskKind::kOrder) return 2;
  return kind_ == TaskKind::kTextClassify ? static_cast<int64_t>(labelled_->classes.size()) : 0;
}

const std::vector<std::string>& Task::class_names() const {
  static const std::vector<std::string> kNone;
  return kind_ == TaskKind::kTextClassify ? labelled_->classes : kNone;
}

int64_t Task::eval_examples() const noexcept {
  if (!labelled_) return 0;
  const int64_t rows = labelled_->split(options_.eval_split).rows;
  return options_.eval_rows > 0 ? std::min(rows, options_.eval_rows) : rows;
}

std::string_view Task::metric() const noexcept {
  switch (kind_) {
    case TaskKind::kOrder: return "classification accuracy (A before B)";
    case TaskKind::kSpan: return "exact match (start and end both right)";
    case TaskKind::kLookback: return "next-token accuracy at target positions >= k";
    case TaskKind::kCopy: return "next-token accuracy on the second half";
    case TaskKind::kText: return "next-token accuracy on text (loss: cross-entropy in nats; perplexity exp(loss))";
    case TaskKind::kMaskedLm: return "masked-token accuracy (loss: cross-entropy at the masked positions; perplexity exp(loss))";
    case TaskKind::kTextClassify: return "classification accuracy on the labelled set";
    case TaskKind::kTextSpan: return "exact match on the labelled set (start and end both right)";
  }
  return "";
}

int64_t Task::min_seq_len() const noexcept {
  switch (kind_) {
    case TaskKind::kOrder: return 3;  // [CLS], A, B
    case TaskKind::kSpan: return options_.max_span + 3;  // [CLS], query, answer, terminator
    case TaskKind::kLookback: return options_.lookback + 1;  // at least one scored target
    case TaskKind::kCopy: return 2;
    case TaskKind::kText: return 1;
    case TaskKind::kMaskedLm: return 2;  // [CLS] and one token to mask
    case TaskKind::kTextClassify:
    case TaskKind::kTextSpan: return labelled_->seq_len;
  }
  return 0;
}

Batch Batch::rows(int64_t begin, int64_t count) const {
  const auto rows_of = [&](const at::Tensor& t) { return t.defined() ? t.narrow(0, begin, count) : t; };
  return {rows_of(tokens), rows_of(key_padding_mask), rows_of(labels), rows_of(loss_mask)};
}

Batch Task::batch(uint64_t seed, DataStream stream, int64_t index, int64_t batch_size, int64_t seq_len) const {
  require(batch_size >= 1, kOp, "batch_size must be >= 1, got ", batch_size);
  require(seq_len >= min_seq_len(), kOp, "seq_len must be >= ", min_seq_len(), " for '", name(), "', got ", seq_len);
  if (labelled_) {
    require(seq_len == labelled_->seq_len, kOp, "seq_len must be the data's row width (", labelled_->seq_len, ", ",
            options_.data, "/task.json) for '", name(), "', got ", seq_len);
    return labelled_batch(seed, stream, index, batch_size, seq_len);
  }
  if (kind_ == TaskKind::kMaskedLm) return masked_batch(seed, stream, index, batch_size, seq_len);
  const int64_t B = batch_size, T = seq_len, V = options_.vocab_size;
  const size_t cells = static_cast<size_t>(B * T);
  Batch out;
  if (model() == ModelKind::kEncoder) {
    std::vector<int64_t> tokens(cells, kPadToken);
    std::vector<uint8_t> padding(cells, 1);
    std::vector<int64_t> labels;
    const int64_t shortest = std::max((T + 1) / 2, min_seq_len());
    for (int64_t r = 0; r < B; ++r) {
      RowRandom rng(seed, stream, index, r);
      int64_t* row = tokens.data() + r * T;
      const int64_t n = rng.between(shortest, T);
      std::fill(padding.begin() + r * T, padding.begin() + r * T + n, 0);
      row[0] = kClsToken;
      for (int64_t t = 1; t < n; ++t) row[t] = kFirstFiller + rng.below(V - kFirstFiller);
      if (kind_ == TaskKind::kOrder) {
        const int64_t a = 1 + rng.below(n - 1);
        int64_t b = 1 + rng.below(n - 2);  // distinct from a: skip over it
        if (b >= a) ++b;
        row[a] = kMarkerA;
        row[b] = kMarkerB;
        labels.push_back(a < b ? 1 : 0);
      } else {
        const int64_t length = 1 + rng.below(options_.max_span);
        const int64_t q = 1 + rng.below(n - length - 2);  // q + length + 1 <= n - 1
        row[q] = kQueryToken;
        row[q + length + 1] = kTerminatorToken;
        labels.push_back(q + 1);
        labels.push_back(q + length);
      }
    }
    out.tokens = to_tensor(tokens, {B, T});
    out.key_padding_mask = to_mask(padding, {B, T});
    out.labels = kind_ == TaskKind::kOrder ? to_tensor(labels, {B}) : to_tensor(labels, {B, 2});
    return out;
  }
  if (kind_ == TaskKind::kText) return text_batch(seed, stream, index, B, T);
  // Decoder: T + 1 symbols per row, inputs x[0..T), targets x[1..T].
  const int64_t period = kind_ == TaskKind::kLookback ? options_.lookback : (T + 1) / 2;
  std::vector<int64_t> tokens(cells), labels(cells);
  std::vector<uint8_t> scored(cells);
  std::vector<int64_t> x(static_cast<size_t>(T + 1));
  for (int64_t r = 0; r < B; ++r) {
    RowRandom rng(seed, stream, index, r);
    for (int64_t i = 0; i <= T; ++i) x[i] = i < period ? rng.below(V) : x[i - period];
    for (int64_t t = 0; t < T; ++t) {
      tokens[r * T + t] = x[t];
      labels[r * T + t] = x[t + 1];
      scored[r * T + t] = t + 1 >= period ? 1 : 0;
    }
  }
  out.tokens = to_tensor(tokens, {B, T});
  out.labels = to_tensor(labels, {B, T});
  out.loss_mask = to_mask(scored, {B, T});
  return out;
}

Batch Task::text_batch(uint64_t seed, DataStream stream, int64_t index, int64_t B, int64_t T) const {
  const std::string_view split = stream == DataStream::kTrain ? "train" : std::string_view(options_.eval_split);
  const std::vector<int64_t>& ids = text_->split(split);
  const auto n = static_cast<int64_t>(ids.size());
  require(n > T, kOp, "seq_len ", T, " needs ", T + 1, " tokens; the ", split, " split of ", options_.data, " holds ",
          n);
  const size_t cells = static_cast<size_t>(B * T);
  std::vector<int64_t> tokens(cells), labels(cells);
  for (int64_t r = 0; r < B; ++r) {
    RowRandom rng(seed, stream, index, r);
    const int64_t start = rng.below(n - T);  // x = ids[start .. start + T]
    std::copy(ids.begin() + start, ids.begin() + start + T, tokens.begin() + r * T);
    std::copy(ids.begin() + start + 1, ids.begin() + start + T + 1, labels.begin() + r * T);
  }
  Batch out;
  out.tokens = to_tensor(tokens, {B, T});
  out.labels = to_tensor(labels, {B, T});
  out.loss_mask = at::ones({B, T}, at::kBool);
  return out;
}

Batch Task::masked_batch(uint64_t seed, DataStream stream, int64_t index, int64_t B, int64_t T) const {
  const std::string_view split = stream == DataStream::kTrain ? "train" : std::string_view(options_.eval_split);
  const std::vector<int64_t>& ids = text_->split(split);
  const auto n = static_cast<int64_t>(ids.size());
  require(n >= T, kOp, "seq_len ", T, " needs ", T - 1, " tokens after [CLS]; the ", split, " split of ",
          options_.data, " holds ", n);
  const int64_t V = options_.vocab_size;
  const size_t cells = static_cast<size_t>(B * T);
  std::vector<int64_t> tokens(cells), labels(cells);
  std::vector<uint8_t> chosen(cells, 0);
  for (int64_t r = 0; r < B; ++r) {
    RowRandom rng(seed, stream, index, r);
    const int64_t start = rng.below(n - T + 2);  // ids[start .. start + T - 1) after [CLS]
    int64_t* row = tokens.data() + r * T;
    row[0] = kTextClsId;
    std::copy(ids.begin() + start, ids.begin() + start + T - 1, row + 1);
    std::copy(row, row + T, labels.begin() + r * T);
    uint8_t* pick = chosen.data() + r * T;
    int64_t picked = 0;
    for (int64_t t = 1; t < T; ++t) {
      pick[t] = rng.below(100) < 15 ? 1 : 0;
      picked += pick[t];
    }
    if (picked == 0) pick[1 + rng.below(T - 1)] = 1;
    for (int64_t t = 1; t < T; ++t) {
      if (pick[t] == 0) continue;
      const int64_t u = rng.below(10);  // BERT's 80 / 10 / 10
      if (u < 8) {
        row[t] = kTextMaskId;
      } else if (u == 8) {
        row[t] = kTextFirstPiece + rng.below(V - kTextFirstPiece);
      }
    }
  }
  Batch out;
  out.tokens = to_tensor(tokens, {B, T});
  out.labels = to_tensor(labels, {B, T});
  out.loss_mask = to_mask(chosen, {B, T});
  return out;
}

Batch Task::labelled_batch(uint64_t seed, DataStream stream, int64_t index, int64_t B, int64_t T) const {
  const std::string_view split = stream == DataStream::kTrain ? "train" : std::string_view(options_.eval_split);
  const LabelledData::Part& part = labelled_->split(split);
  const int64_t per_row = kind_ == TaskKind::kTextSpan ? 2 : 1;
  std::vector<int64_t> rows;
  if (stream == DataStream::kTrain) {
    for (int64_t r = 0; r < B; ++r) rows.push_back(RowRandom(seed, stream, index, r).below(part.rows));
  } else {
    const int64_t n = eval_examples(), first = index * B;
    require(first < n, kOp, "eval batch ", index, " of ", B, " rows starts past the ", n, " rows of the ", split,
            " split of ", options_.data);
    // The sample k of n rows is row floor(k N / n): spread over the whole split, which is in source order.
    for (int64_t k = first; k < std::min(n, first + B); ++k) rows.push_back(k * part.rows / n);
  }
  const auto count = static_cast<int64_t>(rows.size());
  std::vector<int64_t> tokens, labels;
  std::vector<uint8_t> padding;
  tokens.reserve(static_cast<size_t>(count * T));
  for (const int64_t r : rows) {
    const auto first = part.tokens.begin() + r * T;
    tokens.insert(tokens.end(), first, first + T);
    for (int64_t t = 0; t < T; ++t) padding.push_back(first[t] == kTextPadId ? 1 : 0);
    labels.insert(labels.end(), part.labels.begin() + r * per_row, part.labels.begin() + (r + 1) * per_row);
  }
  Batch out;
  out.tokens = to_tensor(tokens, {count, T});
  out.key_padding_mask = to_mask(padding, {count, T});
  out.labels = per_row == 2 ? to_tensor(labels, {count, 2}) : to_tensor(labels, {count});
  return out;
}

TaskScore Task::score_classification(const at::Tensor& logits, const Batch& batch) const {
  const int64_t B = batch.tokens.size(0);
  check_logits(logits, "logits", {B, num_classes()});
  TaskScore s;
  s.loss = at::cross_entropy_loss(logits, batch.labels);
  s.correct = logits.argmax(1).eq(batch.labels).sum().item<int64_t>();
  s.count = B;
  return s;
}

TaskScore Task::score_span(const at::Tensor& start_logits, const at::Tensor& end_logits, const Batch& batch) const {
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  check_logits(start_logits, "start_logits", {B, T});
  check_logits(end_logits, "end_logits", {B, T});
  const at::Tensor start = batch.labels.select(1, 0), end = batch.labels.select(1, 1);
  TaskScore s;
  s.loss = (at::cross_entropy_loss(start_logits, start) + at::cross_entropy_loss(end_logits, end)) * 0.5;
  s.correct = start_logits.argmax(1).eq(start).logical_and(end_logits.argmax(1).eq(end)).sum().item<int64_t>();
  s.count = B;
  return s;
}

at::Tensor Task::scored_rows(const Batch& batch) { return batch.loss_mask.reshape({-1}).nonzero().reshape({-1}); }

TaskScore Task::score_language_model(const at::Tensor& logits, const Batch& batch) const {
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  check_logits(logits, "logits", {B, T, options_.vocab_size});
  return score_scored_rows(logits.reshape({B * T, -1}).index_select(0, scored_rows(batch)), batch);
}

TaskScore Task::score_scored_rows(const at::Tensor& logits, const Batch& batch) const {
  const at::Tensor rows = scored_rows(batch);
  check_logits(logits, "logits", {rows.size(0), options_.vocab_size});
  const at::Tensor targets = batch.labels.reshape({-1}).index_select(0, rows);
  TaskScore s;
  s.loss = at::cross_entropy_loss(logits, targets);
  s.correct = logits.argmax(1).eq(targets).sum().item<int64_t>();
  s.count = rows.size(0);
  return s;
}

TaskScore Task::score_head(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& bias,
                           const Batch& batch) const {
  const at::Tensor rows = scored_rows(batch);
  const int64_t B = batch.tokens.size(0), T = batch.tokens.size(1);
  require(hidden.defined() && hidden.dim() == 3 && hidden.size(0) == B && hidden.size(1) == T, kOp,
          "hidden must be (B, T, D) = (", B, ", ", T, ", D), got ",
          hidden.defined() ? hidden.sizes() : at::IntArrayRef{});
  require(weight.defined() && weight.dim() == 2 && weight.size(0) == vocab_size(), kOp,
          "the head's weight must be (vocab_size, D) = (", vocab_size(), ", D), got ",
          weight.defined() ? weight.sizes() : at::IntArrayRef{});
  const at::Tensor targets = batch.labels.reshape({-1}).index_select(0, rows);
  const at::Tensor hidden_rows = hidden.reshape({-1, hidden.size(-1)}).index_select(0, rows);
  const LinearCrossEntropy r = linear_cross_entropy(hidden_rows, weight, bias, targets);
  return {r.loss, r.correct, rows.size(0)};
}

}  // namespace posenc::nn
