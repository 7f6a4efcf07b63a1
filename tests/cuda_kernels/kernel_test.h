// Helpers for the tests of kernels/cuda: each launcher runs on the emu device and is compared with
// the cpu kernel (kernels/cpu, the reference) on the same random inputs.
//
// The tensors a launcher gets live on the emu device (host memory behind device pointers); the
// cpu kernel gets the same values on cpu.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "engine/emu/settings.h"
#include "engine/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/testing.h"

namespace glass::testing {

inline const Device kKernelDevice = kEmu;

// A copy of a cpu tensor on the kernel device.
inline Tensor on_device(const Tensor& host) {
  return Tensor::from_host(host.raw_data(), host.shape(), host.dtype(), kKernelDevice);
}

// An uninitialised tensor on the kernel device (emu poisons fresh memory: unwritten outputs show).
inline Tensor device_empty(const Shape& shape, DType dtype = DType::f32) {
  return Tensor::empty(shape, dtype, kKernelDevice);
}

// Any contiguous tensor's bytes, read back to the host.
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> bytes(t.nbytes());
  t.copy_to_host(bytes.data());
  return bytes;
}

// A contiguous tensor as a cpu tensor (for all_close against the cpu kernel's outputs).
inline Tensor to_cpu(const Tensor& t) {
  const std::vector<unsigned char> bytes = bytes_of(t);
  return Tensor::from_host(bytes.data(), t.shape(), t.dtype(), kCPU);
}

// While alive, the emulator runs the threads of every block in an order shuffled by `seed`.
class ShuffledThreadOrder {
 public:
  explicit ShuffledThreadOrder(uint64_t seed) : saved_(emu::settings()) {
    emu::Settings s = saved_;
    s.shuffle_seed = seed;
    emu::set_settings(s);
  }
  ~ShuffledThreadOrder() { emu::set_settings(saved_); }
  ShuffledThreadOrder(const ShuffledThreadOrder&) = delete;
  ShuffledThreadOrder& operator=(const ShuffledThreadOrder&) = delete;

 private:
  emu::Settings saved_;
};

// Runs `run` (which overwrites `outputs`) three times: twice in natural thread order, once with a
// shuffled order, and expects bit-identical outputs every time.
template <class Run>
void expect_deterministic(const std::vector<Tensor>& outputs, Run&& run) {
  auto snapshot = [&] {
    std::vector<std::vector<unsigned char>> all;
    for (const Tensor& t : outputs) all.push_back(bytes_of(t));
    return all;
  };
  run();
  const auto first = snapshot();
  run();
  EXPECT_TRUE(first == snapshot()) << "second run differs";
  {
    ShuffledThreadOrder shuffled(12345);
    run();
  }
  EXPECT_TRUE(first == snapshot()) << "run with shuffled thread order differs";
}

}  // namespace glass::testing
