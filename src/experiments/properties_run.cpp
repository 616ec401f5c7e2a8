// One run of the properties suite: pretraining, probes, fine-tuning, result.json.
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "early_stopping.h"
#include "posenc/analysis/identical_word.h"
#include "posenc/analysis/indicators.h"
#include "posenc/analysis/proximity.h"
#include "posenc/error.h"
#include "posenc/experiments/properties.h"
#include "posenc/io/atomic_file.h"
#include "posenc/training/experiment.h"
#include "properties_format.h"

namespace posenc::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
constexpr const char* kOp = "experiment";

struct SplitScore {
  double loss = 0;
  double accuracy = 0;
  int64_t count = 0;
};

// A checkpoint's mean loss and accuracy on `split`: a labelled set's rows
// (an evenly spread sample of `rows` when rows > 0: the splits are in source
// order, so their first rows are one part of speech), or `batches` masked-LM batches.
SplitScore score_checkpoint(const fs::path& checkpoint, const std::string& split, int64_t rows, int64_t batches) {
  nn::LoadedRun loaded;
  nn::TaskModel model = nn::load_task_model(checkpoint, &loaded);
  const nn::TrainConfig& c = loaded.config;
  nn::TaskOptions options = c.task_options;
  options.eval_split = split;
  options.eval_rows = rows;
  const nn::Task task = nn::Task::parse(c.task, options);
  if (task.eval_examples() > 0) batches = (task.eval_examples() + c.batch - 1) / c.batch;
  torch::NoGradGuard no_grad;
  SplitScore s;
  double loss = 0;
  int64_t correct = 0;
  for (int64_t b = 0; b < batches; ++b) {
    const nn::TaskScore t = model.score(task.batch(c.seed, nn::DataStream::kEval, b, c.batch, c.seq_len));
    loss += t.loss.item<double>() * static_cast<double>(t.count);
    correct += t.correct;
    s.count += t.count;
  }
  s.loss = loss / static_cast<double>(s.count);
  s.accuracy = static_cast<double>(correct) / static_cast<double>(s.count);
  return s;
}

Probe probe_of(const analysis::Indicators& i) { return {i.monotonicity, i.translation_invariance, i.symmetry}; }

// The dot proximity of the model's input table over positions 0 .. n-1, when it has one.
std::optional<Probe> table_probe(const fs::path& checkpoint, int64_t n) {
  nn::TaskModel model = nn::load_task_model(checkpoint);
  auto* encoder = dynamic_cast<nn::TransformerEncoderImpl*>(&model.module());
  if (encoder == nullptr || !encoder->input_encoding) return std::nullopt;
  torch::NoGradGuard no_grad;
  const at::Tensor table = encoder->input_encoding->encode_range(0, n, at::kDouble).contiguous();
  const analysis::Matrix m =
      analysis::matrix_from(std::span<const double>(table.data_ptr<double>(), static_cast<size_t>(table.numel())),
                            table.size(0), table.size(1));
  return probe_of(analysis::indicators(analysis::proximity(m, analysis::ProximityKind::kDot)));
}

json identity_of(const nn::TrainConfig& resolved) {
  json j = json::parse(nn::train_config_json(resolved));
  for (const char* volatile_field : {"threads", "posenc_version", "init_from"}) j.erase(volatile_field);
  return j;
}

// An identity with its stages' data named as the suite's layout names it: applied to the identity written and
// to the one read back (older results hold absolute paths).
json suite_relative_stages(json identity) {
  if (identity.is_object() && identity.contains("stages") && identity["stages"].is_array()) {
    for (json& stage : identity["stages"]) stage = nn::suite_relative_data(std::move(stage));
  }
  return identity;
}

// The stages' configs, resolved; the tasks' init_from is set once pretraining has its best checkpoint.
struct StageConfigs {
  nn::TrainConfig pretrain;
  std::vector<nn::TrainConfig> tasks;
};

