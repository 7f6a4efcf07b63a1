// Node: one recorded op on the tape, and the switches that control recording.
//
// A node holds its op name, the tensors it saved for backward, one edge per input (to the node that
// produced that input, or to the leaf it is, or nothing when no gradient flows there), and the
// backward function written next to the op's forward. Node ids grow in the order forward created
// the nodes, so "reverse tape order" is simply "descending id".
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "autograd/creation_site.h"
#include "engine/tensor.h"

namespace glass {

struct Node;

// Where an input's gradient goes: to the node that produced the input, or into a leaf's .grad.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<AutogradMeta> leaf;
  Shape shape;  // the input's shape: its gradient must have it
  DType dtype = DType::f32;
  int output = 0;  // which output of `node` the input is (0 unless the node has several)
  bool defined() const { return node || leaf; }
};

// One gradient per input of a node (an undefined Tensor where no gradient flows). Up to 3 are kept
// inline: running a node's backward function allocates nothing for the list.
using InputGrads = SmallVector<Tensor, 3>;
// Returns the gradients of the node's inputs. grad_out is the gradient of the node's output (of
// output 0 for a node with several: Node::output_grad).
using BackwardFn = std::function<InputGrads(Node& self, const Tensor& grad_out)>;
using NodePreHook = std::function<void(Node& node, const Tensor& grad_out)>;
using NodePostHook = std::function<void(Node& node, const InputGrads& grad_inputs)>;

// What few nodes have, kept out of line so that the common node does not carry it: hooks (tests,
// debugging tools) and the outputs of a node with several (OpScope::finish_outputs, e.g.
// residual_layer_norm): which tensor is output i (identity only), and the gradients of outputs
// 1.. as backward() sums them (an undefined Tensor where none arrived); output 0's gradient is
// the backward function's grad_out.
struct NodeExtras {
  std::vector<NodePreHook> pre_hooks;
  std::vector<NodePostHook> post_hooks;
  std::vector<const TensorImpl*> outputs;
  std::vector<Tensor> output_grads;
};

// A recorded op's node: 440 bytes on x86-64 with libstdc++, 464 as malloc'd with its shared_ptr
// control block (docs/design.md, "What a recorded op costs", accounts for every part).
struct Node {
  int64_t id = 0;
  const char* op = "";
  SmallVector<Edge, 2> inputs;  // most ops have at most 2 inputs: no heap allocation for them
  std::vector<Tensor> saved;    // released as soon as the node has run
  BackwardFn backward;
  Shape out_shape;
  CreationSite created_at;  // forward's call site and module; .str() is the text
  // Null unless a hook or several outputs need it.
  std::unique_ptr<NodeExtras> extras;
  // backward()'s marks, while it runs: which pass found the node (0: none yet) and the node's slot
  // in that pass, where the gradient of its output is summed. A lookup is a load, not a hash.
  uint64_t found_by_pass = 0;
  uint32_t pass_slot = 0;

  Node();  // counts the node as alive (Tape::live_nodes)
  // Frees the graph behind the node without recursion (node.cpp).
  ~Node();

  bool needs_input_grad(size_t i) const { return i < inputs.size() && inputs[i].defined(); }
  bool has_run() const { return !backward; }
  // Which output of this node `t` is (0 for a single-output node).
  int output_index(const Tensor& t) const;
  // The extras, made on first use: where hooks are added and a multi-output node's outputs noted.
  NodeExtras& extra();
  // The summed gradient of output i >= 1 of a multi-output node (undefined: none arrived).
  const Tensor& output_grad(size_t i) const { return extras->output_grads[i]; }
  // "#12 layernorm out [4, 8] <- #11 add, leaf transformer.h.0.ln_1.weight, ..."
  std::string str() const;
};

// Gradient recording on/off for this thread.
class GradMode {
 public:
  static bool enabled();
  static void set_enabled(bool on);
};

// RAII: no op records a node while it lives (evaluation, optimizer updates, weight init).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// The tape: the nodes in the order forward created them. That order is the nodes' ids, which
// the tape hands out, so the tape keeps no list: the graph is owned by the tensors that forward
// returned (a dropped graph frees its memory at once), and backward() finds the nodes it runs by
// walking the edges from the loss. What the tape counts is how many nodes are alive, in the whole
// process, which tests use to show that a graph was freed.
class Tape {
 public:
  static Tape& current();  // per thread
  int64_t next_id() { return next_id_++; }
  // Nodes alive now (made and not yet destroyed), on every thread.
  static int64_t live_nodes();

 private:
  int64_t next_id_ = 1;
};

// The nodes reachable from `root` (its graph as backward would walk it), in tape order.
std::vector<Node*> reachable_nodes(const Tensor& root);

// The nodes reachable from `root`, in tape order, one line each (see Node::str); with saved
// tensors when `with_saved`. This is what train_gpt --print-tape shows.
std::string tape_string(const Tensor& root, bool with_saved = false);

}  // namespace glass
