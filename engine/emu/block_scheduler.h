// The lazy scheduler that runs the CUDA threads of one block on one OS thread.
//
// The OS thread's own stack starts thread 0 and runs the threads back to back. Only when a
// thread blocks (at a barrier or a warp operation) is it left suspended, and the next thread
// starts on a fiber from a pool; released threads queue up and resume in turn. A kernel that
// never blocks therefore runs without a single switch, and one that does needs at most one
// fiber per thread. Fibers never change OS thread, so the built-ins can be thread_local.
//
// Every context runs the same loop (run_threads) and, when it cannot go on, hands over to the
// next runnable one (pick_next). When nothing is runnable while threads are still alive, every
// live thread waits for a partner that will never come: a deadlock, reported by name and line.
#pragma once

#include <vector_types.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/emu/builtins.h"
#include "engine/emu/device_runtime.h"
#include "engine/emu/fiber.h"
#include "engine/emu/launch.h"
#include "engine/emu/settings.h"
#include "engine/emu/static_shared.h"

namespace glass::emu::detail {

// What all blocks of one launch share.
struct LaunchJob {
  const char* kernel;
  KernelBody body;
  dim3 grid;
  dim3 block;
  size_t dynamic_shared_bytes;
  size_t stack_bytes;
  std::optional<uint64_t> shuffle_seed;
  bool reverse_order = false;  // without a seed: threads start, and resume, last to first
  // The static __shared__ variables earlier launches of this kernel wrote: only they are reset
  // between blocks (null: the first launch, all of them are).
  const std::vector<size_t>* static_shared_known = nullptr;
  const BreakTarget* break_at;  // null: no breakpoint in this kernel
};

// What a suspended CUDA thread waits for; deadlock reports group threads by it.
enum class WaitKind : uint8_t { block_barrier, warp_sync, warp_shuffle, warp_vote, warp_matrix };

// One lane's operands of a Tensor Core instruction (engine/emu/tensor_core.cpp): a warp_matrix
// collective hands every lane's MatrixOperands to the lane that completes it, which runs the
// instruction for the whole warp and writes each lane's result registers.
struct MatrixOperands {
  enum class Instruction : uint8_t { mma_m16n8k16_bf16, ldmatrix } instruction;
  // mma: a[4], b[2], c[4] in, d[4] out (d may alias c)
  const uint32_t* a = nullptr;
  const uint32_t* b = nullptr;
  const float* c = nullptr;
  float* d = nullptr;
  // ldmatrix: `matrices` 8x8 matrices, this lane's row address, `matrices` registers out
  int matrices = 0;
  bool trans = false;
  const void* row = nullptr;
  uint32_t* r = nullptr;
};

// A cp.async this thread issued and has not waited for yet.
struct PendingCopy {
  std::byte* dst;
  const std::byte* src;
  int bytes, src_bytes;
  unsigned group;  // commit groups before it: the group it belongs to once committed
  Site site;
};
struct Wait {
  WaitKind kind;
  Site site;
  unsigned mask;  // the warp operation's lanes
};

// A context that runs CUDA threads: the OS thread's own stack (no FiberStack) or a fiber.
struct Fiber {
  Context context;
  std::unique_ptr<FiberStack> stack;
  unsigned tid = 0;  // the CUDA thread it runs: linear index in the block
  uint3 thread_idx{0, 0, 0};
  Wait wait{};
  uint64_t collective_result = 0;  // handed over by the lane that completed a warp operation
  // cp.async of the CUDA thread it runs, in issue order, and the groups it committed so far.
  std::vector<PendingCopy> copies;
  unsigned committed_groups = 0;
};

// One warp operation in progress: lanes deposit a value and wait until every lane of `mask`
// has arrived or exited.
struct WarpCollective {
  WaitKind kind;
  unsigned mask;
  unsigned arrived;
  bool divergent;  // lanes of one mask arrived at operations of different kinds
  Site site;       // warp_matrix: where the first lane executes it (all must be at the same one)
  std::array<uint64_t, 32> value;
  std::array<uint8_t, 32> source;  // shuffles: the lane each lane reads
  std::array<Fiber*, 32> fiber;
};

struct WarpState {
  unsigned present = 0;  // lanes that exist (the last warp of a block may be partial)
  unsigned exited = 0;
  std::vector<WarpCollective*> open;
};

struct BlockBarrier {
  unsigned arrived = 0;
  Site site{};
  bool divergent = false;  // threads arrived at different __syncthreads()
  unsigned true_count = 0;
  BlockVote result{};  // of the last completed barrier, read by the threads it releases
  std::vector<Fiber*> waiters;
};

class BlockScheduler {
 public:
  BlockScheduler();
  ~BlockScheduler();
  BlockScheduler(const BlockScheduler&) = delete;
  BlockScheduler& operator=(const BlockScheduler&) = delete;

  // Prepares this OS thread for the blocks of `job`, which must outlive them.
  void begin_launch(const LaunchJob& job);
  // Runs every thread of block `linear_block`. Throws EmuError naming the kernel, block and
  // thread if a thread threw or the block deadlocked.
  void run_block(uint64_t linear_block);
  LaunchStats take_stats();
  // After the last block of a launch on this OS thread: resets every static __shared__ variable
  // that is still written. Then the ones (indices into static_shared_variables()) that the
  // blocks run here since the last call wrote, sorted; empties the list.
  std::vector<size_t> take_static_shared_written();

