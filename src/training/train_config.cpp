// A run's configuration: resolving and validating it, its learning-rate
// schedule, config.json (written and read back), and the fields a checkpoint
// must match to be resumed (run_identity.h).
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/training/trainer.h"
#include "run_identity.h"

#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif

namespace posenc::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kOp = "train";
// The attention path of runs whose config.json predates the "attention" field.
constexpr const char* kOldAttention = "composed";

// A family's setting as config.json stores it: an integer field as an integer.
json parameter_json(const EncodingParameter& p, const EncodingConfig& e) {
  if (p.integral) return static_cast<int64_t>(p.value(e));
  return p.value(e);
}

// The training option called key, or null when no family has it.
const EncodingParameter* training_option(const std::string& key) {
  const EncodingParameter* p = find_encoding_parameter(key);
  return p != nullptr && p->training_option ? p : nullptr;
}

// "'rope'" for strings, the JSON number otherwise.
// (Appended, not `"'" + string&&`: GCC 12 warns falsely on that form, -Wrestrict.)
std::string show(const json& v) {
  if (!v.is_string()) return v.dump();
  std::string quoted = "'";
  quoted += v.get_ref<const std::string&>();
  quoted += '\'';
  return quoted;
}

template <class T>
T field(const json& j, const char* key, const std::string& source) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    fail_runtime("checkpoint", source, ": missing or invalid field '", key, "'");
  }
}

}  // namespace

namespace detail {

ordered_json trajectory_fields(const TrainConfig& c) {
  const EncodingConfig& e = c.encoding_config;
  ordered_json out{{"task", c.task},
                      {"encoding", c.encoding},
                      {"vocab_size", c.task_options.vocab_size},
                      {"lookback", c.task_options.lookback},
                      {"max_span", c.task_options.max_span},
                      {"data", c.task_options.data},
                      {"layers", c.layers},
                      {"dim", c.dim},
                      {"heads", c.heads},
                      {"seq_len", c.seq_len},
                      {"batch", c.batch},
                      {"max_positions", c.max_positions},
                      {"lr", c.lr},
                      {"warmup", c.warmup},
                      {"weight_decay", c.weight_decay},
                      {"clip", c.clip},
                      {"dropout", c.dropout},
                      {"attention", c.attention},
                      {"seed", c.seed},
                      {"random_positions", c.random_positions},
                      {"layer_encodings", c.layer_encodings}};
  for (const EncodingParameter* p : encoding_training_options()) out[p->name] = parameter_json(*p, e);
  out["init_from"] = c.init_from;
  return out;
}

// Refuses a checkpoint of another configuration; warns about steps / threads.
void check_same_run(const json& saved, const TrainConfig& config, const fs::path& dir,
                    std::vector<std::string>* warnings) {
  const ordered_json now = trajectory_fields(config);
  const json& fields = saved.at("config");
  for (const auto& [key, value] : now.items()) {
    // A field missing from an older checkpoint reads as the value that run had.
    const EncodingParameter* option = training_option(key);
    const json theirs = fields.contains(key)   ? fields.at(key)
                        : key == "attention"   ? json(kOldAttention)
                        : key == "init_from"   ? json("")  // checkpoints from before fine-tuning existed
                        : key == "random_positions" ? json(0)  // ... before randomized positions
                        : key == "layer_encodings" ? json("")  // ... before per-layer encodings
                        : option != nullptr    ? parameter_json(*option, EncodingConfig{})  // before the family
                                               : json();
    if (json(value) != theirs) {
      fail_runtime("checkpoint", dir.string(), " was written for ", key, " ", show(theirs), ", this run uses ",
                   show(json(value)));
    }
  }
  if (warnings == nullptr) return;
  const int64_t steps = saved.at("steps").get<int64_t>(), threads = saved.at("threads").get<int64_t>();
  if (steps != config.steps) {
    warnings->push_back("checkpoint " + dir.filename().string() + " was written for a run of " +
                        std::to_string(steps) + " steps, this run has " + std::to_string(config.steps) +
                        ": the learning-rate schedule changes");
  }
  if (threads != config.threads) {
    warnings->push_back("checkpoint " + dir.filename().string() + " was written with " + std::to_string(threads) +
                        " threads, this run uses " + std::to_string(config.threads) +
                        ": results will not be bit-identical to an uninterrupted run");
  }
}

}  // namespace detail

// ------------------------------------------------------------ config

