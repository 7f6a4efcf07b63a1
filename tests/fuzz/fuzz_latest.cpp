// Fuzz target: the `latest` pointer of a checkpoint directory (--resume DIR), train/checkpoint.h.
// Whatever it holds, the loader must name a file inside the directory or refuse.
#include <filesystem>

#include "engine/error.h"
#include "fuzz_input.h"
#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const std::string d = glass::fuzz::scratch_dir() + "/ckpt_dir";
    std::filesystem::create_directories(d);
    return d;
  }();
  glass::fuzz::write_input(data, size, "ckpt_dir/latest");
  try {
    glass::train::load_checkpoint(dir);
  } catch (const glass::Error& e) {
    glass::fuzz::rejected(e);
  }
  return 0;
}
