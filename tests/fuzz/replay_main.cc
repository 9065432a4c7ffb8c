// attnkit fuzz targets without libFuzzer (any compiler, every ctest run): runs the target on each file given (or
// each file of a folder given: the committed corpus, whose inputs once found new code or a bug), then on
// --random N byte strings from a seeded stream, so CI explores a little further on every run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t files = 0, random = 0;
  uint64_t seed = 1;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--random") && i + 1 < argc) {
      random = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--verbose")) {
      verbose = true;
    } else if (std::filesystem::is_directory(argv[i])) {
      for (const auto& entry : std::filesystem::directory_iterator(argv[i]))
        if (entry.is_regular_file()) run_file(entry.path()), ++files;
    } else if (std::filesystem::is_regular_file(argv[i])) {
      run_file(argv[i]), ++files;
    } else {
      std::fprintf(stderr, "usage: %s [FILE|DIR]... [--random N] [--seed S] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  std::vector<uint8_t> bytes;
  for (size_t k = 0; k < random; ++k) {
    bytes.resize(8 + seed % 120);
    for (uint8_t& b : bytes) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      b = static_cast<uint8_t>(seed >> 56);
    }
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  size_t refused = 0;
  for (const auto& [reason, n] : attnkit::fuzz::refusals()) {
    refused += n;
    if (verbose) std::printf("%6zu refused: %s\n", n, reason.c_str());
  }
  std::printf("%zu corpus inputs and %zu random ones: no failure (%zu calls accepted, %zu refused)\n", files, random,
              attnkit::fuzz::accepted_calls(), refused);
  return 0;
}
