#include "eval_command.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "posenc/error.h"
#include "posenc/training/trainer.h"

namespace posenc::cli {
namespace {

// Evaluations estimated to take longer are refused unless --max-time or --force allows them.
constexpr double kDefaultMaxSeconds = 3600;

}  // namespace

EvalCommand::EvalCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("eval", "Evaluate a trained model at several sequence lengths");
  app_->footer(
      "DIR is a `posenc train --out` directory (its newest valid checkpoint is used) or one of its "
      "checkpoints/step-NNNNNNNN directories. Batches are fresh, drawn from the run's seed on an evaluation "
      "stream. Default lengths: the training length x1, x2, x4.");
  app_->add_option("--checkpoint", checkpoint_, "Run or checkpoint directory")->required();
  app_->add_option("--lengths", lengths_, "Sequence lengths, comma separated, e.g. 64,128,256")->delimiter(',');
  app_->add_option("--batches", batches_, "Batches per length (of the training batch size)")->capture_default_str();
  app_->add_option("--rope-scaling", rope_scaling_,
                   "Evaluate a rope run with a context extension: linear, ntk, dynamic or yarn (docs/rope.md)");
  rope_factor_opt_ = app_->add_option("--rope-factor", rope_factor_,
                                      "Its scale factor (default: the longest length / the training length)");
  app_->add_flag("--json", json_, "Print one JSON object instead of a table");
  resources_.add(*app_);
  resources_.add_time_bound(*app_, kDefaultMaxSeconds);
}

int EvalCommand::run() const {
  ProgressLine progress("eval");
  nn::EvalCallbacks callbacks;
  callbacks.before = [this](const nn::EvalCost& cost) {
    resources_.check("eval", cost.bytes, cost.multiply_adds, cost.largest, kModelRate);
  };
  callbacks.progress = [&progress](int64_t seq_len, double done) {
    progress.update("seq_len " + std::to_string(seq_len), done);
  };
  std::optional<nn::RopeExtension> extension;
  if (!rope_scaling_.empty()) {
    extension = nn::RopeExtension{rope_scaling_, std::nullopt};
    if (rope_factor_opt_->count() > 0) extension->factor = rope_factor_;
  } else if (rope_factor_opt_->count() > 0) {
    fail_argument("eval", "--rope-factor needs --rope-scaling");
  }
  const nn::EvalReport report = nn::evaluate(checkpoint_, lengths_, batches_, callbacks, extension);
  progress.finish();
  for (const std::string& w : report.warnings) std::cerr << "posenc: warning: " << w << '\n';
  const nn::TrainConfig& c = report.config;
  const nn::Task task = nn::Task::parse(c.task, c.task_options);
  // A language model on text, causal or masked: exp(loss) per scored token.
  const bool perplexity = task.kind() == nn::TaskKind::kText || task.kind() == nn::TaskKind::kMaskedLm;
  if (json_) {
    nlohmann::ordered_json out{{"checkpoint", report.checkpoint.string()},
                               {"step", report.step},
                               {"task", c.task},
                               {"encoding", c.encoding},
                               {"train_seq_len", c.seq_len},
                               {"metric", task.metric()}};
    if (report.rope_scaling) {
      const kernels::RopeScaling& s = *report.rope_scaling;
      out["rope_scaling"] = {{"rope_type", std::string(kernels::rope_type_name(s.type))}, {"factor", *s.factor}};
      if (s.original_max_position_embeddings) {
        out["rope_scaling"]["original_max_position_embeddings"] = *s.original_max_position_embeddings;
      }
    }
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const nn::EvalLength& r : report.lengths) {
      if (r.error.empty()) {
        rows.push_back({{"seq_len", r.seq_len}, {"loss", r.loss}, {"accuracy", r.accuracy}, {"count", r.count}});
        if (perplexity) rows.back()["perplexity"] = std::exp(r.loss);
      } else {
        rows.push_back({{"seq_len", r.seq_len}, {"error", r.error}});
      }
    }
    out["lengths"] = std::move(rows);
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << "checkpoint " << report.checkpoint.string() << ": " << c.task << " with " << c.encoding
              << ", trained at seq_len " << c.seq_len << "; accuracy = " << task.metric() << '\n';
    if (report.rope_scaling) {
      std::cout << "rope scaling " << kernels::rope_type_name(report.rope_scaling->type) << ", factor "
                << *report.rope_scaling->factor << " (applied at evaluation)\n";
    }
    std::cout << "seq_len      loss  accuracy     count" << (perplexity ? "  perplexity" : "") << '\n';
    for (const nn::EvalLength& r : report.lengths) {
      char text[128];
      if (r.error.empty()) {
        std::snprintf(text, sizeof text, "%7lld %9.4f %9.4f %9lld", static_cast<long long>(r.seq_len), r.loss,
                      r.accuracy, static_cast<long long>(r.count));
        std::cout << text;
        if (perplexity) {
          std::snprintf(text, sizeof text, " %11.2f", std::exp(r.loss));
          std::cout << text;
        }
        std::cout << '\n';
      } else {
        std::snprintf(text, sizeof text, "%7lld", static_cast<long long>(r.seq_len));
        std::cout << text << "  error: " << r.error << '\n';
      }
    }
  }
  int failed = 0;
  for (const nn::EvalLength& r : report.lengths) {
    if (r.error.empty()) continue;
    std::cout.flush();
    std::cerr << "posenc: eval at seq_len " << r.seq_len << ": " << r.error << '\n';
    ++failed;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace posenc::cli
