#include "posenc/training/trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <fcntl.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include "posenc/error.h"
#include "posenc/io/directory_lock.h"
#include "posenc/kernels/build_info.h"
#include "posenc/nn/torch_compat.h"
#include "posenc/training/checkpoint.h"
#include "posenc/training/data_parallel.h"
#include "run_identity.h"

namespace posenc::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

constexpr const char* kOp = "train";
using detail::check_same_run;
using detail::trajectory_fields;
// Shards per thread of a multi-threaded step: a thread that loses its core to another process takes fewer.
constexpr int64_t kShardsPerThread = 2;


// ------------------------------------------------------------ files

// An append-only log whose bytes can be made durable before a checkpoint records its length.
// O_NOFOLLOW: a link planted at its name is refused, never written through.
class AppendFile {
 public:
  explicit AppendFile(const fs::path& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_runtime(kOp, "cannot open ", path.string(), ": ", std::strerror(errno));
  }
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile() { ::close(fd_); }

  void append(const std::string& line) {
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail_runtime(kOp, "cannot write ", path_.string(), ": ", std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
  void sync() {
    if (::fsync(fd_) != 0) fail_runtime(kOp, "cannot fsync ", path_.string(), ": ", std::strerror(errno));
  }
  // Cuts the log back to its first `bytes` bytes (the length a checkpoint vouches for).
  void truncate(uint64_t bytes) {
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      fail_runtime(kOp, "cannot truncate ", path_.string(), ": ", std::strerror(errno));
    }
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

std::string hex_bits(double v) {
  std::ostringstream s;
  s << std::hex << std::bit_cast<uint64_t>(v);
  return s.str();
}
double from_hex_bits(const std::string& s) { return std::bit_cast<double>(std::stoull(s, nullptr, 16)); }

// Sums since the last metrics line; saved in checkpoints so a resume inside a
// log window reproduces the next line exactly.
struct Window {
  int64_t steps = 0;
  double loss_sum = 0;
  double grad_norm_sum = 0;
  int64_t correct = 0;
  int64_t count = 0;

  json to_json() const {
    return {{"steps", steps}, {"loss_sum", hex_bits(loss_sum)}, {"grad_norm_sum", hex_bits(grad_norm_sum)},
            {"correct", correct}, {"count", count}};
  }
  static Window from_json(const json& j) {
    Window w;
    w.steps = j.at("steps").get<int64_t>();
    w.loss_sum = from_hex_bits(j.at("loss_sum").get<std::string>());
    w.grad_norm_sum = from_hex_bits(j.at("grad_norm_sum").get<std::string>());
    w.correct = j.at("correct").get<int64_t>();
    w.count = j.at("count").get<int64_t>();
    return w;
  }
  double loss() const { return loss_sum / static_cast<double>(steps); }
  double accuracy() const { return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(count, 1)); }
  double grad_norm() const { return grad_norm_sum / static_cast<double>(steps); }
};

template <class Fill>
std::string archive_bytes(Fill&& fill) {
  torch::serialize::OutputArchive archive;
  fill(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

// libtorch's own messages name no file ("PytorchStreamReader failed reading zip archive"): say which one.
template <class Use>
void from_archive(const Checkpoint& c, const std::string& name, Use&& use) {
  try {
    const std::string& bytes = c.file(name);
    torch::serialize::InputArchive archive;
    archive.load_from(bytes.data(), bytes.size());
    use(archive);
  } catch (const c10::Error& e) {
    std::string why = e.what_without_backtrace();
    if (const size_t newline = why.find('\n'); newline != std::string::npos) why.resize(newline);
    fail_runtime("checkpoint", (c.dir / name).string(), " cannot be loaded: ", why);
  }
}

at::Tensor generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Keeps the lines of throughput.jsonl up to `step` (timing is not part of the
// reproducible record, so its length is not in the checkpoint).
void cut_throughput(const fs::path& path, int64_t step) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return;
  std::istringstream in(read_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("step") || j["step"].get<int64_t>() > step) break;
    kept += line + "\n";
  }
  write_file_atomic(path, kept);
}

// AdamW's own archive keys its state by tensor address, so two identical runs
// would write different bytes; this layout keys it by parameter index instead.
void save_optimizer(torch::serialize::OutputArchive& archive, torch::optim::AdamW& optimizer) {
  const std::vector<at::Tensor>& params = optimizer.param_groups().at(0).params();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto it = optimizer.state().find(torch_compat::optimizer_state_key(optimizer.state(), params[i]));
    if (it == optimizer.state().end()) continue;  // never had a gradient (an unused head)
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    const std::string n = std::to_string(i);
    archive.write("step_" + n, at::scalar_tensor(s.step(), at::kLong));
    archive.write("exp_avg_" + n, s.exp_avg());
    archive.write("exp_avg_sq_" + n, s.exp_avg_sq());
  }
}

void load_optimizer(torch::serialize::InputArchive& archive, torch::optim::AdamW& optimizer) {
  const std::vector<at::Tensor>& params = optimizer.param_groups().at(0).params();
  optimizer.state().clear();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string n = std::to_string(i);
    at::Tensor step, exp_avg, exp_avg_sq;
    if (!archive.try_read("step_" + n, step)) continue;
    archive.read("exp_avg_" + n, exp_avg);
    archive.read("exp_avg_sq_" + n, exp_avg_sq);
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step.item<int64_t>());
    s->exp_avg(exp_avg);
    s->exp_avg_sq(exp_avg_sq);
    optimizer.state()[torch_compat::optimizer_state_key(optimizer.state(), params[i])] = std::move(s);
  }
}

