// DeviceRuntime: everything the engine asks of a device apart from its kernels (those are the
// kernel tables of kernels/backend.h): backing memory, copies between host and device, native
// streams and events, synchronisation, free memory, the hardware's name, and the device's
// Capabilities. The engine's device-independent code (the allocator, streams, device flags,
// tensors, the launch gateway) and the communicator call a runtime; upper layers (autograd, nn,
// optim, train, comm) ask capabilities(device), never the device's kind.
//
// One implementation per device, each in one file that CMake compiles only when the device is
// built in (so the device-specific code, and its build conditions, live there):
//   cpu   engine/runtime_cpu.cpp         always
//   emu   engine/runtime_emu.cpp         GLASS_EMU
//   meta  engine/runtime_meta.cpp        GLASS_EMU (meta plans with the emu kernel table)
//   cuda  engine/cuda/runtime_cuda.cpp   GLASS_CUDA
// Each defines `const DeviceRuntime& <kind>_runtime()`, and engine/device_runtime.cpp lists
// them: adding a device is a DeviceKind, its runtime file, a line there, its kernel table
// (kernels/backend.h) and a line of CMake (docs/design.md, "Devices").
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/device_flags.h"
#include "engine/device_memory.h"

namespace glass {

inline constexpr size_t kDeviceKinds = 4;  // DeviceKind's values

// What a device can do, for the layers above the engine. Every field is a fact about the device
// that some decision depends on; the comment says which.
struct Capabilities {
  bool holds_data = true;         // tensors hold values (false on meta: shapes and launches only)
  bool host_memory = false;       // its memory is host memory: memcpy reads it, MPI moves it
  bool kernels_on_host = false;   // its kernels run on the host's cores (MFU against the host peak)
  bool cuda_kernels = false;      // runs kernels/cuda (emu and cuda run them, meta plans them)
  bool fused_classifier = false;  // the loss is the fused classifier kernel (nn/causal_lm.cpp)
  bool gemm_workspace = false;    // cuBLASLt's workspace is allocated (train/preflight.cpp)
  bool device_scalars = false;    // AdamW's step scalars are staged in device memory
  bool tf32 = false;              // f32 GEMMs can use TF32 (train_gpt --tf32)
  bool bf16_by_default = false;   // training defaults to bf16 mixed precision (--dtype "")
  bool kernel_ladders = false;    // GLASS_KERNEL_VARIANT picks rungs of its kernels
  bool cudnn_attention = false;   // --attention cudnn may run (when built with cuDNN)
  bool graphs = false;            // CUDA graphs capture and replay a step (--cuda-graph)
  bool native_streams = false;    // streams of its own (events, a current stream per thread)
  bool device_flags = false;      // kernels report bad input through device flags, read later
  bool small_host_blocks = false;  // the allocator cuts requests of up to 1 KiB from slabs
  bool several_devices = false;    // "<name>:N" names one of several (cuda:N)
  bool picked_by_auto = false;     // --device auto picks it when one is present
};

// A stream of the device's own runtime (a CUDA stream), owned by a glass::Stream (engine/stream.h).
class NativeStream {
 public:
  virtual ~NativeStream() = default;
  virtual void* handle() const = 0;  // cudaStream_t on cuda
  // Makes this stream, and its device, current on the calling thread until the result is dropped.
  virtual std::shared_ptr<void> make_current() const = 0;
  // The host waits for the work issued onto it so far; throws the fault of a kernel that failed.
  virtual void synchronize() const = 0;
  // Work issued onto it from now on waits for the work the calling thread issued so far.
  virtual void wait_for_calling_thread() const = 0;
  // The calling thread's current stream waits for the work issued onto this one so far (on the
  // device: the host does not wait).
  virtual void join_calling_thread() const = 0;
};

class DeviceRuntime {
 public:
  DeviceRuntime(DeviceKind kind, const char* name, Capabilities capabilities)
      : kind_(kind), name_(name), capabilities_(capabilities) {}
  virtual ~DeviceRuntime() = default;
  DeviceRuntime(const DeviceRuntime&) = delete;
  DeviceRuntime& operator=(const DeviceRuntime&) = delete;

  DeviceKind kind() const { return kind_; }
  const char* name() const { return name_; }  // "cpu", "emu", "cuda", "meta"
  const Capabilities& capabilities() const { return capabilities_; }

