#include "check_command.h"

#include <charconv>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>

#include "posenc/check/check.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "check";

std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void print_bands(std::ostream& os, const std::vector<check::Band>& bands) {
  char line[128];
  std::snprintf(line, sizeof line, "  %-24s %10s %12s %12s\n", "position |p| in", "elements", "max abs", "max rel");
  os << line;
  for (const check::Band& b : bands) {
    const std::string range = "[" + std::to_string(b.lo) + ", " + std::to_string(b.hi) + ")";
    std::snprintf(line, sizeof line, "  %-24s %10lld %12s %12s\n", range.c_str(), static_cast<long long>(b.count),
                  fmt(b.max_abs).c_str(), fmt(b.max_rel).c_str());
    os << line;
  }
}

void print_report(std::ostream& os, const check::CheckReport& r) {
  os << "tensor     " << r.tensor << " (" << r.dtype << " " << shape_text(r.shape) << ")\n";
  os << "reference  " << r.what << ": " << r.reference << "\n";
  os << "positions  " << r.first_position << " .. " << r.last_position << (r.what == "bias" ? " (queries)" : "")
     << "\n";
  os << "tolerance  " << fmt(r.tolerance) << " (" << r.tolerance_rule << "; value range " << fmt(r.value_range)
     << ")\n";
  os << "error      max abs " << fmt(r.max_abs) << ", max rel " << fmt(r.max_rel);
  if (r.ratio) os << ", best constant factor " << fmt(*r.ratio);
  os << "\n";
  print_bands(os, r.bands);
  for (const check::ChannelGroup& g : r.channels) {
    os << "  channels " << g.name << " [" << g.first << ", " << g.first + g.count << "): max abs " << fmt(g.max_abs)
       << "\n";
  }
  if (!r.hypotheses.empty()) {
    os << "hypotheses (posenc's values recomputed under each):\n";
    char line[160];
    for (const check::Hypothesis& h : r.hypotheses) {
      std::snprintf(line, sizeof line, "  %-22s max abs %-10s %s\n", h.name.c_str(), fmt(h.max_abs).c_str(),
                    h.explains ? "explains" : "");
      os << line;
    }
  }
  os << "diagnosis:\n";
  for (const std::string& d : r.diagnosis) os << "  - " << d << "\n";
  os << (r.matches ? "result: matches\n" : "result: does not match\n");
}

bool parse_int(std::string_view s, int64_t& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  const auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end;
}

}  // namespace

std::vector<int64_t> parse_position_list(const std::string& text) {
  std::vector<int64_t> out;
  auto bad = [&]() {
    fail_argument(kOp, "--positions must be integers or ranges a:b separated by commas, got '", text, "'");
  };
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view item(text.data() + at, comma - at);
    const size_t colon = item.find(':');
    int64_t a = 0, b = 0;
    if (colon == std::string_view::npos) {
      if (!parse_int(item, a)) bad();
      out.push_back(a);
    } else {
      if (!parse_int(item.substr(0, colon), a) || !parse_int(item.substr(colon + 1), b) || b < a) bad();
      if (b - a > (int64_t{1} << 31)) bad();
      for (int64_t p = a; p < b; ++p) out.push_back(p);
    }
    at = comma + 1;
  }
  return out;
}

