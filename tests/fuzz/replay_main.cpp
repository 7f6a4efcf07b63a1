// Replays fuzz inputs through a fuzz target without libFuzzer: every file named on the command
// line, or found in a directory named there, is passed to LLVMFuzzerTestOneInput once. CI runs the
// committed corpus (seeds and every crash found so far) this way under ASan+UBSan, so a regression
// in a loader fails `make test` in seconds.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_input.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (fs::is_directory(argv[i])) {
      for (const auto& e : fs::recursive_directory_iterator(argv[i]))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else {
      inputs.emplace_back(argv[i]);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (give files or corpus directories)\n");
    return 2;
  }
  const char* verbose = std::getenv("GLASS_FUZZ_VERBOSE");  // names each input (fuzz_input.h)
  for (const fs::path& p : inputs) {
    if (verbose != nullptr && std::string(verbose) == "1") std::fprintf(stderr, "%s\n", p.c_str());
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  std::error_code ec;
  fs::remove_all(glass::fuzz::scratch_dir(), ec);
  return 0;
}
