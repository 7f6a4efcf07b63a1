#include "engine/device_flags.h"

#include <cstring>
#include <map>
#include <mutex>

#include "engine/device_runtime.h"
#include "engine/launch.h"

namespace glass {

namespace {

std::mutex pending_mu;
// Per device (its str()), in the order the ops registered them.
// Never destroyed: flags still pending at exit must not outlive the allocators they came from.
auto& pending = *new std::map<std::string, std::vector<PendingFlag>>;

}  // namespace

Tensor new_device_flag(Device device) {
  const DeviceRuntime& runtime = runtime_for(device);
  GLASS_CHECK(runtime.capabilities().device_flags, "new_device_flag: {} kernels throw directly",
              device.str());
  Tensor flag = Tensor::empty({1}, DType::i32, device);
  // Queued after the work issued so far: the host does not wait (nothing to zero on meta, where
  // the flag is only allocated and counted, as on a GPU).
  runtime.zero(flag.raw_data(), sizeof(int32_t));
  return flag;
}

void defer_flag_check(const Tensor& flag, FlagMessage message) {
  // On meta too: no kernel runs there, so no flag is ever raised, but the flag is kept alive until
  // the next read as on a GPU, so that meta's allocator counts it as long.
  const Device device = flag.device();
  bool full = false;
  {
    std::lock_guard lock(pending_mu);
    auto& list = pending[device.str()];
    list.push_back({flag, std::move(message)});
    full = list.size() > kMaxPendingFlags;
  }
  if (full) check_device_flags(device);
}

std::vector<PendingFlag> pending_flags(Device device) {
  std::lock_guard lock(pending_mu);
  auto it = pending.find(device.str());
  return it == pending.end() ? std::vector<PendingFlag>{} : it->second;
}

void check_device_flags(Device device) { read_to_host(device, {}, "check_device_flags"); }

void read_to_host(Device device, std::span<const HostRead> reads, const char* what) {
  const DeviceRuntime& runtime = runtime_for(device);
  // Without device flags (cpu: its kernels throw directly) there is nothing pending to check and
  // nothing to wait for.
  if (!runtime.capabilities().device_flags) {
    runtime.read_to_host(reads);
    return;
  }
  GLASS_CHECK(has_data(device) || reads.empty(),
              "meta tensors have no data: {} reads {} value(s) from {}", what, reads.size(),
              device.str());
  refuse_host_wait_in_graph_capture(device, what);  // before the pending flags are taken
  // 1. the flags pending on this device go along with the reads
  std::vector<PendingFlag> flags;
  {
    std::lock_guard lock(pending_mu);
    auto it = pending.find(device.str());
    if (it != pending.end()) flags.swap(it->second);
  }
  if ((reads.empty() && flags.empty()) || !has_data(device)) return;  // meta: flags dropped
  std::vector<int32_t> values(flags.size());
  std::vector<HostRead> all(reads.begin(), reads.end());
  for (size_t i = 0; i < flags.size(); ++i)
    all.push_back({&values[i], flags[i].flag.raw_data(), sizeof(int32_t)});
  // 2. one synchronisation for all of them, counted before the host blocks (as the staging ring
  //    counts its wait), so that whoever watches the count sees the wait begin; on devices whose
  //    memory is host memory the kernels have finished and the reads are memcpy
  note_host_sync(device, what);
  runtime.read_to_host(all);
  // 3. the first raised flag, in the order the ops registered them
  for (size_t i = 0; i < flags.size(); ++i)
    if (values[i] != 0) fail("{}", flags[i].message(static_cast<int64_t>(kFlagBase - values[i])));
}

}  // namespace glass
