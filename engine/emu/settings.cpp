#include "engine/emu/settings.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <string_view>
#include <thread>

#include "engine/emu/error.h"
#include "engine/emu/sanitizer.h"

namespace glass::emu {
namespace {

// ASan surrounds every stack variable with red zones, so kernel frames grow several times over.
#if defined(GLASS_EMU_ASAN)
constexpr size_t kDefaultStackBytes = 1024 * 1024;
#else
constexpr size_t kDefaultStackBytes = 256 * 1024;
#endif
constexpr size_t kMinStackKiB = 16;

[[noreturn]] void bad_variable(const char* name, std::string_view value, const char* expected) {
  throw EmuError(std::string(name) + "='" + std::string(value) + "': expected " + expected);
}

uint64_t parse_unsigned(const char* name, std::string_view text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    bad_variable(name, text, "an unsigned integer");
  return v;
}

// An on/off variable: unset or "0" is off, "1" is on.
bool parse_switch(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string_view f(v);
  if (f != "0" && f != "1") bad_variable(name, v, "0 or 1");
  return f == "1";
}

// "x[,y[,z]]" -> uint3, missing coordinates are 0.
uint3 parse_index(const char* name, std::string_view text) {
  unsigned v[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    size_t comma = text.find(',');
    v[i] = static_cast<unsigned>(parse_unsigned(name, text.substr(0, comma)));
    if (comma == std::string_view::npos) return uint3{v[0], v[1], v[2]};
    text.remove_prefix(comma + 1);
  }
  bad_variable(name, text, "at most three coordinates x,y,z");
}

BreakTarget parse_break(const char* name, std::string_view text) {
  BreakTarget t;
  size_t at = text.find('@');
  if (at != std::string_view::npos) {
    t.kernel = std::string(text.substr(at + 1));
    text = text.substr(0, at);
  }
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) bad_variable(name, text, "BLOCK/THREAD[@kernel]");
  t.block = parse_index(name, text.substr(0, slash));
  t.thread = parse_index(name, text.substr(slash + 1));
  return t;
}

struct Store {
  std::mutex mutex;
  std::optional<Settings> current;
};

Store& store() {
  // Never destroyed: emulated-GPU stream workers may still run while static destructors do.
  static Store& s = *new Store;
  return s;
}

}  // namespace

Settings Settings::from_environment() {
  Settings s;
  s.worker_threads = std::max(1u, std::thread::hardware_concurrency());
  s.fiber_stack_bytes = kDefaultStackBytes;
  if (const char* v = std::getenv("GLASS_EMU_THREADS")) {
    uint64_t n = parse_unsigned("GLASS_EMU_THREADS", v);
    if (n == 0 || n > 4096) bad_variable("GLASS_EMU_THREADS", v, "1..4096");
    s.worker_threads = static_cast<unsigned>(n);
  }
  if (const char* v = std::getenv("GLASS_EMU_STACK_KB")) {
    uint64_t kib = parse_unsigned("GLASS_EMU_STACK_KB", v);
    if (kib < kMinStackKiB) bad_variable("GLASS_EMU_STACK_KB", v, "at least 16");
    s.fiber_stack_bytes = kib * 1024;
  }
  if (const char* v = std::getenv("GLASS_EMU_SHUFFLE_SEED"))
    s.shuffle_seed = parse_unsigned("GLASS_EMU_SHUFFLE_SEED", v);
  s.check_memory = parse_switch("GLASS_EMU_CHECK");
  s.race_check = parse_switch("GLASS_EMU_RACECHECK");
  s.init_check = parse_switch("GLASS_EMU_INITCHECK");
  if (const char* v = std::getenv("GLASS_EMU_BREAK"))
    s.break_at = parse_break("GLASS_EMU_BREAK", v);
  return s;
}

Settings settings() {
  Store& st = store();
  std::lock_guard lock(st.mutex);
  if (!st.current) st.current = Settings::from_environment();
  return *st.current;
}

void set_settings(const Settings& s) {
  if (s.worker_threads == 0) throw EmuError("emu settings: worker_threads must be at least 1");
  if (s.fiber_stack_bytes < kMinStackKiB * 1024)
    throw EmuError("emu settings: fiber_stack_bytes must be at least 16 KiB");
  Store& st = store();
  std::lock_guard lock(st.mutex);
  st.current = s;
}

}  // namespace glass::emu
