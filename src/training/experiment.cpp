#include "posenc/training/experiment.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <system_error>
#include <tuple>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/kernels/build_info.h"
#include "posenc/nn/runtime_info.h"
#include "posenc/training/throughput_record.h"

namespace posenc::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kOp = "experiment";
constexpr const char* kResultFormat = "posenc-experiment-run-1";

// The configuration a result belongs to: the run's config.json text, minus
// the fields that may change between an interrupted and a resumed process.
json identity_of(const TrainConfig& c) {
  json j = json::parse(train_config_json(c));
  j.erase("threads");
  j.erase("posenc_version");
  return j;
}

// The first field whose value differs, for the refusal message.
std::string first_difference(const json& stored, const json& now) {
  for (const auto& [key, value] : now.items()) {
    if (!stored.contains(key)) return key + " (absent there)";
    if (stored[key] != value) return key + " " + stored[key].dump() + ", here " + value.dump();
  }
  return "fields";
}

std::vector<EvalLength> lengths_from(const json& rows) {
  std::vector<EvalLength> out;
  for (const json& l : rows) {
    EvalLength e;
    e.seq_len = l.at("seq_len").get<int64_t>();
    if (l.contains("error")) {
      e.error = l.at("error").get<std::string>();
    } else {
      e.loss = l.at("loss").get<double>();
      e.accuracy = l.at("accuracy").get<double>();
      e.count = l.at("count").get<int64_t>();
    }
    out.push_back(e);
  }
  return out;
}

ordered_json lengths_json(const std::vector<EvalLength>& lengths) {
  ordered_json rows = ordered_json::array();
  for (const EvalLength& l : lengths) {
    if (l.error.empty()) {
      rows.push_back({{"seq_len", l.seq_len}, {"loss", l.loss}, {"perplexity", std::exp(l.loss)},
                      {"accuracy", l.accuracy}, {"count", l.count}});
    } else {
      rows.push_back({{"seq_len", l.seq_len}, {"error", l.error}});
    }
  }
  return rows;
}

RunOutcome outcome_from(const json& j, const fs::path& path) {
  try {
    RunOutcome o;
    o.name = j.at("name").get<std::string>();
    o.encoding = j.at("encoding").get<std::string>();
    o.seed = j.at("seed").get<uint64_t>();
    o.train_seconds = j.at("train_seconds").get<double>();
    o.tokens_per_second = j.at("tokens_per_second").get<double>();
    o.lengths = lengths_from(j.at("lengths"));
    if (j.contains("extensions")) {
      for (const json& e : j.at("extensions")) {
        o.extensions.emplace_back(e.at("type").get<std::string>(), lengths_from(e.at("lengths")));
      }
    }
    o.reused = true;
    return o;
  } catch (const json::exception& e) {
    fail_runtime(kOp, path.string(), ": not a run result (", e.what(), ")");
  }
}

}  // namespace

json suite_relative_data(json config) {
  if (!config.is_object() || !config.contains("task_options") || !config["task_options"].is_object()) return config;
  json& options = config["task_options"];
  if (!options.contains("data") || !options["data"].is_string()) return config;
  std::vector<std::string> parts;
  for (const fs::path& part : fs::path(options["data"].get<std::string>()).lexically_normal()) {
    if (!part.empty()) parts.push_back(part.string());
  }
  const size_t n = parts.size();
  if (n >= 1 && parts[n - 1] == "corpus") {
    options["data"] = "corpus";
  } else if (n >= 3 && parts[n - 3] == "corpus" && parts[n - 2] == "tasks") {
    options["data"] = "corpus/tasks/" + parts[n - 1];
  }
  return config;
}

json read_experiment_json(const fs::path& path) {
  try {
    return json::parse(io::read_regular_file(kOp, path.string()));
  } catch (const json::exception&) {
    fail_runtime(kOp, path.string(), ": not valid JSON");
  }
}

