// CUDA atomics as host atomics: blocks run in parallel on several OS threads, so these must be
// real read-modify-write operations. CUDA atomics order nothing by themselves (relaxed); code that
// needs ordering adds __threadfence(), exactly as on the GPU.
//
// They are overloads rather than templates so that arguments convert the way CUDA's declarations
// make them convert (atomicAdd(float*, 1.0) adds a float).
#pragma once

#include <atomic>

#include "engine/emu/atomic_targets.h"  // note_atomic: the race check leaves their bytes alone

namespace glass::emu::detail {

// Read-modify-write through a compare-exchange loop, for what std::atomic_ref cannot do itself.
template <class T, class F>
T atomic_update(T* p, F f) {
  note_atomic(p, sizeof(T));
  std::atomic_ref<T> a(*p);
  T old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, f(old), std::memory_order_relaxed)) {
  }
  return old;
}

}  // namespace glass::emu::detail

// name(T* p, T v): std::atomic_ref<T>(*p).member(v), relaxed; returns the old value.
#define GLASS_EMU_ATOMIC(name, member, T)                               \
  inline T name(T* p, T v) {                                            \
    ::glass::emu::detail::note_atomic(p, sizeof(T));                    \
    return std::atomic_ref<T>(*p).member(v, std::memory_order_relaxed); \
  }
GLASS_EMU_ATOMIC(atomicAdd, fetch_add, int)
GLASS_EMU_ATOMIC(atomicAdd, fetch_add, unsigned)
GLASS_EMU_ATOMIC(atomicAdd, fetch_add, unsigned long long)
GLASS_EMU_ATOMIC(atomicAdd, fetch_add, float)
GLASS_EMU_ATOMIC(atomicAdd, fetch_add, double)
GLASS_EMU_ATOMIC(atomicSub, fetch_sub, int)
GLASS_EMU_ATOMIC(atomicSub, fetch_sub, unsigned)
GLASS_EMU_ATOMIC(atomicExch, exchange, int)
GLASS_EMU_ATOMIC(atomicExch, exchange, unsigned)
GLASS_EMU_ATOMIC(atomicExch, exchange, unsigned long long)
GLASS_EMU_ATOMIC(atomicExch, exchange, float)
GLASS_EMU_ATOMIC(atomicAnd, fetch_and, int)
GLASS_EMU_ATOMIC(atomicAnd, fetch_and, unsigned)
GLASS_EMU_ATOMIC(atomicOr, fetch_or, int)
GLASS_EMU_ATOMIC(atomicOr, fetch_or, unsigned)
GLASS_EMU_ATOMIC(atomicXor, fetch_xor, int)
GLASS_EMU_ATOMIC(atomicXor, fetch_xor, unsigned)
#undef GLASS_EMU_ATOMIC

#define GLASS_EMU_ATOMIC_MAX_MIN(T)                                                    \
  inline T atomicMax(T* p, T v) {                                                      \
    return ::glass::emu::detail::atomic_update(p, [v](T o) { return o < v ? v : o; }); \
  }                                                                                    \
  inline T atomicMin(T* p, T v) {                                                      \
    return ::glass::emu::detail::atomic_update(p, [v](T o) { return v < o ? v : o; }); \
  }
GLASS_EMU_ATOMIC_MAX_MIN(int)
GLASS_EMU_ATOMIC_MAX_MIN(unsigned)
GLASS_EMU_ATOMIC_MAX_MIN(long long)
GLASS_EMU_ATOMIC_MAX_MIN(unsigned long long)
#undef GLASS_EMU_ATOMIC_MAX_MIN

// Returns the old value, whether or not it was swapped.
#define GLASS_EMU_ATOMIC_CAS(T)                                                              \
  inline T atomicCAS(T* p, T compare, T val) {                                               \
    ::glass::emu::detail::note_atomic(p, sizeof(T));                                         \
    std::atomic_ref<T>(*p).compare_exchange_strong(compare, val, std::memory_order_relaxed); \
    return compare;                                                                          \
  }
GLASS_EMU_ATOMIC_CAS(int)
GLASS_EMU_ATOMIC_CAS(unsigned)
GLASS_EMU_ATOMIC_CAS(unsigned long long)
#undef GLASS_EMU_ATOMIC_CAS

// atomicInc/atomicDec wrap around at `limit` the way CUDA defines them.
inline unsigned atomicInc(unsigned* p, unsigned limit) {
  return ::glass::emu::detail::atomic_update(
      p, [limit](unsigned old) { return old >= limit ? 0u : old + 1; });
}
inline unsigned atomicDec(unsigned* p, unsigned limit) {
  return ::glass::emu::detail::atomic_update(
      p, [limit](unsigned old) { return old == 0 || old > limit ? limit : old - 1; });
}