void load_training_state(const Checkpoint& c, TaskModel& model, torch::optim::AdamW& optimizer) {
  from_archive(c, "model.pt", [&](torch::serialize::InputArchive& a) { model.module().load(a); });
  from_archive(c, "optimizer.pt", [&](torch::serialize::InputArchive& a) { load_optimizer(a, optimizer); });
  from_archive(c, "rng.pt", [&](torch::serialize::InputArchive& a) {
    at::Tensor state;
    a.read("cpu_generator", state);
    set_generator_state(state);
  });
}

json parse_state(const Checkpoint& c) {
  try {
    return json::parse(c.file("state.json"));
  } catch (const json::exception&) {
    fail_runtime("checkpoint", c.dir.string(), "/state.json is not valid JSON");
  }
}

}  // namespace


// ------------------------------------------------------------ training

namespace {

// Step `step`'s random positions (random_positions > 0): one draw for every shard, from its own seed stream.
at::Tensor step_positions(const TrainConfig& c, int64_t step, int64_t length) {
  if (c.random_positions == 0) return {};
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(
      c.seed * 0x2545F4914F6CDD1Dull ^ (static_cast<uint64_t>(step) + 0x5851F42D4C957F2Dull));
  return sample_random_positions(length, c.random_positions, generator);
}

// The dropout generators of step `step`'s shards: seeds (this + shard), apart from the run's seed stream.
uint64_t dropout_seed(uint64_t seed, int64_t step) {
  uint64_t x = seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;  // splitmix64's finalizer
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (x ^ (x >> 31)) * 1024;                 // room for the shard index
}

}  // namespace