  // --- devices ---
  // Throws one clear line when `d` does not exist here (cuda: no GPU, or no GPU of that index);
  // where there are several, also makes `d` the calling thread's current one.
  virtual void require(Device d) const { (void)d; }
  virtual int device_count() const { return 1; }
  // "cuda:N" -> N for a device with several_devices; throws naming `name` when it is malformed.
  virtual int parse_index(const std::string& name) const;
  // What a report calls the hardware (engine/device.h, device_name).
  virtual std::string hardware_name(Device d) const = 0;
  // Blocks until every kernel issued to `d` so far has finished (engine/device.h, synchronize).
  virtual void synchronize(Device d) const { (void)d; }
  // After every launch under GLASS_SYNC (engine/debug.h): surfaces an asynchronous kernel fault.
  virtual void synchronize_after_launch() const {}

  // --- memory ---
  // `bytes` of device memory, or nullptr when the device is out of memory.
  virtual void* device_malloc(Device d, size_t bytes) const = 0;
  virtual void device_free(Device d, void* ptr) const = 0;
  // Whether the allocator gives every request an allocation of exactly its size, uncached (emu
  // with red zones: one byte past a tensor's end is then caught).
  virtual bool exact_sizes() const { return false; }
  // A cached block of `bytes` is about to be freed on `stream` (cuda: checks its last use there).
  virtual void check_block_release(void* ptr, size_t bytes, void* stream) const {
    (void)ptr, (void)bytes, (void)stream;
  }
  // Free and total memory now (engine/device_memory.h); nullopt where there is no figure.
  virtual std::optional<DeviceMemory> memory_info(Device d) const = 0;

  // --- copies (contiguous bytes) ---
  // Host to device, ordered after the work issued so far; the host does not wait for it.
  virtual void copy_from_host(void* device_dst, const void* host_src, size_t bytes) const = 0;
  // Device to host, after the work issued so far: each read is complete when this returns.
  virtual void read_to_host(std::span<const HostRead> reads) const = 0;
  // Zeroes device bytes, ordered after the work issued so far; the host does not wait.
  virtual void zero(void* device_dst, size_t bytes) const = 0;

  // --- streams and events (native_streams) ---
  // The calling thread's current native stream; nullptr on devices without native streams.
  virtual void* current_stream() const { return nullptr; }
  // A native stream on `d` for glass::Stream `id`; nullptr on devices without native streams.
  virtual std::unique_ptr<NativeStream> make_stream(Device d, int id) const {
    (void)d, (void)id;
    return nullptr;
  }
  // An event marking the current end of `stream`, whether it has completed, and its release.
  virtual void* record_event(void* stream) const;
  virtual bool event_done(void* event) const;
  virtual void release_event(void* event) const;
  // Runs `issue` (a launch onto `stream`) and stamps when the device ran it, on the host clock
  // `clock_us`; false (nothing run) where the device has no clock of its own, and the caller
  // times it on the host.
  virtual bool time_on_device(void* stream, const std::function<void()>& issue,
                              double (*clock_us)(), double& start_us, double& end_us) const {
    (void)stream, (void)issue, (void)clock_us, (void)start_us, (void)end_us;
    return false;
  }

 private:
  DeviceKind kind_;
  const char* name_;
  Capabilities capabilities_;
};

// A device whose memory is host memory (cpu, emu): copies are memcpy, and kernels have finished
// when their launch returns, so there is nothing to wait for.
class HostMemoryRuntime : public DeviceRuntime {
 public:
  using DeviceRuntime::DeviceRuntime;
  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) const override;
  void read_to_host(std::span<const HostRead> reads) const override;
  void zero(void* device_dst, size_t bytes) const override;
};

// The runtime of `d`'s device; throws one line naming the device and the devices of this build
// when it is not built in ("device 'cuda:0' is not available: this build of glass has no CUDA
// runtime (devices: cpu, emu, meta)").
const DeviceRuntime& runtime_for(Device d);
// The same for a kind; nullptr when it is not built in.
const DeviceRuntime* find_runtime(DeviceKind kind);
// The runtimes built into this glass, in DeviceKind order.
const std::vector<const DeviceRuntime*>& built_runtimes();
// "cpu, emu, cuda, meta": the devices this build can run, for error messages.
std::string built_device_names();
// Why `kind` is not in this build ("this build of glass has no CUDA runtime").
const char* missing_device_reason(DeviceKind kind);

inline const Capabilities& capabilities(Device d) { return runtime_for(d).capabilities(); }

// The host CPU's model name from /proc/cpuinfo ("unknown host CPU" where there is none): what cpu
// and emu report as their hardware.
std::string host_cpu_name();

}  // namespace glass
