// The grid driver: validates a launch, hands its blocks to the worker pool, and turns whatever
// went wrong in any block into one EmuError for the caller.
#include "engine/emu/launch.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>

#include "engine/emu/block_scheduler.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"
#include "engine/emu/memory.h"
#include "engine/emu/settings.h"
#include "engine/emu/worker_pool.h"

namespace glass::emu::detail {
namespace {

// The limits of every GPU from sm_30 to sm_90.
void validate(const char* kernel, dim3 grid, dim3 block) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const bool ok = threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 &&
                  block.z <= 64 && grid.x >= 1 && grid.y >= 1 && grid.z >= 1 &&
                  grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535;
  if (!ok)
    throw EmuError("kernel '" + std::string(kernel) + "': invalid launch configuration, grid " +
                   describe(grid) + " block " + describe(block) +
                   " (a block holds 1..1024 threads, blockDim.z <= 64, gridDim.y/z <= 65535)");
}

// The blocks of one grid, shared by the OS threads that run them.
class GridRun {
 public:
  GridRun(const LaunchJob& job, uint64_t blocks) : job_(job), blocks_(blocks) {}

  // Runs blocks on the calling OS thread until none are left or one has failed.
  void work() {
    BlockScheduler& scheduler = this_thread_scheduler();
    scheduler.begin_launch(job_);
    while (!failed_.load(std::memory_order_relaxed)) {
      const uint64_t b = next_.fetch_add(1, std::memory_order_relaxed);
      if (b >= blocks_) break;
      try {
        scheduler.run_block(b);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        failed_ = true;
      }
    }
    const LaunchStats s = scheduler.take_stats();
    std::lock_guard lock(mutex_);
    stats_.context_switches += s.context_switches;
    stats_.fibers_created += s.fibers_created;
  }

  std::exception_ptr error() const { return error_; }
  LaunchStats stats() const { return stats_; }

 private:
  const LaunchJob& job_;
  const uint64_t blocks_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr error_;
  LaunchStats stats_;
};

// The pool serves one grid at a time; launches from several host threads take turns (and the
// red zone check after a grid blames the right kernel).
std::mutex g_launch_mutex;
std::unique_ptr<WorkerPool> g_pool;

WorkerPool& pool_of_size(unsigned threads) {
  if (!g_pool || g_pool->threads() != threads) {
    g_pool.reset();
    g_pool = std::make_unique<WorkerPool>(threads);
  }
  return *g_pool;
}

}  // namespace

LaunchStats run_grid(const char* kernel, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                     KernelBody body) {
  validate(kernel, grid, block);
  if (t_running_scheduler)
    throw EmuError("kernel '" + std::string(kernel) +
                   "' launched from inside a kernel: dynamic parallelism is not emulated");
  const Settings s = settings();
  const BreakTarget* break_at =
      s.break_at && (s.break_at->kernel.empty() || s.break_at->kernel == kernel) ? &*s.break_at
                                                                                 : nullptr;
  const LaunchJob job{.kernel = kernel,
                      .body = body,
                      .grid = grid,
                      .block = block,
                      .dynamic_shared_bytes = dynamic_shared_bytes,
                      .stack_bytes = s.fiber_stack_bytes,
                      .shuffle_seed = s.shuffle_seed,
                      .break_at = break_at};
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  GridRun run(job, blocks);
  std::lock_guard lock(g_launch_mutex);
  const unsigned helpers = static_cast<unsigned>(std::min<uint64_t>(blocks, s.worker_threads)) - 1;
  pool_of_size(s.worker_threads).run(helpers, [&run] { run.work(); });
  std::exception_ptr error = run.error();
  if (s.check_memory) {
    // Checked even after a failure: the zones must be restored before the next launch, or it
    // would be blamed for this one's writes. The first error is the one reported.
    try {
      check_red_zones(kernel);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return run.stats();
}

}  // namespace glass::emu::detail
