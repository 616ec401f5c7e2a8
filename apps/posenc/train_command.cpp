#include "train_command.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "posenc/error.h"
#include "posenc/kernels/build_info.h"

namespace posenc::cli {
namespace {

// "1:05", "2h03m"; "?" before the first estimate.
std::string duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long long s = std::llround(seconds);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
  }
  return text;
}

// "950", "12.3k", "1.2M"
std::string rate(double per_second) {
  char text[32];
  if (per_second >= 1e6) {
    std::snprintf(text, sizeof text, "%.1fM", per_second / 1e6);
  } else if (per_second >= 1e3) {
    std::snprintf(text, sizeof text, "%.1fk", per_second / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.0f", per_second);
  }
  return text;
}

std::string progress_line(const nn::TrainProgress& p, bool bar) {
  char text[256];
  if (bar) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * p.step / std::max<int64_t>(p.steps, 1));
    const std::string cells = std::string(filled, '#') + std::string(kWidth - filled, '.');
    std::snprintf(text, sizeof text, "[%s] %lld/%lld loss %.4f acc %.3f %s tok/s ETA %s", cells.c_str(),
                  static_cast<long long>(p.step), static_cast<long long>(p.steps), p.loss, p.accuracy,
                  rate(p.tokens_per_second).c_str(), duration(p.eta_seconds).c_str());
  } else {
    std::snprintf(text, sizeof text, "step %lld/%lld loss %.4f acc %.4f lr %.3g %s tok/s elapsed %s eta %s",
                  static_cast<long long>(p.step), static_cast<long long>(p.steps), p.loss, p.accuracy, p.lr,
                  rate(p.tokens_per_second).c_str(), duration(p.elapsed_seconds).c_str(),
                  duration(p.eta_seconds).c_str());
  }
  return text;
}

}  // namespace

TrainCommand::TrainCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("train", "Train a small transformer on a synthetic task or on text, with checkpoints");
  app_->footer(
      "Tasks: order (encoder, A before B?), span (encoder, extraction), lookback (decoder, token k back), copy "
      "(decoder), text (decoder, causal LM on a posenc corpus --out directory), mlm (encoder, masked LM on the same), "
      "text-classify / text-span (encoder, fine-tuning on DIR/tasks/NAME of that directory, usually with "
      "--init-from an mlm run). Encodings: posenc encodings. Writes DIR/config.json, DIR/metrics.jsonl, DIR/throughput.jsonl "
      "and DIR/checkpoints/step-NNNNNNNN; --resume continues from the newest valid checkpoint, bit-identical to "
      "an uninterrupted run with the same seed and --threads.");
  config_.threads = kernels::available_cores();  // the affinity mask, not the machine
  app_->add_option("--task", config_.task, "order | span | lookback | copy | text | mlm | text-classify | text-span")
      ->required();
  app_->add_option("--encoding", config_.encoding, "Encoding name, e.g. rope, alibi, learned+shaw")->required();
  app_->add_option("--out", out_, "Run directory")->required();
  app_->add_flag("--resume", resume_, "Continue from the newest valid checkpoint in --out");
  app_->add_option("--layers", config_.layers, "Transformer blocks")->capture_default_str();
  app_->add_option("--dim", config_.dim, "Model width D")->capture_default_str();
  app_->add_option("--heads", config_.heads, "Attention heads (D divisible by heads)")->capture_default_str();
  app_->add_option("--seq-len", config_.seq_len, "Training sequence length T")->capture_default_str();
  app_->add_option("--batch", config_.batch, "Sequences per step")->capture_default_str();
  app_->add_option("--steps", config_.steps, "Optimizer steps")->capture_default_str();
  app_->add_option("--lr", config_.lr, "Peak learning rate (AdamW)")->capture_default_str();
  app_->add_option("--warmup", config_.warmup, "Linear warmup steps before the cosine decay")->capture_default_str();
  app_->add_option("--weight-decay", config_.weight_decay, "AdamW weight decay")->capture_default_str();
  app_->add_option("--clip", config_.clip, "Max global gradient norm (0: no clipping)")->capture_default_str();
  app_->add_option("--dropout", config_.dropout, "Residual and attention dropout")->capture_default_str();
  app_->add_option("--attention", config_.attention,
                   "Attention path: fused (forward and backward without T x T buffers) or composed (torch ops; "
                   "also taken for attention dropout)")
      ->capture_default_str();
  app_->add_option("--max-positions", config_.max_positions,
                   "Rows of a learned table (default: --seq-len, or --random-positions when set)");
  app_->add_option("--encoding-setting", settings_,
                   "A family's setting, key=value, repeatable (the keys of posenc encodings), e.g. "
                   "input_scale=0.0283 or base=500000");
  app_->add_option("--layer-encodings", config_.layer_encodings,
                   "Per-layer encodings, cycled over the layers: PLAN[:key=value...] per layer, comma-separated, "
                   "e.g. rope:base=10000,rope:base=1000000 (replaces --encoding's attention parts; its input part "
                   "stays)");
  app_->add_option("--random-positions", config_.random_positions,
                   "Randomized positions (Ruoss et al. 2023): train each step at a sorted random subset of "
                   "[0, MAX) of the positions, evaluate at 0..T-1; for absolute and rotary encodings (default: off)");
  app_->add_option("--seed", config_.seed, "Seed of the model init, dropout and data")->capture_default_str();
  app_->add_option("--threads", config_.threads, "Torch threads (results are reproducible per thread count)")
      ->capture_default_str();
  app_->add_option("--checkpoint-every", config_.checkpoint_every, "Steps between checkpoints")
      ->capture_default_str();
  app_->add_option("--keep-checkpoints", config_.keep_checkpoints, "Newest checkpoints kept")->capture_default_str();
  app_->add_option("--log-every", config_.log_every, "Steps per metrics line and progress update")
      ->capture_default_str();
  vocab_size_ = app_->add_option("--vocab-size", config_.task_options.vocab_size,
                                 "Task vocabulary (text: the data's, which is the default)")
                    ->capture_default_str();
  lookback_ = app_->add_option("--lookback", config_.task_options.lookback, "lookback: k")->capture_default_str();
  max_span_ = app_->add_option("--max-span", config_.task_options.max_span, "span: longest answer")
                  ->capture_default_str();
  data_ = app_->add_option("--data", config_.task_options.data,
                           "text, mlm: a directory written by posenc corpus --vocab-size N --out DIR; "
                           "text-classify, text-span: its DIR/tasks/NAME");
  app_->add_option("--init-from", config_.init_from,
                   "Fine-tune: start from the body (all but the heads) of this run or checkpoint; same encoding, "
                   "sizes and vocabulary");
  eval_split_ = app_->add_option("--eval-split", config_.task_options.eval_split,
                                 "text: the split evaluation reads, validation or test")
                    ->capture_default_str();
}