CheckCommand::CheckCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("check", "Compare a tensor dumped from another implementation with posenc's values");
  app_->footer(
      "KIND: rope (--what cos-sin: [N, R] cos then sin; --what rotated: q or k after rotation, with the unrotated "
      "input from --input NAME or --input-file FILE), alibi and t5 (--what bias: (H, Tq, Tk); t5 needs its bucket "
      "table [num_buckets, H] as --input), or a table kind (--what table: sinusoidal, ..., sinusoidal-2d, "
      "sinusoidal-3d). Exit 0: matches; 1: does not match; 2: bad usage. See docs/check.md.");
  app_->add_option("KIND", kind_, "rope, alibi, t5, or a table kind (omit with --hf-config, in the RoPE group)");
  app_->add_option("TENSOR_FILE", file_, "The dumped tensor: .npy or .safetensors");
  tensor_opt_ = app_->add_option("--tensor", tensor_, "Tensor name in a .safetensors file");
  input_opt_ = app_->add_option("--input", input_,
                                "rotated: the unrotated input's name; t5: the bucket table's name "
                                "(in TENSOR_FILE, or in --input-file)");
  app_->add_option("--input-file", input_file_, "A second file holding the input (its only tensor, or --input)");
  what_opt_ = app_->add_option("--what", what_, "cos-sin | rotated | bias | table (default from KIND)");
  positions_opt_ = app_->add_option("--positions", positions_, "Positions of the rows: '0:64,1024,4096:4100'");
  app_->add_option("--start", start_, "First position when --positions is absent")->capture_default_str();
  app_->add_flag("--json", json_, "Print the report as one JSON object");
  base_opt_ = app_->add_option("--base", base_, "Frequency base (rope, sinusoidal kinds; default 10000)");
  rotary_dim_opt_ = app_->add_option("--rotary-dim", rotary_dim_, "rope, rotated: channels rotated (default head_dim)");
  layout_opt_ = app_->add_option("--layout", layout_,
                                 "rope: half | interleaved (default half); sinusoidal: interleaved | half | cos-sin");
  precision_opt_ = app_->add_option("--precision", precision_, "exact | fp32: the formula compared with");
  scale_opt_ = app_->add_option("--scale", scale_, "Amplitude (sinusoidal kinds)");
  length_opt_ = app_->add_option("--length", length_, "normalized: L in p/(L-1)");
  frames_opt_ = app_->add_option("--frames", frames_, "sinusoidal-3d: frames F");
  height_opt_ = app_->add_option("--height", height_, "sinusoidal-2d/3d: grid height");
  width_opt_ = app_->add_option("--width", width_, "sinusoidal-2d/3d: grid width");
  normalize_opt_ = app_->add_flag("--normalize", normalize_, "sinusoidal-2d/3d: normalized coordinates");
  normalize_scale_opt_ = app_->add_option("--normalize-scale", normalize_scale_, "sinusoidal-2d/3d: see --normalize");
  query_offset_opt_ = app_->add_option("--query-offset", query_offset_, "bias: i' = i + offset (default Tk - Tq)");
  causal_opt_ = app_->add_flag("--causal", causal_, "alibi: -inf above the diagonal");
  num_buckets_opt_ = app_->add_option("--num-buckets", num_buckets_, "t5 (default: the bucket table's rows)");
  max_distance_opt_ = app_->add_option("--max-distance", max_distance_, "t5 (default 128)");
  unidirectional_opt_ = app_->add_flag("--unidirectional", unidirectional_, "t5: causal (decoder) buckets");
  rope_.add_to(*app_);
}

void CheckCommand::refuse_options(const std::string& kind) const {
  const bool rope = kind == "rope", grid = kind == "sinusoidal-2d" || kind == "sinusoidal-3d";
  const bool sinusoidal = kind == "sinusoidal" || grid, bias = kind == "alibi" || kind == "t5";
  const std::pair<const CLI::Option*, bool> reads[] = {
      {base_opt_, rope || sinusoidal || kind == "sine-only"},
      {rotary_dim_opt_, rope},
      {layout_opt_, rope || sinusoidal},
      {precision_opt_, rope || sinusoidal},
      {scale_opt_, sinusoidal},
      {length_opt_, kind == "normalized"},
      {frames_opt_, kind == "sinusoidal-3d"},
      {height_opt_, grid},
      {width_opt_, grid},
      {normalize_opt_, grid},
      {normalize_scale_opt_, grid},
      {query_offset_opt_, bias},
      {causal_opt_, kind == "alibi"},
      {num_buckets_opt_, kind == "t5"},
      {max_distance_opt_, kind == "t5"},
      {unidirectional_opt_, kind == "t5"},
  };
  for (const auto& [option, read] : reads) {
    if (option->count() > 0 && !read) fail_argument(kOp, option->get_name(), " does not apply to kind '", kind, "'");
  }
}