StageConfigs stage_configs(const PropertiesRun& run, const PropertiesPlan& plan, const fs::path& corpus) {
  StageConfigs s;
  const bool rescale = plan.sinusoid_input_scale > 0 && nn::reads_input_scale(run.encoding);
  nn::TrainConfig pre = plan.pretrain;
  if (rescale) pre.encoding_config.set("input_scale", plan.sinusoid_input_scale);
  pre.encoding = run.encoding;
  pre.seed = run.seed;
  pre.task_options.data = corpus.string();
  s.pretrain = nn::resolve_train_config(pre);
  for (const std::string& name : plan.tasks) {
    const fs::path dir = corpus / "tasks" / name;
    const fs::path meta = dir / "task.json";
    std::error_code ec;
    if (!fs::exists(meta, ec)) {
      fail_runtime(kOp, "task '", name, "': ", meta.string(), " is missing (the corpus step writes it; remove ",
                   corpus.string(), " to make it again)");
    }
    std::string kind;
    int64_t seq_len = 0;
    try {
      const json j = json::parse(io::read_regular_file(kOp, meta.string()));
      kind = j.at("kind").get<std::string>();
      seq_len = j.at("seq_len").get<int64_t>();
    } catch (const json::exception&) {
      fail_runtime(kOp, meta.string(), ": not a task description (kind, seq_len)");
    }
    nn::TrainConfig c = plan.finetune;
    if (rescale) c.encoding_config.set("input_scale", plan.sinusoid_input_scale);
    c.task = kind == "span" ? "text-span" : "text-classify";
    c.encoding = run.encoding;
    c.seed = run.seed;
    c.seq_len = seq_len;
    c.task_options.data = dir.string();
    s.tasks.push_back(nn::resolve_train_config(c));
  }
  return s;
}

json plan_identity(const StageConfigs& s, const PropertiesPlan& plan) {
  json stages = json::array({identity_of(s.pretrain)});
  for (const nn::TrainConfig& c : s.tasks) stages.push_back(identity_of(c));
  return {{"stages", stages},
          {"tasks", plan.tasks},
          {"pretrain_stopping", {plan.pretrain_stopping.eval_every, plan.pretrain_stopping.patience}},
          {"finetune_stopping", {plan.finetune_stopping.eval_every, plan.finetune_stopping.patience}},
          {"pretrain_eval_batches", plan.pretrain_eval_batches},
          {"validation_rows", plan.validation_rows},
          {"probe", {plan.probe_length, plan.probe_words}}};
}

std::string first_difference(const json& stored, const json& now) {
  const json patch = json::diff(stored, now);
  return patch.empty() ? "fields" : patch[0].value("path", std::string("fields"));
}

}  // namespace

