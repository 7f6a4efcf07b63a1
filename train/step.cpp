#include "train/step.h"

#include <cmath>

#include "autograd/backward.h"
#include "autograd/grad_norms.h"
#include "autograd/ops.h"
#include "comm/zero_adamw.h"
#include "engine/debug.h"
#include "engine/launch.h"
#include "optim/clip.h"
#include "optim/step_status.h"
#include "train/micro_batches.h"

namespace glass::train {

Tensor batch_loss(const CausalLM& model, const Batch& b) {
  return model.loss(model.forward(b.x), b.y);
}

Tensor accumulate_gradients(const CausalLM& model, const std::vector<Batch>& batches,
                            const std::function<void(const Tensor&, int64_t)>& before_backward) {
  const auto k = static_cast<int64_t>(batches.size());
  Tensor loss_sum;
  for (int64_t micro = 0; micro < k; ++micro) {
    const Tensor loss = batch_loss(model, batches[static_cast<size_t>(micro)]);
    if (before_backward) before_backward(loss, micro);
    backward(k == 1 ? loss : loss / static_cast<double>(k));
    loss_sum = micro == 0 ? loss.detach() : loss_sum + loss.detach();
  }
  return loss_sum;
}

Tensor queue_step_update(CausalLM& model, AdamW& optimizer, const Tensor& loss_sum, double lr,
                         double grad_clip, int64_t step) {
  // 1. The global gradient norm's square, every step: clipping scales by it (on the device), and
  //    a NaN or infinity anywhere in the gradients shows in it. A non-finite norm scales nothing.
  //    Sharded (--zero 1): over the ranks' chunks of the reduced gradients (comm/zero_adamw.h).
  const double bound = grad_clip > 0 ? grad_clip : INFINITY;
  auto* zero = dynamic_cast<comm::ZeroAdamW*>(&optimizer);
  const Tensor sum_sq = zero != nullptr ? zero->clip_grad_norm_on_device(bound)
                                        : clip_grad_norm_on_device(model.parameters(), bound);
  GLASS_CHECK(sum_sq.defined(), "step {}: no parameter has a gradient", step);
  // 2. The status the host reads at the end, and the finite gate AdamW reads on the device.
  const Tensor status = step_status(loss_sum, sum_sq);
  optimizer.set_finite_gate(finite_gate(status));
  optimizer.set_lr(lr);
  // 3. The bf16 copies of the masters (none in f32) are a pure function of them (round to
  //    nearest even). AdamW writes them in its own pass, from the values it has just written
  //    (optim/adamw.h); ZeRO's update with sharded masters (bf16) writes its shard's copies so
  //    and all-gathers them (comm/zero_adamw.h). Not gated: a skipped step left the masters as
  //    they were.
  const bool copies_in_step = zero == nullptr && model.compute_dtype() == DType::bf16;
  const bool copies_gathered = zero != nullptr && zero->masters_sharded();
  optimizer.set_compute_copies(copies_in_step ? model.parameter_copies() : std::vector<Tensor>{});
  optimizer.step();
  optimizer.zero_grad();
  if (!copies_in_step && !copies_gathered) {
    LaunchScope scope("refresh_compute_copies", -1, Phase::optimizer);
    model.refresh_compute_copies();
  }
  return status;
}

TrainStep::TrainStep(const RunConfig& run, StepParts parts) : run_(run), p_(parts) {}

StepResult TrainStep::run(int64_t done, double lr) {
  const TrainOptions& o = run_.options;
  const uint64_t rng_offset_before = p_.dropout->offset();
  p_.model->train(true);
  // Each micro-step reads the next --batch rows of the stream, this rank its share of them; the
  // gradients of the micro-steps add up in .grad, each scaled by 1/k, and are all-reduced once.
  const RowRange rows = rows_of_rank(o.batch, p_.comm->rank(), p_.comm->size());
  StepResult r;
  r.lr = lr;
  if (hooks_.before_step) hooks_.before_step(done + 1);
  // The whole step is queued without the host waiting: forward, backward, the norm, the status
  // and the gated AdamW (--cuda-graph: as one graph replay after the eager warm-up step).
  const Tensor status = p_.graph && warmed_up_
                            ? replay(rows, lr, done)
                            : finish_on_device(forward_backward(rows, done), lr, done);
  // A replayed data-parallel step: the host's wait for it, bounded by --comm-timeout, so that a
  // rank that died or hangs in the captured all-reduce ends the job with an error naming this rank
  // (eagerly the gradient sync bounds it). Then the read below finds the step done.
  if (p_.graph && p_.ddp && p_.graph->captured()) {
    const double wait_from = launch_clock_us();
    p_.comm->wait_for_current_stream(fmt::format(
        "step {}: the replayed CUDA graph (its captured gradient all-reduces)", done + 1));
    note_host_span("wait for the replayed graph", "host wait", wait_from, done + 1);
  }
  // The step's one host read, after the update was queued: loss, gradient norm and the gate.
  const double read_from = launch_clock_us();
  const StepStatus st = read_step_status(status);
  note_host_span("read step status (loss, |g|, finite)", "host wait", read_from, done + 1);
  r.loss = mean_over_ranks(*p_.comm, st.loss / static_cast<double>(o.grad_accum));
  r.grad_norm = st.grad_norm;
  // The norm is of the all-reduced gradients, the same on every rank; a rank's own loss is not,
  // so a loss that is finite here but not on another rank would let the replicas part.
  GLASS_CHECK(
      p_.comm->size() == 1 || st.finite == (std::isfinite(r.loss) && std::isfinite(r.grad_norm)),
      "step {}: the ranks disagree on whether the step is finite (this rank's loss {}, "
      "mean {}): the replicas would part",
      done + 1, st.loss, r.loss);
  if (!st.finite) {
    // The gate kept the weights and the moments as the step before left them; the step did not
    // count for AdamW's bias correction either.
    p_.optimizer->uncount_skipped_step();
    if (run_.on_nonfinite == NonFinitePolicy::stop) {
      const std::string origin = locate_nonfinite(done, rng_offset_before);
      fail("step {}: non-finite {} (loss {}, gradient norm {}); the weights were not updated. {}",
           done + 1, std::isfinite(r.loss) ? "gradients" : "loss", r.loss, r.grad_norm, origin);
    }
    r.skipped = true;
  }
  warmed_up_ = true;
  return r;
}

// All micro-steps' batches in two uploads (train/micro_batches.h: no staging wait mid-step).
Tensor TrainStep::forward_backward(const RowRange& rows, int64_t done) {
  const double read_from = launch_clock_us();
  std::vector<Batch> micro =
      upload_micro_batches(host_micro_batches(rows, done), run_.device).micro;
  note_host_span("batch: read + upload", "data", read_from, done + 1);
  return accumulate_micro_steps(micro);
}

void TrainStep::note_host_span(const char* name, const char* phase, double start_us,
                               int64_t step) const {
  if (hooks_.host_span)
    hooks_.host_span({name, phase, start_us, launch_clock_us(), step, run_.device});
}

std::vector<TapeNode> TrainStep::tape_with_grad_norms(int64_t done) {
  const TrainOptions& o = run_.options;
  Generator& gen = *p_.dropout;
  const uint64_t seed = gen.seed(), offset = gen.offset();
  p_.model->train(true);
  const RowRange rows = rows_of_rank(o.batch, p_.comm->rank(), p_.comm->size());
  // The first micro-step's batch, as the step reads it (micro 0 of step done + 1).
  const Batch b = p_.loader->rows(done * o.grad_accum, rows.begin, rows.end, run_.device);
  const Tensor loss = batch_loss(*p_.model, b);
  const double k = static_cast<double>(o.grad_accum);
  // Data parallelism: the pass's backward starts no all-reduce (ZeRO-1: no reduce-scatter), as
  // for an accumulating micro-step, so it needs no other rank and the buckets are left as they
  // were; its gradients (this rank's own) are dropped below. The step sets the sync again.
  const bool syncing = p_.ddp != nullptr && p_.ddp->syncing();
  if (p_.ddp) p_.ddp->set_sync(false);
  // The step runs backward(loss / k) (accumulate_gradients): the same here, so the norms are of
  // d(step loss)/d(node output).
  std::vector<TapeNode> tape =
      glass::tape_with_grad_norms(loss, [&] { backward(o.grad_accum == 1 ? loss : loss / k); });
  if (p_.ddp) p_.ddp->set_sync(syncing);
  gen.set_state(seed, offset);
  p_.optimizer->zero_grad();
  return tape;
}

std::vector<Batch> TrainStep::host_micro_batches(const RowRange& rows, int64_t done) const {
  std::vector<Batch> batches;
  for (int64_t micro = 0; micro < run_.options.grad_accum; ++micro)
    batches.push_back(
        p_.loader->rows(done * run_.options.grad_accum + micro, rows.begin, rows.end, kCPU));
  return batches;
}

Tensor TrainStep::accumulate_micro_steps(const std::vector<Batch>& batches) {
  const auto k = static_cast<int64_t>(batches.size());
  const Tensor loss_sum =
      accumulate_gradients(*p_.model, batches, [&](const Tensor& loss, int64_t micro) {
        if (hooks_.after_forward) hooks_.after_forward(loss, micro);
        // With data parallelism the last micro-step's backward all-reduces the summed gradients.
        if (p_.ddp) p_.ddp->set_sync(micro + 1 == k);
      });
  if (p_.ddp) p_.ddp->finish_gradient_sync();
  return loss_sum;
}

Tensor TrainStep::finish_on_device(const Tensor& loss_sum, double lr, int64_t done) {
  if (hooks_.after_backward) hooks_.after_backward(done + 1);
  return queue_step_update(*p_.model, *p_.optimizer, loss_sum, lr, run_.options.grad_clip,
                           done + 1);
}

Tensor TrainStep::replay(const RowRange& rows, double lr, int64_t done) {
  // Every micro-step's batch, on the host: the graph uploads them before the replay and copies
  // them into its inputs (graph_step.h).
  const double read_from = launch_clock_us();
  const std::vector<Batch> batches = host_micro_batches(rows, done);
  note_host_span("batch: read", "data", read_from, done + 1);
  // The step's scalars into the device memory the captured AdamW reads (before the capture, too:
  // an upload cannot be captured); a replay counts the optimizer's step on the host.
  AdamW& optimizer = *p_.optimizer;
  optimizer.set_lr(lr);
  optimizer.stage_scalars(optimizer.step_count() + 1, lr);
  if (p_.graph->captured()) optimizer.count_replayed_step();
  // The captured step is the eager one's, all its micro-steps unrolled in one graph (with data
  // parallelism, the gradient all-reduces too: comm/data_parallel.h). Not one micro-step graph
  // replayed k times: the eager step's first micro-step sets each .grad (zero_grad left it
  // undefined) and the later ones add to it, so one captured micro-step could not be every
  // micro-step, and the loss sum's additions would need a graph of their own. Unrolled, the replay
  // queues exactly the eager step's kernels.
  return p_.graph->step(batches, [&](const std::vector<Batch>& in) {
    return finish_on_device(accumulate_micro_steps(in), lr, done);
  });
}

std::string TrainStep::locate_nonfinite(int64_t done, uint64_t rng_offset) {
  if (check_nan_enabled())
    return "Anomaly mode was on and no op produced it: it arose outside autograd (after backward).";
  if (p_.ddp)
    return "Run again with GLASS_CHECK_NAN=1 to name the first node that produced it (the "
           "re-run is not done under data parallelism).";
  // 1. Anomaly mode on, the dropout generator back where the step started, the same batches.
  const DebugSettings saved = debug_settings();
  DebugSettings anomaly = saved;
  anomaly.check_nan = true;
  set_debug_settings(anomaly);
  Generator& gen = *p_.dropout;
  const uint64_t seed = gen.seed(), offset_after = gen.offset();
  gen.set_state(seed, rng_offset);
  std::string origin =
      "A re-run of the step in anomaly mode (GLASS_CHECK_NAN) found no op that produced it: it "
      "arose outside autograd (after backward).";
  try {
    const TrainOptions& o = run_.options;
    const RowRange rows = rows_of_rank(o.batch, p_.comm->rank(), p_.comm->size());
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      const Batch b =
          p_.loader->rows(done * o.grad_accum + micro, rows.begin, rows.end, run_.device);
      backward(batch_loss(*p_.model, b));
    }
  } catch (const Error& e) {
    // 2. The first check that fails names the node and where forward created it.
    origin = fmt::format("First produced by: {}", e.what());
  }
  set_debug_settings(saved);
  gen.set_state(seed, offset_after);
  p_.optimizer->zero_grad();
  return origin;
}

}  // namespace glass::train