std::vector<StoredResult> read_run_results(const fs::path& suite_dir) {
  std::error_code ec;
  const fs::path runs = suite_dir / "runs";
  if (!fs::is_directory(runs, ec)) fail_runtime(kOp, suite_dir.string(), ": no runs/ directory: not an experiment");
  std::vector<std::pair<int64_t, StoredResult>> found;
  for (const auto& entry : fs::directory_iterator(runs, ec)) {
    const fs::path r = entry.path() / "result.json";
    if (!fs::exists(r, ec)) continue;
    json j = read_experiment_json(r);
    const int64_t order = j.is_object() ? j.value("order", int64_t{0}) : 0;
    found.push_back({order, {r, std::move(j)}});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first, a.second.path) < std::tie(b.first, b.second.path);
  });
  std::vector<StoredResult> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<std::string> with_every_family(std::vector<std::string> listed, const TrainConfig& model,
                                           const std::vector<std::string>& skipped) {
  for (const EncodingFamily& info : encoding_families()) {
    if (std::find(listed.begin(), listed.end(), info.name) != listed.end()) continue;
    if (std::find(skipped.begin(), skipped.end(), info.name) != skipped.end()) continue;
    TrainConfig c = model;
    c.encoding = info.name;
    EncodingConfig& e = c.encoding_config;
    e.dim = c.dim;
    e.num_heads = c.heads;
    e.max_positions = c.max_positions > 0 ? c.max_positions : c.seq_len;
    e.causal = c.task == "text" || c.task == "lookback" || c.task == "copy";
    try {
      validate_encoding(parse_encoding(info.name), e);
    } catch (const std::exception&) {
      continue;  // a family this model cannot take (e.g. one that needs a causal model)
    }
    listed.push_back(info.name);
  }
  return listed;
}

ExtrapolationPlan extrapolation_plan(bool quick) {
  ExtrapolationPlan p;
  TrainConfig& c = p.train;
  c.task = "text";
  c.task_options.vocab_size = 0;  // the data's
  c.task_options.eval_split = "test";
  c.attention = "fused";
  // Sinusoids at the scale the token embeddings reach in this suite's 1000 steps (rms 0.03 from 0.02; each
  // component's mean square here 0.02^2). The properties suite's 0.2 * sqrt(2), fit for its 6000 steps of
  // masked LM, swamps them here: seed 0's test perplexity 206 at 128 against 150 (docs/experiments.md).
  c.encoding_config.set("input_scale", 0.02 * std::sqrt(2.0));
  if (quick) {
    p.encodings = {"none", "learned", "rope", "alibi"};
    p.seeds = 1;
    p.lengths = {32, 64};
    p.eval_batches = 2;
    p.rope_extensions = {"linear", "yarn"};
    c.layers = 1, c.dim = 32, c.heads = 2, c.seq_len = 32, c.batch = 8, c.steps = 20, c.warmup = 5;
    c.lr = 3e-3, c.checkpoint_every = 10, c.log_every = 10;
  } else {
    // The list, then every family added since (Wang et al.'s variants are the properties suite's).
    // nope is none in a decoder, the same model bit for bit: run once, as none.
    c.layers = 2, c.dim = 128, c.heads = 4, c.seq_len = 128;
    p.encodings = with_every_family({"none", "sinusoidal", "learned", "rope", "rope-xpos", "alibi", "t5", "shaw", "xl"},
                                    c, {"learnable-sinusoidal", "shaw-sinusoidal", "shaw-learnable-sinusoidal", "nope"});
    p.seeds = 3;
    p.lengths = {128, 256, 512, 1024, 2048};
    p.eval_batches = 8;
    p.rope_extensions = {"linear", "ntk", "dynamic", "yarn"};
    c.layers = 2, c.dim = 128, c.heads = 4, c.seq_len = 128, c.batch = 16, c.steps = 1000, c.warmup = 100;
    c.lr = 1e-3, c.checkpoint_every = 250, c.log_every = 50;
  }
  return p;
}

bool reads_input_scale(const std::string& encoding) {
  for (const std::string& part : parse_encoding(encoding).parts) {
    for (const EncodingParameter& p : find_encoding_family(part)->parameters) {
      if (p.name == "input_scale") return true;
    }
  }
  return false;
}

