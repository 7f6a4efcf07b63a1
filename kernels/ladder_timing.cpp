// The kernel-ladder timing harness (see kernels/ladder_timing.h).
#include "kernels/ladder_timing.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/allocator.h"
#include "engine/error.h"
#include "engine/launch.h"
#include "engine/rng.h"

namespace glass::kernels::ladder {

namespace {

// Adds up the launches that end while it is subscribed: their time, FLOPs and bytes.
// The unit of the launch with the most FLOPs is the run's compute unit.
struct RunCost : LaunchObserver {
  double us = 0, flops = 0, bytes = 0, most_flops = -1;
  ComputeUnit unit = ComputeUnit::cuda_core;
  RunCost() { subscribe(this); }
  ~RunCost() override { unsubscribe(this); }
  RunCost(const RunCost&) = delete;
  RunCost& operator=(const RunCost&) = delete;
  void on_launch_end(const LaunchRecord& r) override {
    us += r.end_us - r.start_us;
    flops += r.info.flops;
    bytes += r.info.bytes;
    if (r.info.flops > most_flops) {
      most_flops = r.info.flops;
      unit = r.info.unit;
    }
  }
};

// N(0, 1) values on `device`, drawn there from gen's Philox stream.
Tensor random(const Shape& shape, Generator& gen, Device device) {
  const Tensor t = Tensor::empty(shape, DType::f32, device);
  backend(device).fill_normal(t, 0, 1, gen.seed(),
                              gen.reserve(static_cast<uint64_t>(t.numel()) + 1));
  return t;
}

// t cast to `dtype` on its device (t itself when it has that dtype).
Tensor as_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  const Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  backend(t.device()).cast(t, out);
  return out;
}

// Random inputs for `op` at `shape` on `device`, and a call running rung N on them.
std::function<void(int)> make_problem(Op op, Device device, const Shape& shape, DType dtype,
                                      Generator& gen) {
  const size_t dims = op == Op::matmul ? 3 : op == Op::attention ? 4 : 2;
  GLASS_CHECK(shape.size() == dims &&
                  std::all_of(shape.begin(), shape.end(), [](int64_t s) { return s > 0; }),
              "time_ladder: {} takes a shape of {} positive sizes ({}), got [{}]", op_name(op),
              dims, shape_names(op), fmt::join(shape, ", "));
  auto empty = [&](const Shape& s) { return Tensor::empty(s, DType::f32, device); };
  switch (op) {
    case Op::softmax: {
      const Tensor x = random(shape, gen, device), y = empty(shape);
      return [=](int rung) { run_softmax_forward(rung, x, y); };
    }
    case Op::layernorm: {
      const Tensor x = random(shape, gen, device), y = empty(shape);
      const Tensor weight = random({shape[1]}, gen, device), bias = random({shape[1]}, gen, device);
      const Tensor mean = empty({shape[0]}), rstd = empty({shape[0]});
      return [=](int rung) { run_layernorm_forward(rung, x, weight, bias, y, mean, rstd, 1e-5); };
    }
    case Op::rmsnorm: {
      // bf16: the same N(0, 1) draws, rounded; rstd stays f32
      const Tensor x = as_dtype(random(shape, gen, device), dtype),
                   weight = as_dtype(random({shape[1]}, gen, device), dtype);
      const Tensor y = Tensor::empty(shape, dtype, device), rstd = empty({shape[0]});
      return [=](int rung) { run_rmsnorm_forward(rung, x, weight, y, rstd, 1e-5); };
    }
    case Op::matmul: {
      const int64_t M = shape[0], N = shape[1], K = shape[2];
      // bf16: the same N(0, 1) draws, rounded
      const Tensor a = as_dtype(random({M, K}, gen, device), dtype),
                   b = as_dtype(random({K, N}, gen, device), dtype);
      const Tensor c = Tensor::empty({M, N}, dtype, device);
      return [=](int rung) { run_matmul(rung, a, b, c); };
    }
    case Op::attention: {
      // bf16 operands: the same N(0, 1) draws rounded; the Tensor Core rung takes bf16 only, so in
      // an f32 ladder it gets those too (and a bf16 output)
      const int64_t B = shape[0], H = shape[1], T = shape[2], D = shape[3];
      const Tensor qkv = random({B, T, 3 * H * D}, gen, device), out = empty({B, T, H * D});
      const Tensor qkv_bf16 = as_dtype(qkv, DType::bf16);
      const Tensor out_bf16 = Tensor::empty(out.shape(), DType::bf16, device);
      const Tensor lse = empty({B, H, T});
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      return [=](int index) {
        const bool bf16 = dtype == DType::bf16 || !rung(Op::attention, index).f32;
        run_attention_forward(index, bf16 ? qkv_bf16 : qkv, bf16 ? out_bf16 : out, lse, H, H,
                              scale);
      };
    }
  }
  fail("time_ladder: unknown op {}", static_cast<int>(op));
}

// Whether `rung` takes `shape`: attention's Tensor Core rung only its head dims (32, 64, 128);
// every other rung any shape of its op.
bool takes_shape(Op op, const Rung& rung, const Shape& shape) {
  if (op == Op::attention && !rung.f32) return shape.size() == 4 && flash_mma_head_dim_ok(shape[3]);
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

const char* shape_names(Op op) {
  switch (op) {
    case Op::matmul:
      return "M, N, K";
    case Op::attention:
      return "B, H, T, D";
    default:
      return "rows, cols";
  }
}

Shape default_shape(Op op) {
  switch (op) {
    case Op::matmul:
      return {256, 256, 256};
    case Op::attention:
      return {1, 4, 128, 64};  // GPT-2's head dim; short enough for the emulator's naive rung
    default:
      return {256, 1000};
  }
}

std::vector<LadderRow> time_ladder(Op op, Device device, const Shape& shape,
                                   std::span<const int> rung_indices,
                                   const TimingOptions& options) {
  GLASS_CHECK(options.warmup >= 0 && options.repeats >= 1,
              "time_ladder: warmup ({}) must be >= 0 and repeats ({}) >= 1", options.warmup,
              options.repeats);
  ladder_table(device);  // throws for a device without ladders
  const bool bf16 = options.dtype == DType::bf16;
  GLASS_CHECK(options.dtype == DType::f32 ||
                  (bf16 && (op == Op::matmul || op == Op::attention || op == Op::rmsnorm)),
              "time_ladder: {} runs on f32 operands; only matmul, attention and rmsnorm also "
              "take bf16 (asked for {})",
              op_name(op), dtype_name(options.dtype));
  std::vector<int> indices(rung_indices.begin(), rung_indices.end());
  std::string bf16_rungs;
  for (const Rung& r : rungs(op)) {
    if (r.bf16)
      bf16_rungs += fmt::format("{}{} {}", bf16_rungs.empty() ? "" : ", ", r.index, r.name);
    // all: the rungs that take the dtype and the shape (a rung asked for by name must)
    if (rung_indices.empty() && (!bf16 || r.bf16) && takes_shape(op, r, shape))
      indices.push_back(r.index);
  }
  for (int i : indices) {
    const Rung& r = rung(op, i);  // throws for a bad index before anything runs
    GLASS_CHECK(!bf16 || r.bf16,
                "time_ladder: {}'s rung {} ({}) takes f32 operands only; the "
                "rungs that take bf16: {}",
                op_name(op), r.index, r.name, bf16_rungs);
  }
  Generator gen(options.seed);
  const std::function<void(int)> run = make_problem(op, device, shape, options.dtype, gen);

  std::vector<LadderRow> rows;
  for (int i : indices) {
    for (int w = 0; w < options.warmup; ++w) run(i);
    std::vector<double> times;
    double flops = 0, bytes = 0, scratch = 0;
    ComputeUnit unit = ComputeUnit::cuda_core;
    Allocator& allocator = Allocator::for_device(device);
    for (int r = 0; r < options.repeats; ++r) {
      const RunCost cost;
      const int64_t before = allocator.stats().allocated_bytes;
      allocator.reset_peaks();
      run(i);
      scratch = static_cast<double>(allocator.stats().peak_allocated_bytes - before);
      times.push_back(cost.us);
      flops = cost.flops;
      bytes = cost.bytes;
      unit = cost.unit;
    }
    rows.push_back({op, &rung(op, i), shape, options.repeats, median(times),
                    *std::min_element(times.begin(), times.end()), flops, bytes, scratch, unit});
  }
  return rows;
}

std::string ladder_table(std::span<const LadderRow> rows) {
  std::string out = fmt::format(
      "{:<10} {:>4}  {:<11} {:<26} {:>12} {:>12} {:>12} {:>9} {:>9} {:>11}\n", "op", "rung", "name",
      "kernel", "median us", "min us", "bytes", "GB/s", "GFLOP/s", "alloc MiB");
  for (const LadderRow& r : rows)
    out += fmt::format(
        "{:<10} {:>3}{:1}  {:<11} {:<26} {:>12.1f} {:>12.1f} {:>12.4g} {:>9.3f} {:>9.3f} "
        "{:>11.3f}\n",
        op_name(r.op), r.rung->index, r.rung->production ? "*" : "", r.rung->name, r.rung->kernel,
        r.median_us, r.min_us, r.bytes, r.gb_per_s(), r.gflop_per_s(),
        r.allocated_bytes / (1024.0 * 1024.0));
  return out;
}

}  // namespace glass::kernels::ladder
