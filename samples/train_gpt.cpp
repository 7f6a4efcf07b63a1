// train_gpt: trains a GPT on a text file (character vocabulary) or an llm.c token shard.
//
//   build/samples/train_gpt --data data/tinyshakespeare.txt --steps 600
//
// Prints a progress line per step, a summary, and a sample of generated text at the end. Every
// error is one line on stderr ("train_gpt: error: ...") and a non-zero exit status. SIGINT or
// SIGTERM stop after the current step (with a checkpoint when --checkpoint-dir is set) and exit
// with 130 or 143; a second one exits at once (docs/reliability.md).
#include <csignal>

#include "comm/communicator.h"
#include "engine/error.h"
#include "samples/command_line.h"
#include "samples/train_gpt_flags.h"
#include "train/shutdown.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  CLI::App app{"train_gpt: train a GPT with glass"};
  glass::samples::describe_program(app, "README.md and docs/tour.md");
  glass::train::TrainOptions options;
  glass::samples::add_train_gpt_flags(app, options);
  if (const auto status = glass::samples::parse_command_line(app, argc, argv, "train_gpt"))
    return *status;
  try {
    // 0 steps writes the initial weights (--save) and exits; anything else of nothing is a mistake.
    GLASS_CHECK(options.steps >= 1 || (options.steps == 0 && !options.save.empty()),
                "--steps {} must be at least 1 (or 0 with --save FILE, to write the initial "
                "weights)",
                options.steps);
    if (options.steps == 0) options.sample = 0;  // nothing trained: no sample of it either
    // Which model flags the user set: the others are defaults, and yield to --init's file or
    // --resume's checkpoint instead of contradicting it.
    for (const char* flag :
         {"--n-layer", "--n-head", "--n-embd", "--seq-len", "--vocab-size", "--dropout", "--arch",
          "--n-kv-head", "--ffn-hidden", "--rope-theta", "--norm-eps", "--tie-embeddings"})
      if (app.count(flag) > 0) options.shape_flags_given.emplace_back(flag);
    if (!options.model.empty()) {
      // A preset fixes the model's shape: a flag that would change it is a contradiction.
      for (const char* flag : {"--n-layer", "--n-head", "--n-embd", "--n-kv-head", "--ffn-hidden"})
        GLASS_CHECK(app.count(flag) == 0, "--model {} fixes the model's shape; drop {}",
                    options.model, flag);
      if (app.count("--seq-len") == 0)
        options.seq_len = glass::GPTConfig::preset(options.model).block_size;
    }
    // A full disk or a file-size limit (RLIMIT_FSIZE) must end in an error naming the file, not
    // in SIGXFSZ's silent kill: ignored, the write fails with EFBIG instead.
    std::signal(SIGXFSZ, SIG_IGN);
    glass::train::install_stop_handlers();
    glass::train::Trainer trainer(options);
    trainer.run();
    if (const int sig = trainer.stopped_by_signal()) return 128 + sig;
  } catch (const std::exception& e) {
    fmt::print(stderr, "train_gpt: error: {}\n", e.what());
    std::fflush(stderr);
    glass::comm::abort_job(1);  // under mpirun: end the other ranks too
    return 1;
  }
  return 0;
}