int TrainCommand::run() const {
  // Each task option belongs to one task: given to another, it would be silently ignored.
  const bool text_task = config_.task == "text" || config_.task == "mlm" || config_.task == "text-classify" ||
                         config_.task == "text-span";
  for (const auto& [option, task] : {std::pair{lookback_, "lookback"}, std::pair{max_span_, "span"}}) {
    if (option->count() > 0 && config_.task != task) {
      fail_argument("train", option->get_name(), " does not apply to task '", config_.task, "' (only to '", task,
                    "')");
    }
  }
  for (const CLI::Option* option : {data_, eval_split_}) {
    if (option->count() > 0 && !text_task) {
      fail_argument("train", option->get_name(), " does not apply to task '", config_.task,
                    "' (only to text, mlm, text-classify, text-span)");
    }
  }
  const bool bar = ::isatty(STDERR_FILENO) == 1;
  bool drawn = false;  // a bar line is on screen without its newline
  auto end_bar = [&] {
    if (drawn) std::cerr << '\n';
    drawn = false;
  };
  nn::TrainCallbacks callbacks;
  callbacks.warning = [&](const std::string& w) {
    end_bar();
    std::cerr << "posenc: warning: " << w << '\n';
  };
  callbacks.progress = [&](const nn::TrainProgress& p) {
    if (bar) {
      std::cerr << '\r' << progress_line(p, true) << "\033[K" << std::flush;
      drawn = true;
    } else {
      std::cerr << progress_line(p, false) << '\n';
    }
  };
  nn::TrainResult r;
  try {
    nn::TrainConfig config = config_;
    nn::apply_encoding_settings(config.encoding_config, settings_);
    if (text_task && vocab_size_->count() == 0) config.task_options.vocab_size = 0;  // the data's
    r = nn::train(config, out_, {.resume = resume_}, callbacks);
  } catch (...) {
    end_bar();
    throw;
  }
  end_bar();
  char text[512];
  if (r.end_step == r.start_step) {
    std::snprintf(text, sizeof text, "%s is already at step %lld of %lld; nothing to train", out_.c_str(),
                  static_cast<long long>(r.end_step), static_cast<long long>(config_.steps));
  } else {
    std::snprintf(text, sizeof text,
                  "trained %s with %s: steps %lld..%lld of %lld in %.1f s (%s tokens/s), loss %.4f, accuracy %.4f; "
                  "checkpoint %s",
                  config_.task.c_str(), config_.encoding.c_str(), static_cast<long long>(r.start_step + 1),
                  static_cast<long long>(r.end_step), static_cast<long long>(config_.steps), r.seconds,
                  rate(r.tokens_per_second).c_str(), r.loss, r.accuracy, r.checkpoint.string().c_str());
  }
  std::cout << text << '\n';
  return 0;
}

}  // namespace posenc::cli
