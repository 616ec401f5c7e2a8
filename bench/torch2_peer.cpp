// The torch 2 peer (torch2_peer.h).
#include "torch2_peer.h"

#include <spawn.h>
#include <sys/wait.h>
#include <torch/version.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace posenc::bench {
namespace {

// The command that runs the peer: this process's torch when it is torch 2 (a
// build made in the torch 2 root), else scripts/torch2-run into that root.
std::vector<std::string> peer_command(const std::string& name, std::string& why_not) {
  const std::string source = POSENC_SOURCE_DIR;
  const std::string script = "bench/peers/" + name;
  if (TORCH_VERSION_MAJOR >= 2) return {"/bin/sh", "-c", "cd \"$1\" && exec /usr/bin/python3 " + script, "sh", source};
  const char* env_root = std::getenv("POSENC_TORCH2_ROOT");
  // Absolute, and handed on so: scripts/torch2-run runs from the source folder, not from here.
  const std::string root =
      std::filesystem::absolute(env_root && *env_root ? env_root : source + "/build/torch2-root").string();
  setenv("POSENC_TORCH2_ROOT", root.c_str(), 1);
  if (!std::filesystem::exists(root + "/.posenc-packages")) {
    why_not = "no torch 2 root at " + root + " (make build-torch2 makes it)";
    return {};
  }
  if (geteuid() != 0) {
    why_not = "entering the torch 2 root needs root";
    return {};
  }
  return {"/bin/sh", "-c", "cd \"$1\" && exec scripts/torch2-run /usr/bin/python3 " + script, "sh", source};
}

std::string shape_text(const at::Tensor& t) {
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : ",") + std::to_string(d);
  return s;
}

}  // namespace

std::unique_ptr<Torch2Peer> Torch2Peer::start(const std::string& script, int threads, std::string& why_not) {
  const std::vector<std::string> command = peer_command(script, why_not);
  if (command.empty()) return nullptr;
  std::signal(SIGPIPE, SIG_IGN);  // a peer that ended makes a write fail with EPIPE, reported, not a killed benchmark
  int to_peer[2], from_peer[2];
  if (pipe(to_peer) != 0 || pipe(from_peer) != 0) {
    why_not = std::string("pipe: ") + std::strerror(errno);
    return nullptr;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_peer[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_peer[1], 1);
  for (int fd : {to_peer[0], to_peer[1], from_peer[0], from_peer[1]}) posix_spawn_file_actions_addclose(&actions, fd);
  std::vector<char*> argv;
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_peer[0]);
  close(from_peer[1]);
  if (spawned != 0) {
    close(to_peer[1]);
    close(from_peer[0]);
    why_not = std::string("cannot start /bin/sh: ") + std::strerror(spawned);
    return nullptr;
  }
  std::unique_ptr<Torch2Peer> peer(new Torch2Peer(pid, fdopen(to_peer[1], "w"), fdopen(from_peer[0], "r")));
  try {
    peer->banner_ = peer->expect("ready");
    const std::string reply = peer->command("threads " + std::to_string(threads), "threads");  // "N gemm=G"
    const size_t gemm = reply.find("gemm=");
    if (gemm != std::string::npos) peer->banner_ += ", its float32 GEMM " + reply.substr(gemm + 5) + " GFLOP/s";
  } catch (const std::exception& e) {
    why_not = e.what();
    return nullptr;
  }
  return peer;
}

Torch2Peer::~Torch2Peer() {
  std::fputs("quit\n", to_);
  std::fclose(to_);
  std::fclose(from_);
  int status = 0;
  waitpid(pid_, &status, 0);
}

std::string Torch2Peer::read_line() {
  std::string line;
  for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) line += char(c);
  if (line.empty() && std::feof(from_)) throw std::runtime_error("the torch 2 peer ended without an answer");
  return line;
}

std::string Torch2Peer::expect(const std::string& word) {
  const std::string line = read_line();
  if (line.rfind(word, 0) != 0) throw std::runtime_error("torch 2 peer: " + line);
  return line.size() > word.size() ? line.substr(word.size() + 1) : "";
}

void Torch2Peer::send(const std::string& name, const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kFloat).contiguous();
  const size_t bytes = size_t(c.numel()) * sizeof(float);
  std::fprintf(to_, "tensor %s %s %zu\n", name.c_str(), shape_text(c).c_str(), bytes);
  if (std::fwrite(c.data_ptr<float>(), 1, bytes, to_) != bytes) throw std::runtime_error("torch 2 peer: write failed");
}

std::string Torch2Peer::command(const std::string& line, const std::string& reply) {
  std::fprintf(to_, "%s\n", line.c_str());
  std::fflush(to_);
  return expect(reply);
}

void Torch2Peer::define(const std::string& id, const std::string& fields) { command("case " + id + " " + fields, "ok"); }

at::Tensor Torch2Peer::read_tensor() {
  std::istringstream header(read_line());
  std::string dims;
  size_t bytes = 0;
  header >> dims >> bytes;
  std::vector<int64_t> shape;
  std::istringstream d(dims);
  for (std::string part; std::getline(d, part, ',');) shape.push_back(std::stoll(part));
  at::Tensor t = at::empty(shape, at::kFloat);
  if (size_t(t.numel()) * sizeof(float) != bytes || std::fread(t.data_ptr<float>(), 1, bytes, from_) != bytes) {
    throw std::runtime_error("torch 2 peer: a tensor reply of " + dims + " did not arrive whole");
  }
  return t;
}

std::vector<at::Tensor> Torch2Peer::result(const std::string& id) {
  std::fprintf(to_, "result %s\n", id.c_str());
  std::fflush(to_);
  const int count = std::stoi(expect("result"));
  std::vector<at::Tensor> r;
  for (int n = 0; n < count; ++n) r.push_back(read_tensor());
  return r;
}

double Torch2Peer::seconds(const std::string& id) { return std::stod(command("time " + id, "seconds")); }

void Torch2Peer::forget() { command("forget", "ok"); }

}  // namespace posenc::bench
