// train_gpt's command line: one flag per TrainOptions field.
#include "samples/train_gpt_flags.h"

namespace glass::samples {

void add_train_gpt_flags(CLI::App& app, train::TrainOptions& o) {
  app.add_option(
      "--device", o.device,
      "cpu | emu (CUDA kernels on the CPU) | cuda[:N] | auto (cuda if a GPU is there, else cpu)");
  app.add_option("--dtype", o.dtype,
                 "f32 | bf16 (mixed precision: bf16 copies of f32 master weights, f32 sums; "
                 "every device, cpu's products on AVX512-BF16 where the CPU has it). Default: "
                 "bf16 on cuda, f32 elsewhere")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--data", o.data,
                 "text file, llm.c .bin token shard, or a directory of shards (prepare_data)");
  app.add_option("--vocab-size", o.vocab_size, "vocabulary size (token shards)");
  app.add_option("--model", o.model,
                 "a preset shape: gpt2 (124M: L=12, H=12, C=768, T=1024, V=50257 padded to "
                 "50304) | llama-tiny (L=4, H=8, Hkv=4, C=256, F=704, T=128) | stories15m "
                 "(llama2.c's 15M: L=6, H=6, C=288, F=768, T=256); llamas take the data's "
                 "vocabulary")
      ->check(CLI::IsMember({"gpt2", "llama-tiny", "stories15m"}));
  app.add_option("--arch", o.arch,
                 "gpt2 (learned positions, LayerNorm, GELU MLP, biases) | llama (RoPE, RMSNorm, "
                 "SwiGLU, grouped-query attention, no biases)")
      ->check(CLI::IsMember({"gpt2", "llama"}));
  app.add_option("--n-layer", o.n_layer, "transformer blocks");
  app.add_option("--n-head", o.n_head, "attention heads");
  app.add_option("--n-embd", o.n_embd, "embedding width C");
  app.add_option("--n-kv-head", o.n_kv_head,
                 "llama: key/value heads of grouped-query attention, dividing --n-head (0 = "
                 "--n-head)");
  app.add_option("--ffn-hidden", o.ffn_hidden,
                 "llama: SwiGLU hidden size F (0 = 8C/3 rounded up to a multiple of 64, or of 256 "
                 "from 2048)");
  app.add_option("--rope-theta", o.rope_theta, "llama: RoPE base");
  app.add_option("--norm-eps", o.norm_eps, "llama: RMSNorm epsilon");
  app.add_option("--tie-embeddings", o.tie_embeddings,
                 "llama: on (the LM head is the embedding matrix) | off (a separate lm_head)")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--seq-len", o.seq_len, "sequence length T (the model's block size)");
  app.add_option("--batch", o.batch, "sequences per step B");
  app.add_option("--steps", o.steps, "optimizer steps in all (a resumed run continues to this)");
  app.add_option("--lr", o.lr, "peak learning rate");
  app.add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay (>= 2-D params)");
  app.add_option("--beta1", o.beta1, "AdamW beta1");
  app.add_option("--beta2", o.beta2, "AdamW beta2");
  app.add_option("--eps", o.eps, "AdamW epsilon");
  app.add_option("--warmup", o.warmup, "linear warmup steps");
  app.add_option("--lr-schedule", o.lr_schedule, "constant | cosine")
      ->check(CLI::IsMember({"constant", "cosine"}));
  app.add_option("--grad-clip", o.grad_clip, "global gradient-norm clip (0 = off)");
  app.add_option("--dropout", o.dropout, "dropout probability");
  app.add_option("--seed", o.seed, "seed for init, dropout, shuffling and sampling");
  app.add_flag("--shuffle", o.shuffle, "random batch windows instead of sequential ones");
  app.add_flag("--tf32", o.tf32, "f32 GEMMs on TF32 tensor cores (cuda, emu; default off)");
  app.add_flag("--cuda-graph", o.cuda_graph,
               "cuda: capture the training step into a CUDA graph after one eager step and "
               "replay it (all --grad-accum micro-steps in one graph; with data parallelism "
               "each rank's graph holds its all-reduces; --dropout reads its random offsets "
               "from device memory)");
  app.add_option("--init", o.init,
                 "start from these weights, shape from the file: glass/nanoGPT or Hugging Face "
                 "GPT-2 .safetensors, or an llm.c checkpoint (.bin)");
  app.add_option("--save", o.save, "write the final weights here");
  app.add_option("--save-format", o.save_format,
                 "layout of --save: glass (safetensors, glass's names) | hf (Hugging Face "
                 "safetensors; a llama's with config.json) | llmc (llm.c checkpoint, f32; gpt2) | "
                 "llama2c (llama2.c checkpoint and tokenizer.bin; llama)")
      ->check(CLI::IsMember({"glass", "hf", "llmc", "llama2c"}));
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "write checkpoints into this directory");
  app.add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints");
  app.add_option("--keep-last", o.keep_last,
                 "checkpoints kept in --checkpoint-dir, the newest (0 = all); older ones are "
                 "removed only after a newer one is complete");
  app.add_option("--resume", o.resume, "resume from a checkpoint directory (or file)");
  app.add_option("--on-nonfinite", o.on_nonfinite,
                 "a step with a NaN/Inf loss or gradient: stop (name the step and the first node "
                 "that produced it) | skip (no update; marked \"skipped\" in the metrics)")
      ->check(CLI::IsMember({"stop", "skip"}));
  app.add_option("--metrics", o.metrics, "append one JSON object per step to this file");
  app.add_option("--eval-every", o.eval_every, "steps between validation losses (0 = at end)");
  app.add_option("--eval-batches", o.eval_batches, "batches per validation loss");
  app.add_option("--sample", o.sample,
                 "tokens to generate after training (characters of text data), with a KV cache");
  app.add_option("--prompt", o.prompt, "text the sample continues (default: a new line/document)");
  app.add_option("--temperature", o.temperature, "sampling temperature (0 = most likely token)");
  app.add_option("--top-k", o.top_k, "sample among the k most likely tokens (0 = all)");
  app.add_option("--threads", o.threads, "cpu threads (0 = all cores)");
  app.add_option("--attention", o.attention,
                 "attention kernel: naive | flash (the device's best hand-written one) | "
                 "flash-simt (CUDA cores; emu, cuda) | flash-mma (Tensor Cores, bf16, head dim "
                 "32/64/128; emu, cuda) | cudnn (cuda only) | auto (cpu: flash; emu and cuda: "
                 "flash-mma where it applies, else flash-simt, naive where neither suits the "
                 "head dim)")
      ->check(CLI::IsMember({"auto", "naive", "flash", "flash-simt", "flash-mma", "cudnn"}));
  app.add_flag_function(
      "--no-preflight", [&o](int64_t) { o.preflight = false; },
      "skip the pre-flight: the step planned on the meta device before step 1 and checked "
      "against the device's free memory (docs/memory.md)");
  app.add_option("--recompute", o.recompute,
                 "activation recomputation: none | gelu (the MLP's GELU output; llama: SwiGLU's) "
                 "| mlp (the whole MLP) | block (each transformer block): less memory, more "
                 "FLOPs (docs/memory.md)");
  app.add_flag("--print-tape", o.print_tape,
               "print the autograd tape of the recorded step (the profiled one with --trace or "
               "--report, else the first), with the node ids of the trace and report");
  app.add_flag("--quiet", o.quiet, "no per-step lines (validation and summary only)");
  app.add_option("--trace", o.trace, "write a Chrome/Perfetto trace of the profiled steps (.json)");
  app.add_option("--report", o.report, "write an HTML report: loss, kernels, roofline, memory");
  app.add_option("--profile-steps", o.profile_steps, "steps a:b to profile (default: the second)");
  // Data parallelism: `mpirun -np N train_gpt ...` (docs/distributed.md).
  app.add_option("--comm-bucket-mb", o.comm_bucket_mb, "gradient all-reduce bucket size (MiB)");
  app.add_option("--grad-accum", o.grad_accum, "micro-steps of --batch rows per optimizer step");
  app.add_option("--comm", o.comm_backend, "auto (from the device) | local | mpi | nccl")
      ->check(CLI::IsMember({"auto", "local", "mpi", "nccl"}));
  app.add_option("--comm-timeout", o.comm_timeout_s,
                 "seconds to wait for a collective (dead rank)");
  app.add_option("--zero", o.zero,
                 "ZeRO stage: 0 | 1 (each rank keeps 1/N of AdamW's state: the moments, and under "
                 "bf16 the f32 masters)")
      ->check(CLI::IsMember({0, 1}));
}

}  // namespace glass::samples
