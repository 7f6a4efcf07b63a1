#include "train/preflight.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <ctime>

#include "autograd/ops.h"
#include "engine/allocator.h"
#include "engine/device.h"
#include "engine/device_runtime.h"
#include "engine/error.h"
#include "engine/log.h"
#include "kernels/cuda/cuda_kernels.h"
#include "train/gpt_cost.h"

namespace glass::train {

namespace {

// The largest strength a graded remedy is tried at (k = 2, 4, ..., this).
constexpr int64_t kMaxStrength = 1024;

// The GEMM workspace (kernels/cuda/gemm.cu) is made once per device and process and kept, so a
// plan counts it only when it is the first on meta in the process. It is made on meta before
// the plans instead, left out of each, and added once where the device runs the CUDA kernels
// (cpu has none).
void make_meta_gemm_workspace() {
  matmul(Tensor::empty({8, 8}, DType::f32, kMeta), Tensor::empty({8, 8}, DType::f32, kMeta));
}
int64_t gemm_workspace_bytes(Device device) {
  return capabilities(device).gemm_workspace ? kernels::cuda::kGemmWorkspaceBytes : 0;
}

// The run's step on meta, its tensors rounded as the run's device rounds them (cpu's 64-byte
// classes for small tensors, emu's exact sizes under red zones: engine/allocator.h) and its loss
// the run's device's (train/step_plan.h: planned_device).
RecordedStep plan_step(const PreflightRun& run) {
  StepPlanOptions plan = run.plan;
  plan.planned_device = run.device;
  return record_training_step(kMeta, plan);
}

// The figure compared with the free memory: the peak in use (allocated, and under --cuda-graph
// the graph pool's free blocks, which only the graph may use: train/step_plan.h).
int64_t planned_peak(const PreflightRun& run) {
  return plan_step(run).peak_in_use_bytes + gemm_workspace_bytes(run.device) +
         static_cast<int64_t>(data_parallel_bytes(run));
}

std::string bytes(int64_t b) { return format_bytes(static_cast<double>(b)); }

// --cuda-graph: the peak includes the graph's private pool, whose free blocks stay the graph's.
std::string graph_pool_note(const PreflightRun& run, const PreflightResult& r) {
  return run.plan.cuda_graph
             ? fmt::format(", with the CUDA graph's private pool of {}", bytes(r.graph_pool_bytes))
             : "";
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:.0f}%",
                                 100.0 * static_cast<double>(part) / static_cast<double>(whole))
                   : "-";
}

// The mildest strength of `remedy` whose plan fits in `free` bytes; else its strongest that
// applies (marked as not fitting), or nothing when it applies to this run at no strength.
std::optional<PlannedRemedy> plan_remedy(const Remedy& remedy, const PreflightRun& run,
                                         int64_t free) {
  std::optional<PlannedRemedy> last;
  for (int64_t k = remedy.graded ? 2 : 1; k <= (remedy.graded ? kMaxStrength : 1); k *= 2) {
    PreflightRun changed = run;
    const std::string flags = remedy.apply(changed, k);
    if (flags.empty()) continue;
    const int64_t peak = planned_peak(changed);
    last = PlannedRemedy{flags, peak, peak <= free};
    if (last->fits) break;
  }
  return last;
}

}  // namespace

double data_parallel_bytes(const PreflightRun& run) {
  if (run.world <= 1) return 0;
  const StepPlanOptions& p = run.plan;
  const auto budget = [&](int zero) {
    return gpt_memory_budget(
        p.config, p.batch * run.world, p.seq_len, p.dtype,
        {.world = run.world, .zero = zero, .size_classes = SizeClasses::of_device(run.device)});
  };
  // ZeRO-1's share: the two budgets differ only in the optimizer's terms (the moments, and the
  // masters under bf16), held all step; the difference of their totals is that change as the
  // allocator rounds it (one tensor per parameter unsharded, a few flat shards sharded).
  const GptMemoryBudget shared = budget(run.zero), whole = budget(0);
  return shared.gradient_buckets_bytes + (shared.total_bytes() - whole.total_bytes());
}

