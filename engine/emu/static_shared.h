// Static __shared__ variables on emu: poisoned at the start of every block, and measured.
//
// cuda_shim.h turns `__shared__ float tile[32][33];` into a thread_local variable placed in the
// ELF section `glass_emu_shared` (kStaticSharedSection). The kernel keeps its CUDA syntax: a
// declaration prefix cannot wrap the variable in a C++ object, but it can choose its section.
// The linker gathers every static __shared__ variable of the program into that one section, so
// each OS thread's copy of all of them is one contiguous range of its thread-local storage. The
// program's symbol table gives each variable's offset and size in the section.
//
// An OS thread runs one block at a time, so that range is the running block's static shared
// memory. The scheduler sets it to 0xFF bytes (NaN as any float type, -1 as an integer) before
// every block, like dynamic shared memory, and after the block finds which variables the block
// wrote: their sizes are the kernel's static shared bytes, counted toward the per-block limit.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#define GLASS_EMU_STATIC_SHARED_SECTION "glass_emu_shared"

namespace glass::emu::detail {

// One static __shared__ variable of the program.
struct StaticSharedVariable {
  size_t offset;     // from the start of the section
  size_t bytes;      // as the symbol table records it
  std::string name;  // demangled, e.g. "block_sum(float const*, float*, int)::s"
};

// Every static __shared__ variable of the program, by offset (read once from the executable's
// symbol table; empty when there are none or the executable is stripped).
const std::vector<StaticSharedVariable>& static_shared_variables();

// The calling OS thread's copy of the section.
class StaticSharedMemory {
 public:
  StaticSharedMemory();
  // Before a block: the first time on this OS thread, sets every variable to 0xFF bytes (after
  // that, end_block keeps them so).
  void begin_block() {
    if (fresh_) poison_all();
  }
  // After a block: sets every variable that is not all 0xFF bytes back to 0xFF, and adds its
  // index (into static_shared_variables()) to `written`, which stays sorted and unique. With
  // `only`, just those variables are looked at (the ones earlier launches of the kernel wrote):
  // the scan after the last block of a launch on this OS thread passes null and looks at all.
  void end_block(std::vector<size_t>& written, const std::vector<size_t>* only);
  // Whether [p, p + bytes) lies in this OS thread's static shared memory.
  bool contains(const void* p, size_t bytes) const;

 private:
  void poison_all();

  std::byte* base_ = nullptr;  // null when the program has no static __shared__ variable
  bool fresh_ = true;
};

// Total bytes of the variables `indices` (into static_shared_variables()), and their names.
size_t static_shared_bytes(const std::vector<size_t>& indices);
std::string describe_static_shared(const std::vector<size_t>& indices);

}  // namespace glass::emu::detail
