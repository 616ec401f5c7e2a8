// A main for the fuzz targets in the normal (non-clang) build: runs every file
// of the given directories through LLVMFuzzerTestOneInput, then every prefix
// of each file and each file with one byte changed, so ctest replays the seed
// corpus and its nearest neighbours on every build (also under ASan/UBSan).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> files;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  size_t inputs = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    run(bytes);
    for (size_t n = 0; n < bytes.size(); ++n) run(bytes.substr(0, n));
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(changed[i] + 1);
      run(changed);
    }
    inputs += 1 + 2 * bytes.size();
  }
  std::printf("replayed %zu files, %zu inputs\n", files.size(), inputs);
  return files.empty() ? 1 : 0;
}
