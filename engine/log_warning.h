// One warning line in the engine's log (engine/log.h), for code that cannot include spdlog: the
// CUDA files nvcc compiles (a cuBLASLt GEMM that runs its epilogue in passes, a cuDNN plan that
// is not deterministic).
#pragma once

#include <string>

namespace glass {
void log_warning(const std::string& message);
}  // namespace glass