std::vector<ExperimentRun> plan_runs(const ExtrapolationPlan& plan) {
  require(plan.seeds >= 1, kOp, "seeds must be >= 1, got ", plan.seeds);
  require(!plan.encodings.empty(), kOp, "encodings must name at least one encoding, got none");
  require(!plan.lengths.empty(), kOp, "lengths must hold at least one length, got none");
  for (int64_t l : plan.lengths) require(l >= 1, kOp, "lengths must be >= 1, got ", l);
  require(plan.eval_batches >= 1, kOp, "eval_batches must be >= 1, got ", plan.eval_batches);
  for (const std::string& e : plan.encodings) parse_encoding(e);  // the registry's message, before any work
  std::vector<ExperimentRun> runs;
  for (const std::string& encoding : plan.encodings) {
    for (int64_t s = 0; s < plan.seeds; ++s) {
      ExperimentRun r;
      r.order = static_cast<int64_t>(runs.size());
      r.name = encoding + "-s" + std::to_string(s);
      r.config = plan.train;
      r.config.encoding = encoding;
      r.config.seed = static_cast<uint64_t>(s);
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

RunOutcome run_experiment(const ExperimentRun& run, const fs::path& suite_dir, const std::vector<int64_t>& lengths,
                          int64_t eval_batches, const std::vector<std::string>& rope_extensions,
                          const TrainCallbacks& callbacks) {
  const TrainConfig config = resolve_train_config(run.config);
  const fs::path dir = suite_dir / "runs" / run.name;
  const fs::path result_path = dir / "result.json";
  const json identity = suite_relative_data(identity_of(config));
  // Only a plain "rope" model is evaluated with the extensions (they scale its one rotary part).
  const std::vector<std::string> extensions = config.encoding == "rope" ? rope_extensions : std::vector<std::string>{};
  std::error_code ec;
  if (fs::exists(result_path, ec)) {
    try {
      read_experiment_json(result_path);
    } catch (const std::runtime_error&) {
      // A result that cannot be read is never mixed in: set aside, said, and the run done again.
      const fs::path aside = dir / "result.json.corrupt";
      fs::rename(result_path, aside, ec);
      if (ec) throw;
      if (callbacks.warning) {
        callbacks.warning(result_path.string() + ": not valid JSON; moved to " + aside.string() + " and running " +
                          run.name + " again");
      }
    }
  }
  if (fs::exists(result_path, ec)) {
    const json stored = read_experiment_json(result_path);
    if (!stored.is_object() || stored.value("format", "") != kResultFormat || !stored.contains("config")) {
      fail_runtime(kOp, result_path.string(), ": not a run result of this posenc (format ", kResultFormat, ")");
    }
    const json stored_extensions = stored.value("extensions_asked", json::array());
    const json stored_identity = suite_relative_data(stored["config"]);
    if (stored_identity != identity || stored.value("lengths_asked", json()) != json(lengths) ||
        stored_extensions != json(extensions)) {
      fail_runtime(kOp, result_path.string(), " was written for another configuration (",
                   stored_identity != identity                              ? first_difference(stored_identity, identity)
                   : stored.value("lengths_asked", json()) != json(lengths) ? std::string("other lengths")
                                                                            : std::string("other rope extensions"),
                   "): use another --out");
    }
    return outcome_from(stored, result_path);
  }
  fs::create_directories(dir, ec);
  if (ec) fail_runtime(kOp, dir.string(), ": cannot create the run directory: ", ec.message());
  // Resume only what an earlier process started (a fresh directory would warn that it has no checkpoint).
  const bool started = fs::exists(dir / "metrics.jsonl", ec) || fs::exists(dir / "checkpoints", ec);
  train(config, dir, {.resume = started}, callbacks);
  const EvalReport report = evaluate(dir, lengths, eval_batches);
  // Every process's training, not only this one's (a resumed run).
  const RecordedTraining trained = recorded_training(dir, config.steps, config.batch * config.seq_len);

  RunOutcome o;
  o.name = run.name;
  o.encoding = config.encoding;
  o.seed = config.seed;
  o.train_seconds = trained.seconds;
  o.tokens_per_second =
      trained.seconds > 0 ? static_cast<double>(trained.steps * config.batch * config.seq_len) / trained.seconds : 0.0;
  o.lengths = report.lengths;
  for (const std::string& type : extensions) {
    o.extensions.emplace_back(type, evaluate(dir, lengths, eval_batches, {}, RopeExtension{type, std::nullopt}).lengths);
  }
  ordered_json j;
  j["format"] = kResultFormat;
  j["name"] = o.name;
  j["order"] = run.order;
  j["encoding"] = o.encoding;
  j["seed"] = o.seed;
  j["git_revision"] = std::string(kernels::git_revision());
  j["blas"] = blas_info().summary();  // a run's bits depend on the BLAS kernels too
  j["train_seconds"] = o.train_seconds;
  j["tokens_per_second"] = o.tokens_per_second;
  j["checkpoint_step"] = report.step;
  j["lengths_asked"] = lengths;
  j["extensions_asked"] = extensions;
  j["lengths"] = lengths_json(o.lengths);
  ordered_json scaled = ordered_json::array();
  for (const auto& [type, rows] : o.extensions) scaled.push_back({{"type", type}, {"lengths", lengths_json(rows)}});
  j["extensions"] = scaled;
  j["config"] = identity;
  io::write_file_atomically(kOp, result_path.string(), j.dump(2) + "\n");
  return o;
}

SuiteSummary summarize_experiment(const fs::path& suite_dir) {
  SuiteSummary s;
  // Each result once, in the plan's order, so the table lists encodings as the suite does.
  const std::vector<StoredResult> results = read_run_results(suite_dir);
  // encoding -> seq_len -> (perplexities, first error); encodings in first-seen order of the plan names.
  std::vector<std::string> order;
  std::map<std::string, std::map<int64_t, std::pair<std::vector<std::pair<uint64_t, double>>, std::string>>> cells;
  for (const StoredResult& stored : results) {
    const json& j = stored.json;
    const RunOutcome o = outcome_from(j, stored.path);
    if (s.runs == 0 && j.contains("config")) s.train_seq_len = j["config"].value("seq_len", int64_t{0});
    ++s.runs;
    std::vector<std::pair<std::string, const std::vector<EvalLength>*>> rows = {{o.encoding, &o.lengths}};
    for (const auto& [type, lengths] : o.extensions) rows.emplace_back(o.encoding + "+" + type, &lengths);
    for (const auto& [name, lengths] : rows) {
      if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
      for (const EvalLength& l : *lengths) {
        if (std::find(s.lengths.begin(), s.lengths.end(), l.seq_len) == s.lengths.end()) s.lengths.push_back(l.seq_len);
        auto& cell = cells[name][l.seq_len];
        if (l.error.empty()) {
          cell.first.emplace_back(o.seed, l.loss);
        } else if (cell.second.empty()) {
          cell.second = l.error;
        }
      }
    }
  }
  std::sort(s.lengths.begin(), s.lengths.end());
  for (const std::string& encoding : order) {
    SummaryRow row;
    row.encoding = encoding;
    for (int64_t L : s.lengths) {
      SummaryCell c;
      c.seq_len = L;
      auto& [losses, error] = cells[encoding][L];
      c.error = error;
      // A length where some seed could not be evaluated is not applicable as a whole.
      if (error.empty() && !losses.empty()) {
        std::sort(losses.begin(), losses.end());
        c.seed_losses = losses;
        std::vector<double> values;
        for (const auto& [seed, loss] : losses) values.push_back(std::exp(loss));
        c.seeds = static_cast<int64_t>(values.size());
        double sum = 0;
        for (double v : values) sum += v;
        c.mean = sum / static_cast<double>(values.size());
        double sq = 0;
        for (double v : values) sq += (v - c.mean) * (v - c.mean);
        c.sd = values.size() > 1 ? std::sqrt(sq / static_cast<double>(values.size() - 1)) : 0.0;
      }
      row.cells.push_back(c);
    }
    s.rows.push_back(std::move(row));
  }
  return s;
}

std::string summary_json(const SuiteSummary& s) {
  ordered_json j;
  j["suite"] = s.suite;
  j["train_seq_len"] = s.train_seq_len;
  j["runs"] = s.runs;
  j["lengths"] = s.lengths;
  ordered_json rows = ordered_json::array();
  for (const SummaryRow& r : s.rows) {
    ordered_json cells = ordered_json::array();
    for (const SummaryCell& c : r.cells) {
      if (c.seeds > 0) {
        cells.push_back({{"seq_len", c.seq_len}, {"perplexity_mean", c.mean}, {"perplexity_sd", c.sd},
                         {"seeds", c.seeds}});
      } else {
        cells.push_back({{"seq_len", c.seq_len}, {"not_applicable", c.error.empty() ? "no result" : c.error}});
      }
    }
    rows.push_back({{"encoding", r.encoding}, {"test_perplexity", cells}});
  }
  j["rows"] = rows;
  return j.dump(2) + "\n";
}

}  // namespace posenc::nn
