// Training and evaluation of the small models (models.h) on the synthetic
// tasks (tasks.h), reproducible and resumable.
//
//   model init: torch::manual_seed(seed), then the task's encoder or decoder
//   optimizer:  AdamW(lr, weight_decay), gradients clipped to global norm `clip`
//   schedule:   lr(s) = lr * s / warmup for s <= warmup, then
//               lr * (1 + cos(pi * (s - warmup) / (steps - warmup))) / 2, 0 at s = steps
//   data:       step s (1-based) trains on batch s-1 of DataStream::kTrain
//   threads:    at::set_num_threads(threads) (torch's OpenMP pool); results are
//               bit-reproducible for a fixed seed and thread count
//
// A run directory DIR holds
//   config.json       every option, the encoding's parameters, the posenc version
//   metrics.jsonl     one line per log_every steps (and the last step):
//                     {"step", "lr", "loss", "accuracy", "grad_norm", "tokens"}, the
//                     means over the steps since the previous line; deterministic,
//                     so a resumed run's file is byte-identical to an uninterrupted one
//   throughput.jsonl  {"step", "elapsed_s", "tokens_per_s"}: timing, not reproducible
//   checkpoints/step-<8 digits>/   every checkpoint_every steps and at the end
//                     (checkpoint.h): model.pt, optimizer.pt (AdamW's moments and
//                     step per parameter index), rng.pt (torch's default CPU
//                     generator, for dropout), state.json (step, data
//                     cursor, metrics.jsonl length, partial log window, the config
//                     that fixes the trajectory), MANIFEST; the newest
//                     keep_checkpoints are kept. Every file is a function of the
//                     run, so two identical runs write byte-identical checkpoints.
// The library never prints: progress and warnings go to callbacks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "posenc/nn/encoding_registry.h"
#include "posenc/nn/models.h"
#include "posenc/training/tasks.h"

namespace posenc::nn {

struct TrainConfig {
  std::string task = "order";        // a Task::names() name: order | span | lookback | copy | text | mlm | ...
  std::string encoding = "sinusoidal";  // a registry name, e.g. "learned+shaw"
  TaskOptions task_options;
  // The families' settings (encoding_training_options(), saved in config.json's
  // encoding_parameters); dim, num_heads, max_positions and causal are taken
  // from the fields below and the task.
  EncodingConfig encoding_config;
  int64_t layers = 2;
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t seq_len = 64;
  int64_t batch = 32;
  int64_t steps = 1000;
  double lr = 1e-3;
  int64_t warmup = 100;
  double weight_decay = 0.01;
  double clip = 1.0;                 // max global gradient norm
  uint64_t seed = 0;
  int64_t threads = 1;
  int64_t checkpoint_every = 100;
  int64_t keep_checkpoints = 3;
  int64_t log_every = 10;
  double dropout = 0.0;
  int64_t max_positions = 0;         // rows of a learned table; 0: seq_len (random_positions when set)
  // Randomized positions (Ruoss et al., ACL 2023): > 0, each training step
  // gives its sequences a sorted random subset of [0, random_positions) as
  // positions (one draw per step, seeded by seed and step); evaluation uses
  // 0..T-1. Needs an input or query/key encoding; >= seq_len. 0: off.
  int64_t random_positions = 0;
  // Per-layer encodings, comma-separated, cycled over the layers (TransformerOptions::layer_encodings),
  // e.g. "rope:base=10000,rope:base=10000,rope:base=1000000". Empty: every layer takes `encoding`.
  std::string layer_encodings;
  // "fused" (the fused attention forward and backward; attention dropout takes the composed path)
  // | "composed" (differentiable torch ops).
  // config.json files written before the field existed read "composed", the path they trained with.
  std::string attention = "fused";
  // Fine-tuning: a posenc train run (or one of its checkpoints) whose body (embeddings, encoding, blocks, final
  // norm; not the heads) replaces this model's initial values before step 1. Same model kind, encoding, sizes,
  // vocabulary and max_positions. Empty: train from the seeded initialisation.
  std::string init_from;
};

// Checks every field, the task and the encoding (parse_encoding / validate_encoding messages),
// and returns the config with max_positions resolved. Throws std::invalid_argument
// "[train] steps must be >= 1, got 0" (likewise for the other fields) and c10::ValueError from the registry.
TrainConfig resolve_train_config(const TrainConfig& config);

// config.layer_encodings split at the commas (empty: none).
std::vector<std::string> layer_encoding_list(const TrainConfig& config);

// The learning rate of step s (1-based), as in the schedule above.
double learning_rate(const TrainConfig& config, int64_t step);

// The ATen thread count a run trains on: its threads, or 1 when it shards batches over several threads
// (each shard single-threaded inside). Whatever evaluates a trained run sets the same, for the same sums.
int aten_threads(const TrainConfig& config);

// config.json text (every field, the encoding's parameters, the posenc version) and back.
// Parsing throws std::runtime_error "[checkpoint] SOURCE: missing or invalid field 'dim'".
std::string train_config_json(const TrainConfig& config);
TrainConfig train_config_from_json(const std::string& text, const std::string& source);

// The task's model (encoder with its classification or span head, or decoder) and its score.
class TaskModel {
 public:
  TaskModel(const Task& task, const TrainConfig& resolved);
  // positions (T) int64: the encodings' positions (undefined: 0..T-1; the trainer passes one random draw per
  // step with random_positions, so every shard of a step sees the same).
  TaskScore score(const Batch& batch, const at::Tensor& positions = {});
  // The first layer's attention weights (B, H, T, T) for tokens (B, T) (analysis probes).
  at::Tensor first_layer_attention(const at::Tensor& tokens);
  torch::nn::Module& module();
  const Task& task() const noexcept { return task_; }

