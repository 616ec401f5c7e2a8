#include "properties_format.h"

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"
#include "posenc/kernels/build_info.h"
#include "posenc/nn/runtime_info.h"
#include "posenc/training/experiment.h"

#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif

namespace posenc::experiments {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
constexpr const char* kOp = "experiment";

ordered_json probe_json(const std::optional<Probe>& p) {
  if (!p) return nullptr;
  return {{"monotonicity", p->monotonicity},
          {"translation_invariance", p->translation_invariance},
          {"symmetry", p->symmetry}};
}

std::optional<Probe> probe_from(const json& j) {
  if (j.is_null()) return std::nullopt;
  return Probe{j.at("monotonicity").get<double>(), j.at("translation_invariance").get<double>(),
               j.at("symmetry").get<double>()};
}

}  // namespace

void check_result_format(const json& j, const std::filesystem::path& path) {
  if (!j.is_object() || j.value("format", "") != kPropertiesResultFormat) {
    fail_runtime(kOp, path.string(), ": not a properties run result (format ", kPropertiesResultFormat, ")");
  }
}

json read_result(const std::filesystem::path& path) {
  json j = nn::read_experiment_json(path);
  check_result_format(j, path);
  return j;
}

PropertiesOutcome outcome_from_result(const json& j, const std::filesystem::path& path) {
  try {
    PropertiesOutcome o;
    o.name = j.at("name").get<std::string>();
    o.encoding = j.at("encoding").get<std::string>();
    o.seed = j.at("seed").get<uint64_t>();
    for (const json& s : j.at("stages")) {
      o.stages.push_back({s.at("stage").get<std::string>(), s.at("best_step").get<int64_t>(),
                          s.at("last_step").get<int64_t>(), s.at("validation").get<double>(),
                          s.at("test").get<double>(), s.at("test_count").get<int64_t>(), s.at("seconds").get<double>(),
                          s.at("tokens_per_second").get<double>()});
    }
    if (o.stages.empty()) fail_runtime(kOp, path.string(), ": not a properties run result (no stages)");
    o.table = probe_from(j.at("probes").at("table"));
    o.attention = probe_from(j.at("probes").at("identical_word_attention"));
    o.attention_note = j.at("probes").value("identical_word_attention_note", "");
    return o;
  } catch (const json::exception& e) {
    fail_runtime(kOp, path.string(), ": not a properties run result (", e.what(), ")");
  }
}

std::string result_text(const PropertiesOutcome& o, int64_t order, const json& identity) {
  ordered_json j;
  j["format"] = kPropertiesResultFormat;
  j["suite"] = "properties";
  j["name"] = o.name;
  j["order"] = order;
  j["encoding"] = o.encoding;
  j["seed"] = o.seed;
  j["posenc_version"] = POSENC_VERSION;
  j["git_revision"] = std::string(kernels::git_revision());
  j["blas"] = nn::blas_info().summary();  // a run's bits depend on the BLAS kernels too
  ordered_json stages = ordered_json::array();
  for (const StageOutcome& s : o.stages) {
    // Pretraining's scores are masked-LM losses (perplexity exp(loss)); the tasks', accuracies.
    stages.push_back({{"stage", s.stage},
                      {"metric", s.stage == "pretrain" ? "masked-LM loss" : "accuracy"},
                      {"best_step", s.best_step},
                      {"last_step", s.last_step},
                      {"validation", s.validation},
                      {"test", s.test},
                      {"test_count", s.test_count},
                      {"seconds", s.seconds},
                      {"tokens_per_second", s.tokens_per_second}});
  }
  j["stages"] = stages;
  j["probes"] = {{"table", probe_json(o.table)}, {"identical_word_attention", probe_json(o.attention)}};
  if (!o.attention_note.empty()) j["probes"]["identical_word_attention_note"] = o.attention_note;
  j["config"] = identity;
  return j.dump(2) + "\n";
}

}  // namespace posenc::experiments