int CheckCommand::run() const {
  check::CheckRequest request;
  std::string file = file_;
  const bool hf = rope_.has_hf_config();
  if (hf) {
    // The config names the scheme: the one positional is the file.
    if (file.empty()) file = kind_;
    else fail_argument(kOp, "KIND does not apply with --hf-config (the config gives the scheme), got '", kind_, "'");
    if (!kernels::is_unscaled(rope_.scaling())) {  // any scaling option given (--seq-len is not one)
      fail_argument(kOp, "the RoPE scaling options conflict with --hf-config (the config gives the scaling)");
    }
  }
  if (file.empty()) fail_argument(kOp, "TENSOR_FILE is required: posenc check KIND TENSOR_FILE");
  if (hf) {
    check::apply_hf_config(rope_.hf_config_path(), rope_.layer(), request);
  } else {
    request.kind = kind_;
    if (kind_ != "rope") rope_.refuse_for(kOp, "kind '" + kind_ + "'");
    request.rope.scaling = rope_.scaling();
  }
  request.rope.seq_len = rope_.seq_len();
  const std::string& kind = request.kind;
  refuse_options(kind);
  if (what_opt_->count() > 0) request.what = check::parse_what(what_);
  const std::optional<std::string> tensor = tensor_opt_->count() > 0 ? std::optional(tensor_) : std::nullopt;
  request.tensor = check::load_dumped(file, tensor);
  if (!input_file_.empty()) {
    request.input =
        check::load_dumped(input_file_, input_opt_->count() > 0 ? std::optional(input_) : std::nullopt);
  } else if (input_opt_->count() > 0) {
    request.input = check::load_dumped(file, input_);
  }
  if (positions_opt_->count() > 0) request.positions = parse_position_list(positions_);
  request.start = start_;
  if (base_opt_->count() > 0) request.rope.base = request.absolute.base = request.grid.base = base_;
  if (rotary_dim_ != 0) request.rope.rotary_dim = rotary_dim_;
  if (layout_opt_->count() > 0) {
    if (kind == "rope") {
      request.rope.layout = kernels::parse_rope_layout(layout_, kOp);
    } else {
      request.absolute.layout = request.grid.layout = kernels::parse_layout(layout_, kOp);
    }
  }
  if (precision_opt_->count() > 0) {
    request.rope.precision = request.absolute.precision = request.grid.precision =
        kernels::parse_precision(precision_, kOp);
  }
  if (scale_opt_->count() > 0) request.absolute.scale = request.grid.scale = scale_;
  if (length_opt_->count() > 0) request.absolute.length = length_;
  if (frames_opt_->count() > 0) request.grid.frames = frames_;
  request.grid.height = height_;
  request.grid.width = width_;
  request.grid.normalize = normalize_;
  if (normalize_scale_opt_->count() > 0) request.grid.normalize_scale = normalize_scale_;
  if (query_offset_opt_->count() > 0) request.bias.query_offset = query_offset_;
  request.bias.causal = causal_;
  if (num_buckets_opt_->count() > 0) request.bias.t5.num_buckets = num_buckets_;
  else if (!hf) request.bias.t5.num_buckets = 0;  // the bucket table's rows
  if (max_distance_opt_->count() > 0) request.bias.t5.max_distance = max_distance_;
  if (unidirectional_) request.bias.t5.bidirectional = false;

  const check::CheckReport report = check::run_check(request);
  if (json_) {
    std::cout << check::report_json(report) << "\n";
  } else {
    print_report(std::cout, report);
  }
  return report.matches ? 0 : 1;
}

}  // namespace posenc::cli
