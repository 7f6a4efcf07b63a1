#include "engine/emu/block_scheduler.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <utility>

#include "engine/emu/builtins.h"
#include "engine/emu/deadlock_report.h"
#include "engine/emu/debug_hook.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"

namespace glass::emu::detail {
namespace {

// Fresh dynamic shared memory is all 0xFF bytes: NaN as float, double, half and bf16, -1 as an
// integer, so reading it before some thread wrote it shows in the result.
constexpr int kSharedPoison = 0xFF;
constexpr size_t kSharedAlignment = 128;

// SplitMix64: a small, good generator; a block's order depends only on the seed and the block.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <class T>
void shuffle(std::span<T> items, uint64_t& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[next_random(rng) % i]);
}

bool equal(uint3 a, uint3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// Marks this OS thread as running kernel code for as long as a block runs.
class RunningScope {
 public:
  explicit RunningScope(BlockScheduler* s) { t_running_scheduler = s; }
  ~RunningScope() { t_running_scheduler = nullptr; }
};

}  // namespace

void BlockScheduler::AlignedFree::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t(kSharedAlignment));
}

BlockScheduler::BlockScheduler() = default;
BlockScheduler::~BlockScheduler() = default;

BlockScheduler& this_thread_scheduler() {
  thread_local BlockScheduler scheduler;
  return scheduler;
}

void BlockScheduler::begin_launch(const LaunchJob& job) {
  job_ = &job;
  nthreads_ = job.block.x * job.block.y * job.block.z;
  one_dimensional_ = job.block.y == 1 && job.block.z == 1;
  shuffled_ = job.shuffle_seed.has_value() || job.reverse_order;
  blockDim = job.block;
  gridDim = job.grid;
  if (job.stack_bytes != stack_bytes_) {  // between blocks every fiber is idle
    idle_.clear();
    fibers_.clear();
    stack_bytes_ = job.stack_bytes;
  }
  if (job.dynamic_shared_bytes > shared_capacity_) {
    shared_.reset(static_cast<std::byte*>(
        ::operator new[](job.dynamic_shared_bytes, std::align_val_t(kSharedAlignment))));
    shared_capacity_ = job.dynamic_shared_bytes;
  }
  for (unsigned w = 0; w < 32; ++w) {
    const unsigned first = w * 32;
    const unsigned lanes = first >= nthreads_ ? 0 : std::min(32u, nthreads_ - first);
    warps_[w].present = lanes == 32 ? ~0u : (1u << lanes) - 1;
  }
}

LaunchStats BlockScheduler::take_stats() { return std::exchange(stats_, LaunchStats{}); }

std::vector<size_t> BlockScheduler::take_static_shared_written() {
  static_shared_.end_block(static_shared_written_, nullptr);
  return std::exchange(static_shared_written_, {});
}

void BlockScheduler::run_block(uint64_t linear_block) {
  const uint64_t gx = job_->grid.x, gy = job_->grid.y;
  blockIdx =
      uint3{static_cast<unsigned>(linear_block % gx), static_cast<unsigned>(linear_block / gx % gy),
            static_cast<unsigned>(linear_block / (gx * gy))};
  next_start_ = exited_ = suspended_ = 0;
  aborting_ = false;
  error_ = nullptr;
  barrier_.arrived = 0;
  for (WarpState& w : warps_) w.exited = 0;
  copies_in_flight_.clear();
  if (job_->dynamic_shared_bytes > 0)
    std::memset(shared_.get(), kSharedPoison, job_->dynamic_shared_bytes);
  static_shared_.begin_block();
  break_here_ = job_->break_at && equal(blockIdx, job_->break_at->block);
  if (shuffled_) {
    order_.resize(nthreads_);
    std::iota(order_.begin(), order_.end(), 0u);
    if (job_->shuffle_seed) {
      rng_ = *job_->shuffle_seed ^ (0x632BE59BD9B4E019ull * (linear_block + 1));
      shuffle(std::span(order_), rng_);
    } else {
      std::reverse(order_.begin(), order_.end());
    }
  }

  RunningScope running(this);
  current_ = &main_;
  run_threads();
  // The threads still alive are suspended; run them until the last one hands back to main_.
  if (exited_ < next_start_) switch_to(pick_next());
  // Static shared memory back to poison for the next block, noting what this one wrote.
  static_shared_.end_block(static_shared_written_, job_->static_shared_known);
  if (error_) std::rethrow_exception(error_);
}

