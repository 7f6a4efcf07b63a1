#include "fuzz_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/log.h"

namespace glass::fuzz {

const std::string& scratch_dir() {
  static const std::string dir = [] {
    const auto d =
        std::filesystem::temp_directory_path() / ("glass_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }();
  return dir;
}

std::string write_input(const uint8_t* data, size_t size, const std::string& name) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

void rejected(const std::exception& e) {
  static const bool verbose = [] {
    const char* v = std::getenv("GLASS_FUZZ_VERBOSE");
    return v != nullptr && std::string(v) == "1";
  }();
  if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
}

}  // namespace glass::fuzz
