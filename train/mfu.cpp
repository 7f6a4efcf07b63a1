#include "train/mfu.h"

#include <fmt/format.h>

#include "train/gpt_cost.h"

namespace glass::train {

Mfu gpt_mfu(const GPTConfig& c, int64_t seq_len, const DevicePeaks& peaks, DType dtype) {
  const GptStepFlops f = gpt_step_flops(c, 1, seq_len);
  Mfu m;
  m.flops_per_token = f.per_token();
  m.peak_flops = peaks.flops(dtype);
  const std::string counted =
      c.arch == Arch::gpt2
          ? "parameters without the position embedding wpe (wte counted once: the LM head is "
            "tied to it)"
          : (c.tie_embeddings ? "parameters (embed_tokens counted once: the LM head is tied to it)"
                              : "parameters without embed_tokens (a lookup; lm_head counted)");
  m.formula = fmt::format(
      "MFU = model FLOPs per token x tokens/s / peak FLOP/s; FLOPs per token = 6 N + 12 L T C = "
      "{:.4g} + {:.4g} = {:.4g}, N = {} {}, 12 L T C the attention scores and weighted sum (L={} "
      "T={} C={}); peak {:.4g} GFLOP/s {} on {} ({})",
      f.six_n, f.attention, m.flops_per_token, flop_parameters(c), counted, c.n_layer, seq_len,
      c.n_embd, m.peak_flops / 1e9, dtype_name(dtype), peaks.name, peaks.source);
  return m;
}

Mfu with_recompute(Mfu m, const GPTConfig& c, int64_t seq_len, Recompute mode,
                   bool gelu_in_gemm_epilogue) {
  m.recomputed_flops_per_token = recompute_flops_per_token(c, seq_len, mode, gelu_in_gemm_epilogue);
  if (mode != Recompute::none)
    m.formula += fmt::format(
        "; HFU = hardware FLOPs per token x tokens/s / peak: model FLOPs + {:.4g} that "
        "--recompute {} computes again in backward = {:.4g}",
        m.recomputed_flops_per_token, recompute_name(mode),
        m.flops_per_token + m.recomputed_flops_per_token);
  return m;
}

}  // namespace glass::train
