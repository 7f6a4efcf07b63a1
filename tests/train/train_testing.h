// A tiny training configuration shared by the train/ tests: small enough to run in milliseconds.
#pragma once

#include <filesystem>
#include <string>

#include "train/trainer.h"

namespace glass::testing {

inline std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("glass_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline train::TrainOptions tiny_options() {
  train::TrainOptions o;
  o.data = std::string(GLASS_SOURCE_DIR) + "/data/tinyshakespeare.txt";
  o.n_layer = 2;
  o.n_head = 2;
  o.n_embd = 16;
  o.seq_len = 12;
  o.batch = 3;
  o.steps = 6;
  o.warmup = 2;
  o.dropout = 0.1;  // dropout on: resume must restore the RNG too
  o.sample = 0;
  o.eval_every = 0;
  o.eval_batches = 1;
  o.threads = 2;
  o.quiet = true;
  return o;
}

}  // namespace glass::testing
