// Pre-flight: before step 1, train_gpt plans one training step on the `meta` device
// (train/step_plan.h: shapes only, nothing runs and nothing is stored, a few milliseconds for the
// default model) and compares the plan's peak with the memory the device has free
// (engine/device_memory.h: cudaMemGetInfo on cuda, MemAvailable on cpu, GLASS_EMU_GPU_MEMORY's
// budget on emu). Over it, the run stops with one error before anything big is allocated, giving
// the figures and each remedy that would fit with its own planned peak (planned on meta too);
// over 80% of it, a warning. train_gpt --no-preflight skips it.
//
// The figure compared is the planned peak *allocated* (rounded as the run's device rounds: its
// size classes, cpu's 64-byte classes for small tensors, emu's exact sizes under red zones;
// engine/allocator.h, SizeClasses), not the peak reserved: before failing, the allocator gives
// its cached free blocks back to the device and tries again (engine/allocator.h), so what must
// fit at once is the live blocks; the reserved peak (the cache on top) is printed beside it.
// Under --cuda-graph the plan is the eager warm-up step and the captured one, and the figure
// counts the graph's private pool whole (its free blocks are the graph's: no other request gets
// them, and the cache cannot give them back), train/step_plan.h. Not in the plan: what the
// allocator does not count (the CUDA context, cuBLAS's, cuDNN's and NCCL's own buffers),
// evaluation and sampling (smaller than a training step: no saved activations). With data
// parallelism each rank plans its own step (--batch is the global batch, a rank's micro-step has
// --batch / ranks rows), and the cost model adds what the ranks' sharing changes
// (data_parallel_bytes: the gradient buckets, ZeRO-1's sharded moments and bf16 masters).
//
// The remedies are one table (preflight_remedies): each entry is the flags a user adds and how
// they change the planned step (StepPlanOptions). Adding a remedy is adding one entry.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/device_memory.h"
#include "train/step_plan.h"

namespace glass::train {

// What the pre-flight plans: one rank's step (plan.batch = its rows per micro-step), on `device`.
struct PreflightRun {
  StepPlanOptions plan;
  Device device;
  int world = 1;  // data-parallel ranks: --batch is plan.batch * world
  int zero = 0;   // --zero: 1 shards AdamW's moments (bf16: and the masters) over the ranks
};

// What data parallelism adds to one rank's step beyond the plan on meta (which runs one process,
// without a communicator), from the cost model (train/gpt_cost.h): the flat gradient buckets that
// every rank holds all step (world > 1), and with ZeRO-1 the moments (and under bf16 the f32
// masters) it no longer keeps (negative), each tensor rounded to its size class.
double data_parallel_bytes(const PreflightRun& run);

// One remedy: `apply` changes the planned run (its step, or its sharding) for strength k and
// returns the flags to add ("--batch 4"), or "" where it does not apply to this run (bf16 when
// already bf16, a batch that k does not divide, ZeRO-1 on one rank). A graded remedy is tried at k
// = 2, 4, 8, ... until its plan fits (the mildest that fits is offered); a fixed one once, at k
// = 1.
struct Remedy {
  std::function<std::string(PreflightRun& run, int64_t k)> apply;
  bool graded = false;
};
const std::vector<Remedy>& preflight_remedies();

struct PlannedRemedy {
  std::string flags;               // what to add to the command line
  int64_t planned_peak_bytes = 0;  // the step's planned peak allocated with it
  bool fits = false;
};

struct PreflightResult {
  int64_t planned_peak_bytes = 0;       // peak allocated of the planned step (this rank's)
  int64_t planned_reserved_bytes = 0;   // peak reserved: with the allocator's cache
  int64_t graph_pool_bytes = 0;         // --cuda-graph: the capture's private pool (reserved)
  std::optional<DeviceMemory> memory;   // the device's free memory; nullopt: nothing to compare
  double plan_ms = 0;                   // the time the plan of the run's step took
  double plan_cpu_ms = 0;               // ... and the CPU time of the process meanwhile
  std::vector<PlannedRemedy> remedies;  // planned only when the step does not fit
  std::string summary;                  // run_preflight's line for the log
  bool fits() const { return !memory || planned_peak_bytes <= memory->free_bytes; }
  // Over 80% of the free memory (and fits): a warning.
  bool tight() const {
    return memory && fits() &&
           static_cast<double>(planned_peak_bytes) > 0.8 * static_cast<double>(memory->free_bytes);
  }
};

// Plans the run's step (and, when it does not fit, every remedy) without checking anything.
PreflightResult plan_preflight(const PreflightRun& run);

// The refusal: the figures and the remedies (the message of the error run_preflight throws).
std::string preflight_refusal(const PreflightRun& run, const PreflightResult& result);

// plan_preflight, then: throws the refusal when the step does not fit; else returns the result
// with its summary line (a warning when the step takes over 80% of the free memory).
PreflightResult run_preflight(const PreflightRun& run);

// Logs the summary line: a warning over 80%, else info. The Trainer logs it with its set-up lines,
// once every other check of the run has passed (an error stays the only line of a failed start).
void log_preflight(const PreflightResult& result);

}  // namespace glass::train
