// The addresses atomics update while the race check (GLASS_EMU_RACECHECK, launch_checks.h) reruns
// a launch. The check compares what the launch wrote under several thread orders; the final value
// of an address that atomics update may depend on the order by design (a float sum's rounding, the
// slot an atomicAdd hands out), so every atomic of intrinsics_atomic.h notes the bytes it updates
// and the check does not compare those bytes. What a thread computes from an atomic's old value
// and stores elsewhere is compared as usual.
#pragma once

#include <cstddef>

namespace glass::emu::detail {

class AtomicTargets;  // launch_checks.cpp

// Non-null while the race check runs a launch on this OS thread: its blocks run there one after
// another, and a block's CUDA threads are fibers of that thread.
extern thread_local AtomicTargets* t_atomic_targets;
void note_atomic_target(AtomicTargets& targets, const void* p, size_t bytes);

inline void note_atomic(const void* p, size_t bytes) {
  if (t_atomic_targets != nullptr) note_atomic_target(*t_atomic_targets, p, bytes);
}

}  // namespace glass::emu::detail
