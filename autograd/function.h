// OpScope: how a differentiable op records itself. Every op in autograd/ reads the same way:
//
//   Tensor gelu(const Tensor& x) {
//     OpScope op("gelu", {x});                          // node id, launch context (op, forward)
//     Tensor y = empty_like(x);
//     kernels::backend(x).gelu_forward(x, y);            // visible launches
//     return op.finish(y, {x}, [](Node& n, const Tensor& dy) -> InputGrads {
//       Tensor dx = empty_like(n.saved[0]);
//       kernels::backend(dy).gelu_backward(n.saved[0], dy, dx);
//       return {dx};
//     });
//   }
//
// finish() creates a Node only when grad mode is on and some input requires grad; otherwise the
// saved tensors and backward function are dropped at once and the output is a plain tensor.
// The scope notes where forward created the node (autograd/creation_site.h) and, in anomaly mode
// (GLASS_CHECK_NAN=1), finish() checks the output for NaN/Inf.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "engine/launch.h"

namespace glass {

class OpScope {
 public:
  // The scope refers to its inputs, which must outlive it: they are the op's own arguments or
  // locals. `{a, b}` binds to lvalues only, so a temporary cannot be passed by mistake, and no
  // input is copied (a copy is two atomic reference-count updates per input).
  OpScope(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> inputs);
  OpScope(const char* op, const std::vector<Tensor>& inputs);
  OpScope(const char* op, std::vector<Tensor>&& inputs) = delete;
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  bool needs_grad() const { return needs_grad_; }
  int64_t node_id() const { return id_; }
  // Attaches the node to `out` (when recording) and returns `out`.
  Tensor finish(Tensor out, std::vector<Tensor> saved, BackwardFn backward);
  // The same for an op with several outputs, all made by one node: the backward function gets
  // output 0's gradient as grad_out and the others' as node.output_grad(i) (i >= 1), each
  // undefined when no gradient reached it.
  std::vector<Tensor> finish_outputs(std::vector<Tensor> outs, std::vector<Tensor> saved,
                                     BackwardFn backward);

 private:
  void init(const char* op);
  // The node, with one edge per input (to its producer's output, or to the leaf it is).
  std::shared_ptr<Node> make_node(const Shape& out_shape, std::vector<Tensor> saved,
                                  BackwardFn backward);
  const char* op_;
  SmallVector<const Tensor*, 6> inputs_;
  bool needs_grad_ = false;
  int64_t id_ = -1;
  CreationSite site_;
  std::string
      site_text_;  // site_ as text while a debug switch may print it; the scope points at it
  std::optional<LaunchScope> scope_;
};

}  // namespace glass