TrainResult train(const TrainConfig& requested, const fs::path& dir, const TrainRun& run,
                  const TrainCallbacks& callbacks) {
  using Clock = std::chrono::steady_clock;
  const TrainConfig config = resolve_train_config(requested);
  // More threads than cores only spin against each other (checked here, not in
  // resolve_train_config: a run trained elsewhere must still evaluate).
  const int64_t cores = kernels::available_cores();
  require(config.threads <= cores, kOp, "threads must be in 1..", cores,
          " (the cores available to this process), got ", config.threads);
  const Task task = Task::parse(config.task, config.task_options);
  const fs::path checkpoints = dir / "checkpoints";
  const fs::path metrics_path = dir / "metrics.jsonl";
  const fs::path throughput_path = dir / "throughput.jsonl";
  TrainResult result;
  result.loss = result.accuracy = std::numeric_limits<double>::quiet_NaN();
  auto warn = [&](const std::string& w) {
    result.warnings.push_back(w);
    if (callbacks.warning) callbacks.warning(w);
  };

  // Held until train() returns: a second process on DIR is refused, naming this one.
  const io::DirectoryLock lock(kOp, dir.string());
  std::optional<LatestCheckpoint> latest;
  std::error_code ec;
  if (run.resume) {
    // A run stopped while writing its first checkpoint has none that is valid:
    // it starts again from step 0, exactly as a fresh run would.
    CheckpointScan scan = scan_checkpoints(checkpoints);
    latest = std::move(scan.latest);
    if (!latest) {
      warn((scan.skipped.empty() ? "no checkpoint in " + checkpoints.string()
                                 : "no valid checkpoint in " + checkpoints.string() + " (" + scan.skipped_list() + ")") +
           "; starting from step 0");
    }
  } else if (fs::exists(metrics_path, ec) || !list_checkpoints(checkpoints).empty()) {
    fail_argument(kOp, dir.string(),
                  " already holds a run (metrics.jsonl or checkpoints); resume it or choose another directory");
  }

  // More than one thread: kShardsPerThread shards of each batch per thread, taken in turn by the threads,
  // each single-threaded inside.
  const int shards = static_cast<int>(std::min(config.threads * kShardsPerThread, config.batch));
  const int workers = static_cast<int>(config.threads);
  at::set_num_threads(aten_threads(config));
  torch::manual_seed(config.seed);
  TaskModel model(task, config);
  if (!config.init_from.empty() && !latest) {
    // Loading builds a second model, which draws from torch's generator: this run's draws must not depend on it.
    const at::Tensor rng = generator_state();
    initialize_from(model, config, config.init_from);
    set_generator_state(rng);
  }
  model.module().train();
  std::vector<at::Tensor> parameters = model.module().parameters();
  torch::optim::AdamW optimizer(parameters,
                                torch::optim::AdamWOptions(config.lr).weight_decay(config.weight_decay));

  Window window;
  int64_t start = 0, cursor = 0;
  uint64_t metrics_bytes = 0;
  if (latest) {
    const Checkpoint& c = latest->checkpoint;
    const json state = parse_state(c);
    std::vector<std::string> mismatch_warnings;
    try {
      check_same_run(state, config, c.dir, &mismatch_warnings);
      start = state.at("step").get<int64_t>();
      cursor = state.at("data_cursor").get<int64_t>();
      metrics_bytes = state.at("metrics_bytes").get<uint64_t>();
      window = Window::from_json(state.at("window"));
    } catch (const json::exception&) {
      fail_runtime("checkpoint", c.dir.string(), "/state.json is missing a field or has a wrong type");
    }
    load_training_state(c, model, optimizer);
    for (const std::string& w : latest->warnings) warn(w);
    for (const std::string& w : mismatch_warnings) warn(w);
    const uint64_t have = fs::exists(metrics_path, ec) ? fs::file_size(metrics_path, ec) : 0;
    if (have < metrics_bytes) {
      fail_runtime("checkpoint", metrics_path.string(), " has ", have, " bytes, fewer than the ", metrics_bytes,
                   " recorded in ", c.dir.filename().string());
    }
    result.start_step = start;
    result.checkpoint = c.dir;
  }

  write_file_atomic(dir / "config.json", train_config_json(config));
  if (start == 0) {
    write_file_atomic(throughput_path, "");
  } else {
    cut_throughput(throughput_path, start);
  }
  AppendFile metrics(metrics_path), throughput(throughput_path);
  // The record is cut back to the checkpoint, so the lines after it are written again, identically.
  metrics.truncate(metrics_bytes);

  const Clock::time_point began = Clock::now();
  Clock::time_point window_began = began;
  const int64_t tokens_per_step = config.batch * config.seq_len;
  const int64_t last = run.stop_after > 0 ? std::min(run.stop_after, config.steps) : config.steps;
  const double max_norm = config.clip > 0 ? config.clip : std::numeric_limits<double>::infinity();
  for (int64_t step = start + 1; step <= last; ++step) {
    const double lr = learning_rate(config, step);
    for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    }
    const Batch batch = task.batch(config.seed, DataStream::kTrain, cursor, config.batch, config.seq_len);
    optimizer.zero_grad();
    const at::Tensor positions = step_positions(config, step, batch.tokens.size(1));
    TaskScore score;
    if (workers > 1) {
      const ShardLoss total = data_parallel_gradient(
          [&](int64_t begin, int64_t count) {
            const TaskScore s = model.score(batch.rows(begin, count), positions);
            return ShardLoss{s.loss, s.count, s.correct};
          },
          config.batch, parameters, shards, workers, dropout_seed(config.seed, step));
      score = TaskScore{total.loss, total.correct, total.count};
    } else {
      score = model.score(batch, positions);
      score.loss.backward();
    }
    const double grad_norm = torch::nn::utils::clip_grad_norm_(parameters, max_norm);
    const double loss = score.loss.item<double>();
    // Checked before the update, so the last checkpoint and the log stay those of a finite model.
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      fail_runtime(kOp, "training diverged at step ", step, " (loss ", loss, ", gradient norm ", grad_norm,
                   ", lr ", lr, "): lower lr, raise warmup or set clip");
    }
    optimizer.step();
    ++cursor;
    window.steps += 1;
    window.loss_sum += loss;
    window.grad_norm_sum += grad_norm;
    window.correct += score.correct;
    window.count += score.count;
    result.end_step = step;

    if (step % config.log_every == 0 || step == config.steps) {
      const Clock::time_point now = Clock::now();
      const double elapsed = std::chrono::duration<double>(now - began).count();
      const double window_seconds = std::chrono::duration<double>(now - window_began).count();
      window_began = now;
      ordered_json line{{"step", step},          {"lr", lr},
                        {"loss", window.loss()}, {"accuracy", window.accuracy()},
                        {"grad_norm", window.grad_norm()}, {"tokens", step * tokens_per_step}};
      metrics.append(line.dump() + "\n");
      metrics_bytes += line.dump().size() + 1;
      const double done = static_cast<double>(step - start);
      ordered_json timing{{"step", step},
                          {"elapsed_s", elapsed},
                          {"tokens_per_s", static_cast<double>(window.steps * tokens_per_step) / window_seconds}};
      throughput.append(timing.dump() + "\n");
      result.loss = window.loss();
      result.accuracy = window.accuracy();
      if (callbacks.progress) {
        TrainProgress p;
        p.step = step;
        p.steps = config.steps;
        p.loss = window.loss();
        p.accuracy = window.accuracy();
        p.lr = lr;
        p.elapsed_seconds = elapsed;
        p.tokens_per_second = done * static_cast<double>(tokens_per_step) / elapsed;
        p.eta_seconds = elapsed / done * static_cast<double>(config.steps - step);
        callbacks.progress(p);
      }
      window = Window{};
    }

    if (step % config.checkpoint_every == 0 || step == config.steps) {
      metrics.sync();  // the checkpoint vouches for metrics_bytes bytes of it
      throughput.sync();
      json state{{"step", step},
                 {"data_cursor", cursor},
                 {"metrics_bytes", metrics_bytes},
                 {"window", window.to_json()},
                 {"steps", config.steps},
                 {"threads", config.threads},
                 {"config", trajectory_fields(config)}};
      std::map<std::string, std::string> files;
      files["model.pt"] = archive_bytes([&](torch::serialize::OutputArchive& a) { model.module().save(a); });
      files["optimizer.pt"] = archive_bytes([&](torch::serialize::OutputArchive& a) { save_optimizer(a, optimizer); });
      files["rng.pt"] =
          archive_bytes([&](torch::serialize::OutputArchive& a) { a.write("cpu_generator", generator_state()); });
      files["state.json"] = state.dump(2) + "\n";
      result.checkpoint = write_checkpoint(checkpoints, step, files);
      prune_checkpoints(checkpoints, step, config.keep_checkpoints);
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  if (result.end_step > start && result.seconds > 0) {
    result.tokens_per_second =
        static_cast<double>((result.end_step - start) * tokens_per_step) / result.seconds;
  }
  if (result.end_step == 0) result.end_step = start;
  return result;
}

