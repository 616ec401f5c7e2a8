#include "posenc/training/throughput_record.h"

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "posenc/error.h"
#include "posenc/io/atomic_file.h"

namespace posenc::nn {

RecordedTraining recorded_training(const std::filesystem::path& run_dir, int64_t up_to_step, int64_t tokens_per_step) {
  constexpr const char* kOp = "train";
  require(up_to_step >= 0, kOp, "up_to_step must be >= 0, got ", up_to_step);
  require(tokens_per_step >= 1, kOp, "tokens_per_step must be >= 1, got ", tokens_per_step);
  std::istringstream in(io::read_regular_file(kOp, (run_dir / "throughput.jsonl").string()));
  RecordedTraining r;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer() || !j.contains("tokens_per_s") ||
        !j["tokens_per_s"].is_number() || j["tokens_per_s"].get<double>() <= 0) {
      break;
    }
    const int64_t step = j["step"].get<int64_t>();
    if (step <= r.steps || step > up_to_step) break;
    // A window's tokens over its rate is its wall time. The first window after a resume counts only the time
    // since the resume: its steps before the checkpoint were trained by a process that never logged them.
    r.seconds += static_cast<double>((step - r.steps) * tokens_per_step) / j["tokens_per_s"].get<double>();
    r.steps = step;
  }
  return r;
}

}  // namespace posenc::nn