TrainConfig resolve_train_config(const TrainConfig& config) {
  TrainConfig c = config;
  if (!c.task_options.data.empty()) {
    // Absolute, so that a run's config.json still finds its data from another directory.
    c.task_options.data = std::filesystem::absolute(c.task_options.data).lexically_normal().string();
  }
  if (!c.init_from.empty()) c.init_from = std::filesystem::absolute(c.init_from).lexically_normal().string();
  const Task task = Task::parse(c.task, c.task_options);
  c.task_options.vocab_size = task.vocab_size();  // text: 0 becomes the data's
  require(c.layers >= 1, kOp, "layers must be >= 1, got ", c.layers);
  require(c.dim >= 1, kOp, "dim must be >= 1, got ", c.dim);
  require(c.heads >= 1, kOp, "heads must be >= 1, got ", c.heads);
  require(c.seq_len >= task.min_seq_len(), kOp, "seq_len must be >= ", task.min_seq_len(), " for task '", c.task,
          "', got ", c.seq_len);
  if (task.fixed_seq_len() > 0) {
    require(c.seq_len == task.fixed_seq_len(), kOp, "seq_len must be the data's row width (", task.fixed_seq_len(),
            ") for task '", c.task, "', got ", c.seq_len);
  }
  require(c.batch >= 1, kOp, "batch must be >= 1, got ", c.batch);
  require(c.steps >= 1, kOp, "steps must be >= 1, got ", c.steps);
  require(std::isfinite(c.lr) && c.lr > 0, kOp, "lr must be finite and > 0, got ", c.lr);
  require(c.warmup >= 0, kOp, "warmup must be >= 0, got ", c.warmup);
  require(std::isfinite(c.weight_decay) && c.weight_decay >= 0, kOp, "weight_decay must be finite and >= 0, got ",
          c.weight_decay);
  require(std::isfinite(c.clip) && c.clip >= 0, kOp, "clip must be finite and >= 0 (0: no clipping), got ", c.clip);
  require(c.threads >= 1, kOp, "threads must be >= 1, got ", c.threads);
  require(c.checkpoint_every >= 1, kOp, "checkpoint_every must be >= 1, got ", c.checkpoint_every);
  require(c.keep_checkpoints >= 1, kOp, "keep_checkpoints must be >= 1, got ", c.keep_checkpoints);
  require(c.log_every >= 1, kOp, "log_every must be >= 1, got ", c.log_every);
  require(c.dropout >= 0 && c.dropout < 1, kOp, "dropout must be in [0, 1), got ", c.dropout);
  require(c.attention == "fused" || c.attention == "composed", kOp, "attention must be 'fused' or 'composed', got '",
          c.attention, "'");
  require(c.random_positions == 0 || c.random_positions >= c.seq_len, kOp,
          "random_positions must be 0 (off) or >= seq_len (", c.seq_len, "), got ", c.random_positions);
  if (c.max_positions == 0) c.max_positions = std::max(c.seq_len, c.random_positions);
  require(c.max_positions >= c.seq_len, kOp, "max_positions must be >= seq_len (", c.seq_len, "), got ",
          c.max_positions);
  EncodingConfig& e = c.encoding_config;
  e.dim = c.dim;
  e.num_heads = c.heads;
  e.max_positions = c.max_positions;
  e.causal = task.model() == ModelKind::kDecoder;
  const EncodingPlan plan = parse_encoding(c.encoding);
  validate_encoding(plan, e);
  const std::vector<std::string> every_part = validate_layer_encodings(plan, e, layer_encoding_list(c));
  if (c.random_positions > 0) {
    require(reads_absolute_positions(every_part), kOp, "random_positions needs an input or query/key encoding (absolute or rotary), got '",
            c.encoding, "'");
    const bool table = std::find(plan.parts.begin(), plan.parts.end(), "learned") != plan.parts.end();
    require(!table || c.max_positions >= c.random_positions, kOp, "random_positions ", c.random_positions,
            " needs max_positions >= ", c.random_positions, " (rows of the learned table), got ", c.max_positions);
  }
  return c;
}

