// glass's thread pool for the cpu kernels (kernels/cpu/threads.h explains the design).
//
// One loop at a time owns the pool. Its state is one 64-bit word: an epoch (which loop), the
// chunk count and the next unclaimed chunk. A thread claims a chunk with one fetch_add on the
// word; the claim is valid when the `next` it got is below the count in the same word, and only
// then does it read the loop's function (published before the word, replaced only after every
// chunk of this loop has finished, which this claimed chunk has not). A worker whose fetch_add
// lands after the loop ended gets a `next` past the count and does nothing. `done` counts
// finished chunks; the caller returns when it reaches the count. Workers sleep on the futex
// `posted` (bumped per loop), the caller on `done`; each side wakes the other only when it has
// said it sleeps (a seq_cst flag written before it re-checks the word it sleeps on).
#include "kernels/cpu/threads.h"

#include <cblas.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace glass::kernels::cpu {

namespace {

// How long an idle worker spins for the next loop before it sleeps. The loops of a training step
// come microseconds apart; a sleeping worker takes 10-50 us to wake. Spinning longer only burns
// time other processes could use.
constexpr double kSpinSeconds = 100e-6;
// How long the caller spins for a worker's last chunk before it sleeps.
constexpr double kCallerSpinSeconds = 50e-6;

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
          nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The loop's state word: epoch (24 bits) | chunks (20 bits) | next (20 bits).
constexpr int64_t kMaxChunks = int64_t{1} << 18;  // leaves room for late claims past the count
struct Word {
  uint64_t bits;
  uint32_t epoch() const { return static_cast<uint32_t>(bits >> 40); }
  int64_t chunks() const { return static_cast<int64_t>((bits >> 20) & 0xFFFFF); }
  int64_t next() const { return static_cast<int64_t>(bits & 0xFFFFF); }
  static uint64_t make(uint32_t epoch, int64_t chunks) {
    return (static_cast<uint64_t>(epoch & 0xFFFFFF) << 40) | (static_cast<uint64_t>(chunks) << 20);
  }
};

thread_local bool t_in_parallel = false;
std::atomic<bool> g_backoff_enabled{true};

// Every chunk in order on this thread; the first exception is rethrown after the last chunk, as
// the pool does.
void run_in_order(int64_t chunks, void (*fn)(const void*, int64_t), const void* ctx) {
  std::exception_ptr error;
  for (int64_t c = 0; c < chunks; ++c) {
    try {
      fn(ctx, c);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

struct Stats {
  std::atomic<int64_t> parallel_loops{0}, serial_by_backoff{0}, starved_loops{0}, busy_loops{0},
      chunks_by_workers{0};
};
Stats g_stats;

// Prints the counters at exit when GLASS_THREAD_STATS is set: how often the pool split a loop,
// how often a loop looked starved and how often the machine was busy (docs/profiling.md).
void print_stats_at_exit() {
  const ThreadStats s = thread_stats();
  std::fprintf(stderr,
               "glass thread pool: %lld loops split, %lld looked starved, %lld of them on a busy "
               "machine, %lld run alone by the back-off, %lld chunks run by workers\n",
               static_cast<long long>(s.parallel_loops), static_cast<long long>(s.starved_loops),
               static_cast<long long>(s.busy_loops), static_cast<long long>(s.serial_by_backoff),
               static_cast<long long>(s.chunks_by_workers));
}

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// The thread count before set_threads: OMP_NUM_THREADS when set (as before glass had its own
// pool), else every core.
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS"))
    if (const int n = std::atoi(env); n > 0) return n;
  return cores_available();
}

class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {}
  ~Pool() { stop_workers(); }

  int threads() const { return threads_; }

  void resize(int threads) {
    const std::lock_guard lock(loop_mu_);
    if (threads == threads_) return;
    stop_workers();
    threads_ = threads;
  }

  void run(int64_t chunks, void (*fn)(const void*, int64_t), const void* ctx) {
    std::unique_lock lock(loop_mu_, std::try_to_lock);
    // Another application thread's loop owns the pool, or one thread: this loop runs alone.
    if (!lock.owns_lock() || threads_ <= 1) return run_serial(chunks, fn, ctx);
    const double start = now_s();
    // a window that ends while the cores are still queued: the next one starts, without a probe
    if (backoff_.window_ended(start) && machine_oversubscribed_now()) backoff_.on_busy_wait(start);
    if (backoff_.serial_at(start)) {
      g_stats.serial_by_backoff.fetch_add(1, std::memory_order_relaxed);
      return run_serial(chunks, fn, ctx);
    }
    start_workers();
    g_stats.parallel_loops.fetch_add(1, std::memory_order_relaxed);
    // 1. publish the loop, then wake the sleeping workers
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    worker_chunks_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    epoch_ = (epoch_ + 1) & 0xFFFFFF;
    state_.store(Word::make(epoch_, chunks), std::memory_order_seq_cst);
    posted_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&posted_);
    // 2. the caller claims chunks like a worker
    t_in_parallel = true;
    claim_and_run(/*worker=*/false);
    t_in_parallel = false;
    const double own_work = now_s() - start;
    // 3. wait for chunks that workers claimed and have not finished
    double waited = 0;
    if (done_.load(std::memory_order_acquire) < chunks) {
      const double wait_start = now_s();
      wait_for_done(chunks, wait_start);
      waited = now_s() - wait_start;
    }
    if (loop_means_busy(own_work, worker_chunks_.load(std::memory_order_relaxed), waited)) {
      g_stats.starved_loops.fetch_add(1, std::memory_order_relaxed);
      if (machine_oversubscribed_now()) {
        g_stats.busy_loops.fetch_add(1, std::memory_order_relaxed);
        if (g_backoff_enabled.load(std::memory_order_relaxed)) backoff_.on_busy_wait(now_s());
      }
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static void run_serial(int64_t chunks, void (*fn)(const void*, int64_t), const void* ctx) {
    const bool was = std::exchange(t_in_parallel, true);
    struct Restore {
      bool was;
      ~Restore() { t_in_parallel = was; }
    } restore{was};
    run_in_order(chunks, fn, ctx);
  }

  // Claims chunks of the current loop until none is left; returns whether it ran any.
  bool claim_and_run(bool worker) {
    bool ran = false;
    for (;;) {
      const Word seen{state_.load(std::memory_order_acquire)};
      if (seen.next() >= seen.chunks()) return ran;
      const Word got{state_.fetch_add(1, std::memory_order_acq_rel)};
      if (got.next() >= got.chunks()) return ran;
      // a valid claim: this loop cannot end (nor its function change) before the chunk is done
      const auto fn = fn_.load(std::memory_order_relaxed);
      const void* ctx = ctx_.load(std::memory_order_relaxed);
      try {
        fn(ctx, got.next());
      } catch (...) {
        const std::lock_guard lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      ran = true;
      if (worker) {
        worker_chunks_.fetch_add(1, std::memory_order_relaxed);
        g_stats.chunks_by_workers.fetch_add(1, std::memory_order_relaxed);
      }
      const uint32_t finished = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
      if (finished == static_cast<uint32_t>(got.chunks()) &&
          caller_sleeps_.load(std::memory_order_seq_cst))
        futex_wake_all(&done_);
    }
  }

  void wait_for_done(int64_t chunks, double wait_start) {
    const auto target = static_cast<uint32_t>(chunks);
    while (done_.load(std::memory_order_acquire) < target) {
      if (now_s() - wait_start < kCallerSpinSeconds) {
        cpu_relax();
        continue;
      }
      caller_sleeps_.store(true, std::memory_order_seq_cst);
      const uint32_t seen = done_.load(std::memory_order_seq_cst);
      if (seen < target) futex_wait(&done_, seen);
      caller_sleeps_.store(false, std::memory_order_relaxed);
    }
  }

  void worker_main() {
    uint32_t seen_posted = posted_.load(std::memory_order_acquire);
    while (!stop_.load(std::memory_order_acquire)) {
      // 1. wait for a new loop: spin a little, then sleep
      const double spin_start = now_s();
      while (posted_.load(std::memory_order_acquire) == seen_posted &&
             !stop_.load(std::memory_order_relaxed)) {
        if (now_s() - spin_start < kSpinSeconds) {
          for (int i = 0; i < 16; ++i) cpu_relax();
          continue;
        }
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (posted_.load(std::memory_order_seq_cst) == seen_posted &&
            !stop_.load(std::memory_order_seq_cst))
          futex_wait(&posted_, seen_posted);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen_posted = posted_.load(std::memory_order_acquire);
      // 2. take part in it (a loop that already ended leaves nothing to claim)
      t_in_parallel = true;
      claim_and_run(/*worker=*/true);
      t_in_parallel = false;
    }
  }

  void start_workers() {
    if (!workers_.empty()) return;
    stop_.store(false);
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_main(); });
  }

  void stop_workers() {
    if (workers_.empty()) return;
    stop_.store(true, std::memory_order_seq_cst);
    posted_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&posted_);
    for (std::thread& w : workers_) w.join();
    workers_.clear();
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex loop_mu_;  // held by the loop that owns the pool (and by resize)
  uint32_t epoch_ = 0;
  ContentionBackoff backoff_;
  alignas(64) std::atomic<uint64_t> state_{Word::make(0, 0)};
  alignas(64) std::atomic<uint32_t> done_{0};
  alignas(64) std::atomic<uint32_t> posted_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int64_t> worker_chunks_{0};  // chunks the workers ran in this loop
  std::atomic<bool> caller_sleeps_{false};
  std::atomic<bool> stop_{false};
  std::atomic<void (*)(const void*, int64_t)> fn_{nullptr};
  std::atomic<const void*> ctx_{nullptr};
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// Never destroyed: a kernel may run while static objects are torn down, and threads blocked in
// a futex end with the process.
Pool& pool() {
  static Pool* p = [] {
    if (const char* env = std::getenv("GLASS_THREAD_STATS"); env != nullptr && *env != '0')
      std::atexit(print_stats_at_exit);
    return new Pool(default_threads());
  }();
  return *p;
}

}  // namespace

int set_threads(int threads) {
  if (threads <= 0) threads = cores_available();
  pool().resize(threads);
  // OpenBLAS runs only the f64 GEMMs of gradcheck (and emu's cuBLAS) on its own threads.
  openblas_set_num_threads(threads);
  return threads;
}

int num_threads() { return pool().threads(); }

bool in_parallel() { return t_in_parallel; }

int64_t chunk_count(int64_t items) {
  return std::min<int64_t>(items, kChunksPerThread * num_threads());
}

void parallel_chunks(int64_t chunks, void (*fn)(const void* ctx, int64_t chunk), const void* ctx) {
  if (chunks <= 0) return;
  if (chunks == 1 || t_in_parallel) return run_in_order(chunks, fn, ctx);
  if (chunks > kMaxChunks)
    throw std::invalid_argument("parallel_chunks: " + std::to_string(chunks) +
                                " chunks, more than the pool's limit of " +
                                std::to_string(kMaxChunks));
  pool().run(chunks, fn, ctx);
}

bool loop_means_busy(double own_work_s, int64_t worker_chunks, double waited_s) {
  const bool descheduled_holder = waited_s > kBusyWaitFloorSeconds && waited_s > own_work_s;
  const bool absent_workers = worker_chunks == 0 && own_work_s > kAbsentWorkerSeconds;
  return descheduled_holder || absent_workers;
}

// Reads a short /proc file into `text`; false where it is absent or unreadable.
bool read_proc_file(const char* path, char (&text)[256]) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  return true;
}

CpuPressure cpu_pressure_now() {
  // "some avg10=0.37 avg60=7.60 avg300=19.60 total=29381802948": avg10 in percent, total in
  // microseconds.
  char text[256];
  if (!read_proc_file("/proc/pressure/cpu", text)) return {};
  const char* avg10 = std::strstr(text, "avg10=");
  const char* total = std::strstr(text, "total=");
  if (std::strncmp(text, "some", 4) != 0 || avg10 == nullptr || total == nullptr) return {};
  return {static_cast<double>(std::strtoull(total + 6, nullptr, 10)) * 1e-6,
          std::strtod(avg10 + 6, nullptr) / 100};
}

double cpu_stall_seconds_now() { return cpu_pressure_now().stalled_s; }

int runnable_threads_now() {
  // "0.52 0.58 0.59 3/412 12345": the fourth field is runnable/total scheduling entities, this
  // thread included. One read() of a short file: a few microseconds.
  char text[256];
  if (!read_proc_file("/proc/loadavg", text)) return -1;
  double l1, l5, l15;
  int runnable, total;
  return std::sscanf(text, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &runnable, &total) == 5 ? runnable
                                                                                        : -1;
}

double stall_share(double from_s, double stalled_from_s, double to_s, double stalled_to_s) {
  const double interval = to_s - from_s;
  if (interval < kStallMinIntervalSeconds || interval > kStallWindowSeconds) return -1;
  return std::clamp((stalled_to_s - stalled_from_s) / interval, 0.0, 1.0);
}

bool machine_oversubscribed_now() {
  // The previous reading, shared by every caller (the pool's loops and tests).
  static std::mutex mu;
  static double last_time = -1e300, last_stalled = -1;
  static bool verdict = false, last_over_cores = false;
  static const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const std::lock_guard lock(mu);
  const double now = now_s();
  if (const CpuPressure pressure = cpu_pressure_now(); pressure.stalled_s >= 0) {
    // 1. the kernel's CPU pressure since the previous reading (first or stale: over its last 10 s)
    const double stalled = pressure.stalled_s;
    double share = last_stalled >= 0 ? stall_share(last_time, last_stalled, now, stalled) : -1;
    if (share < 0 && now - last_time < kStallMinIntervalSeconds)
      return verdict;  // too soon: the last word stands
    if (share < 0) share = pressure.recent_share;
    verdict = share * static_cast<double>(cores) > kBusyWaitingCores;
    last_time = now;
    last_stalled = stalled;
    return verdict;
  }
  // 2. no pressure file: runnable threads above the cores now and at the previous reading
  const int runnable = runnable_threads_now();
  const bool over_cores = runnable < 0 || runnable > cores;  // unknown: trust the loop's evidence
  verdict = over_cores && last_over_cores && now - last_time <= kStallWindowSeconds;
  last_over_cores = over_cores;
  last_time = now;
  return verdict;
}

void set_busy_backoff(bool enabled) { g_backoff_enabled.store(enabled); }

ThreadStats thread_stats() {
  return {g_stats.parallel_loops.load(), g_stats.serial_by_backoff.load(),
          g_stats.starved_loops.load(), g_stats.busy_loops.load(),
          g_stats.chunks_by_workers.load()};
}

void reset_thread_stats() {
  g_stats.parallel_loops = 0;
  g_stats.serial_by_backoff = 0;
  g_stats.starved_loops = 0;
  g_stats.busy_loops = 0;
  g_stats.chunks_by_workers = 0;
}

}  // namespace glass::kernels::cpu