// The loop of every context: start threads while there are any. A thread that blocks inside
// body() suspends this context, and the next one carries on starting threads. This is the hot
// path of kernels that never block: it touches as little as it can.
void BlockScheduler::run_threads() {
  Fiber& self = *current_;
  while (!aborting_ && next_start_ < nthreads_) {
    start_thread(self, shuffled_ ? order_[next_start_] : next_start_);
    ++next_start_;
    try {
      job_->body.invoke(job_->body.object);
    } catch (const CancelledThread&) {
    } catch (...) {
      fail(std::current_exception(), self);
    }
    if (!self.copies.empty()) [[unlikely]]
      check_copies_waited(self);
    ++exited_;
    warps_[self.tid >> 5].exited |= 1u << (self.tid & 31);
    if (suspended_ > 0 && !aborting_) complete_for_exit(self);
  }
}

inline void BlockScheduler::start_thread(Fiber& self, unsigned tid) {
  const unsigned bx = job_->block.x, by = job_->block.y;
  // Built in a register and stored to both places: reading self.thread_idx back right after
  // writing it would stall on store forwarding, between every two threads.
  const uint3 t =
      one_dimensional_ ? uint3{tid, 0, 0} : uint3{tid % bx, tid / bx % by, tid / (bx * by)};
  self.tid = tid;
  self.thread_idx = t;
  threadIdx = t;
  if (break_here_ && equal(t, job_->break_at->thread)) [[unlikely]]
    glass_emu_thread_hook(job_->kernel, blockIdx.x, blockIdx.y, blockIdx.z, t.x, t.y, t.z);
}

// An exited thread counts as arrived at every barrier and warp operation it belongs to, so its
// exit may complete one that others wait at.
void BlockScheduler::complete_for_exit(const Fiber& self) {
  WarpState& w = warps_[self.tid >> 5];
  for (size_t i = 0; i < w.open.size();) {
    if (collective_done(w, *w.open[i]))
      complete_collective(w, *w.open[i], nullptr);  // removes it from w.open
    else
      ++i;
  }
  BlockBarrier& b = barrier_;
  if (b.arrived > 0 && !b.divergent && b.arrived + exited_ == nthreads_) {
    b.result = {b.true_count, b.arrived};
    b.arrived = 0;
    make_ready(b.waiters, false);
    b.waiters.clear();
  }
}

Fiber* BlockScheduler::pick_next() {
  if (ready_head_ < ready_.size()) {
    Fiber* f = ready_[ready_head_++];
    if (ready_head_ == ready_.size()) {
      ready_.clear();
      ready_head_ = 0;
    }
    return f;
  }
  if (!aborting_ && next_start_ < nthreads_) return idle_fiber();
  if (exited_ == next_start_) return &main_;  // the block is done; main_ waits in run_block
  report_deadlock();                          // makes every waiting thread ready, to unwind
  return pick_next();
}

Fiber* BlockScheduler::idle_fiber() {
  if (!idle_.empty()) {
    Fiber* f = idle_.back();
    idle_.pop_back();
    return f;
  }
  auto f = std::make_unique<Fiber>();
  f->stack = std::make_unique<FiberStack>(stack_bytes_);
  make_context(f->context, *f->stack, &BlockScheduler::fiber_entry);
  ++stats_.fibers_created;
  fibers_.push_back(std::move(f));
  return fibers_.back().get();
}

void BlockScheduler::fiber_entry() { this_thread_scheduler().fiber_loop(); }

void BlockScheduler::fiber_loop() {
  for (;;) {
    run_threads();
    Fiber* self = current_;
    Fiber* next = pick_next();
    idle_.push_back(self);  // parked here until idle_fiber() hands it the next threads
    switch_to(next);
  }
}

