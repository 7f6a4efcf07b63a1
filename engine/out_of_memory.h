// Out of memory: the one error an allocation that does not fit raises, on every device, saying
// what asked, what was held and what would help:
//
//   out of memory on cuda:0 allocating 768.0 MiB for a tensor [16, 128, 50304] bf16 in op
//   'matmul' (forward) of module 'lm_head': the allocator holds 20.1 GiB allocated and 20.3 GiB
//   reserved; its largest free block was 12.0 MiB (the cache was given back and the allocation
//   tried again); the device has 310.0 MiB free of 1.00 GiB (cudaMemGetInfo). To fit the step:
//   a smaller --batch, --grad-accum K (the same global batch in K micro-steps), --dtype bf16,
//   --recompute (activations recomputed in backward), --zero 1 (optimizer state sharded over the
//   data-parallel ranks); run without --no-preflight for each one's planned peak before step 1.
//
// The Allocator throws it with the figures it holds; Tensor::empty adds the tensor's shape and
// dtype on its way out; the op and phase come from the thread's launch context
// (engine/launch.h's LaunchScope), the module from autograd (its ModulePathScope: in forward the
// module whose forward runs, in backward the module whose forward made the node), through the
// source that autograd installs (the engine does not know modules).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/device_memory.h"
#include "engine/error.h"
#include "engine/launch.h"

namespace glass {

struct OutOfMemoryFigures {
  Device device;
  int64_t request_bytes = 0;         // the block asked for (size-class rounded)
  int64_t allocated_bytes = 0;       // the allocator's, when it failed
  int64_t reserved_bytes = 0;        // ... before it gave its cache back
  int64_t largest_free_block = 0;    // the largest block of its cache before it was given back
  std::optional<DeviceMemory> free;  // the device's own figures after the retry failed
  std::string op;                    // the launch context's op ("" outside any)
  Phase phase = Phase::other;
  std::string module;  // the module that asked ("" unknown)
  std::string tensor;  // "[16, 128, 50304] bf16" once Tensor::empty added it ("" before)
};

class OutOfMemoryError : public Error {
 public:
  explicit OutOfMemoryError(OutOfMemoryFigures figures);
  const char* what() const noexcept override { return message_.c_str(); }
  const OutOfMemoryFigures& figures() const { return figures_; }
  // Names the tensor being made (Tensor::empty, as the error passes through it).
  void set_tensor(const std::string& tensor);

 private:
  OutOfMemoryFigures figures_;
  std::string message_;
};

// Throws OutOfMemoryError with `figures`, the thread's op, phase and module filled in.
[[noreturn]] void throw_out_of_memory(OutOfMemoryFigures figures);

// The module path of the code running on this thread ("" when none), as autograd knows it.
using ModulePathSource = std::string (*)();
void set_module_path_source(ModulePathSource source);

}  // namespace glass