PropertiesOutcome run_properties(const PropertiesRun& run, const PropertiesPlan& plan, const fs::path& suite_dir,
                                 const PropertiesCallbacks& callbacks) {
  const fs::path corpus = suite_dir / "corpus";
  StageConfigs configs = stage_configs(run, plan, corpus);
  // The tasks' data stay loaded for the whole run (the loader shares them only while a Task holds them).
  std::vector<nn::Task> loaded = {nn::Task::parse(configs.pretrain.task, configs.pretrain.task_options)};
  for (const nn::TrainConfig& c : configs.tasks) loaded.push_back(nn::Task::parse(c.task, c.task_options));
  const json identity = suite_relative_stages(plan_identity(configs, plan));
  const fs::path dir = suite_dir / "runs" / run.name;
  const fs::path result_path = dir / "result.json";
  std::error_code ec;
  if (fs::exists(result_path, ec)) {
    json stored;
    try {
      stored = read_result(result_path);
    } catch (const std::runtime_error& e) {
      // A result that cannot be read is never mixed in: set aside, said, and the run done again.
      const fs::path aside = dir / "result.json.corrupt";
      fs::rename(result_path, aside, ec);
      if (ec) throw;
      if (callbacks.train.warning) {
        callbacks.train.warning(std::string(e.what()).substr(std::string("[experiment] ").size()) +
                                "; moved to " + aside.string() + " and running " + run.name + " again");
      }
    }
  }
  if (fs::exists(result_path, ec)) {
    const json stored = read_result(result_path);
    const json stored_identity = suite_relative_stages(stored.value("config", json()));
    if (stored_identity != identity) {
      fail_runtime(kOp, result_path.string(), " was written for another configuration (",
                   first_difference(stored_identity, identity), " differs): use another --out");
    }
    PropertiesOutcome o = outcome_from_result(stored, result_path);
    o.reused = true;
    return o;
  }
  // The probes run on the trainer's ATen thread count also when every stage was trained by an earlier
  // process: on torch 2 the probes' sums follow the count.
  at::set_num_threads(nn::aten_threads(configs.pretrain));
  PropertiesOutcome o;
  o.name = run.name;
  o.encoding = run.encoding;
  o.seed = run.seed;

  // Pretraining: masked LM, stopped on the validation loss.
  if (callbacks.stage) callbacks.stage("pretrain");
  const fs::path pre_dir = dir / "pretrain";
  const StageTraining pre = train_with_early_stopping(
      configs.pretrain, pre_dir, plan.pretrain_stopping,
      [&](const fs::path& c) { return -score_checkpoint(c, "validation", 0, plan.pretrain_eval_batches).loss; },
      callbacks.train);
  const fs::path best_pretrain = checkpoint_dir(pre_dir, pre.best_step);
  const SplitScore pre_test = score_checkpoint(best_pretrain, "test", 0, plan.pretrain_eval_batches);
  o.stages.push_back({"pretrain", pre.best_step, pre.last_step, -pre.best_score, pre_test.loss, pre_test.count,
                      pre.seconds, pre.seconds > 0 ? static_cast<double>(pre.tokens) / pre.seconds : 0.0});

  // Probes of the pretrained model.
  o.table = table_probe(best_pretrain, plan.probe_length);
  try {
    const analysis::IdenticalWordResult iwa =
        analysis::identical_word_attention(best_pretrain, {.length = plan.probe_length, .words = plan.probe_words});
    // Computed in float32: a map flat to within its rounding (no position signal, e.g. "none") has no shape
    // to read, though it passes the indicators' float64 flatness test.
    const auto [lo, hi] = std::minmax_element(iwa.attention.values.begin(), iwa.attention.values.end());
    if (*hi - *lo <= 1e-5 * std::fabs(*hi)) {
      char note[160];
      std::snprintf(note, sizeof note,
                    "the identical-word attention is flat to float32 rounding (max - min = %.3g): no position "
                    "signal, no indicators",
                    *hi - *lo);
      o.attention_note = note;
    } else {
      o.attention = probe_of(analysis::indicators(iwa.attention));
    }
  } catch (const std::invalid_argument& e) {  // a constant map (no position signal): no indicators
    o.attention_note = e.what();
  }

  // Fine-tuning, each task from the pretrained body, stopped on validation accuracy.
  for (size_t t = 0; t < plan.tasks.size(); ++t) {
    if (callbacks.stage) callbacks.stage(plan.tasks[t]);
    nn::TrainConfig c = configs.tasks[t];
    c.init_from = best_pretrain.string();
    const fs::path task_dir = dir / plan.tasks[t];
    const StageTraining r = train_with_early_stopping(
        c, task_dir, plan.finetune_stopping,
        [&](const fs::path& cp) { return score_checkpoint(cp, "validation", plan.validation_rows, 1).accuracy; },
        callbacks.train);
    const SplitScore test = score_checkpoint(checkpoint_dir(task_dir, r.best_step), "test", 0, 1);
    o.stages.push_back({plan.tasks[t], r.best_step, r.last_step, r.best_score, test.accuracy, test.count, r.seconds,
                        r.seconds > 0 ? static_cast<double>(r.tokens) / r.seconds : 0.0});
  }
  io::write_file_atomically(kOp, result_path.string(), result_text(o, run.order, identity));
  return o;
}

}  // namespace posenc::experiments
