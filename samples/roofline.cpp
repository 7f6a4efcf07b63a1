// roofline: the course's cost model on the command line.
//
//   build/samples/roofline gemm --m 32 --k 4096 --n 4096 --dtype bf16 --device h200
//   build/samples/roofline elementwise --n 16777216 --inputs 2 --outputs 1 --dtype bf16
//   build/samples/roofline attention --batch 8 --heads 12 --seq-len 1024 --head-dim 64 --dtype bf16
//   build/samples/roofline model --model gpt2 --dtype bf16 --batch 8
//   build/samples/roofline model --n-layer 12 --n-head 12 --n-embd 768 --vocab-size 50257
//       --seq-len 1024 --batch 8 --dtype bf16            ("gpt" is another name for "model")
//   build/samples/roofline model --arch llama --n-layer 6 --n-head 6 --n-kv-head 2 --n-embd 288
//       --vocab-size 32000 --seq-len 256 --n-expert 8 --top-k 2
//   build/samples/roofline step --model gpt2 --dtype bf16 --batch 16 --seq-len 1024 --gpu h200
//       [--attention auto|naive|flash|...] [--json] [--launches] [--top 10]
//
// gemm / elementwise: FLOPs, ideal bytes, arithmetic intensity, the bound and the least time on
// the device. attention: the same for causal attention forward done naively (the T x T matrix
// through memory) and as FlashAttention (tiles, nothing T x T), with the memory each needs. model:
// the memory budget of training (parameters, gradients, master weights, AdamW moments, activations,
// temporaries) and the FLOPs of a step. step: one training step planned on the `meta` device
// (nothing runs: samples/roofline_step.h), each launch bounded by the roof of the unit that does
// its FLOPs (Tensor Cores bf16/TF32, CUDA cores, or memory only), summed by kernel and by unit,
// against the model's FLOPs at 100% MFU (ideal_ms); --gpu picks the datasheet roofs. Devices
// (--device of the others): the GPU table (engine/device_peaks.h) or `cpu` (this machine: its
// hardware FLOP/s peak and a measured bandwidth). Errors are one line on stderr
// ("roofline: error: ...") and a non-zero exit status.
#include <CLI/CLI.hpp>

#include "engine/error.h"
#include "engine/roofline.h"
#include "kernels/peaks.h"
#include "samples/cli_args.h"
#include "samples/command_line.h"
#include "samples/roofline_step.h"
#include "samples/si_units.h"
#include "train/gpt_cost.h"

