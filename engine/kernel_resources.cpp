#include "engine/kernel_resources.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "engine/error.h"

#ifndef GLASS_KERNEL_RESOURCES_JSON
#define GLASS_KERNEL_RESOURCES_JSON ""
#endif

namespace glass {

namespace {

// Allocation rules of compute capability 9.0 (the CUDA occupancy calculator's table; the same on
// 8.x): registers are handed out per warp in units of 256, shared memory per block in units of
// 128 bytes, and the system reserves 1 KiB of shared memory in every block.
constexpr int kRegisterUnit = 256;
constexpr int64_t kSharedUnit = 128;
constexpr int64_t kSharedReservedPerBlock = 1024;

int64_t round_up(int64_t n, int64_t unit) { return (n + unit - 1) / unit * unit; }

}  // namespace

KernelResourceReport read_kernel_resources(const std::string& path) {
  KernelResourceReport report;
  report.path = path;
  std::ifstream in(path);
  if (path.empty() || !in) {
    report.missing = path.empty() ? "this build compiled no cuda kernels with nvcc"
                                  : fmt::format("no ptxas report at {}", path);
    return report;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
    for (const auto& k : j.at("kernels")) {
      KernelResources r;
      r.function = k.at("function").get<std::string>();
      r.template_args = k.at("template").get<std::string>();
      r.source = k.at("source").get<std::string>();
      r.arch = k.at("arch").get<std::string>();
      r.production = k.at("production").get<bool>();
      r.registers = k.at("registers").get<int>();
      r.barriers = k.at("barriers").get<int>();
      r.static_shared_bytes = k.at("static_shared_bytes").get<int64_t>();
      r.local_bytes = k.at("local_bytes").get<int64_t>();
      r.stack_bytes = k.at("stack_bytes").get<int64_t>();
      r.spill_store_bytes = k.at("spill_store_bytes").get<int64_t>();
      r.spill_load_bytes = k.at("spill_load_bytes").get<int64_t>();
      r.mma_instructions = k.at("mma_instructions").get<int>();
      report.kernels.push_back(std::move(r));
    }
  } catch (const nlohmann::json::exception& e) {
    fail("kernel resource report {}: {}", path, e.what());
  }
  return report;
}

const KernelResourceReport& kernel_resource_report() {
  static const KernelResourceReport report = [] {
    const char* env = std::getenv("GLASS_KERNEL_RESOURCES");
    return read_kernel_resources(env && *env ? env : GLASS_KERNEL_RESOURCES_JSON);
  }();
  return report;
}

std::vector<const KernelResources*> kernels_for_launch(const KernelResourceReport& report,
                                                       std::string_view launch,
                                                       std::string_view arch) {
  const std::string conventional = std::string(launch) + "_kernel";
  std::vector<const KernelResources*> out;
  for (const KernelResources& k : report.kernels)
    if (k.arch == arch && (k.function == conventional || k.function == launch)) out.push_back(&k);
  return out;
}

const char* library_of(std::string_view kernel) {
  if (kernel.starts_with("cublas")) return "cuBLAS";
  if (kernel.starts_with("cudnn")) return "cuDNN";
  return "";
}

Occupancy theoretical_occupancy(int threads, int registers, int64_t shared_bytes,
                                const emu::DeviceLimits& limits) {
  Occupancy o;
  const int max_warps = limits.max_threads_per_multiprocessor / limits.warp_size;
  o.warps_per_block = (threads + limits.warp_size - 1) / limits.warp_size;
  if (threads <= 0 || threads > limits.max_threads_per_block ||
      registers > limits.max_registers_per_thread)
    return o;
  // Each resource's limit on resident blocks; the smallest wins.
  o.blocks_per_sm = limits.max_blocks_per_multiprocessor;
  o.limiter = "blocks";
  auto limit = [&](int64_t blocks, const char* what) {
    if (blocks < o.blocks_per_sm) {
      o.blocks_per_sm = static_cast<int>(std::max<int64_t>(blocks, 0));
      o.limiter = what;
    }
  };
  // 1. warps
  limit(max_warps / o.warps_per_block, "warps");
  // 2. registers, allocated per warp
  const int64_t registers_per_warp = round_up(int64_t{registers} * limits.warp_size, kRegisterUnit);
  if (registers_per_warp > 0) {
    const int64_t block_registers = registers_per_warp * o.warps_per_block;
    limit(block_registers > limits.registers_per_block
              ? 0
              : limits.registers_per_multiprocessor / registers_per_warp / o.warps_per_block,
          "registers");
  }
  // 3. shared memory, with the block's reserved kilobyte
  const int64_t block_shared = round_up(shared_bytes + kSharedReservedPerBlock, kSharedUnit);
  limit(shared_bytes > static_cast<int64_t>(limits.shared_per_block_optin)
            ? 0
            : static_cast<int64_t>(limits.shared_per_multiprocessor) / block_shared,
        "shared memory");
  o.fraction = static_cast<double>(o.blocks_per_sm * o.warps_per_block) / max_warps;
  return o;
}

std::vector<LaunchOccupancy> launch_occupancy(const std::vector<TracedLaunch>& launches,
                                              const KernelResourceReport& report) {
  std::vector<LaunchOccupancy> rows;
  std::map<std::tuple<std::string, int, int64_t>, size_t> index;
  for (const TracedLaunch& l : launches) {
    const LaunchInfo& info = l.record.info;
    if (info.device.kind == DeviceKind::cpu) continue;
    const int threads = static_cast<int>(info.block.x * info.block.y * info.block.z);
    const auto key =
        std::make_tuple(std::string(info.kernel), threads, static_cast<int64_t>(info.shared_bytes));
    auto [it, added] = index.try_emplace(key, rows.size());
    if (!added) {
      rows[it->second].calls++;
      continue;
    }
    LaunchOccupancy row;
    row.kernel = info.kernel;
    row.threads = threads;
    row.dynamic_shared_bytes = static_cast<int64_t>(info.shared_bytes);
    row.calls = 1;
    row.library = library_of(info.kernel);
    for (const KernelResources* k :
         kernels_for_launch(report, info.function ? info.function : info.kernel)) {
      row.instantiations++;
      row.registers = std::max(row.registers, k->registers);
      row.static_shared_bytes = std::max(row.static_shared_bytes, k->static_shared_bytes);
      row.spills = row.spills || k->spills();
      row.mma_instructions = std::max(row.mma_instructions, k->mma_instructions);
    }
    if (row.instantiations > 0)
      row.occupancy = theoretical_occupancy(threads, row.registers,
                                            row.static_shared_bytes + row.dynamic_shared_bytes);
    rows.push_back(row);
  }
  return rows;
}

std::string occupancy_table(const std::vector<LaunchOccupancy>& rows,
                            const KernelResourceReport& report) {
  std::string out = "theoretical occupancy on an H200 (sm_90), ";
  out += report.missing.empty()
             ? fmt::format("registers and shared memory from ptxas ({})\n", report.path)
             : fmt::format("unknown: {}\n", report.missing);
  // mma: the Tensor Core instructions in the kernel's PTX (0: it runs on the CUDA cores)
  constexpr const char* kRow = "{:<28} {:>7} {:>8} {:>6} {:>9} {:>6} {:>5} {:>9} {:>10} {:>13}\n";
  out += fmt::format(kRow, "kernel", "threads", "dyn smem", "regs", "smem", "spills", "mma",
                     "blocks/SM", "occupancy", "limited by");
  for (const LaunchOccupancy& r : rows) {
    if (!r.library.empty()) {  // the block shape is the library's own choice, unknown here
      out += fmt::format(kRow, r.kernel, "-", "-", "-", "-", "-", "-", "-", "-",
                         "(" + r.library + ")");
      continue;
    }
    if (r.instantiations == 0) {
      out += fmt::format(kRow, r.kernel, r.threads, r.dynamic_shared_bytes, "-", "-", "-", "-", "-",
                         "-", "(no ptxas row)");
      continue;
    }
    out += fmt::format(kRow, r.kernel, r.threads, r.dynamic_shared_bytes, r.registers,
                       r.static_shared_bytes, r.spills ? "yes" : "no", r.mma_instructions,
                       r.occupancy.blocks_per_sm,
                       fmt::format("{:.0f}%", 100 * r.occupancy.fraction), r.occupancy.limiter);
  }
  return out;
}

}  // namespace glass
