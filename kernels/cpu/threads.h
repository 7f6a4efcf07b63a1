// The threads the `cpu` kernels run on: glass's own pool, built to stay fast on a busy machine.
//
// A parallel loop is cut into chunks; the calling thread and the pool's workers claim chunks one
// at a time from a shared counter until none is left. The caller returns as soon as every chunk
// has run: a worker that the scheduler has not run yet (the cores busy with other processes)
// finds nothing left when it wakes, and nobody waited for it. OpenMP's parallel regions end in a
// barrier that every thread of the team must reach, so one descheduled thread holds up the whole
// region, and libgomp's threads spin for milliseconds waiting for the next region, burning the
// time slices the other processes (and our own threads) need: with two busy processes on two
// cores, a 1 ms GEMM took 25-390 ms at 2 OpenMP threads (bench/RESULTS.md, 2026-12-05).
//
// Waiting is short and adaptive: a worker spins for at most kSpinMicroseconds for the next loop
// (loops of a training step follow each other within microseconds), then sleeps on a futex. When
// a worker that holds a chunk was descheduled, or no worker shows up at all (the machine is busy:
// loop_means_busy, confirmed by the kernel's CPU pressure), the next loops run on the calling
// thread alone for a back-off window, doubling while the machine stays busy (ContentionBackoff); no
// worker spins during it. When a window ends, the pressure during it decides whether to split
// again.
//
// Results never depend on the threads: a chunk is a fixed range of the loop, whichever thread runs
// it, and every loop body writes its own outputs (sums over chunks are added in chunk order by the
// kernels themselves).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace glass::kernels::cpu {

// 0 = every core this process may run on. Returns the count in effect. Not while a loop runs.
int set_threads(int threads);
int num_threads();

// True on a thread that is running a chunk of a parallel loop that was split over the pool:
// loops nested in it run on that thread alone (sgemm inside attention's per-slice loop).
bool in_parallel();

// fn(chunk) for every chunk < chunks, each exactly once, spread over the pool (the calling thread
// included). Runs them in order on the calling thread when there is one thread, one chunk, or it
// is already inside a parallel loop. The first exception a chunk throws is rethrown here after
// every chunk has finished.
void parallel_chunks(int64_t chunks, void (*fn)(const void* ctx, int64_t chunk), const void* ctx);

template <class Fn>
void parallel_chunks(int64_t chunks, Fn&& fn) {
  using F = std::remove_reference_t<Fn>;
  parallel_chunks(
      chunks, [](const void* ctx, int64_t c) { (*static_cast<F*>(const_cast<void*>(ctx)))(c); },
      static_cast<const void*>(&fn));
}

// How many chunks a loop over `items` is cut into: a few per thread, so a thread that starts late
// or is interrupted leaves its share to the others (kChunksPerThread), never more than the items.
constexpr int64_t kChunksPerThread = 4;
int64_t chunk_count(int64_t items);

// fn(begin, end) over consecutive ranges that cover [0, items) once. In parallel when `parallel`
// (the kernel's own threshold) and there is more than one thread; otherwise fn(0, items). Ranges
// start at multiples of `align` items (a vector's worth of elements keeps loops whole).
template <class Fn>
void parallel_ranges(int64_t items, bool parallel, Fn&& fn, int64_t align = 1) {
  if (items <= 0) return;
  const int64_t blocks = (items + align - 1) / align;
  const int64_t chunks = parallel && !in_parallel() ? std::min(chunk_count(blocks), blocks) : 1;
  if (chunks <= 1) return fn(int64_t{0}, items);
  parallel_chunks(chunks, [&](int64_t c) {
    const int64_t begin = blocks * c / chunks * align;
    const int64_t end = std::min(items, blocks * (c + 1) / chunks * align);
    if (begin < end) fn(begin, end);
  });
}

// Whether a loop says the machine is busy (other processes hold the cores), from what the calling
// thread saw: it worked `own_work_s` on chunks, the workers ran `worker_chunks`, and it then
// waited `waited_s` for the workers' last chunks. Busy when
// - it waited longer than kBusyWaitFloorSeconds and longer than its own work: a worker was
//   descheduled while it held a chunk (a running worker finishes a chunk, a small part of the
//   loop, well within the time), or
// - no worker ran a chunk although the caller worked longer than kAbsentWorkerSeconds: a woken
//   worker starts within ~50 us on a quiet machine, so it was left waiting for a core.
constexpr double kBusyWaitFloorSeconds = 200e-6;
constexpr double kAbsentWorkerSeconds = 300e-6;
bool loop_means_busy(double own_work_s, int64_t worker_chunks, double waited_s);

