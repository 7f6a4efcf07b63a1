// Block barriers, warp shuffles and votes for kernels compiled under emu. Each call blocks the
// current fiber until its partners arrive; see device_runtime.h for the rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/emu/builtins.h"
#include "engine/emu/device_runtime.h"

inline void __syncthreads(::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  ::glass::emu::detail::sync_block(0, site);
}
inline int __syncthreads_count(int predicate,
                               ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return static_cast<int>(::glass::emu::detail::sync_block(predicate, site).true_count);
}
inline int __syncthreads_and(int predicate, ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  auto v = ::glass::emu::detail::sync_block(predicate, site);
  return v.true_count == v.arrived;
}
inline int __syncthreads_or(int predicate, ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return ::glass::emu::detail::sync_block(predicate, site).true_count != 0;
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  ::glass::emu::detail::sync_warp(mask, site);
}

namespace glass::emu::detail {

// Shuffles move any 1-, 2-, 4- or 8-byte value (int, float, double, long long, bf16, half2, ...).
template <class T>
T shuffle_value(T value, unsigned mask, ShuffleMode mode, int lane_arg, int width, Site site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "warp shuffles move values of at most 8 bytes");
  // Through void*: types such as __nv_bfloat16 have protected members, and copying their bytes
  // is still exactly what is meant.
  uint64_t bits = 0;
  std::memcpy(&bits, static_cast<const void*>(&value), sizeof(T));
  bits = shuffle(bits, mask, mode, lane_arg, width, site);
  std::memcpy(static_cast<void*>(&value), &bits, sizeof(T));
  return value;
}

}  // namespace glass::emu::detail

template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return ::glass::emu::detail::shuffle_value(var, mask, ::glass::emu::detail::ShuffleMode::index,
                                             src_lane, width, site);
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return ::glass::emu::detail::shuffle_value(var, mask, ::glass::emu::detail::ShuffleMode::up,
                                             static_cast<int>(delta), width, site);
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return ::glass::emu::detail::shuffle_value(var, mask, ::glass::emu::detail::ShuffleMode::down,
                                             static_cast<int>(delta), width, site);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return ::glass::emu::detail::shuffle_value(
      var, mask, ::glass::emu::detail::ShuffleMode::butterfly, lane_mask, width, site);
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return static_cast<unsigned>(::glass::emu::detail::vote(mask, predicate, site));
}
inline int __any_sync(unsigned mask, int predicate,
                      ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  return static_cast<unsigned>(::glass::emu::detail::vote(mask, predicate, site)) != 0;
}
// True when the predicate holds on every lane that took part (lanes that exited do not).
inline int __all_sync(unsigned mask, int predicate,
                      ::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  uint64_t v = ::glass::emu::detail::vote(mask, predicate, site);
  return static_cast<unsigned>(v) == static_cast<unsigned>(v >> 32);
}
// Lanes never run converged under emu: this is every lane of the warp that exists.
inline unsigned __activemask() { return ::glass::emu::detail::active_mask(); }

// A block runs on one OS thread, so ordering inside it only needs the compiler not to reorder;
// blocks run in parallel, so the device-wide fence is a real one.
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

[[noreturn]] inline void __trap(::glass::emu::detail::Site site = GLASS_EMU_CALL_SITE) {
  ::glass::emu::detail::trap(site);
}
