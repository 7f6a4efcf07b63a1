// Device error flags: bad input that only a kernel sees (a token id outside the table, a target
// outside the vocabulary) is reported without making the host wait for the device.
//
// A kernel cannot throw, and reading a flag back after every launch would cost a host
// synchronisation per op. So the op gets a fresh flag (an int32 in device memory, zeroed on the
// current stream without waiting), its kernels raise it, and the op registers the flag with the
// message that names the problem. The next host read of that device (Tensor::copy_to_host: item(),
// to_vector, the step's loss) reads every pending flag in the same synchronisation and throws the
// first raised one's message. Like CUDA's own asynchronous errors, a bad id surfaces at the next
// read, not at the call; `check_device_flags` reads them at once where that is wanted.
//
// Encoding: 0 = not raised; a kernel that meets bad input at `position` does
//   atomicMax(flag, kFlagBase - position)
// so that, whatever order the threads ran in, the flag ends up naming the first bad position.
// On `cpu` the kernels throw directly and no flag is used. On `meta` (no data, no kernel runs) a
// flag is allocated and kept pending as elsewhere, so that meta's allocator counts it as a GPU's
// does, and dropped unread at the next read.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace glass {

constexpr int32_t kFlagBase = INT32_MAX;

// The message of a raised flag, given the first bad position (it may read tensors it captured:
// that read happens on the error path only).
using FlagMessage = std::function<std::string(int64_t position)>;

// A fresh, zeroed flag (i32[1]) on `device` (emu or cuda).
Tensor new_device_flag(Device device);
// Registers `flag`: the next host read of its device checks it. More than kMaxPendingFlags pending
// flags on a device are checked at once (one synchronisation), so a loop that never reads back
// keeps a bounded list.
void defer_flag_check(const Tensor& flag, FlagMessage message);
constexpr size_t kMaxPendingFlags = 1024;
// Reads the flags pending on `device` now and throws the first raised one's message.
void check_device_flags(Device device);

// The flags pending on `device` now, with their messages, left pending. A CUDA graph's capture
// registers the flags of its ops once; whoever replays it registers them again after each
// replay (defer_flag_check), since the graph's kernels raise them anew (train/graph_step.cpp).
struct PendingFlag {
  Tensor flag;
  FlagMessage message;
};
std::vector<PendingFlag> pending_flags(Device device);

// One device -> host copy: `bytes` from device memory `src` to host memory `dst`.
struct HostRead {
  void* dst;
  const void* src;
  size_t bytes;
};
// The one place the engine reads device memory back (Tensor::copy_to_host, check_device_flags):
// the reads and every flag pending on `device`, in one synchronisation (counted by
// note_host_sync); then throws the first raised flag's message. On `cpu`, plain copies.
void read_to_host(Device device, std::span<const HostRead> reads, const char* what);

}  // namespace glass
