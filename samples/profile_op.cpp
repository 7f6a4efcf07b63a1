// profile_op: the micro-lab. Times one operation's forward + backward on a device, first without
// any observer (median of repeats after warm-up), then once with the trace recorder, and writes
// what it measured as JSON (and the profiled run as a Chrome trace).
//
//   build/samples/profile_op --device cpu --operation mlp --output mlp.json --trace mlp_trace.json
//   build/samples/profile_op --device emu --operation softmax --variant all --output ladder.json
//
// With --variant N|all it times the operation's kernel ladder instead (samples/variant_table.h):
// one row per rung with time, GB/s, GFLOP/s and the fraction of the roofline floor.
//
// Every error is one line on stderr ("profile_op: error: ...") and a non-zero exit status.
#include <CLI/CLI.hpp>
#include <charconv>

#include "engine/atomic_file.h"
#include "engine/error.h"
#include "kernels/cpu/threads.h"
#include "kernels/ladder_timing.h"
#include "samples/cli_args.h"
#include "samples/command_line.h"
#include "samples/op_timer.h"
#include "samples/variant_table.h"
#include "train/profiler.h"

namespace {

struct Flags {
  std::string device = "cpu", operation = "matmul", shape, dtype = "f32", output, trace, variant;
  std::string report;
  std::string attention = "auto";
  glass::samples::TimingPlan plan;
  int threads = 0;
};

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;  // the operation's default
  const char* p = text.data();
  const char* end = p + text.size();
  while (true) {
    int64_t v = 0;
    const auto [next, ec] = std::from_chars(p, end, v);
    GLASS_CHECK(ec == std::errc() && (next == end || *next == ','),
                "--shape '{}': expected comma-separated integers, e.g. 256,384,320", text);
    out.push_back(v);
    if (next == end) return out;
    p = next + 1;
  }
}

// --shape's meaning for each operation, then for the ops only --variant times (their ladders').
std::string shape_help() {
  std::vector<std::string> parts;
  for (const std::string& o : glass::samples::operations())
    parts.push_back(o + " " + glass::samples::operation_shape_help(o));
  namespace ladder = glass::kernels::ladder;
  std::vector<std::string> variant_only;
  for (const ladder::Op op : {ladder::Op::layernorm, ladder::Op::rmsnorm})
    variant_only.push_back(fmt::format("{} {}", ladder::op_name(op), ladder::shape_names(op)));
  return fmt::format("{}; with --variant also {}", fmt::join(parts, "; "),
                     fmt::join(variant_only, "; "));
}

void run(const Flags& f) {
  glass::check_output_file("--output", f.output);
  glass::check_output_file("--trace", f.trace);
  glass::check_output_file("--report", f.report);
  glass::kernels::cpu::set_threads(f.threads);
  if (!f.variant.empty()) {
    const glass::samples::VariantResult r = glass::samples::time_variants(
        {glass::Device::parse(f.device), f.operation, f.variant, parse_shape(f.shape),
         f.plan.warmup, f.plan.repeats, glass::samples::parse_dtype_flag(f.dtype)});
    glass::write_file_atomic(f.output, r.json.dump(2) + "\n");
    fmt::print("{} on {}: kernel ladder\n{}", f.operation, f.device, r.table);
    return;
  }
  const glass::samples::OpCase op{glass::Device::parse(f.device), f.operation, parse_shape(f.shape),
                                  glass::samples::parse_dtype_flag(f.dtype), f.attention};
  glass::TraceRecorder recorder;
  glass::samples::TimingPlan plan = f.plan;
  plan.tape = !f.report.empty();  // the tape graph, with each node's gradient norm
  const glass::samples::OpRow row = glass::samples::time_op(op, plan, recorder);
  const nlohmann::json j = glass::samples::row_json(row, GLASS_VERSION);
  glass::write_file_atomic(f.output, j.dump(2) + "\n");
  if (!f.trace.empty()) recorder.write(f.trace);
  if (!f.report.empty()) {
    glass::write_file_atomic(
        f.report, glass::train::render_pass_report(
                      fmt::format("glass profile_op: {} {} on {}", op.operation, j["shapes"].dump(),
                                  op.device.str()),
                      {fmt::format("The profiled run (forward + backward) of {}; median {:.3f} ms "
                                   "over {} unobserved runs ({}).",
                                   op.operation, row.median_ms, f.plan.repeats, row.clock),
                       "Backward starts from a random gradient u of the output: the loss is "
                       "sum(out * u), so the output's gradient norm is |u|; the norms come from a "
                       "pass of their own before the timed runs."},
                      recorder.launches(), row.tape, {}, op.device, op.dtype, row.profiled_ms));
    fmt::print("report written to {}\n", f.report);
  }
  fmt::print("{} {} on {}: median {:.3f} ms over {} runs ({}), profiled run {:.3f} ms\n{}",
             op.operation, j["shapes"].dump(), op.device.str(), row.median_ms, f.plan.repeats,
             row.clock, row.profiled_ms, row.kernels.table());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"profile_op: time one operation's forward + backward on a device"};
  glass::samples::describe_program(app, "docs/profiling.md and docs/kernel_ladders.md");
  Flags f;
  app.add_option("--device", f.device, "cpu | emu | cuda");
  app.add_option("--operation", f.operation,
                 "matmul | softmax | mlp | attention (with --variant: layernorm, rmsnorm, and "
                 "attention's ladder)");
  app.add_option("--variant", f.variant,
                 "N, a rung's name (e.g. smem) or all: time the operation's kernel ladder rung by "
                 "rung (emu, cuda)");
  app.add_option("--shape", f.shape,
                 "sizes, comma-separated (default: the operation's): " + shape_help());
  app.add_option(
      "--dtype", f.dtype,
      "f32 | bf16 (emu's bf16 is judged against the host's f32 peak, cpu's against its bf16 "
      "peak where the core has AVX512-BF16; "
      "with --variant: the rungs that take bf16: matmul's cuBLAS and Tensor Core rungs, "
      "attention's flash and mma rungs, both rmsnorm rungs)");
  app.add_option("--attention", f.attention,
                 "the attention operation's kernel: auto | naive | flash | flash-simt | flash-mma "
                 "| cudnn");
  app.add_option("--output", f.output, "write the measurements here (JSON)")->required();
  app.add_option("--trace", f.trace, "write the profiled run as a Chrome/Perfetto trace (JSON)");
  app.add_option("--report", f.report,
                 "write the profiled run as the step explorer (HTML: timeline, kernels, "
                 "roofline, memory, the op's tape with each node's gradient norm)");
  app.add_option("--warmup", f.plan.warmup, "untimed runs first");
  app.add_option("--repeats", f.plan.repeats, "timed runs (the median is reported)");
  app.add_option("--threads", f.threads, "cpu threads (0 = all cores)");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "profile_op"))
    return *status;
  try {
    run(f);
  } catch (const std::exception& e) {
    fmt::print(stderr, "profile_op: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
