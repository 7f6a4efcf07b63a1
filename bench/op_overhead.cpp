// op_overhead: what one eager op costs beyond its arithmetic, on `cpu`, next to PyTorch.
//
// A chain of 20,000 adds of 16-element f32 tensors, x <- x + y, where the arithmetic is ~16 ns and
// everything else is overhead (checks, the output's allocation, the launch gateway, the tape):
//   us_per_op_nograd      the chain under NoGradGuard: no node recorded
//   us_per_op_recording   the chain with x requiring grad: one node per add
//   us_per_node_backward  backward() over that chain (plus its sum), per node
// Each is the best of --repeats runs. Prints one JSON line per system, then both side by side; the
// PyTorch line comes from bench/torch_op_overhead.py, run by this program in the same run with
// OMP_WAIT_POLICY=PASSIVE and the same thread count (--no-torch skips it).
//
//   build/bench/op_overhead [--ops 20000] [--size 16] [--repeats 5] [--threads 2] [--no-torch]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "autograd/ops.h"
#include "kernels/cpu/threads.h"
#include "samples/command_line.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ops = 20000, size = 16, repeats = 5, threads = 2;
  bool torch = true;
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The three numbers, best of o.repeats each, in µs.
nlohmann::json measure_glass(const Options& o) {
  using namespace glass;
  const Tensor y = ones({o.size});
  double nograd = 1e30, recording = 1e30, backward_s = 1e30;
  for (int r = 0; r < o.repeats; ++r) {
    {
      NoGradGuard no_grad;
      Tensor x = zeros({o.size});
      const auto t0 = Clock::now();
      for (int i = 0; i < o.ops; ++i) x = add(x, y);
      nograd = std::min(nograd, seconds_since(t0));
    }
    Tensor x0 = zeros({o.size});
    x0.set_requires_grad(true);
    Tensor x = x0;
    auto t0 = Clock::now();
    for (int i = 0; i < o.ops; ++i) x = add(x, y);
    recording = std::min(recording, seconds_since(t0));
    const Tensor loss = sum(x);
    t0 = Clock::now();
    backward(loss);
    backward_s = std::min(backward_s, seconds_since(t0));
    // 16 ones added ops times, summed: the chain really ran.
    if (item(sum(x.detach())) != static_cast<double>(o.size) * o.ops) {
      fmt::print(stderr, "op_overhead: wrong sum\n");
      std::exit(1);
    }
  }
  const double per = 1e6 / o.ops;
  return {{"system", "glass"},
          {"us_per_op_nograd", nograd * per},
          {"us_per_op_recording", recording * per},
          {"us_per_node_backward", backward_s * per}};
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
  fmt::print("{:<24}{:>10}{:>20}{:>18}\n", "µs", "glass",
             torch.value("system", std::string("pytorch")), "pytorch / glass");
  for (const char* k : {"us_per_op_nograd", "us_per_op_recording", "us_per_node_backward"}) {
    const double g = glass[k], t = torch[k];
    fmt::print("{:<24}{:>10.3f}{:>20.3f}{:>17.1f}x\n", k, g, t, t / g);
  }
  return 0;
}
