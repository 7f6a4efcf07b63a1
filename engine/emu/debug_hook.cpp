#include "engine/emu/debug_hook.h"

#include <atomic>

namespace {
std::atomic<uint64_t> g_hook_calls{0};
}

// noinline and the counter keep the call and the symbol, so that the breakpoint has a place.
extern "C" __attribute__((noinline)) void glass_emu_thread_hook(const char*, unsigned, unsigned,
                                                                unsigned, unsigned, unsigned,
                                                                unsigned) {
  g_hook_calls.fetch_add(1, std::memory_order_relaxed);
}

namespace glass::emu {

uint64_t thread_hook_calls() { return g_hook_calls.load(std::memory_order_relaxed); }

}  // namespace glass::emu
