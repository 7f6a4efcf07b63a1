// A tiny training configuration shared by the train/ tests: small enough to run in milliseconds.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "kernels/backend.h"
#include "tests/testing.h"
#include "train/trainer.h"

namespace glass::testing {

inline std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("glass_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An llm.c token shard: int32[256] header (magic, version, count, 0...), then uint16 tokens.
inline std::string shard_bytes(int32_t magic, int32_t version, int32_t count,
                               const std::vector<uint16_t>& tokens) {
  std::string b(1024, '\0');
  int32_t header[3] = {magic, version, count};
  std::memcpy(b.data(), header, sizeof(header));
  b.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return b;
}

// Every parameter's values, in the model's order: what bit-exact comparisons of runs compare.
inline std::vector<std::vector<float>> weights_of(const train::Trainer& t) {
  std::vector<std::vector<float>> w;
  for (const auto& [name, p] : t.model().named_parameters()) w.push_back(to_vector<float>(p));
  return w;
}

// A NaN put into one gradient element after backward of step `step` (1-based), through the
// trainer's step hooks (train/step.h): before each step the value to add (NaN at `step`, else 0)
// is written to device memory, and after backward a kernel adds it to the middle element of the
// first parameter's gradient. A kernel reading device memory, so that a captured step
// (--cuda-graph, whose after_backward runs once, at the capture) adds it at that replay too.
inline void inject_nan_at_step(train::Trainer& t, int64_t step) {
  auto value = std::make_shared<Tensor>();  // f32 [1], shared by the two hooks
  train::StepHooks& hooks = t.step_hooks();
  hooks.before_step = [&t, value, step](int64_t s) {
    const float v = s == step ? NAN : 0.0f;
    if (!value->defined())
      *value = Tensor::empty({1}, DType::f32, t.model().parameters().front().device());
    value->copy_from_host(&v);
  };
  hooks.after_backward = [&t, value](int64_t) {
    NoGradGuard no_grad;
    const Tensor g = t.model().parameters().front().grad();
    GLASS_CHECK(g.dtype() == DType::f32 && g.is_contiguous(), "test NaN injection: gradient {}",
                g.describe());
    const Tensor one = slice(view(g, {-1}), 0, g.numel() / 2, g.numel() / 2 + 1);
    kernels::backend(g).binary(kernels::BinaryOp::add, one, *value, one);
  };
}

inline train::TrainOptions tiny_options() {
  train::TrainOptions o;
  o.data = testing::kTinyShakespeare;
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
