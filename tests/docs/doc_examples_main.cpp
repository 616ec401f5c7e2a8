// Runs every C++ example of the docs (ctest DocsExamples.Cpp) in a scratch
// directory holding the files they open: a BERT and a GPT-2 checkpoint's
// position table (written with posenc::io, other tensors beside them so that
// finding the table by name matters).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "doc_examples.h"
#include "posenc/io/tensor_file.h"

namespace {

posenc::io::NamedTensor random_table(const std::string& name, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = normal(rng);
  posenc::io::NamedTensor t{name, {posenc::io::ElementType::kFloat32, {rows, cols}, {}}};
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  t.tensor.data.assign(bytes, bytes + values.size() * sizeof(float));
  return t;
}

}  // namespace

int main() {
  std::string scratch = (std::filesystem::temp_directory_path() / "posenc-doc-examples-XXXXXX").string();
  if (mkdtemp(scratch.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  std::filesystem::current_path(scratch);
  std::mt19937 rng(0);
  const std::vector<posenc::io::NamedTensor> bert = {
      random_table("bert.embeddings.position_embeddings.weight", 512, 768, rng),
      random_table("bert.embeddings.word_embeddings.weight", 64, 768, rng)};
  const std::vector<posenc::io::NamedTensor> gpt2 = {random_table("transformer.wpe.weight", 1024, 768, rng),
                                                     random_table("transformer.wte.weight", 64, 768, rng)};
  posenc::io::save_tensors("bert.safetensors", bert);
  posenc::io::save_tensors("gpt2.safetensors", gpt2);
  int failed = 0;
  for (const DocExample& example : kDocExamples) {
    try {
      example.run();
      std::printf("ran the C++ examples of %s\n", example.page);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: an example threw: %s\n", example.page, e.what());
      ++failed;
    }
  }
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  std::filesystem::remove_all(scratch);
  return failed == 0 ? 0 : 1;
}