  // Device side, for the CUDA thread that is current.
  BlockVote sync_block(int predicate, Site site);
  uint64_t warp_collective(WaitKind kind, unsigned mask, uint64_t value, unsigned source_lane,
                           Site site);
  // Tensor Core instructions (engine/emu/tensor_core.cpp).
  void matrix_instruction(MatrixOperands& operands, Site site);
  void cp_async(void* dst, const void* src, int bytes, int src_bytes, Site site);
  void cp_async_commit();
  void cp_async_wait(int pending_groups, Site site);
  unsigned lane() const { return current_->tid & 31; }
  unsigned active_mask() const;
  void* dynamic_shared() const { return shared_.get(); }

 private:
  [[noreturn]] static void fiber_entry();
  [[noreturn]] void fiber_loop();
  void run_threads();
  void start_thread(Fiber& self, unsigned tid);
  void complete_for_exit(const Fiber& self);
  Fiber* pick_next();
  Fiber* idle_fiber();
  void switch_to(Fiber* next);
  void suspend(const Wait& wait);
  bool make_ready(std::span<Fiber* const> released, bool caller_takes_part);
  void yield_to_released();
  void fail(std::exception_ptr error, const Fiber& thread);
  std::vector<Fiber*> waiting_threads() const;
  void abort_block();
  void report_deadlock();
  bool collective_done(const WarpState& w, const WarpCollective& c) const;
  uint64_t complete_collective(WarpState& w, WarpCollective& c, const Fiber* caller);
  WarpCollective* open_collective(WarpState& w, WaitKind kind, unsigned mask);
  std::string matrix_lanes_error(const WarpState& w, const WarpCollective& c) const;
  void run_matrix_instruction(const WarpCollective& c);
  void run_mma(const WarpCollective& c);
  void run_ldmatrix(const WarpCollective& c);
  bool in_shared_memory(const void* p, size_t bytes) const;
  void land_oldest_groups(Fiber& thread, int groups);
  void forget_in_flight(const PendingCopy& copy);
  void check_copies_waited(Fiber& thread);

  const LaunchJob* job_ = nullptr;
  unsigned nthreads_ = 0;
  bool one_dimensional_ = true;
  bool shuffled_ = false;

  // The block being run.
  unsigned next_start_ = 0;  // threads started so far (index into order_ when shuffled)
  unsigned exited_ = 0;      // threads started and finished; the others are alive
  unsigned suspended_ = 0;   // threads waiting at a barrier or warp operation
  bool aborting_ = false;    // a thread failed or the block deadlocked: unwind every thread
  bool break_here_ = false;  // this block holds the BreakTarget thread
  std::exception_ptr error_;
  BlockBarrier barrier_;
  std::array<WarpState, 32> warps_;
  std::vector<unsigned> order_;  // thread start order when shuffled
  uint64_t rng_ = 0;

  // Contexts.
  Fiber main_;  // this OS thread's own stack
  Fiber* current_ = &main_;
  std::vector<Fiber*> ready_;  // released threads, resumed first come, first served
  size_t ready_head_ = 0;
  std::vector<std::unique_ptr<Fiber>> fibers_;
  std::vector<Fiber*> idle_;
  size_t stack_bytes_ = 0;
  std::vector<std::unique_ptr<WarpCollective>> collectives_;
  std::vector<WarpCollective*> free_collectives_;

  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], AlignedFree> shared_;
  size_t shared_capacity_ = 0;
  StaticSharedMemory static_shared_;
  std::vector<size_t> static_shared_written_;
  // Shared memory that a cp.async of this block will still write: 16-byte chunk -> the bytes
  // of it in flight (bit i: byte i) and the cp.async's site. ldmatrix refuses to read them.
  struct InFlight {
    uint16_t bytes;
    Site site;
  };
  std::unordered_map<uintptr_t, InFlight> copies_in_flight_;

  LaunchStats stats_;
};

// Thrown into the suspended threads of a block that failed, so that their stacks unwind
// (destructors run, the fibers become reusable). Kernel code never sees it.
struct CancelledThread {};

// The scheduler of the calling OS thread, created on first use.
BlockScheduler& this_thread_scheduler();

// The scheduler running a block on this OS thread, null outside kernel code.
inline thread_local BlockScheduler* t_running_scheduler = nullptr;

// The running scheduler, for the device intrinsics; throws EmuError naming `what` and the call
// site when called outside a kernel.
[[noreturn]] void called_outside_kernel(const char* what, Site site);
inline BlockScheduler& running_scheduler(const char* what, Site site) {
  BlockScheduler* s = t_running_scheduler;
  if (!s) [[unlikely]]
    called_outside_kernel(what, site);
  return *s;
}

// Inline, like switch_context: they sit between a kernel's call and the switch.
inline void BlockScheduler::switch_to(Fiber* next) {
  Fiber* prev = current_;
  if (next == prev) return;
  current_ = next;
  threadIdx = next->thread_idx;
  ++stats_.context_switches;
  switch_context(prev->context, next->context);
}

// Done when every lane of the mask has arrived, exited, or does not exist.
inline bool BlockScheduler::collective_done(const WarpState& w, const WarpCollective& c) const {
  return !c.divergent && ((c.arrived | w.exited | ~w.present) & c.mask) == c.mask;
}

inline void BlockScheduler::suspend(const Wait& wait) {
  current_->wait = wait;
  ++suspended_;
  switch_to(pick_next());
  --suspended_;
  if (aborting_) throw CancelledThread{};
}

}  // namespace glass::emu::detail