namespace {

struct Flags {
  std::string device = "h200", dtype;  // dtype: resolve_dtype's default when not given
  int64_t m = 0, k = 0, n = 0;         // gemm; n also elementwise
  int inputs = 2, outputs = 1;         // elementwise
  double flops_per_element = 1;        // elementwise
  glass::GPTConfig gpt{50257, 1024, 12, 12, 768, 0};  // GPT-2 small by default
  int64_t batch = 8, seq_len = 1024;
  int64_t heads = 12, head_dim = 64;                 // attention
  std::string model;                                 // a preset of train_gpt --model
  std::string arch = "gpt2", tie_embeddings = "on";  // model
  int64_t n_expert = 1, top_k = 1;                   // model: a mixture of experts on paper
  std::string recompute = "none";                    // model: train_gpt --recompute
  int64_t world = 1;                                 // model: data-parallel ranks (per rank)
  int zero = 0;                                      // model: ZeRO stage 0 | 1
};

glass::DevicePeaks peaks_of(const std::string& name) {
  if (name == "cpu") return glass::kernels::peaks_for(glass::kCPU);
  if (auto p = glass::find_known_gpu(name)) return *p;
  std::string known = "cpu";
  for (const auto& g : glass::known_gpus()) known += ", " + g.name;
  glass::fail("--device '{}': unknown (known: {})", name, known);
}

// --dtype when not given: bf16 on the GPUs (their tensor-core peak), f32 on `cpu`, the one dtype
// the cpu row plans (train_gpt's default there too).
void resolve_dtype(Flags& f) {
  if (f.dtype.empty()) f.dtype = f.device == "cpu" ? "f32" : "bf16";
  glass::samples::parse_dtype_flag(f.dtype);  // an unknown name fails here
  GLASS_CHECK(f.dtype != "bf16" || f.device != "cpu",
              "--dtype bf16: roofline's --device cpu plans f32 only; use --dtype f32");
}

using glass::samples::si;

// The roofline part that gemm and elementwise share.
void print_roofline(const std::string& what, const std::string& flops_formula,
                    const std::string& bytes_formula, const glass::OpCost& cost, glass::DType dtype,
                    const Flags& f) {
  const glass::DevicePeaks peaks = peaks_of(f.device);
  const glass::RooflinePoint r = glass::roofline(cost, peaks, dtype);
  fmt::print("{} {} on {}: {} {}, {} ({})\n", what, f.dtype, peaks.name,
             si(peaks.flops(dtype), "FLOP/s"), f.dtype, si(peaks.bytes_per_s, "B/s"), peaks.source);
  fmt::print("  FLOPs       {:<22} = {}\n", flops_formula, si(cost.flops, "FLOP"));
  fmt::print("  bytes       {:<22} = {}\n", bytes_formula, si(cost.bytes, "B"));
  fmt::print("  intensity   {:<22} = {:.4g} FLOP/byte\n", "FLOPs / bytes", r.intensity);
  fmt::print("  ridge       {:<22} = {:.4g} FLOP/byte\n", "peak / bandwidth", r.ridge);
  fmt::print("  bound       {}\n", r.bound());
  fmt::print("  ideal time  {:<22} = {}\n", "max(FLOPs/peak, B/bw)", si(r.floor_s, "s"));
}

void gemm(const Flags& f) {
  const glass::DType dtype = glass::samples::parse_dtype_flag(f.dtype);
  const std::string b = std::to_string(glass::dtype_size(dtype));
  print_roofline(fmt::format("gemm M={} K={} N={}", f.m, f.k, f.n), "2 M K N",
                 b + " (MK + KN + MN)", glass::gemm_cost(f.m, f.k, f.n, dtype), dtype, f);
}

void elementwise(const Flags& f) {
  const glass::DType dtype = glass::samples::parse_dtype_flag(f.dtype);
  print_roofline(fmt::format("elementwise n={} ({} in, {} out)", f.n, f.inputs, f.outputs),
                 fmt::format("n x {}", f.flops_per_element),
                 fmt::format("{} n ({} + {})", glass::dtype_size(dtype), f.inputs, f.outputs),
                 glass::elementwise_cost(f.n, f.inputs, f.outputs, f.flops_per_element, dtype),
                 dtype, f);
}

void attention(const Flags& f) {
  const glass::DType dtype = glass::samples::parse_dtype_flag(f.dtype);
  const glass::AttentionCost c =
      glass::attention_cost(f.batch, f.heads, f.seq_len, f.head_dim, dtype);
  const std::string shape =
      fmt::format("B={} H={} T={} D={}", f.batch, f.heads, f.seq_len, f.head_dim);
  const std::string b = std::to_string(glass::dtype_size(dtype));
  print_roofline("attention forward, naive, " + shape, "B H T(T+1)/2 (4D+5)",
                 b + " B H (4TD + 4T^2)", c.naive, dtype, f);
  fmt::print("  memory      {:<22} = {}\n", b + " B H T^2 (S, then P)",
             si(c.naive_memory_bytes, "B"));
  print_roofline("attention forward, flash (32-row query tiles), " + shape, "B H T(T+1)/2 (4D+5)",
                 b + " B H D (2T + 2R) + 4 B H T", c.flash, dtype, f);
  fmt::print("  memory      {:<22} = {}\n", "4 B H T (lse)", si(c.flash_memory_bytes, "B"));
  fmt::print("  (R = keys the query tiles read: sum over tiles of min(T, tile end))\n");
}

// The parameter count's formula for the model's architecture.
std::string parameter_formula(const glass::GPTConfig& c) {
  if (c.arch == glass::Arch::gpt2) return "N = V_pad C + T_max C + L (12 C^2 + 13 C) + 2 C";
  return fmt::format(
      "N = V C{} + L (2 C + (H + 2 Hkv) D C + H D C + 3 F C) + C  (H={} Hkv={} "
      "D={} F={})",
      c.tie_embeddings ? "" : " (embed_tokens) + V C (lm_head)", c.n_head, c.kv_heads(),
      c.head_dim(), c.ffn());
}

void print_memory_rows(const glass::train::GptMemoryBudget& m) {
  constexpr double GiB = double(1 << 30);
  const std::pair<const char*, double> rows[] = {{"parameters", m.parameters_bytes},
                                                 {"gradients", m.gradients_bytes},
                                                 {"fp32 master weights", m.master_bytes},
                                                 {"AdamW moments (fp32)", m.adam_bytes},
                                                 {"saved activations", m.activations_bytes},
                                                 {"temporaries", m.temporaries_bytes},
                                                 {"recomputed (one layer)", m.recompute_bytes},
                                                 {"gradient buckets", m.gradient_buckets_bytes},
                                                 {"GEMM workspace", m.workspace_bytes},
                                                 {"size classes", m.size_class_bytes},
                                                 {"total", m.total_bytes()}};
  for (const auto& [name, bytes] : rows)
    fmt::print("  {:<22} {:>14.0f} B {:>10.3f} GiB\n", name, bytes, bytes / GiB);
}

// The mixture-of-experts variant beside the dense model: active vs resident parameters, FLOPs per
// token from the active ones, weight memory (weights, gradients, masters, moments) from the
// resident ones.
void print_experts(const Flags& f, glass::DType dtype, const glass::train::GptStepFlops& dense) {
  const auto e = glass::train::expert_parameters(f.gpt, f.n_expert, f.top_k);
  const double L = static_cast<double>(f.gpt.n_layer);
  // A token's extra FLOPs over the dense model: (k - 1) more experts and the router, 6 per weight.
  const double extra =
      6 * L * static_cast<double>((e.top_k - 1) * e.mlp + e.n_expert * f.gpt.n_embd);
  const double per_token = dense.per_token() + extra;
  const double b = static_cast<double>(glass::dtype_size(dtype));
  const auto weight_bytes = [&](double n) { return n * (2 * b + (b < 4 ? 4 : 0) + 8); };
  constexpr double GiB = double(1 << 30);
  fmt::print(
      "mixture of experts on paper: E={} experts per layer, top-k={}, one expert = the "
      "model's MLP ({} parameters), a router [E, C] per layer\n",
      e.n_expert, e.top_k, e.mlp);
  fmt::print("  resident = N + L ((E - 1) mlp + E C); active = N + L ((k - 1) mlp + E C)\n");
  fmt::print("  {:<34} {:>16} {:>16} {:>16}\n", "", "dense", "active (MoE)", "resident (MoE)");
  const int64_t N = glass::gpt_num_parameters(f.gpt, true);
  fmt::print("  {:<34} {:>16} {:>16} {:>16}\n", "parameters", N, e.active, e.resident);
  fmt::print("  {:<34} {:>16} {:>16} {:>16}\n", "FLOPs per token (6 N' + 12 L T C)",
             si(dense.per_token(), "FLOP"), si(per_token, "FLOP"), "-");
  fmt::print("  {:<34} {:>16} {:>16} {:>16}\n", "weights+grads+masters+moments",
             fmt::format("{:.3f} GiB", weight_bytes(static_cast<double>(N)) / GiB), "-",
             fmt::format("{:.3f} GiB", weight_bytes(static_cast<double>(e.resident)) / GiB));
  fmt::print(
      "  (a token pays for {:.2f}x the dense FLOPs while memory holds {:.2f}x the dense "
      "weights)\n",
      per_token / dense.per_token(), static_cast<double>(e.resident) / static_cast<double>(N));
}

void model(const Flags& f) {
  const glass::DType dtype = glass::samples::parse_dtype_flag(f.dtype);
  // The experts' flags are checked before anything is printed: an error is one line.
  const bool experts = f.n_expert > 1 || f.top_k > 1;
  if (experts) glass::train::expert_parameters(f.gpt, f.n_expert, f.top_k);
  const glass::Recompute recompute = glass::parse_recompute(f.recompute);
  // As train_gpt runs the step: flash attention on every device; the fused classifier on the
  // GPUs (emu, cuda), cross-entropy beside the logits on cpu; cpu's allocator's size classes.
  const glass::train::GptBudgetOptions options{
      .flash_attention = true,
      .fused_classifier = f.device != "cpu",
      .gemm_workspace = f.device != "cpu",
      .recompute = recompute,
      .world = f.world,
      .zero = f.zero,
      .size_classes =
          f.device == "cpu" ? glass::SizeClasses::of_device(glass::kCPU) : glass::SizeClasses{}};
  const auto m = glass::train::gpt_memory_budget(f.gpt, f.batch, f.seq_len, dtype, options);
  const auto fl = glass::train::gpt_step_flops(f.gpt, f.batch, f.seq_len);
  const bool llama = f.gpt.arch == glass::Arch::llama;
  fmt::print("{} {} | batch {} x seq_len {} | {}\n", glass::arch_name(f.gpt.arch), f.gpt.str(),
             f.batch, f.seq_len, f.dtype);
  fmt::print("memory at the step's peak (N = {} parameters{}; docs/memory.md):\n", m.parameters,
             f.gpt.padded_vocab_size ? ", wte padded to the vocabulary's multiple of 64" : "");
  const std::string b = std::to_string(glass::dtype_size(dtype));
  fmt::print("  {}; b = {} bytes per element\n", parameter_formula(f.gpt), b);
  fmt::print("  parameters b N, master weights 4 N (when b < 4), moments 8 N: all step\n");
  if (llama) {
    fmt::print(
        "  activations b (L ({:.0f} BT + 2 BT) + 2 BTC + BT + BT V_pad) + 4 L B H T "
        "(an estimate: llm.c's list)\n",
        glass::train::layer_activation_width(f.gpt));
    fmt::print(
        "  (a llama layer keeps 7 C + (H + 2 Hkv) D + 3 F per token: GQA's K/V are "
        "{} of multi-head attention's)\n",
        fmt::format("{}/{}", f.gpt.kv_heads(), f.gpt.n_head));
  } else {
    fmt::print(
        "  activations b (L 16 BTC + 2 BTC + BT V_pad) + 4 (L (4 + H) BT + 4 BT) (flash "
        "attention: LSE, no T x T; the batch's tokens and targets in i32)\n");
    fmt::print("  the peak is at {}; size classes: the allocator's rounding of every tensor\n",
               m.peak_at);
  }
  if (recompute != glass::Recompute::none)
    fmt::print("  --recompute {}: {}\n", f.recompute,
               recompute == glass::Recompute::block
                   ? "each layer keeps its input, 2 BTC, instead of the above; backward rebuilds "
                     "one layer at a time"
                   : fmt::format("each layer keeps {:.0f} BT fewer; backward rebuilds {:.0f} BT "
                                 "of one layer at a time",
                                 glass::train::recompute_widths(f.gpt, recompute).dropped,
                                 glass::train::recompute_widths(f.gpt, recompute).rebuilt));
  if (f.world > 1)
    fmt::print("  per rank of {} (batch {} each): gradient buckets 4 N (data parallelism){}\n",
               f.world, f.batch / f.world,
               f.zero == 1
                   ? fmt::format(", moments 8 ceil(N / {0}){1} (ZeRO-1)", f.world,
                                 dtype == glass::DType::f32
                                     ? ""
                                     : fmt::format(" and f32 masters 4 ceil(N / {})", f.world))
                   : std::string());
  print_memory_rows(m);
  fmt::print("training FLOPs per step (tokens T = {}):\n", fl.tokens);
  const char* counted =
      llama ? (f.gpt.tie_embeddings ? "6 N' T (N' = all)" : "6 N' T (N' = w/o embed)")
            : "6 N' T (N' = without wpe)";
  fmt::print("  {:<27} {}\n", counted, si(fl.six_n * fl.tokens, "FLOP"));
  fmt::print("  attention 12 L T_seq C T    {}\n", si(fl.attention * fl.tokens, "FLOP"));
  fmt::print("  total                       {}\n", si(fl.total(), "FLOP"));
  if (recompute != glass::Recompute::none) {
    const double again =
        glass::train::recompute_flops_per_token(f.gpt, f.seq_len, recompute, f.device != "cpu") *
        fl.tokens;
    fmt::print("  recomputed forward          {} (hardware FLOPs {}: HFU counts them, MFU not)\n",
               si(again, "FLOP"), si(fl.total() + again, "FLOP"));
  }
  const glass::DevicePeaks peaks = peaks_of(f.device);
  fmt::print("  at 100% MFU on {}: {} per step ({})\n", peaks.name,
             si(fl.total() / peaks.flops(dtype), "s"), peaks.source);
  if (experts) print_experts(f, dtype, fl);
}

void add_common(CLI::App* cmd, Flags& f) {
  cmd->add_option("--device", f.device, "h200 | h100 | a100 | cpu (this machine)");
  cmd->add_option("--dtype", f.dtype, "bf16 | f32 (default: f32 on cpu, else bf16)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"roofline: FLOPs, bytes, bounds and memory budgets of the course's cost model"};
  glass::samples::describe_program(app, "docs/profiling.md");
  app.require_subcommand(1);
  // --help shows each default (subcommands too); required sizes have none to show.
  Flags f;
  CLI::App* g = app.add_subcommand("gemm", "C[M,N] = A[M,K] B[K,N]");
  g->add_option("--m", f.m, "rows of A and C")->required()->default_str("");
  g->add_option("--k", f.k, "the reduction size")->required()->default_str("");
  g->add_option("--n", f.n, "columns of B and C")->required()->default_str("");
  add_common(g, f);
  CLI::App* e = app.add_subcommand("elementwise", "an op over n elements of each tensor");
  e->add_option("--n", f.n, "elements")->required()->default_str("");
  e->add_option("--inputs", f.inputs, "tensors read");
  e->add_option("--outputs", f.outputs, "tensors written");
  e->add_option("--flops-per-element", f.flops_per_element, "FLOPs per output element");
  add_common(e, f);
  CLI::App* a = app.add_subcommand("attention", "causal attention forward: naive vs flash");
  a->add_option("--batch", f.batch, "sequences B");
  a->add_option("--heads", f.heads, "heads H");
  a->add_option("--seq-len", f.seq_len, "sequence length T");
  a->add_option("--head-dim", f.head_dim, "head dim D");
  add_common(a, f);
  CLI::App* t = app.add_subcommand(
      "model", "memory budget and FLOPs of a training step of a GPT-2 or llama model");
  t->alias("gpt");
  t->add_option("--arch", f.arch, "gpt2 | llama")->check(CLI::IsMember({"gpt2", "llama"}));
  t->add_option("--n-layer", f.gpt.n_layer, "transformer blocks L");
  t->add_option("--n-head", f.gpt.n_head, "attention heads H");
  t->add_option("--n-kv-head", f.gpt.n_kv_head, "llama: key/value heads Hkv (0 = H)");
  t->add_option("--n-embd", f.gpt.n_embd, "width C");
  t->add_option("--ffn-hidden", f.gpt.ffn_hidden, "llama: SwiGLU hidden size F (0 = 8C/3 rounded)");
  t->add_option("--tie-embeddings", f.tie_embeddings, "llama: on | off")
      ->check(CLI::IsMember({"on", "off"}));
  t->add_option("--vocab-size", f.gpt.vocab_size, "vocabulary V");
  t->add_option("--block-size", f.gpt.block_size, "positions in wpe (default: --seq-len)");
  t->add_option("--seq-len", f.seq_len, "sequence length T");
  t->add_option("--batch", f.batch, "sequences per step B");
  t->add_option("--n-expert", f.n_expert,
                "a mixture of experts on paper: E experts per layer (each the model's MLP); "
                "prints active vs resident parameters");
  t->add_option("--top-k", f.top_k, "experts each token runs through (with --n-expert)");
  t->add_option("--recompute", f.recompute,
                "train_gpt --recompute: none | gelu | mlp | block (saved activations shrink, one "
                "layer's recomputed part is added, HFU's FLOPs grow)");
  t->add_option("--world", f.world,
                "data-parallel ranks: the budget is one rank's, --batch the global batch");
  t->add_option(
       "--zero", f.zero,
       "ZeRO stage: 0 | 1 (AdamW's moments, and under bf16 the f32 masters, sharded over --world)")
      ->check(CLI::IsMember({0, 1}));
  t->add_option("--model", f.model,
                "a preset of train_gpt --model: gpt2 (GPT-2 124M as train_gpt trains it: padded "
                "vocabulary, flash attention, fused classifier) | llama-tiny | stories15m (with "
                "--vocab-size, default 32000 as llama2.c's tokenizer)")
      ->check(CLI::IsMember({"gpt2", "llama-tiny", "stories15m"}));
  add_common(t, f);
  glass::samples::RooflineStepFlags step;
  step.config = glass::GPTConfig::gpt2();
  step.config.padded_vocab_size = 0;  // --model gpt2 pads; the shape flags alone do not
  CLI::App* s = app.add_subcommand(
      "step", "one training step planned on the meta device: every launch against a GPU's roofs");
  s->add_option("--model", step.model,
                "a preset of train_gpt --model: gpt2 (GPT-2 124M as train_gpt trains it) | "
                "llama-tiny | stories15m (vocabulary: --vocab-size, default 32000)")
      ->check(CLI::IsMember({"gpt2", "llama-tiny", "stories15m"}));
  std::string step_arch = "gpt2";
  s->add_option("--arch", step_arch, "gpt2 | llama")->check(CLI::IsMember({"gpt2", "llama"}));
  s->add_option("--n-kv-head", step.config.n_kv_head, "llama: key/value heads Hkv (0 = H)");
  s->add_option("--ffn-hidden", step.config.ffn_hidden, "llama: SwiGLU hidden size F");
  s->add_option("--n-layer", step.config.n_layer, "transformer blocks L");
  s->add_option("--n-head", step.config.n_head, "attention heads H");
  s->add_option("--n-embd", step.config.n_embd, "width C");
  s->add_option("--vocab-size", step.config.vocab_size, "vocabulary V");
  s->add_option("--block-size", step.config.block_size, "positions in wpe (default: --seq-len)");
  s->add_option("--seq-len", step.seq_len, "sequence length T");
  s->add_option("--batch", step.batch, "sequences per step B");
  s->add_option("--dtype", step.dtype, "bf16 (mixed precision) | f32")
      ->check(CLI::IsMember({"bf16", "f32"}));
  s->add_option("--gpu", step.gpu, "h200 | h100 | a100: whose datasheet roofs");
  s->add_option("--attention", step.attention,
                "the model's attention kernel, as train_gpt --attention (auto: what train_gpt "
                "picks on cuda)");
  s->add_flag("--tf32", step.tf32, "f32 GEMMs on TF32 tensor cores (train_gpt --tf32)");
  s->add_flag("--json", step.json, "JSON instead of tables");
  s->add_flag("--launches", step.every_launch, "every launch, not only the top ones");
  s->add_option("--top", step.top, "launches listed by bound time");
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "roofline"))
    return *status;
  try {
    resolve_dtype(f);
    if (g->parsed()) gemm(f);
    if (e->parsed()) elementwise(f);
    if (a->parsed()) attention(f);
    if (t->parsed()) {
      if (!f.model.empty()) {
        for (const char* flag :
             {"--n-layer", "--n-head", "--n-embd", "--n-kv-head", "--ffn-hidden", "--arch"})
          GLASS_CHECK(t->count(flag) == 0, "--model {} fixes the model's shape; drop {}", f.model,
                      flag);
        const int64_t vocab = f.gpt.vocab_size;
        f.gpt = glass::GPTConfig::preset(f.model);
        if (f.gpt.vocab_size == 0) f.gpt.vocab_size = t->count("--vocab-size") ? vocab : 32000;
        if (t->count("--seq-len") == 0) f.seq_len = f.gpt.block_size;
      } else {
        f.gpt.arch = glass::parse_arch(f.arch);
        f.gpt.tie_embeddings = f.tie_embeddings == "on";
        if (t->count("--block-size") == 0) f.gpt.block_size = f.seq_len;
      }
      model(f);
    }
    if (s->parsed()) {
      if (!step.model.empty()) {
        for (const char* flag :
             {"--n-layer", "--n-head", "--n-embd", "--arch", "--n-kv-head", "--ffn-hidden"})
          GLASS_CHECK(s->count(flag) == 0, "--model {} fixes the model's shape; drop {}",
                      step.model, flag);
        const int64_t vocab = step.config.vocab_size;
        step.config = glass::GPTConfig::preset(step.model);
        if (step.config.vocab_size == 0)
          step.config.vocab_size = s->count("--vocab-size") ? vocab : 32000;
        if (s->count("--seq-len") == 0) step.seq_len = step.config.block_size;
      } else {
        step.config.arch = glass::parse_arch(step_arch);
      }
      if (s->count("--block-size") == 0 && step.model.empty())
        step.config.block_size = step.seq_len;
      glass::samples::roofline_step(step);
    }
  } catch (const std::exception& ex) {
    fmt::print(stderr, "roofline: error: {}\n", ex.what());
    return 1;
  }
  return 0;
}
