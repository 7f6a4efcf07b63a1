// train_gpt: trains a GPT on a text file (character vocabulary) or an llm.c token shard.
//
//   build/samples/train_gpt --data data/tinyshakespeare.txt --steps 600
//
// Prints a progress line per step, a summary, and a sample of generated text at the end. Every
// error is one line on stderr ("train_gpt: error: ...") and a non-zero exit status.
#include <CLI/CLI.hpp>

#include "comm/communicator.h"
#include "engine/error.h"
#include "train/trainer.h"

namespace {

void add_flags(CLI::App& app, glass::train::TrainOptions& o) {
  app.add_option(
      "--device", o.device,
      "cpu | emu (CUDA kernels on the CPU) | cuda[:N] | auto (cuda if a GPU is there, else cpu)");
  app.add_option("--dtype", o.dtype,
                 "f32 | bf16 (mixed precision: bf16 copies of f32 master weights, f32 sums; "
                 "emu, cuda). Default: bf16 on cuda, f32 elsewhere")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--data", o.data, "text file or llm.c .bin token shard");
  app.add_option("--vocab-size", o.vocab_size, "vocabulary size (token shards)");
  app.add_option("--model", o.model,
                 "a preset shape: gpt2 (124M: L=12, H=12, C=768, T=1024, V=50257 padded to 50304)")
      ->check(CLI::IsMember({"gpt2"}));
  app.add_option("--n-layer", o.n_layer, "transformer blocks");
  app.add_option("--n-head", o.n_head, "attention heads");
  app.add_option("--n-embd", o.n_embd, "embedding width C");
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
               "replay it (one process, --grad-accum 1, --dropout 0)");
  app.add_option("--init", o.init, "start from these weights (.safetensors; shape from the file)");
  app.add_option("--save", o.save, "write the final weights here (.safetensors)");
  app.add_option("--checkpoint-dir", o.checkpoint_dir, "write checkpoints into this directory");
  app.add_option("--checkpoint-every", o.checkpoint_every, "steps between checkpoints");
  app.add_option("--resume", o.resume, "resume from a checkpoint directory (or file)");
  app.add_option("--metrics", o.metrics, "append one JSON object per step to this file");
  app.add_option("--eval-every", o.eval_every, "steps between validation losses (0 = at end)");
  app.add_option("--eval-batches", o.eval_batches, "batches per validation loss");
  app.add_option("--sample", o.sample, "characters to generate after training");
  app.add_option("--threads", o.threads, "cpu threads (0 = all cores)");
  app.add_option("--attention", o.attention,
                 "attention kernel: naive | flash | cudnn (default: flash on emu and cuda, "
                 "naive on cpu)")
      ->check(CLI::IsMember({"auto", "naive", "flash", "cudnn"}));
  app.add_flag("--print-tape", o.print_tape, "print the autograd tape of the first step");
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
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"train_gpt: train a GPT with glass"};
  glass::train::TrainOptions options;
  add_flags(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "train_gpt: error: {} (see --help)\n", e.what());
    return 2;
  }
  try {
    if (!options.model.empty()) {
      // A preset fixes the model's shape: a flag that would change it is a contradiction.
      for (const char* flag : {"--n-layer", "--n-head", "--n-embd"})
        GLASS_CHECK(app.count(flag) == 0, "--model {} fixes the model's shape; drop {}",
                    options.model, flag);
      if (app.count("--seq-len") == 0) options.seq_len = glass::GPTConfig::gpt2().block_size;
    }
    glass::train::Trainer trainer(options);
    trainer.run();
  } catch (const std::exception& e) {
    fmt::print(stderr, "train_gpt: error: {}\n", e.what());
    std::fflush(stderr);
    glass::comm::abort_job(1);  // under mpirun: end the other ranks too
    return 1;
  }
  return 0;
}
