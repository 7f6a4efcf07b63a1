// Helpers for the kernel-ladder tests: the cuda_kernels helpers (emu tensors, cpu copies,
// determinism under shuffled thread order) and a scoped rung selection.
#pragma once

#include "kernels/cuda/ladder/ladder_kernels.h"
#include "kernels/ladder.h"
#include "tests/cuda_kernels/kernel_test.h"

namespace glass::testing {

// While alive, the emu/cuda backend entries run the rungs of `s`; the previous selection after.
class ScopedSelection {
 public:
  explicit ScopedSelection(const kernels::ladder::Selection& s)
      : saved_(kernels::ladder::active_selection()) {
    kernels::ladder::set_active_selection(s);
  }
  ~ScopedSelection() { kernels::ladder::set_active_selection(saved_); }
  ScopedSelection(const ScopedSelection&) = delete;
  ScopedSelection& operator=(const ScopedSelection&) = delete;

 private:
  kernels::ladder::Selection saved_;
};

// A contiguous [rows, cols] tensor on the kernel device whose first element lies `offset` floats
// past a 256-byte aligned allocation: row starts then fall anywhere relative to 16-byte bounds.
inline Tensor device_at_offset(int64_t rows, int64_t cols, int64_t offset) {
  const Tensor storage = device_empty({rows * cols + offset});
  return view(slice(storage, 0, offset, rows * cols + offset), {rows, cols});
}

}  // namespace glass::testing
