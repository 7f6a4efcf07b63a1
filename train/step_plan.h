// One training step of a GPT, recorded: every launch it makes (kernel, grid, FLOPs, bytes, unit)
// and the memory it takes. On `meta` (engine/device.h) nothing runs and nothing is stored, so the
// record is a plan: GPT-2 124M's bf16 step at B=16 T=1024 is planned in about a second on any
// machine, with the launches and the allocator's peak that the same step makes on a GPU. On emu
// (or cuda) the same function runs the step for real, which is how tests check the plan.
//
// The step is the Trainer's (train/step.h): the model (f32 masters, and bf16 compute copies
// under --dtype bf16) and AdamW built as train_gpt builds them, one batch uploaded, forward,
// cross-entropy, backward (for each of --grad-accum micro-steps), the clipped gradient norm, the
// step status, the gated AdamW update, zero_grad and the refreshed copies. Only the step's launches
// are recorded (not the model's set-up). The host's read of the status, which ends a trained step,
// is not made (on meta there is nothing to read: the placeholder for the Trainer's non-finite check
// is that there is none); the ops' error flags, which that read would check, are checked after the
// measurement (dropped on meta).
//
// Memory is measured from the allocator of the device (engine/allocator.h): its cache is emptied
// first, and the figures are the growth over what was allocated before, so a plan in a fresh
// process reports what train_gpt's first step allocates. One exception: the GEMM workspace
// (kernels/cuda/gemm.cu) is allocated once per device and stream and kept, so it counts only in
// the first step recorded on a device in a process.
//
// --cuda-graph (StepPlanOptions::cuda_graph): as the Trainer runs it, an eager warm-up step, then
// the captured one: the batches uploaded into the graph's inputs and the random base (kept while
// the graph lives), and forward, backward and the update with every request served from a new
// private pool of the allocator (engine/allocator.h), which first takes over the blocks the
// warm-up left in the cache. No graph is made (meta has none): the pool is the capture's whole
// effect on memory. The blocks freed inside it stay the pool's, in use by every replay, so
// peak_in_use_bytes counts them; the launches recorded are the captured step's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/launch.h"
#include "nn/gpt.h"

namespace glass::train {

struct StepPlanOptions {
  GPTConfig config;
  int64_t batch = 1, seq_len = 1;
  // Micro-steps of `batch` rows each (train_gpt --grad-accum): their gradients add up in .grad.
  int64_t grad_accum = 1;
  DType dtype = DType::bf16;  // bf16: mixed precision (bf16 copies of f32 masters); or f32
  // The attention kernel (autograd/ops.h: parse_attention_kernel), as train_gpt --attention.
  std::string attention = "auto";
  // Activation recomputation (nn/recompute.h), as train_gpt --recompute.
  std::string recompute = "none";
  bool tf32 = false;  // f32 GEMMs on TF32 tensor cores (train_gpt --tf32), for this step only
  // train_gpt --cuda-graph: an eager warm-up step, then the step as the graph's capture records
  // it, its requests served from a private pool (train/graph_step.h, engine/allocator.h).
  bool cuda_graph = false;
  // On meta: the device whose run this plans (train/preflight.h). Its allocator's rounding
  // (engine/allocator.h: SizeClasses, cpu's 64-byte classes for small tensors) and its loss
  // (cpu: cross-entropy, its gradient beside the logits) are planned; the other kernels are
  // meta's (those of emu and cuda).
  std::optional<Device> planned_device;
  // train_gpt's defaults; the values change no launch, only the scalars AdamW reads.
  double lr = 1e-3, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;  // 0 = off (clip_scale launches are then skipped)
};

struct RecordedStep {
  std::vector<LaunchInfo> launches;  // the step's, in issue order
  std::string attention;             // the attention kernel that ran ("flash", "naive", ...)
  int64_t state_bytes = 0;           // allocated when the step began: weights, masters, copies
  int64_t peak_allocated_bytes = 0;  // the most allocated at once during the step (state included)
  int64_t peak_reserved_bytes = 0;   // the most obtained from the device (free cached blocks too)
  // peak_allocated_bytes with the graph pool's free blocks (AllocatorStats::in_use_bytes): what
  // the device must hold at once. The same figure without --cuda-graph.
  int64_t peak_in_use_bytes = 0;
  int64_t graph_pool_bytes = 0;  // --cuda-graph: what the capture's pool reserved (kept)
};

// Builds the model and optimizer on `device` and records one training step there. On meta a
// plan; on emu, cuda or cpu the step runs (on zero weights and zero tokens).
RecordedStep record_training_step(Device device, const StepPlanOptions& options);

}  // namespace glass::train
