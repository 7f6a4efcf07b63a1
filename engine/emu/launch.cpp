// The grid driver: validates a launch against the device's limits, hands its blocks to the
// worker pool (or, with a launch check on, runs them one after another under the checks), and
// turns whatever went wrong in any block into one EmuError for the caller.
#include "engine/emu/launch.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/emu/block_scheduler.h"
#include "engine/emu/describe.h"
#include "engine/emu/device_limits.h"
#include "engine/emu/error.h"
#include "engine/emu/launch_checks.h"
#include "engine/emu/memory.h"
#include "engine/emu/settings.h"
#include "engine/emu/shared_memory_limits.h"
#include "engine/emu/static_shared.h"
#include "engine/emu/worker_pool.h"

namespace glass::emu::detail {
namespace {

// The device's limits on block and grid dimensions (device_limits.h).
void validate(const char* kernel, dim3 grid, dim3 block) {
  const DeviceLimits& d = kH200;
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  const bool ok = threads >= 1 && threads <= static_cast<uint64_t>(d.max_threads_per_block) &&
                  block.x <= static_cast<unsigned>(d.max_block_dim_x) &&
                  block.y <= static_cast<unsigned>(d.max_block_dim_y) &&
                  block.z <= static_cast<unsigned>(d.max_block_dim_z) && grid.x >= 1 &&
                  grid.y >= 1 && grid.z >= 1 && grid.x <= d.max_grid_dim_x &&
                  grid.y <= static_cast<unsigned>(d.max_grid_dim_y) &&
                  grid.z <= static_cast<unsigned>(d.max_grid_dim_z);
  if (!ok)
    throw EmuError(
        "kernel '" + std::string(kernel) + "': invalid launch configuration, grid " +
        describe(grid) + " block " + describe(block) + " (" + d.name + ": a block holds 1.." +
        std::to_string(d.max_threads_per_block) + " threads, blockDim <= (" +
        std::to_string(d.max_block_dim_x) + "," + std::to_string(d.max_block_dim_y) + "," +
        std::to_string(d.max_block_dim_z) + "), gridDim <= (" + std::to_string(d.max_grid_dim_x) +
        "," + std::to_string(d.max_grid_dim_y) + "," + std::to_string(d.max_grid_dim_z) + "))");
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
    add(scheduler);
  }

  // Runs every block on the calling OS thread, in order, under the thread order `order`, calling
  // after_block(b) after each (for the launch checks). Throws what a block throws.
  void work_in_order(ThreadOrder order, const std::function<void(uint64_t)>& after) {
    LaunchJob job = job_;
    job.shuffle_seed = order.shuffle_seed;
    job.reverse_order = order.reversed;
    BlockScheduler& scheduler = this_thread_scheduler();
    scheduler.begin_launch(job);
    try {
      for (uint64_t b = 0; b < blocks_; ++b) {
        scheduler.run_block(b);
        after(b);
      }
    } catch (...) {
      add(scheduler);
      throw;
    }
    add(scheduler);
  }

  std::exception_ptr error() const { return error_; }
  LaunchStats stats() const { return stats_; }
  const std::vector<size_t>& static_shared_written() const { return static_written_; }

 private:
  const LaunchJob& job_;
  const uint64_t blocks_;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr error_;
  LaunchStats stats_;
  std::vector<size_t> static_written_;  // static __shared__ variables the blocks wrote

  void add(BlockScheduler& scheduler) {
    const LaunchStats s = scheduler.take_stats();
    const std::vector<size_t> written = scheduler.take_static_shared_written();
    std::lock_guard lock(mutex_);
    stats_.context_switches += s.context_switches;
    stats_.fibers_created += s.fibers_created;
    std::vector<size_t> merged;
    std::set_union(static_written_.begin(), static_written_.end(), written.begin(), written.end(),
                   std::back_inserter(merged));
    static_written_ = std::move(merged);
  }
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
                     KernelBody body, const KernelArguments& arguments) {
  validate(kernel, grid, block);
  // Static shared bytes are measured by running (static_shared.h): the first launch of a
  // kernel is checked when it has run, later ones before they start, as on the GPU.
  const void* function = arguments.function;
  const std::optional<std::vector<size_t>> known_static = known_static_shared(function, kernel);
  if (known_static)
    check_shared_memory(function, kernel, static_shared_bytes(*known_static), dynamic_shared_bytes,
                        describe_static_shared(*known_static));
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
                      .static_shared_known = known_static ? &*known_static : nullptr,
                      .break_at = break_at};
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  GridRun run(job, blocks);
  std::lock_guard lock(g_launch_mutex);
  std::exception_ptr error;
  if ((s.race_check || s.init_check) && arguments.function) {
    // Checked launches run their blocks in order on this thread, so that reruns compare equal.
    const SerialGridRun in_order = [&run](ThreadOrder order,
                                          const std::function<void(uint64_t)>& after) {
      run.work_in_order(order, after);
    };
    const ThreadOrder configured{.shuffle_seed = s.shuffle_seed};
    const auto once = [&] {
      if (s.race_check)
        race_checked_run(kernel, grid, arguments, configured, in_order);
      else
        in_order(configured, [](uint64_t) {});
    };
    try {
      if (s.init_check)
        init_checked_run(kernel, arguments, once);
      else
        once();
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    const unsigned helpers =
        static_cast<unsigned>(std::min<uint64_t>(blocks, s.worker_threads)) - 1;
    pool_of_size(s.worker_threads).run(helpers, [&run] { run.work(); });
    error = run.error();
  }
  if (!error) {
    const size_t static_bytes = static_shared_bytes(run.static_shared_written());
    record_static_shared(function, kernel, run.static_shared_written());
    try {
      check_shared_memory(function, kernel, static_bytes, dynamic_shared_bytes,
                          describe_static_shared(run.static_shared_written()));
    } catch (...) {
      error = std::current_exception();
    }
  }
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