// Queues the threads a barrier or warp operation released. With a shuffle seed (or in reverse
// order) the caller, if it took part, queues up with them and the group is shuffled (reversed); the
// caller must then yield_to_released() once its bookkeeping is done. Returns whether it must.
bool BlockScheduler::make_ready(std::span<Fiber* const> released, bool caller_takes_part) {
  const size_t first = ready_.size();
  ready_.insert(ready_.end(), released.begin(), released.end());
  if (!shuffled_) return false;
  if (caller_takes_part) ready_.push_back(current_);
  if (job_->shuffle_seed)
    shuffle(std::span(ready_).subspan(first), rng_);
  else
    std::reverse(ready_.begin() + static_cast<std::ptrdiff_t>(first), ready_.end());
  return caller_takes_part;
}

void BlockScheduler::yield_to_released() {
  switch_to(pick_next());
  if (aborting_) throw CancelledThread{};
}

// Inline into the device entry point below (see switch_context for why).
[[gnu::always_inline]] inline BlockVote BlockScheduler::sync_block(int predicate, Site site) {
  BlockBarrier& b = barrier_;
  if (b.arrived == 0) {
    b.site = site;
    b.divergent = false;
    b.true_count = 0;
  } else if (!(b.site == site)) {
    b.divergent = true;  // can never complete: the deadlock report will show both sites
  }
  ++b.arrived;
  b.true_count += predicate != 0;
  if (!b.divergent && b.arrived + exited_ == nthreads_) {
    // The last thread to arrive releases the others and carries on.
    b.result = {b.true_count, b.arrived};
    b.arrived = 0;
    const bool yield = make_ready(b.waiters, true);
    b.waiters.clear();
    const BlockVote result = b.result;
    if (yield) yield_to_released();
    return result;
  }
  b.waiters.push_back(current_);
  suspend(Wait{WaitKind::block_barrier, site, 0});
  // Still this barrier's result: the next one cannot complete before this thread arrives there.
  return b.result;
}

BlockVote sync_block(int predicate, Site site) {
  return running_scheduler("__syncthreads()", site).sync_block(predicate, site);
}

void BlockScheduler::fail(std::exception_ptr error, const Fiber& thread) {
  if (!error_) {
    const std::string where = "kernel '" + std::string(job_->kernel) + "': thread " +
                              describe(thread.thread_idx) + " of block " + describe(blockIdx) +
                              ": ";
    // An EmuError naming the thread, with the original exception nested in it.
    auto wrap = [&](const std::string& what) {
      try {
        std::throw_with_nested(EmuError(where + what));
      } catch (...) {
        return std::current_exception();
      }
    };
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      error_ = wrap(e.what());
    } catch (...) {
      error_ = wrap("threw an exception of unknown type");
    }
  }
  abort_block();
}

std::vector<Fiber*> BlockScheduler::waiting_threads() const {
  std::vector<Fiber*> waiting(barrier_.waiters);
  for (const WarpState& w : warps_)
    for (const WarpCollective* c : w.open)
      for (unsigned lanes = c->arrived; lanes; lanes &= lanes - 1)
        waiting.push_back(c->fiber[std::countr_zero(lanes)]);
  return waiting;
}

// Wakes every suspended thread of the block; each throws CancelledThread and unwinds.
void BlockScheduler::abort_block() {
  aborting_ = true;
  const std::vector<Fiber*> waiting = waiting_threads();
  ready_.insert(ready_.end(), waiting.begin(), waiting.end());
  barrier_.waiters.clear();
  barrier_.arrived = 0;
  for (WarpState& w : warps_) {
    free_collectives_.insert(free_collectives_.end(), w.open.begin(), w.open.end());
    w.open.clear();
  }
}

void BlockScheduler::report_deadlock() {
  if (!error_)
    error_ = std::make_exception_ptr(
        EmuError(deadlock_report(*job_, blockIdx, waiting_threads(), exited_)));
  abort_block();
}

}  // namespace glass::emu::detail
