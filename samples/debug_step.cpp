// debug_step: one forward and backward pass small enough to follow in a debugger.
//
//   build/samples/debug_step --device cpu|emu [--rows 6] [--cols 40] [--seed 1] [--report r.html]
//
// loss = sum(softmax(LayerNorm(x)) * w) over x [rows, cols] and a fixed random w: a LayerNorm
// module (registered as "net.ln", so its nodes say where they come from), a softmax and a weighted
// sum, then backward. It prints the tape, the loss and the gradient norms. docs/debugging.md walks
// through it in gdb: LayerNorm's backward kernel on `cpu`, one CUDA thread of the softmax kernel on
// `emu`. With rows >= 4 the softmax grid has a block 3; cols = 40 gives it two warps. --report
// writes the pass as the step explorer (train/report.h): its launches, tape and memory ledger, and
// each node's gradient norm, measured on an identical pass run just before (without --report
// there is only the one pass, whose launches the walkthrough's breakpoints stop in).
#include <chrono>
#include <cmath>

#include "autograd/backward.h"
#include "autograd/grad_norms.h"
#include "autograd/ops.h"
#include "autograd/tape_record.h"
#include "engine/allocator.h"
#include "engine/atomic_file.h"
#include "engine/error.h"
#include "nn/layers.h"
#include "samples/command_line.h"
#include "train/profiler.h"

namespace {

struct Options {
  std::string device = "cpu";
  int64_t rows = 6, cols = 40;
  uint64_t seed = 1;
  std::string report;  // the step explorer's HTML ("" = none)
};

// The module tree the walkthrough steps through: net.ln.
struct Net : glass::Module {
  explicit Net(int64_t cols) : ln(cols) { register_module("ln", ln); }
  glass::LayerNorm ln;
};

struct Root : glass::Module {
  explicit Root(int64_t cols) : net(cols) { register_module("net", net); }
  Net net;
};

double l2_norm(const glass::Tensor& t) {
  double s = 0;
  for (float v : glass::to_vector<float>(t)) s += static_cast<double>(v) * v;
  return std::sqrt(s);
}

void run(const Options& o) {
  using namespace glass;
  GLASS_CHECK(o.rows > 0 && o.cols > 0, "--rows {} and --cols {} must be positive", o.rows, o.cols);
  check_output_file("--report", o.report);
  const Device device = Device::parse(o.device);
  Generator gen(o.seed);
  Root model(o.cols);
  model.to(device);
  Tensor x = randn({o.rows, o.cols}, gen, 0, 1, DType::f32, device).set_requires_grad(true);
  Tensor w = randn({o.rows, o.cols}, gen, 0, 1, DType::f32, device);
  // loss = sum(softmax(LayerNorm(x)) * w)
  const auto forward = [&] {
    Tensor probs = softmax(model.net.ln.forward(x));
    return sum(probs * w);
  };
  // --report: the gradient norm of every node, measured on a pass of its own before the shown one
  // (autograd/grad_norms.h), so that the report's timeline has only the pass's own launches; then
  // the pass's gradients are dropped and the peaks forgotten.
  std::vector<TapeNode> norms;
  if (!o.report.empty()) {
    const Tensor l = forward();
    norms = tape_with_grad_norms(l, [&] { backward(l); });
    x.set_grad(Tensor());
    for (Tensor& p : model.parameters()) p.set_grad(Tensor());
    Allocator::for_device(device).reset_peaks();
  }
  TraceRecorder recorder;  // --report: every launch of the pass
  if (!o.report.empty()) recorder.start();
  const auto t0 = std::chrono::steady_clock::now();
  Tensor loss = forward();
  std::vector<TapeNode> tape = record_tape(loss);
  fmt::print("{}", tape_string(loss, true));
  backward(loss);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  recorder.stop();
  if (!o.report.empty()) {
    GLASS_CHECK(copy_grad_norms(norms, tape),
                "debug_step: the gradient-norm pass recorded {} nodes, the shown pass {}",
                norms.size(), tape.size());
    train::LedgerState state;  // the LayerNorm's weight and bias; x and w are the pass's inputs
    for (const Tensor& p : model.parameters()) {
      state.parameters +=
          static_cast<int64_t>(Allocator::for_device(device).class_of(p.storage()->nbytes));
      state.storages.insert(p.storage().get());
    }
    write_file_atomic(
        o.report,
        train::render_pass_report(
            "glass debug_step on " + device.str(),
            {fmt::format("loss = sum(softmax(LayerNorm(x)) * w), x [{}, {}]", o.rows, o.cols)},
            recorder.launches(), tape, state, device, DType::f32, ms));
    fmt::print("report written to {}\n", o.report);
  }
  fmt::print("loss {:.6f}\n", item(loss));
  fmt::print("|dx| {:.6f}  |d ln.weight| {:.6f}  |d ln.bias| {:.6f}\n", l2_norm(x.grad()),
             l2_norm(model.net.ln.weight.grad()), l2_norm(model.net.ln.bias.grad()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"debug_step: one forward + backward of LayerNorm -> softmax, to step through"};
  glass::samples::describe_program(app, "docs/debugging.md");
  Options o;
  app.add_option("--device", o.device, "cpu | emu");
  app.add_option("--rows", o.rows, "rows of x (softmax blocks on emu)");
  app.add_option("--cols", o.cols, "columns of x (LayerNorm width)");
  app.add_option("--seed", o.seed, "seed for x and w");
  app.add_option("--report", o.report,
                 "write the pass as the step explorer (HTML: timeline, tape, memory, roofline)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "debug_step"))
    return *status;
  try {
    run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "debug_step: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
