#include "train/run_log.h"

#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/log.h"
#include "train/shutdown.h"

namespace glass::train {

namespace {

constexpr double kMiB = 1 << 20;

}  // namespace

void RunLog::open_metrics(const std::string& path) {
  metrics_.open(path, std::ios::app);
  GLASS_CHECK(metrics_.good(), "cannot open metrics file '{}' for writing", path);
}

void RunLog::setup(const RunConfig& run, int threads, const Dataset& data, const GPTConfig& config,
                   int64_t parameters, AttentionKernel attention,
                   const std::optional<PreflightResult>& preflight) const {
  if (preflight) log_preflight(*preflight);
  const TrainOptions& o = run.options;
  log().info("device {} | {} threads | data {}: {} train + {} val tokens, vocab {}",
             run.device.str(), threads, data.path, data.train.size(), data.val.size(),
             data.vocab_size);
  log().info(
      "model {} | {:.2f}M parameters | {} | batch {} x {} = {} tokens per step | attention {}",
      config.str(), static_cast<double>(parameters) / 1e6,
      run.dtype == DType::f32 ? "f32" : "bf16 mixed precision (f32 master weights)", o.batch,
      o.seq_len, o.batch * o.seq_len, attention_kernel_name(attention));
}

void RunLog::step(const StepResult& r, const StepFigures& f) {
  const double tokens_per_s_here = r.tokens_per_s / static_cast<double>(f.world);
  const double mfu = f.mfu ? f.mfu->of(tokens_per_s_here) : 0.0;
  const double hfu = f.mfu ? f.mfu->hfu_of(tokens_per_s_here) : 0.0;
  if (!quiet_ || f.val_loss) {
    std::string line = fmt::format(
        "step {:5d}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:7.1f} ms | {:8.0f} tok/s",
        r.step, steps_, r.loss, r.lr, r.grad_norm, r.ms, r.tokens_per_s);
    if (f.mfu)
      line += fmt::format(" | MFU {:.2f}%{} | peak mem {:.1f}/{:.1f} MiB alloc/resv", 100 * mfu,
                          hfu != mfu ? fmt::format(" HFU {:.2f}%", 100 * hfu) : "",
                          static_cast<double>(f.memory.peak_allocated_bytes) / kMiB,
                          static_cast<double>(f.memory.peak_reserved_bytes) / kMiB);
    if (f.val_loss) line += fmt::format(" | val loss {:.4f}", *f.val_loss);
    if (r.skipped) line += " | skipped (non-finite)";
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
  if (metrics_.is_open()) {
    nlohmann::json j = {{"step", r.step},
                        {"loss", r.loss},
                        {"lr", r.lr},
                        {"grad_norm", r.grad_norm},
                        {"ms", r.ms},
                        {"tokens_per_s", r.tokens_per_s},
                        {"mfu", mfu},
                        {"hfu", hfu},
                        {"peak_allocated_bytes", f.memory.peak_allocated_bytes},
                        {"peak_reserved_bytes", f.memory.peak_reserved_bytes},
                        {"peak_in_use_bytes", f.memory.peak_in_use_bytes},
                        {"planned_peak_bytes", f.planned_peak_bytes},
                        {"host_syncs", r.host_syncs},
                        {"skipped", r.skipped}};
    if (f.val_loss) j["val_loss"] = *f.val_loss;
    metrics_ << j.dump() << "\n";
    metrics_.flush();
  }
}

void RunLog::summary(const RunTotals& t) const {
  // No step run (resumed at --steps): no loss to report, rather than "final loss nan".
  const std::string losses =
      t.steps == 0 ? ""
                   : fmt::format(" | final loss {:.4f}{}", t.final_loss,
                                 t.val_loss ? fmt::format(" | val loss {:.4f}", *t.val_loss) : "");
  // The pre-flight's planned peak beside the measured one (the same figure: allocated).
  const std::string planned =
      t.planned_peak_bytes && t.measured_peak_bytes
          ? fmt::format(" | planned peak {:.1f} MiB (pre-flight), measured {:.1f} MiB (step {})",
                        static_cast<double>(*t.planned_peak_bytes) / kMiB,
                        static_cast<double>(*t.measured_peak_bytes) / kMiB, t.measured_step)
          : "";
  // Model and hardware FLOPs utilisation over the whole run (HFU only where --recompute differs).
  std::string utilisation;
  if (t.mfu != nullptr && t.steps > 0) {
    const double per_rank = t.tokens_per_s / static_cast<double>(t.world);
    const double mfu = t.mfu->of(per_rank), hfu = t.mfu->hfu_of(per_rank);
    utilisation = fmt::format(" | MFU {:.2f}%{}", 100 * mfu,
                              hfu != mfu ? fmt::format(" HFU {:.2f}%", 100 * hfu) : "");
  }
  fmt::print(
      "\ndone: {} steps in {:.1f} s | {:.0f} tok/s{}{} | peak memory {:.1f} MiB allocated, {:.1f} "
      "MiB reserved{}\n",
      t.steps, t.seconds, t.tokens_per_s, utilisation, losses,
      static_cast<double>(t.memory.peak_allocated_bytes) / kMiB,
      static_cast<double>(t.memory.peak_reserved_bytes) / kMiB, planned);
  if (!t.skipped_steps.empty())
    fmt::print("skipped {} non-finite step(s) (--on-nonfinite skip): {}\n", t.skipped_steps.size(),
               fmt::join(t.skipped_steps, ", "));
}

void RunLog::stopped(int signal, int64_t step, const std::string& checkpoint,
                     const std::string& checkpoint_dir) const {
  if (checkpoint.empty())
    fmt::print("\nstopped by {} after step {}: no --checkpoint-dir, so nothing was saved\n",
               stop_signal_name(signal), step);
  else
    fmt::print(
        "\nstopped by {} after step {}: checkpoint written to {} (continue with --resume {})\n",
        stop_signal_name(signal), step, checkpoint, checkpoint_dir);
  std::fflush(stdout);
}

void RunLog::sample(const Generation& g, const std::string& tokenizer, const std::string& prompt,
                    const std::string& text) const {
  fmt::print("\n--- sample: {} {} tokens, {:.1f} tokens/s (KV cache) ---\n{}{}\n---\n",
             g.tokens.size(), tokenizer, g.tokens_per_s(), prompt, text);
}

}  // namespace glass::train
