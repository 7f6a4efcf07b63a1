// bench_ladder: prints the kernel-ladder table (kernels/ladder_timing.h) of softmax, LayerNorm,
// matmul, attention and RMSNorm: time, GB/s of the ideal bytes and GFLOP/s per rung. On emu the
// numbers measure the emulator on the CPU (fibers, barriers), not a GPU; docs/kernel_ladders.md
// says how to read them.
//
//   bench_ladder [--op all|softmax|layernorm|matmul|attention|rmsnorm] [--device emu] [--rows R
//   --cols C]
//                [--mnk M N K] [--bhtd B H T D] [--warmup W] [--repeats N]
//
// Errors are one line on stderr, "bench_ladder: error: ...", and a non-zero exit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/device.h"
#include "kernels/ladder_timing.h"
#include "samples/command_line.h"

namespace {

namespace ladder = glass::kernels::ladder;
using ladder::Op;

// Each op's shape flag starts at the shape profile_op --variant times by default.
struct Options {
  std::string op = "all", device = "emu";
  int64_t rows = ladder::default_shape(Op::softmax)[0],
          cols = ladder::default_shape(Op::softmax)[1];
  std::vector<int64_t> mnk = ladder::default_shape(Op::matmul).to_vector();
  std::vector<int64_t> bhtd = ladder::default_shape(Op::attention).to_vector();
  ladder::TimingOptions timing;
};

glass::Shape shape_of(Op op, const Options& o) {
  switch (op) {
    case Op::matmul:
      return glass::Shape(o.mnk);
    case Op::attention:
      return glass::Shape(o.bhtd);
    default:
      return {o.rows, o.cols};
  }
}

void run(const Options& o) {
  const glass::Device device = glass::Device::parse(o.device);
  std::vector<Op> ops(glass::kernels::ladder::kOps.begin(), glass::kernels::ladder::kOps.end());
  if (o.op != "all") ops = {glass::kernels::ladder::parse_op(o.op)};
  for (Op op : ops) {
    const glass::Shape shape = shape_of(op, o);
    const auto rows = glass::kernels::ladder::time_ladder(op, device, shape, {}, o.timing);
    std::printf(
        "%s [%s] on %s (median of %d after %d warm-up):\n%s\n", glass::kernels::ladder::op_name(op),
        fmt::format("{}", fmt::join(shape, ", ")).c_str(), device.str().c_str(), o.timing.repeats,
        o.timing.warmup, glass::kernels::ladder::ladder_table(rows).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("bench_ladder: the kernel-ladder table (docs/kernel_ladders.md)");
  app.option_defaults()->always_capture_default();  // --help shows each default
  app.add_option("--op", o.op, "all, softmax, layernorm, matmul, attention or rmsnorm");
  app.add_option("--device", o.device, "emu (or cuda where built)");
  app.add_option("--rows", o.rows, "softmax, layernorm and rmsnorm rows");
  app.add_option("--cols", o.cols, "softmax, layernorm and rmsnorm columns");
  app.add_option("--mnk", o.mnk, "matmul sizes M N K")->expected(3);
  app.add_option("--bhtd", o.bhtd, "attention sizes B H T D (qkv [B, T, 3 H D])")->expected(4);
  app.add_option("--warmup", o.timing.warmup, "untimed runs per rung");
  app.add_option("--repeats", o.timing.repeats, "timed runs per rung (the median is shown)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "bench_ladder"))
    return *status;
  try {
    run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ladder: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
