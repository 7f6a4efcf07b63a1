// The emulator's entry points behind the device intrinsics of cuda_shim.h. Each acts on the block
// that the calling OS thread is running, as the CUDA thread that is current on it.
#pragma once

#include <cstdint>
#include <cstring>

namespace glass::emu::detail {

// Where a barrier or warp operation was called: deadlock reports name it, and threads waiting at
// two different __syncthreads() are a divergent barrier. Kernels keep calling __syncthreads()
// without arguments: the intrinsics take `Site site = Site::here()` as a default argument, which
// is evaluated at the call. (here() rather than a braced Site{__builtin_FILE(), ...}: GCC 12
// evaluates the builtins inside a braced default argument where the function is declared.)
struct Site {
  const char* file;
  unsigned line;

  static constexpr Site here(const char* file = __builtin_FILE(),
                             unsigned line = __builtin_LINE()) {
    return Site{file, line};
  }
  bool operator==(const Site& o) const {
    return line == o.line && (file == o.file || std::strcmp(file, o.file) == 0);
  }
};

#define GLASS_EMU_CALL_SITE ::glass::emu::detail::Site::here()

// Result of a block barrier that also votes (__syncthreads_count/_and/_or).
struct BlockVote {
  unsigned true_count;  // threads whose predicate was non-zero
  unsigned arrived;     // threads that took part (exited threads do not)
};

enum class ShuffleMode : uint8_t { index, up, down, butterfly };

// __syncthreads: waits until every thread of the block that has not exited arrives here.
BlockVote sync_block(int predicate, Site site);

// __syncwarp / __shfl_*_sync / __ballot_sync: every lane of `mask` that has not exited must take
// part. shuffle returns the 8 bytes deposited by the source lane that PTX's shfl.sync rules pick
// (its own `bits` when that lane is out of range or not taking part).
void sync_warp(unsigned mask, Site site);
uint64_t shuffle(uint64_t bits, unsigned mask, ShuffleMode mode, int lane_arg, int width,
                 Site site);
// Bits 0-31: lanes whose predicate was non-zero; bits 32-63: lanes that took part.
uint64_t vote(unsigned mask, int predicate, Site site);

// Lanes of the caller's warp that exist.
unsigned active_mask();

void* dynamic_shared_memory();

// Tensor Core instructions (engine/emu/tensor_core.cpp), behind kernels/cuda/tensor_core.h, which
// says what each does and what the emulator checks. mma and ldmatrix are warp collectives of all
// 32 lanes; `r` receives `matrices` registers.
void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                       const float (&c)[4], Site site);
void ldmatrix(uint32_t* r, int matrices, bool trans, const void* row, Site site);
// cp.async of `bytes` (4, 8 or 16) from src to dst; only the first `src_bytes` are read, the rest
// of dst is zero-filled.
void cp_async(void* dst, const void* src, int bytes, int src_bytes, Site site);
void cp_async_commit(Site site);
void cp_async_wait(int pending_groups, Site site);

[[noreturn]] void trap(Site site);

}  // namespace glass::emu::detail
