// The settings of the emulated CUDA runtime for the suites that run on it (test_emucuda_runtime,
// and glass's test_cuda_runtime), made before main() and so before the runtime reads them (once):
// two emulated GPUs, the stream checks on.
#include <cstdlib>

namespace {
const bool environment_set = [] {
  setenv("GLASS_EMU_GPUS", "2", 1);
  setenv("GLASS_EMU_STREAM_CHECK", "1", 1);
  return true;
}();
}  // namespace