// A starved loop is only evidence: on a quiet virtual machine a sleeping worker's core can take
// hundreds of microseconds to wake (the hypervisor halted it), which looks like a worker left
// waiting for a core. So a starved loop counts as busy only when the kernel confirms that threads
// of this machine waited for a core (machine_oversubscribed_now):
// - Linux's CPU pressure (/proc/pressure/cpu, "some": the time in which a core had a runnable
//   thread waiting for it, averaged over the cores): busy when, since the previous reading (5 ms
//   to kStallWindowSeconds ago; at a first or stale reading, over the kernel's own last 10 s,
//   "avg10"), its share of the time times the cores exceeds kBusyWaitingCores: on average over
//   half a core had a queue.
//   Our own two threads on two cores wait for nothing (0); add two spinning processes and both
//   cores have a queue (2); a passing system thread is a few hundredths.
// - without a pressure file, /proc/loadavg's count of runnable threads (this process's own
//   included) above the cores in two readings in a row: one reading may catch our two threads and
//   one passing system thread on a quiet two-core machine.
// Without that check a quiet machine can back off into serial windows of up to a second after a
// slow wake-up (bench/RESULTS.md, 2026-12-05: the quiet step's time swung 2x; the loadavg count
// alone still did, 5 busy loops of ~6000).
constexpr double kBusyWaitingCores = 0.5;
constexpr double kStallWindowSeconds = 2.0;
// The shortest interval judged: readings 1 ms apart showed no stall at all with three spinning
// threads on two cores, 5 ms apart the true 0.5 share (2026-12-06, measured here).
constexpr double kStallMinIntervalSeconds = 5e-3;
// /proc/pressure/cpu's "some" line: its total (seconds stalled since boot) and its avg10 as a
// share of the time; both -1 where the kernel has no pressure file.
struct CpuPressure {
  double stalled_s = -1;
  double recent_share = -1;
};
CpuPressure cpu_pressure_now();
double cpu_stall_seconds_now();  // cpu_pressure_now().stalled_s
int runnable_threads_now();      // /proc/loadavg's runnable count; -1 where the system does not say
// The share of [from, to] (steady-clock seconds) spent stalled, from two cpu_stall_seconds_now
// readings; -1 when the interval is too short (under kStallMinIntervalSeconds) or too old to judge
// by.
double stall_share(double from_s, double stalled_from_s, double to_s, double stalled_to_s);
bool machine_oversubscribed_now();

// The back-off after a busy loop: the next loops run on the calling thread alone until
// `serial_until`. The first busy loop sets a window of kFirstWindow; each busy loop within
// kMemory of the last doubles it, up to kLongestWindow; one after kMemory without any starts
// again from kFirstWindow. When a window ends (`window_ended`, once per window), the pool asks the
// kernel whether threads still waited for a core during it: if so the next window starts at once
// (no loop is split: a probe on a busy machine costs a wait for a descheduled worker); if not, or
// where the kernel cannot say, the next loop is split over the pool again, a probe of the cores.
// Times in seconds on any steady clock.
struct ContentionBackoff {
  static constexpr double kFirstWindow = 0.05, kLongestWindow = 1.0, kMemory = 2.0;
  double serial_until = -1e300;
  double window = 0;
  double last_busy = -1e300;
  bool window_open = false;

  bool serial_at(double now) const { return now < serial_until; }
  bool window_ended(double now) {
    if (!window_open || serial_at(now)) return false;
    window_open = false;
    return true;
  }
  void on_busy_wait(double now) {
    window = now - last_busy <= kMemory
                 ? std::min(std::max(window, kFirstWindow) * 2, kLongestWindow)
                 : kFirstWindow;
    last_busy = now;
    serial_until = now + window;
    window_open = true;
  }
};

// Whether busy loops start a back-off (on by default). Off, every loop is split over the pool
// whatever the machine's load: for a benchmark that measures what the split itself costs.
void set_busy_backoff(bool enabled);

// Counters since the process started (or since reset_thread_stats), for benchmarks and tests.
struct ThreadStats {
  int64_t parallel_loops = 0;     // loops split over the pool
  int64_t serial_by_backoff = 0;  // loops run alone because of ContentionBackoff
  int64_t starved_loops = 0;      // loops that loop_means_busy judged starved of a worker
  int64_t busy_loops = 0;         // of those, loops that ran while the machine was oversubscribed
  int64_t chunks_by_workers = 0;  // chunks a worker (not the caller) ran
};
ThreadStats thread_stats();
void reset_thread_stats();

}  // namespace glass::kernels::cpu
