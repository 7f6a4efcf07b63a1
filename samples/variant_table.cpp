#include "samples/variant_table.h"

#include <algorithm>

#include "engine/error.h"
#include "kernels/ladder_timing.h"
#include "kernels/peaks.h"

namespace glass::samples {

namespace ladder = kernels::ladder;

namespace {

// The ladder's shape from profile_op's: matmul's --shape is M,K,N there and [M, N, K] here.
Shape ladder_shape(ladder::Op op, const std::vector<int64_t>& given) {
  if (given.empty()) return ladder::default_shape(op);
  if (op == ladder::Op::matmul) {
    GLASS_CHECK(given.size() == 3, "--variant: matmul's --shape is M,K,N");
    return {given[0], given[2], given[1]};
  }
  GLASS_CHECK(given.size() == ladder::default_shape(op).size(), "--variant: {}'s --shape is {}",
              ladder::op_name(op), ladder::shape_names(op));
  return Shape(given);
}

}  // namespace

VariantResult time_variants(const VariantRequest& r) {
  GLASS_CHECK(r.device.kind != DeviceKind::cpu,
              "--variant: the kernel ladders are CUDA kernels; run them with --device emu (on the "
              "CPU, through the emulator) or --device cuda");
  const ladder::Op op = ladder::parse_op(r.operation);
  std::vector<int> rungs;  // empty: all
  if (r.variant != "all") {
    const ladder::Selection s = ladder::parse_selection(r.operation + ":" + r.variant, "--variant");
    rungs.push_back(s.rung[static_cast<size_t>(op)]);
  }
  const Shape shape = ladder_shape(op, r.shape);
  const std::vector<ladder::LadderRow> rows =
      ladder::time_ladder(op, r.device, shape, rungs, {r.warmup, r.repeats, 1, r.dtype});
  // The floor each rung is measured against: the device's peaks (datasheet or measured).
  const DevicePeaks peaks = kernels::peaks_for(r.device);
  VariantResult out;
  out.table = ladder::ladder_table(rows);
  out.table += fmt::format(
      "peaks ({}): {:.1f} GFLOP/s f32, {:.1f} GFLOP/s bf16 Tensor Cores, {:.1f} GB/s; source: {}\n",
      peaks.name, peaks.f32_flops / 1e9, peaks.bf16_flops / 1e9, peaks.bytes_per_s / 1e9,
      peaks.source);
  out.table += "rung  roofline fraction  compute roof\n";
  out.json = nlohmann::json::array();
  for (const ladder::LadderRow& row : rows) {
    // the Tensor Core rung against the Tensor Cores' peak (emu has none: the host's f32 peak)
    const bool tensor_cores = row.unit == ComputeUnit::tensor_core_bf16 && peaks.bf16_flops > 0;
    const double peak_flops = tensor_cores ? peaks.bf16_flops : peaks.f32_flops;
    const double floor_s = std::max(row.flops / peak_flops, row.bytes / peaks.bytes_per_s);
    const double fraction = floor_s / (row.median_us * 1e-6);
    out.table += fmt::format("{:>4}  {:>17.3f}  {}\n", row.rung->index, fraction,
                             tensor_cores ? "bf16 Tensor Cores" : "f32");
    out.json.push_back({{"rung", row.rung->index},
                        {"name", row.rung->name},
                        {"kernel", row.rung->kernel},
                        {"production", row.rung->production},
                        {"median_us", row.median_us},
                        {"min_us", row.min_us},
                        {"flops", row.flops},
                        {"bytes", row.bytes},
                        {"gb_per_s", row.gb_per_s()},
                        {"gflop_per_s", row.gflop_per_s()},
                        {"roofline_fraction", fraction},
                        {"compute_unit", compute_unit_name(row.unit)},
                        {"dtype", dtype_name(r.dtype)},
                        {"allocated_bytes", row.allocated_bytes}});
  }
  return out;
}

}  // namespace glass::samples
