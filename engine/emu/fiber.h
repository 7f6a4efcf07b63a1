// Execution contexts for the scheduler: fiber stacks and the switch between contexts, on
// Boost.Context's fcontext (a few ns per switch; ucontext's swapcontext makes a system call).
//
// Under AddressSanitizer every switch is announced with __sanitizer_start/finish_switch_fiber,
// otherwise ASan would take a fiber's stack for a wild pointer into the thread's stack.
#pragma once

#include <boost/context/detail/fcontext.hpp>

#include <cstddef>

#include "engine/emu/sanitizer.h"
#if defined(GLASS_EMU_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

namespace glass::emu::detail {

// An mmap'd stack with a PROT_NONE guard page below it, so that an overflow faults at once
// instead of overwriting a neighbour. MAP_NORESERVE: only the pages a fiber touches cost memory.
class FiberStack {
 public:
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;

  void* bottom() const { return bottom_; }  // lowest usable address
  size_t size() const { return size_; }

 private:
  void* mapping_;
  size_t mapping_bytes_;
  void* bottom_;
  size_t size_;
};

// A suspended or running execution context: an OS thread's own stack or a fiber's.
struct Context {
  boost::context::detail::fcontext_t handle = nullptr;
  void (*entry)() = nullptr;  // what a fiber runs when first switched to; must never return
  // The stack's bounds, for ASan. An OS thread's own stack learns them on its first switch.
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
};

// Prepares `c` to run c.entry() on `stack` when it is first switched to.
void make_context(Context& c, FiberStack& stack, void (*entry)());

// Handed from the suspending context to the resumed one, which records where the suspended one
// stopped (fcontext only tells the receiver).
struct SwitchTransfer {
  Context* from;
  Context* to;
};

// Runs first thing in a context that has just been switched to.
inline SwitchTransfer* after_switch(boost::context::detail::transfer_t t,
                                    [[maybe_unused]] void* fake_stack) {
  auto* tr = static_cast<SwitchTransfer*>(t.data);
  tr->from->handle = t.fctx;
#if defined(GLASS_EMU_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, &tr->from->stack_bottom, &tr->from->stack_size);
#endif
  return tr;
}

// Suspends `from` and runs `to`; returns when some context switches back to `from`. Inline:
// after a switch every return up the call chain is mispredicted (the CPU's return stack holds
// the other context's calls), so each call level between a kernel and the switch costs ~20
// cycles per switch.
inline void switch_context(Context& from, Context& to) {
  SwitchTransfer tr{&from, &to};
  void* fake_stack = nullptr;
#if defined(GLASS_EMU_ASAN)
  __sanitizer_start_switch_fiber(&fake_stack, to.stack_bottom, to.stack_size);
#endif
  after_switch(boost::context::detail::jump_fcontext(to.handle, &tr), fake_stack);
}

}  // namespace glass::emu::detail