// ------------------------------------------------------------ evaluation

namespace {

// load_task_model, the scaling chosen once the run's config is known.
using ScalingFor = std::function<std::optional<kernels::RopeScaling>(const TrainConfig&)>;

TaskModel load_task_model_with(const fs::path& given, LoadedRun* run, const ScalingFor& scaling_for) {
  const fs::path dir = given.has_filename() ? given : given.parent_path();  // "run/" names "run"
  std::error_code ec;
  // DIR is a run directory, or one of its checkpoint directories (named step-*, or with a MANIFEST).
  const bool is_checkpoint = fs::exists(dir / "MANIFEST", ec) ||
                             (dir.filename().string().starts_with("step-") && !fs::exists(dir / "config.json", ec));
  const fs::path run_dir = is_checkpoint ? dir.parent_path().parent_path() : dir;
  LoadedRun loaded;
  Checkpoint checkpoint;
  if (is_checkpoint) checkpoint = load_checkpoint(dir);  // its own errors first: not a checkpoint, corrupted
  const fs::path config_path = run_dir / "config.json";
  if (!fs::is_regular_file(config_path, ec)) {
    fail_runtime("checkpoint", (is_checkpoint ? run_dir : dir).string(), " is not a posenc run (no config.json)");
  }
  loaded.config = resolve_train_config(train_config_from_json(read_file(config_path), config_path.string()));
  const TrainConfig& config = loaded.config;
  if (!is_checkpoint) {
    std::optional<LatestCheckpoint> latest = find_latest_checkpoint(run_dir / "checkpoints", "evaluating");
    if (!latest) fail_runtime("checkpoint", dir.string(), " has no checkpoint (no checkpoints/step-*)");
    checkpoint = std::move(latest->checkpoint);
    loaded.warnings = std::move(latest->warnings);
  }
  try {
    check_same_run(parse_state(checkpoint), config, checkpoint.dir, nullptr);
  } catch (const json::exception&) {
    fail_runtime("checkpoint", checkpoint.dir.string(), "/state.json is missing a field or has a wrong type");
  }
  loaded.checkpoint = checkpoint.dir;
  loaded.step = checkpoint.step;

  TrainConfig built = config;
  const std::optional<kernels::RopeScaling> rope_scaling = scaling_for(config);
  if (rope_scaling) {
    const std::vector<std::string> parts = parse_encoding(config.encoding).parts;
    require(std::find(parts.begin(), parts.end(), "rope") != parts.end(), "eval",
            "rope_scaling needs a run whose encoding has 'rope', got '", config.encoding, "'");
    kernels::validate(*rope_scaling, config.dim / config.heads, config.encoding_config.real("base"), "eval");
    built.encoding_config.rope_scaling = *rope_scaling;  // no parameter changes: the weights load as trained
  }
  TaskModel model(Task::parse(config.task, config.task_options), built);
  from_archive(checkpoint, "model.pt", [&](torch::serialize::InputArchive& a) { model.module().load(a); });
  model.module().eval();
  if (run != nullptr) *run = std::move(loaded);
  return model;
}

}  // namespace

