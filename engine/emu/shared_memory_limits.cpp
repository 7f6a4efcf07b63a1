#include "engine/emu/shared_memory_limits.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "engine/emu/device_limits.h"
#include "engine/emu/error.h"
#include "engine/emu/static_shared.h"

namespace glass::emu {
namespace {

// A kernel: its function, or its name when it has none (a lambda body).
using KernelKey = std::pair<const void*, std::string>;
KernelKey key_of(const void* kernel, const char* name) {
  return kernel ? KernelKey{kernel, ""} : KernelKey{nullptr, name};
}

struct Registry {
  std::mutex mutex;
  std::map<const void*, size_t> opted_in;  // cudaFuncAttributeMaxDynamicSharedMemorySize
  std::map<KernelKey, std::vector<size_t>> static_written;
};

Registry& registry() {
  // Never destroyed: emulated-GPU stream workers may still run while static destructors do.
  static Registry& r = *new Registry;
  return r;
}

std::string kib(size_t bytes) {
  return std::to_string(bytes) + " bytes" +
         (bytes % 1024 == 0 ? " (" + std::to_string(bytes / 1024) + " KiB)" : "");
}

}  // namespace

void set_max_dynamic_shared_bytes(const void* kernel, const char* name, size_t bytes) {
  if (!kernel)
    throw EmuError("cudaFuncSetAttribute(MaxDynamicSharedMemorySize) for kernel '" +
                   std::string(name) + "': no kernel function given");
  if (bytes > kH200.shared_per_block_optin)
    throw EmuError("kernel '" + std::string(name) + "': cannot opt into " + kib(bytes) +
                   " of dynamic shared memory per block: the device's opt-in limit is " +
                   kib(kH200.shared_per_block_optin) + " (" + kH200.name + ")");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.opted_in[kernel] = bytes;
}

size_t max_dynamic_shared_bytes(const void* kernel) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (auto it = r.opted_in.find(kernel); it != r.opted_in.end()) return it->second;
  auto it = r.static_written.find(KernelKey{kernel, ""});
  const size_t used = it == r.static_written.end() ? 0 : detail::static_shared_bytes(it->second);
  return used >= kH200.shared_per_block ? 0 : kH200.shared_per_block - used;
}

namespace detail {

std::optional<std::vector<size_t>> known_static_shared(const void* kernel, const char* name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.static_written.find(key_of(kernel, name));
  if (it == r.static_written.end()) return std::nullopt;
  return it->second;
}

void record_static_shared(const void* kernel, const char* name,
                          const std::vector<size_t>& written) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<size_t>& known = r.static_written[key_of(kernel, name)];
  std::vector<size_t> merged;
  std::set_union(known.begin(), known.end(), written.begin(), written.end(),
                 std::back_inserter(merged));
  known = std::move(merged);
}

void check_shared_memory(const void* kernel, const char* name, size_t static_bytes,
                         size_t dynamic_bytes, const std::string& static_detail) {
  std::optional<size_t> opted;
  if (kernel) {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    if (auto it = r.opted_in.find(kernel); it != r.opted_in.end()) opted = it->second;
  }
  const size_t total = static_bytes + dynamic_bytes;
  std::string over;
  if (static_bytes > kH200.shared_per_block) {
    over = "static __shared__ alone may use at most " + kib(kH200.shared_per_block) +
           " per block (nvcc refuses more)";
  } else if (!opted && total > kH200.shared_per_block) {
    over = "the limit is " + kib(kH200.shared_per_block) +
           " per block unless the kernel opts in with cudaFuncSetAttribute("
           "cudaFuncAttributeMaxDynamicSharedMemorySize) (kernels/cuda/shared_memory.h), up to " +
           kib(kH200.shared_per_block_optin);
  } else if (opted && dynamic_bytes > *opted) {
    over = "the kernel opted into at most " + kib(*opted) + " of dynamic shared memory";
  } else if (opted && total > kH200.shared_per_block_optin) {
    over = "the device's limit with opt-in is " + kib(kH200.shared_per_block_optin) + " per block";
  } else {
    return;
  }
  throw EmuError("kernel '" + std::string(name) + "': a block asks for " + kib(total) +
                 " of shared memory (" + std::to_string(static_bytes) + " static" +
                 (static_detail.empty() ? "" : ": " + static_detail) + "; " +
                 std::to_string(dynamic_bytes) + " dynamic), more than the " + kH200.name +
                 " allows: " + over);
}

}  // namespace detail
}  // namespace glass::emu
