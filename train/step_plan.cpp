#include "train/step_plan.h"

#include <mutex>
#include <optional>

#include "autograd/backward.h"
#include "autograd/ops.h"
#include "engine/allocator.h"
#include "engine/device_flags.h"
#include "kernels/backend.h"
#include "optim/adamw.h"
#include "train/micro_batches.h"
#include "train/step.h"

namespace glass::train {

namespace {

// Every launch on one device, in the order the gateway reports them.
class LaunchList : public LaunchObserver {
 public:
  explicit LaunchList(Device device) : device_(device) {}
  void on_launch_end(const LaunchRecord& r) override {
    if (!(r.info.device == device_)) return;
    const std::lock_guard lock(mu_);
    launches_.push_back(r.info);
  }
  std::vector<LaunchInfo> take() {
    const std::lock_guard lock(mu_);
    return std::move(launches_);
  }

 private:
  Device device_;
  std::mutex mu_;
  std::vector<LaunchInfo> launches_;
};

// Subscribed for its scope's life (unsubscribed however the step ends).
class Subscription {
 public:
  explicit Subscription(LaunchObserver* observer) : observer_(observer) { subscribe(observer); }
  ~Subscription() { unsubscribe(observer_); }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

 private:
  LaunchObserver* observer_;
};

// The process-wide TF32 switch set for one step, and put back after it.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool on) : saved_(kernels::tf32_enabled()) { kernels::set_tf32(on); }
  ~Tf32Scope() { kernels::set_tf32(saved_); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;

 private:
  bool saved_;
};

void check_options(Device, const StepPlanOptions& o) {
  o.config.validate();
  GLASS_CHECK(o.batch >= 1, "step plan: --batch {} must be at least 1", o.batch);
  GLASS_CHECK(o.grad_accum >= 1, "step plan: --grad-accum {} must be at least 1", o.grad_accum);
  GLASS_CHECK(o.seq_len >= 1 && o.seq_len <= o.config.block_size,
              "step plan: --seq-len {} must be in [1, block_size={}]", o.seq_len,
              o.config.block_size);
  GLASS_CHECK(o.dtype == DType::f32 || o.dtype == DType::bf16,
              "step plan: --dtype {}: expected f32 or bf16", dtype_name(o.dtype));
}

}  // namespace

RecordedStep record_training_step(Device device, const StepPlanOptions& o) {
  check_options(device, o);
  const Tf32Scope tf32(o.tf32);
  Allocator& allocator = Allocator::for_device(device);
  // A plan of another device's run rounds as its allocator does, for as long as its tensors live.
  std::optional<Allocator::PlannedClasses> classes;
  if (device.kind == DeviceKind::meta && o.planned_device)
    classes.emplace(allocator, SizeClasses::of_device(*o.planned_device));
  allocator.empty_cache();
  const AllocatorStats before = allocator.stats();

  // The model as the Trainer builds it: on the host, moved to the device (to meta: shapes only;
  // nanoGPT's initialisation is skipped, the step's launches do not depend on the values), its
  // attention kernel set, AdamW over its f32 masters, then the compute copies.
  Generator dropout_gen(0);
  const std::unique_ptr<CausalLM> model_ptr = make_model(o.config, dropout_gen);
  CausalLM& model = *model_ptr;
  model.to(device);
  const AttentionKernel attention = parse_attention_kernel(o.attention);
  const int64_t head_dim = o.config.head_dim();
  check_attention_kernel(resolve_attention_kernel(attention, device, o.dtype, head_dim), device,
                         o.dtype, head_dim);
  model.set_attention(attention);
  model.set_recompute(parse_recompute(o.recompute));
  if (device.kind == DeviceKind::meta && o.planned_device) model.set_loss_as_on(*o.planned_device);
  AdamW optimizer(model.named_parameters(),
                  AdamWOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay});
  if (o.dtype != DType::f32) model.set_compute_dtype(o.dtype);
  model.train(true);

  RecordedStep step;
  step.attention =
      attention_kernel_name(resolve_attention_kernel(attention, device, o.dtype, head_dim));
  step.state_bytes = allocator.stats().allocated_bytes - before.allocated_bytes;
  allocator.reset_peaks();
  LaunchList list(device);
  const int64_t pool_reserved_before = allocator.stats().pool_reserved_bytes;
  uint64_t pool = 0;
  {
    const Subscription subscription(&list);
    // Batches of zero tokens, uploaded as the Trainer uploads its micro-steps' batches, and the
    // step's forward, backward and update (train/step.h).
    const Batch host{zeros({o.batch, o.seq_len}, DType::i32),
                     zeros({o.batch, o.seq_len}, DType::i32)};
    const std::vector<Batch> hosts(static_cast<size_t>(o.grad_accum), host);
    if (o.cuda_graph) {  // the warm-up: the eager step, its blocks left in the cache
      const MicroBatches warm = upload_micro_batches(hosts, device);
      queue_step_update(model, optimizer, accumulate_gradients(model, warm.micro, {}), o.lr,
                        o.grad_clip, 1);
      list.take();
    }
    // Under --cuda-graph: the graph's inputs and its random base, made before the capture.
    const MicroBatches batches = upload_micro_batches(hosts, device);
    const Tensor rng_base = o.cuda_graph ? Tensor::empty({2}, DType::i32, device) : Tensor();
    std::optional<Allocator::PoolScope> capture;
    if (o.cuda_graph) {
      pool = allocator.create_pool();
      capture.emplace(allocator, pool);
    }
    const Tensor loss_sum = accumulate_gradients(model, batches.micro, {});
    const Tensor status =
        queue_step_update(model, optimizer, loss_sum, o.lr, o.grad_clip, o.cuda_graph ? 2 : 1);
    capture.reset();
    step.graph_pool_bytes = allocator.stats().pool_reserved_bytes - pool_reserved_before;
  }
  step.launches = list.take();
  const AllocatorStats after = allocator.stats();
  step.peak_allocated_bytes = after.peak_allocated_bytes - before.allocated_bytes;
  step.peak_reserved_bytes = after.peak_reserved_bytes - before.reserved_bytes;
  step.peak_in_use_bytes = after.peak_in_use_bytes - before.in_use_bytes;
  if (pool != 0) allocator.release_pool(pool);  // the graph is gone
  // Where the trained step reads its status: the ops' error flags are checked (on meta, dropped).
  check_device_flags(device);
  return step;
}

}  // namespace glass::train