// The remedies, mildest first. One entry per remedy: the flags a user adds, and how they change
// the planned run. Another memory remedy goes here as one more entry.
const std::vector<Remedy>& preflight_remedies() {
  static const std::vector<Remedy> remedies = {
      // A smaller batch: fewer activations, and a smaller global batch (another training run).
      {[](PreflightRun& run, int64_t k) -> std::string {
         StepPlanOptions& p = run.plan;
         if (p.batch % k != 0) return "";
         p.batch /= k;
         return fmt::format("--batch {}", p.batch * run.world);
       },
       true},
      // The same global batch in k times as many micro-steps of 1/k the rows: the same training.
      {[](PreflightRun& run, int64_t k) -> std::string {
         StepPlanOptions& p = run.plan;
         if (p.batch % k != 0) return "";
         p.batch /= k;
         p.grad_accum *= k;
         return fmt::format("--batch {} --grad-accum {}", p.batch * run.world, p.grad_accum);
       },
       true},
      // ZeRO-1: each of the ranks keeps the moments of its 1/world of the weights (the same
      // weights after every step, bit for bit).
      {[](PreflightRun& run, int64_t) -> std::string {
         if (run.world <= 1 || run.zero != 0) return "";
         run.zero = 1;
         return "--zero 1";
       },
       false},
      // Activation recomputation: each block keeps only its input, backward re-runs it (about a
      // third more FLOPs; the same gradients, bit for bit).
      {[](PreflightRun& run, int64_t) -> std::string {
         if (run.plan.recompute == "block") return "";
         run.plan.recompute = "block";
         return "--recompute block";
       },
       false},
      // bf16 mixed precision: bf16 activations and compute copies, f32 master weights.
      {[](PreflightRun& run, int64_t) -> std::string {
         if (run.plan.dtype != DType::f32) return "";
         run.plan.dtype = DType::bf16;
         return "--dtype bf16";
       },
       false},
  };
  return remedies;
}

PreflightResult plan_preflight(const PreflightRun& run) {
  PreflightResult r;
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();
  make_meta_gemm_workspace();
  const RecordedStep step = plan_step(run);
  r.plan_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.plan_cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  const int64_t added =
      gemm_workspace_bytes(run.device) + static_cast<int64_t>(data_parallel_bytes(run));
  r.planned_peak_bytes = step.peak_in_use_bytes + added;
  r.graph_pool_bytes = step.graph_pool_bytes;
  r.planned_reserved_bytes = step.peak_reserved_bytes + added;
  r.memory = device_memory(run.device);
  if (!r.fits())
    for (const Remedy& remedy : preflight_remedies())
      if (std::optional<PlannedRemedy> p = plan_remedy(remedy, run, r.memory->free_bytes))
        r.remedies.push_back(*p);
  // A plan builds its model on the host (shapes, no values: untouched pages) before moving it to
  // meta: the host's blocks go back, and its peak is the run's again, not the plan's.
  Allocator& host = Allocator::for_device(kCPU);
  host.empty_cache();
  host.reset_peaks();
  return r;
}

std::string preflight_refusal(const PreflightRun& run, const PreflightResult& r) {
  const StepPlanOptions& p = run.plan;
  std::string m = fmt::format(
      "pre-flight: one training step needs {} at its peak (allocated{}, planned on the meta "
      "device; {} with the allocator's cache), but {} has {} free of {} ({}). The step: {} | "
      "{} | {} rows x {} tokens per micro-step{}{}.",
      bytes(r.planned_peak_bytes), graph_pool_note(run, r), bytes(r.planned_reserved_bytes),
      run.device.str(), bytes(r.memory->free_bytes), bytes(r.memory->total_bytes), r.memory->source,
      p.config.str(), dtype_name(p.dtype), p.batch, p.seq_len,
      p.grad_accum > 1 ? fmt::format(", {} micro-steps", p.grad_accum) : "",
      run.world > 1 ? fmt::format(", on each of {} ranks{}", run.world, run.zero ? " (ZeRO-1)" : "")
                    : "");
  // One line, as every error of train_gpt: the remedies one after the other.
  std::vector<std::string> fitting, not_fitting;
  for (const PlannedRemedy& remedy : r.remedies)
    (remedy.fits ? fitting : not_fitting)
        .push_back(fmt::format("{} (planned peak {}, {} of the free memory)", remedy.flags,
                               bytes(remedy.planned_peak_bytes),
                               percent(remedy.planned_peak_bytes, r.memory->free_bytes)));
  if (!fitting.empty()) m += fmt::format(" Each of these would fit: {}.", fmt::join(fitting, "; "));
  if (!not_fitting.empty())
    m += fmt::format(
        " {}: {}.",
        fitting.empty() ? "None of the remedies fits alone (combine them)" : "These would not fit",
        fmt::join(not_fitting, "; "));
  m += " (--no-preflight skips this check; docs/memory.md explains the figures)";
  return m;
}

PreflightResult run_preflight(const PreflightRun& run) {
  PreflightResult r = plan_preflight(run);
  if (!r.memory) return r;
  if (!r.fits()) fail("{}", preflight_refusal(run, r));
  r.summary = fmt::format(
      "pre-flight: the step's planned peak is {} allocated{} ({} reserved) of {} free on {} ({}), "
      "planned in {:.0f} ms ({:.0f} ms of CPU)",
      bytes(r.planned_peak_bytes), graph_pool_note(run, r), bytes(r.planned_reserved_bytes),
      bytes(r.memory->free_bytes), run.device.str(),
      percent(r.planned_peak_bytes, r.memory->free_bytes), r.plan_ms, r.plan_cpu_ms);
  if (r.tight())
    r.summary += ": over 80% of the free memory; a smaller --batch or --grad-accum leaves room";
  return r;
}

void log_preflight(const PreflightResult& r) {
  if (r.summary.empty()) return;
  if (r.tight())
    log().warn("{}", r.summary);
  else
    log().info("{}", r.summary);
}

}  // namespace glass::train