std::vector<std::string> layer_encoding_list(const TrainConfig& config) {
  std::vector<std::string> out;
  const std::string& text = config.layer_encodings;
  size_t start = 0;
  while (!text.empty()) {
    const size_t end = text.find(',', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    require(!out.back().empty(), kOp, "layer_encodings has an empty entry in '", text, "'");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

int aten_threads(const TrainConfig& c) { return c.threads > 1 ? 1 : static_cast<int>(c.threads); }

double learning_rate(const TrainConfig& c, int64_t step) {
  const double s = static_cast<double>(step);
  if (step <= c.warmup) return c.lr * s / static_cast<double>(c.warmup);
  if (c.steps <= c.warmup) return 0.0;  // past the end of a warmup-only schedule
  const double progress = std::min(1.0, (s - static_cast<double>(c.warmup)) / static_cast<double>(c.steps - c.warmup));
  return c.lr * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

std::string train_config_json(const TrainConfig& c) {
  const EncodingConfig& e = c.encoding_config;
  ordered_json j;
  j["posenc_version"] = POSENC_VERSION;
  j["task"] = c.task;
  j["model"] = Task::parse(c.task, c.task_options).model() == ModelKind::kEncoder ? "encoder" : "decoder";
  j["task_options"] = ordered_json{{"vocab_size", c.task_options.vocab_size},
                                   {"lookback", c.task_options.lookback},
                                   {"max_span", c.task_options.max_span}};
  if (!c.task_options.data.empty()) {
    j["task_options"]["data"] = c.task_options.data;
    j["task_options"]["eval_split"] = c.task_options.eval_split;
  }
  j["encoding"] = c.encoding;
  j["encoding_parts"] = parse_encoding(c.encoding).parts;
  j["encoding_parameters"] = ordered_json::object();
  for (const EncodingParameter* p : encoding_training_options()) j["encoding_parameters"][p->name] = parameter_json(*p, e);
  j["layers"] = c.layers;
  j["dim"] = c.dim;
  j["heads"] = c.heads;
  j["seq_len"] = c.seq_len;
  j["batch"] = c.batch;
  j["steps"] = c.steps;
  j["lr"] = c.lr;
  j["warmup"] = c.warmup;
  j["weight_decay"] = c.weight_decay;
  j["clip"] = c.clip;
  j["seed"] = c.seed;
  j["threads"] = c.threads;
  j["checkpoint_every"] = c.checkpoint_every;
  j["keep_checkpoints"] = c.keep_checkpoints;
  j["log_every"] = c.log_every;
  j["dropout"] = c.dropout;
  j["max_positions"] = c.max_positions;
  j["random_positions"] = c.random_positions;
  j["layer_encodings"] = c.layer_encodings;
  j["attention"] = c.attention;
  if (!c.init_from.empty()) j["init_from"] = c.init_from;
  return j.dump(2) + "\n";
}

TrainConfig train_config_from_json(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    fail_runtime("checkpoint", source, " is not valid JSON");
  }
  TrainConfig c;
  c.task = field<std::string>(j, "task", source);
  const json options = field<json>(j, "task_options", source);
  c.task_options.vocab_size = field<int64_t>(options, "vocab_size", source);
  c.task_options.lookback = field<int64_t>(options, "lookback", source);
  c.task_options.max_span = field<int64_t>(options, "max_span", source);
  if (options.contains("data")) c.task_options.data = field<std::string>(options, "data", source);
  if (options.contains("eval_split")) c.task_options.eval_split = field<std::string>(options, "eval_split", source);
  c.encoding = field<std::string>(j, "encoding", source);
  const json p = field<json>(j, "encoding_parameters", source);
  // A setting missing from the file keeps its default: the file predates the family that reads it.
  for (const EncodingParameter* option : encoding_training_options()) {
    if (!p.contains(option->name)) continue;
    const double value = option->integral ? static_cast<double>(field<int64_t>(p, option->name.c_str(), source))
                                          : field<double>(p, option->name.c_str(), source);
    option->set(c.encoding_config, value);
  }
  c.layers = field<int64_t>(j, "layers", source);
  c.dim = field<int64_t>(j, "dim", source);
  c.heads = field<int64_t>(j, "heads", source);
  c.seq_len = field<int64_t>(j, "seq_len", source);
  c.batch = field<int64_t>(j, "batch", source);
  c.steps = field<int64_t>(j, "steps", source);
  c.lr = field<double>(j, "lr", source);
  c.warmup = field<int64_t>(j, "warmup", source);
  c.weight_decay = field<double>(j, "weight_decay", source);
  c.clip = field<double>(j, "clip", source);
  c.seed = field<uint64_t>(j, "seed", source);
  c.threads = field<int64_t>(j, "threads", source);
  c.checkpoint_every = field<int64_t>(j, "checkpoint_every", source);
  c.keep_checkpoints = field<int64_t>(j, "keep_checkpoints", source);
  c.log_every = field<int64_t>(j, "log_every", source);
  c.dropout = field<double>(j, "dropout", source);
  c.max_positions = field<int64_t>(j, "max_positions", source);
  if (j.contains("random_positions")) c.random_positions = field<int64_t>(j, "random_positions", source);
  if (j.contains("layer_encodings")) c.layer_encodings = field<std::string>(j, "layer_encodings", source);
  c.attention = j.contains("attention") ? field<std::string>(j, "attention", source) : kOldAttention;
  if (j.contains("init_from")) c.init_from = field<std::string>(j, "init_from", source);
  return c;
}

}  // namespace posenc::nn
