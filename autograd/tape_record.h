// A tape, recorded as plain data: what the step explorer (train/report.h) draws as the tape graph
// and what its memory ledger attributes saved activations to. Taken from the loss after forward,
// before backward frees what the nodes saved; the ids are the nodes' own, the same as the launches'
// node_id in a trace of the same step and as tape_string (train_gpt --print-tape) prints.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace glass {

struct TapeInput {
  int64_t node = -1;  // the node that produced the input, or -1
  std::string leaf;   // else the leaf's name ("transformer.h.0.ln_1.weight"; "leaf" unnamed)
  int64_t bytes = 0;  // the input's size: a leaf's gradient is this big
  bool grad = false;  // a gradient flows to it
};

struct TapeSaved {
  const void* storage = nullptr;  // identity of the storage (shared storages are counted once)
  int64_t bytes = 0;              // the whole storage's bytes
  std::string tensor;             // "f32[2, 8, 16]"
};

struct TapeNode {
  int64_t id = 0;
  std::string op, out_shape;  // "layernorm", "[2, 8, 16]"
  std::string module;         // "transformer.h.0.ln_1"; "" outside any module
  std::string site;           // "nn/layers.cpp:118": the line that called the op
  std::vector<TapeInput> inputs;
  std::vector<TapeSaved> saved;
  // |d loss / d output|_2 after backward, where a pass measured it (autograd/grad_norms.h);
  // empty: not measured, or no gradient reached the node.
  std::optional<double> grad_norm;
};

// The nodes reachable from `root`, in tape order (ascending id).
std::vector<TapeNode> record_tape(const Tensor& root);

}  // namespace glass
