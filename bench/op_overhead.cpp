// op_overhead: what one eager op costs beyond its arithmetic, on `cpu`, next to PyTorch.
//
// A chain of 20,000 adds of 16-element f32 tensors, x <- x + y, where the arithmetic is ~16 ns and
// everything else is overhead (checks, the output's allocation, the launch gateway, the tape):
//   us_per_op_nograd      the chain under NoGradGuard: no node recorded
//   us_per_op_recording   the chain with x requiring grad: one node per add
//   us_per_node_backward  backward() over that chain (plus its sum), per node
//   rss_bytes_per_op_recording  how much the process's resident memory grew while the recording
//                         chain ran, per op (the most over the repeats: the first run's fresh
//                         pages)
// Each is the best of --repeats runs, in wall-clock time and (cpu_us_*) in the thread's own CPU
// time, which on a machine shared with other busy processes leaves out the time spent waiting for a
// core. Prints one JSON line per system, then both side by side; the PyTorch line comes from
// bench/torch_op_overhead.py, run by this program in the same run with OMP_WAIT_POLICY=PASSIVE and
// the same thread count (--no-torch skips it).
//
//   build/bench/op_overhead [--ops 20000] [--size 16] [--repeats 5] [--threads 2] [--no-torch]
#include <fmt/format.h>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/ops.h"
#include "kernels/cpu/threads.h"
#include "samples/command_line.h"

namespace {

using Clock = std::chrono::steady_clock;

// This thread's CPU time in seconds.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The process's resident memory in bytes (/proc/self/statm's second field, in pages).
double resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// The best wall-clock and CPU time of a section over the repeats.
struct Best {
  double wall = 1e30, cpu = 1e30;
  struct Start {
    Clock::time_point wall;
    double cpu;
  };
  static Start start() { return {Clock::now(), thread_seconds()}; }
  void stop(const Start& s) {
    wall = std::min(wall, std::chrono::duration<double>(Clock::now() - s.wall).count());
    cpu = std::min(cpu, thread_seconds() - s.cpu);
  }
};

struct Options {
  int ops = 20000, size = 16, repeats = 5, threads = 2;
  bool torch = true;
};

// The three numbers, best of o.repeats each, in µs: wall-clock, then thread CPU time.
nlohmann::json measure_glass(const Options& o) {
  using namespace glass;
  const Tensor y = ones({o.size});
  Best nograd, recording, backward_s;
  double rss_growth = 0;
  for (int r = 0; r < o.repeats; ++r) {
    {
      NoGradGuard no_grad;
      Tensor x = zeros({o.size});
      const auto t0 = Best::start();
      for (int i = 0; i < o.ops; ++i) x = add(x, y);
      nograd.stop(t0);
    }
    Tensor x0 = zeros({o.size});
    x0.set_requires_grad(true);
    Tensor x = x0;
    const double rss0 = resident_bytes();
    auto t0 = Best::start();
    for (int i = 0; i < o.ops; ++i) x = add(x, y);
    recording.stop(t0);
    rss_growth = std::max(rss_growth, resident_bytes() - rss0);
    const Tensor loss = sum(x);
    t0 = Best::start();
    backward(loss);
    backward_s.stop(t0);
    // 16 ones added ops times, summed: the chain really ran.
    if (item(sum(x.detach())) != static_cast<double>(o.size) * o.ops) {
      fmt::print(stderr, "op_overhead: wrong sum\n");
      std::exit(1);
    }
  }
  const double per = 1e6 / o.ops;
  return {{"system", "glass"},
          {"us_per_op_nograd", nograd.wall * per},
          {"us_per_op_recording", recording.wall * per},
          {"us_per_node_backward", backward_s.wall * per},
          {"cpu_us_per_op_nograd", nograd.cpu * per},
          {"cpu_us_per_op_recording", recording.cpu * per},
          {"cpu_us_per_node_backward", backward_s.cpu * per},
          {"rss_bytes_per_op_recording", rss_growth / o.ops}};
}

// Runs the PyTorch script and returns its last line as JSON (null when it fails).
nlohmann::json measure_torch(const Options& o) {
  const std::string cmd = fmt::format(
      "OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 {}/bench/torch_op_overhead.py --ops {} --size {} "
      "--repeats {} --threads {} 2>/dev/null",
      GLASS_SOURCE_DIR, o.ops, o.size, o.repeats, o.threads);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return nullptr;
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, pipe)) out = buf;  // the last line
  if (pclose(pipe) != 0 || out.empty()) return nullptr;
  return nlohmann::json::parse(out, nullptr, false);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"op_overhead: what one eager op costs beyond its arithmetic, next to PyTorch"};
  app.option_defaults()->always_capture_default();
  app.add_option("--ops", o.ops, "adds in the chain")->check(CLI::PositiveNumber);
  app.add_option("--size", o.size, "elements of each tensor")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "runs of each measurement (the best is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "cpu threads, for glass and PyTorch alike");
  bool no_torch = false;
  app.add_flag("--no-torch", no_torch, "skip bench/torch_op_overhead.py");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "op_overhead"))
    return *status;
  o.torch = !no_torch;
  glass::kernels::cpu::set_threads(o.threads);
  const nlohmann::json glass = measure_glass(o);
  fmt::print("{}\n", glass.dump());
  if (!o.torch) return 0;
  const nlohmann::json torch = measure_torch(o);
  if (torch.is_null() || torch.is_discarded()) {
    fmt::print(stderr,
               "op_overhead: bench/torch_op_overhead.py failed (is python3-torch installed?)\n");
    return 1;
  }
  fmt::print("{}\n", torch.dump());
  fmt::print("chain of {} adds of {} f32 elements on cpu, {} threads, best of {}\n", o.ops, o.size,
             o.threads, o.repeats);
  fmt::print("{:<28}{:>10}{:>20}{:>18}\n", "µs", "glass",
             torch.value("system", std::string("pytorch")), "pytorch / glass");
  for (const char* k :
       {"us_per_op_nograd", "us_per_op_recording", "us_per_node_backward", "cpu_us_per_op_nograd",
        "cpu_us_per_op_recording", "cpu_us_per_node_backward", "rss_bytes_per_op_recording"}) {
    if (!torch.contains(k)) continue;
    const double g = glass[k], t = torch[k];
    fmt::print("{:<28}{:>10.3f}{:>20.3f}{:>17.1f}x\n", k, g, t, t / g);
  }
  return 0;
}
