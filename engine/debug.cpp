#include "engine/debug.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

#include "engine/device_runtime.h"
#include "engine/error.h"

namespace {
uint64_t g_break_hits = 0;  // atomic through the builtins below
}

// noinline, the counter and the asm keep the call, the symbol and `info`, so that a breakpoint
// has a place and the debugger sees the argument. The counter is a compiler builtin rather than a
// std::atomic member so that the breakpoint's first line is this file's, not <atomic>'s.
extern "C" __attribute__((noinline)) void glass_break_here(const glass::LaunchInfo* info) {
  __atomic_add_fetch(&g_break_hits, 1, __ATOMIC_RELAXED);
  asm volatile("" : : "r"(info) : "memory");
}

namespace glass {
namespace {

bool parse_flag(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  const std::string_view f(v);
  GLASS_CHECK(f == "0" || f == "1", "{}='{}': expected 0 or 1", name, f);
  return f == "1";
}

std::vector<std::string> parse_names(const char* name) {
  std::vector<std::string> names;
  const char* v = std::getenv(name);
  if (!v) return names;
  std::string_view list(v);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    GLASS_CHECK(!item.empty(), "{}='{}': expected kernel or op names separated by commas", name, v);
    names.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
    GLASS_CHECK(!list.empty(), "{}='{}': a name must follow every comma", name, v);
  }
  return names;
}

struct Store {
  std::mutex mutex;
  std::shared_ptr<const DebugSettings> current;  // null until read
};

Store& store() {
  static Store s;
  return s;
}

// Makes `s` the settings in force and publishes its switches to the lock-free flags. Called with
// the store's mutex held.
void install(Store& st, const DebugSettings& s) {
  st.current = std::make_shared<const DebugSettings>(s);
  detail::debug_bits = detail::kDebugLoaded | (s.any() ? detail::kDebugAny : 0) |
                       (s.check_nan ? detail::kDebugCheckNan : 0);
  detail::debug_switches_off = !s.any();
}

// The settings in force; reads the environment on first use.
std::shared_ptr<const DebugSettings> current_settings() {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  if (!st.current) install(st, DebugSettings::from_environment());
  return st.current;
}

bool breaks_on(const DebugSettings& s, const LaunchInfo& info) {
  return std::any_of(s.break_on.begin(), s.break_on.end(), [&](const std::string& name) {
    return name == info.kernel || name == info.op;
  });
}

// Waits for the device to finish the launch and turns a pending device error into an exception.
// `cpu` and `emu` kernels have finished when launch_kernel returns and throw their own errors.
void synchronize(const LaunchInfo& info) { runtime_for(info.device).synchronize_after_launch(); }

// "kernel 'layernorm_backward' on cpu (op layernorm, node #12, backward, created at ...)"
std::string launch_context(const LaunchInfo& info) {
  std::string s = fmt::format("kernel '{}' on {} (op {}, ", info.kernel, info.device.str(),
                              *info.op ? info.op : "-");
  s += info.node_id >= 0 ? fmt::format("node #{}, ", info.node_id) : "no node, ";
  s += phase_name(info.phase);
  const char* site = current_launch_context().created_at;
  if (site && *site) s += fmt::format(", created at {}", site);
  return s + ")";
}

}  // namespace

DebugSettings DebugSettings::from_environment() {
  DebugSettings s;
  s.sync = parse_flag("GLASS_SYNC");
  s.check_nan = parse_flag("GLASS_CHECK_NAN");
  s.break_on = parse_names("GLASS_BREAK_ON");
  return s;
}

DebugSettings debug_settings() { return *current_settings(); }

void set_debug_settings(const DebugSettings& s) {
  for (const auto& name : s.break_on)
    GLASS_CHECK(!name.empty(), "set_debug_settings: an empty name in break_on");
  Store& st = store();
  std::lock_guard lock(st.mutex);
  install(st, s);
}

uint64_t break_hits() { return __atomic_load_n(&g_break_hits, __ATOMIC_RELAXED); }

namespace detail {

std::atomic<uint8_t> debug_bits{0};
std::atomic<bool> debug_switches_off{false};

uint8_t load_debug_bits() {
  current_settings();
  return debug_bits.load(std::memory_order_relaxed);
}

void run_debugged(const LaunchInfo& info, const std::function<void()>& kernel) {
  if (debug_switches_off.load(std::memory_order_relaxed) && debug_bits != 0) {
    kernel();
    return;
  }
  const std::shared_ptr<const DebugSettings> s = current_settings();
  if (breaks_on(*s, info)) glass_break_here(&info);
  if (!s->sync) {
    kernel();
    return;
  }
  try {
    kernel();
    synchronize(info);
  } catch (const std::exception& e) {
    throw Error(fmt::format("GLASS_SYNC: {} failed: {}", launch_context(info), e.what()));
  }
}

}  // namespace detail
}  // namespace glass