 private:
  Task task_;
  TransformerEncoder encoder_{nullptr};
  TransformerDecoder decoder_{nullptr};
};

// Copies the body of the run at `source` into `model` (TrainConfig::init_from). Throws
// "[train] init_from: RUN has dim 32, this run 64" for a mismatch, and load_task_model's errors.
void initialize_from(TaskModel& model, const TrainConfig& config, const std::filesystem::path& source);

struct TrainProgress {
  int64_t step = 0;
  int64_t steps = 0;
  double loss = 0;       // mean over the steps since the previous report
  double accuracy = 0;
  double lr = 0;
  double tokens_per_second = 0;  // this process, since its first step
  double elapsed_seconds = 0;    // this process
  double eta_seconds = 0;
};

struct TrainCallbacks {
  std::function<void(const TrainProgress&)> progress;  // every log_every steps and at the last step
  std::function<void(const std::string&)> warning;     // e.g. a corrupted checkpoint skipped on resume
};

struct TrainRun {
  bool resume = false;     // continue from the newest valid checkpoint in DIR (fresh start when DIR has none)
  int64_t stop_after = 0;  // > 0: return after this step as if interrupted (tests, time-boxed jobs)
};

struct TrainResult {
  int64_t start_step = 0;  // the step resumed from (0: fresh)
  int64_t end_step = 0;    // the last step trained
  double loss = 0;         // the last report's means (NaN when no step ran)
  double accuracy = 0;
  double seconds = 0;
  double tokens_per_second = 0;
  std::filesystem::path checkpoint;   // the newest checkpoint written (empty if none)
  std::vector<std::string> warnings;  // also passed to callbacks.warning
};

// Trains into `dir`. Without run.resume, a DIR that already holds a run is refused:
// "[train] DIR already holds a run (metrics.jsonl or checkpoints); resume it or choose another directory".
// With it, a checkpoint written for another configuration is refused:
// "[checkpoint] DIR/checkpoints/step-00000100 was written for encoding 'rope', this run uses 'alibi'";
// when no checkpoint is valid (a run stopped while writing its first one) it
// starts again from step 0, bit-identical to a fresh run, with a warning.
// DIR is locked while train() runs (io::DirectoryLock): a second process gets
// "[train] DIR is in use by process 1234 (lock file DIR/.lock)".
// A non-finite loss or gradient norm stops training before the update:
// "[train] training diverged at step 3 (loss nan, gradient norm nan, lr 1e+30): lower lr, raise warmup or set clip".
TrainResult train(const TrainConfig& config, const std::filesystem::path& dir, const TrainRun& run = {},
                  const TrainCallbacks& callbacks = {});

struct EvalLength {
  int64_t seq_len = 0;
  double loss = 0;      // mean over the scored items
  double accuracy = 0;
  int64_t count = 0;    // scored items (examples or tokens)
  std::string error;    // non-empty when this length could not be evaluated (e.g. a learned table too short)
};

struct EvalReport {
  TrainConfig config;
  std::filesystem::path checkpoint;
  int64_t step = 0;
  std::vector<std::string> warnings;
  std::vector<EvalLength> lengths;
  std::optional<kernels::RopeScaling> rope_scaling;  // the extension applied, if any
};

// What load_task_model loaded.
struct LoadedRun {
  TrainConfig config;                 // resolved
  std::filesystem::path checkpoint;   // the checkpoint directory used
  int64_t step = 0;
  std::vector<std::string> warnings;  // newer checkpoints skipped as corrupted or incomplete
};

// Loads DIR/config.json and the newest valid checkpoint of DIR (or DIR itself
// when it is a checkpoint directory) into the task's model, in eval() mode, as
// evaluate() does; `run` (optional) receives what was loaded. Throws the
// errors listed for evaluate() below.
// rope_scaling: applied to the model's "rope" part (evaluation of a context
// extension); refused for a run without one.
TaskModel load_task_model(const std::filesystem::path& dir, LoadedRun* run = nullptr,
                          const std::optional<kernels::RopeScaling>& rope_scaling = std::nullopt);

// What evaluate() will cost, from the run's config before any batch runs
// (napkin math, float32): bytes, the peak of one batch at the longest length
// (its widest layer's activations, the output logits, the parameters) and
// multiply_adds, every batch at every length (projections, FFN, q.k and p.v
// over the keys each query sees, the output head). `largest` names the
// memory peak, e.g. "one batch of 32 sequences at seq_len 100000".
struct EvalCost {
  double bytes = 0;
  double multiply_adds = 0;
  std::string largest;
};

// The lengths evaluate() runs: `lengths`, or seq_len, 2 seq_len, 4 seq_len when empty
// (a labelled set: its row width only).
std::vector<int64_t> eval_lengths(const TrainConfig& config, const std::vector<int64_t>& lengths);
EvalCost estimate_evaluation(const TrainConfig& config, const std::vector<int64_t>& lengths, int64_t batches);

struct EvalCallbacks {
  // After the run is loaded, before the first batch; throw to refuse the work.
  std::function<void(const EvalCost&)> before;
  // After every batch: the length being evaluated and the share of the estimated work done, in [0, 1].
  std::function<void(int64_t seq_len, double done)> progress;
};

// Loads DIR/config.json and the newest valid checkpoint of DIR (or DIR itself
// when it is a checkpoint directory), and evaluates `batches` fresh batches of
// DataStream::kEval at each length, without gradients (the fused attention);
// a labelled set (text-classify, text-span) is evaluated on every row of its
// eval split instead, whatever `batches` says.
// Lengths {} mean seq_len, 2 seq_len, 4 seq_len. Throws std::runtime_error
// "[checkpoint] DIR is not a posenc run (no config.json)" and the checkpoint.h errors.
// A context extension applied to a trained "rope" model at evaluation: type
// "linear", "ntk", "dynamic" or "yarn" with scale factor s (default: the
// longest evaluated length / the training length, at least 1) and the training
// length as original_max_position_embeddings (dynamic, yarn); Hugging Face's
// formulas (docs/rope.md).
struct RopeExtension {
  std::string type;
  std::optional<double> factor;
};
// "[eval] rope extension must be linear, ntk, dynamic or yarn, got 'x'".
kernels::RopeScaling rope_extension_scaling(const RopeExtension& extension, int64_t train_seq_len,
                                            int64_t longest_length);

// extension: evaluate a "rope" run with that scaling (report.rope_scaling says
// which); "[eval] rope_scaling needs a run whose encoding has 'rope', got 'alibi'".
EvalReport evaluate(const std::filesystem::path& dir, const std::vector<int64_t>& lengths, int64_t batches = 8,
                    const EvalCallbacks& callbacks = {},
                    const std::optional<RopeExtension>& extension = std::nullopt);

}  // namespace posenc::nn