TaskModel load_task_model(const fs::path& given, LoadedRun* run, const std::optional<kernels::RopeScaling>& rope_scaling) {
  return load_task_model_with(given, run, [&](const TrainConfig&) { return rope_scaling; });
}

kernels::RopeScaling rope_extension_scaling(const RopeExtension& e, int64_t train_seq_len, int64_t longest) {
  require(e.type == "linear" || e.type == "ntk" || e.type == "dynamic" || e.type == "yarn", "eval",
          "rope extension must be linear, ntk, dynamic or yarn, got '", e.type, "'");
  kernels::RopeScaling s;
  s.type = kernels::parse_rope_type(e.type, "eval");
  s.factor = e.factor ? *e.factor
                      : std::max(1.0, static_cast<double>(longest) / static_cast<double>(train_seq_len));
  if (e.type == "dynamic" || e.type == "yarn") s.original_max_position_embeddings = train_seq_len;
  return s;
}

EvalReport evaluate(const fs::path& given, const std::vector<int64_t>& lengths, int64_t batches,
                    const EvalCallbacks& callbacks, const std::optional<RopeExtension>& extension) {
  require(batches >= 1, "eval", "batches must be >= 1, got ", batches);
  for (const int64_t length : lengths) require(length >= 1, "eval", "lengths must be >= 1, got ", length);
  EvalReport report;
  LoadedRun loaded;
  // The training length and the longest length to evaluate fix the extension's default factor.
  TaskModel model = load_task_model_with(given, &loaded, [&](const TrainConfig& trained) {
    std::optional<kernels::RopeScaling> s;
    if (extension) {
      const std::vector<int64_t> wanted = eval_lengths(trained, lengths);
      s = rope_extension_scaling(*extension, trained.seq_len, *std::max_element(wanted.begin(), wanted.end()));
    }
    report.rope_scaling = s;
    return s;
  });
  report.config = std::move(loaded.config);
  report.checkpoint = std::move(loaded.checkpoint);
  report.step = loaded.step;
  report.warnings = std::move(loaded.warnings);
  const TrainConfig& config = report.config;
  const Task& task = model.task();
  torch::NoGradGuard no_grad;
  const std::vector<int64_t> wanted = eval_lengths(config, lengths);
  const EvalCost total = estimate_evaluation(config, wanted, batches);
  if (callbacks.before) callbacks.before(total);
  double done = 0;  // multiply-adds of the batches evaluated (or skipped by an error)
  for (const int64_t length : wanted) {
    const double per_batch = estimate_evaluation(config, {length}, 1).multiply_adds;
    EvalLength r;
    r.seq_len = length;
    double loss_sum = 0;
    int64_t correct = 0;
    try {
      const int64_t rows = task.eval_examples();  // a labelled set: every row once
      const int64_t runs = rows > 0 ? (rows + config.batch - 1) / config.batch : batches;
      for (int64_t b = 0; b < runs; ++b) {
        const Batch batch = task.batch(config.seed, DataStream::kEval, b, config.batch, length);
        const TaskScore s = model.score(batch);
        loss_sum += s.loss.item<double>() * static_cast<double>(s.count);
        correct += s.correct;
        r.count += s.count;
        done += per_batch;
        if (callbacks.progress) callbacks.progress(length, total.multiply_adds > 0 ? done / total.multiply_adds : 1.0);
      }
      r.loss = loss_sum / static_cast<double>(r.count);
      r.accuracy = static_cast<double>(correct) / static_cast<double>(r.count);
    } catch (const c10::Error& e) {  // e.g. a learned table shorter than the length
      r.error = e.what_without_backtrace();
      // libtorch's allocator names its own source line, not what ran out.
      if (r.error.starts_with("[enforce fail at alloc_cpu")) r.error = "[eval] out of memory at this length";
    } catch (const std::invalid_argument& e) {  // e.g. a length below the task's minimum
      r.error = e.what();
    }
    report.lengths.push_back(std::move(r));
  }
  return report;
}

}  // namespace posenc::nn
