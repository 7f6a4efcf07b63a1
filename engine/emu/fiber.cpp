#include "engine/emu/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/emu/error.h"

#if defined(GLASS_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace glass::emu::detail {
namespace {

void fiber_start(boost::context::detail::transfer_t t) {
  SwitchTransfer* tr = after_switch(t, nullptr);
  tr->to->entry();
}

size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

#if defined(GLASS_EMU_ASAN)
// Frames left on a parked fiber keep their red zones poisoned in ASan's shadow memory, and
// whatever is mapped at this address next would be reported. Clearing the shadow with
// __asan_unpoison_memory_region would write (and so fault in) 1/8 of the stack's size; handing
// the whole shadow pages back to the kernel zeroes them for free.
void release_shadow(char* begin, size_t bytes) {
  size_t scale = 0, offset = 0;
  __asan_get_shadow_mapping(&scale, &offset);
  const uintptr_t page = page_size();
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(begin) >> scale) + offset;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(begin + bytes) >> scale) + offset;
  const uintptr_t whole_lo = (lo + page - 1) / page * page, whole_hi = hi / page * page;
  if (whole_lo >= whole_hi) {
    __asan_unpoison_memory_region(begin, bytes);
    return;
  }
  // The partial shadow pages at both ends are cleared the ordinary way.
  const size_t head = (whole_lo - lo) << scale, tail = (hi - whole_hi) << scale;
  __asan_unpoison_memory_region(begin, head);
  __asan_unpoison_memory_region(begin + bytes - tail, tail);
  madvise(reinterpret_cast<void*>(whole_lo), whole_hi - whole_lo, MADV_DONTNEED);
}
#endif

}  // namespace

FiberStack::FiberStack(size_t bytes) {
  const size_t page = page_size();
  size_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = size_ + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping_ == MAP_FAILED)
    throw EmuError("emu: cannot map a fiber stack of " + std::to_string(size_) +
                   " bytes: " + std::strerror(errno));
  mprotect(mapping_, page, PROT_NONE);  // the guard page; stacks grow down towards it
  bottom_ = static_cast<char*>(mapping_) + page;
}

FiberStack::~FiberStack() {
#if defined(GLASS_EMU_ASAN)
  release_shadow(static_cast<char*>(bottom_), size_);
#endif
  munmap(mapping_, mapping_bytes_);
}

void make_context(Context& c, FiberStack& stack, void (*entry)()) {
  c.entry = entry;
  c.stack_bottom = stack.bottom();
  c.stack_size = stack.size();
  char* top = static_cast<char*>(stack.bottom()) + stack.size();
  c.handle = boost::context::detail::make_fcontext(top, stack.size(), &fiber_start);
}

}  // namespace glass::emu::detail
