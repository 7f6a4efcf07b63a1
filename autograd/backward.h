// backward(): runs the tape in reverse.
//
// The whole idea, as micrograd writes it:
//
//   order = every node the loss was computed from, each after the nodes that produced its inputs
//   loss.grad = 1
//   for node in reversed(order):
//       for input, local in zip(node.inputs, node.backward(node.grad)):   # the chain rule
//           input.grad += local
//
// glass does exactly this in three named steps (autograd/backward.cpp):
// 1. dependency counting: walk the graph from `root`, collect its nodes, and count for every leaf
//    how many edges lead to it. Node ids grow in tape order, so "each node after its producers" is
//    "ascending id" and reversed(order) is "descending id": deterministic, and easy to follow in a
//    debugger. Each node found is marked with the pass's number and given a slot where its
//    output's gradient will be summed (Node::found_by_pass, pass_slot): a node's bookkeeping is a
//    load, not a hash lookup (the leaves, far fewer, are counted in a map).
// 2. the reverse walk: visit the nodes in descending id. By the time a node runs, every gradient
//    flowing into it has arrived and been summed (a visible "grad_accumulate" launch, into a fresh
//    tensor: a backward function may hand one tensor to several inputs). A node drops its saved
//    tensors and backward function right after it runs.
// 3. delivery to leaves: a leaf's gradients are summed over its edges; when the last one has
//    delivered, the sum is added to its .grad (an empty .grad becomes the sum itself when nothing
//    else holds it, with no launch, or else a copy of it) and its gradient-ready hooks fire (data
//    parallelism starts a bucket's all-reduce there).
#pragma once

#include <vector>

#include "autograd/node.h"
#include "engine/tensor.h"

namespace glass {

struct Node;

// The node backward() is running on this thread and the gradient flowing into it (both null
// outside a node's backward function). For debuggers: stopped anywhere inside a backward kernel,
// `print *glass::backward_now.node` shows the op, node id, saved tensors and creation site, and
// `print *glass::backward_now.grad_out` the incoming gradient, whatever the optimiser did to the
// local variables on the way down (docs/debugging.md).
struct BackwardNow {
  const Node* node = nullptr;
  const Tensor* grad_out = nullptr;
};
extern thread_local BackwardNow backward_now;

// `grad` defaults to ones for a one-element root. Throws if root does not require grad or the graph
// was already run backward.
void backward(const Tensor& root, const Tensor& grad = Tensor());

// True while backward() runs, for the gradient it made itself: the ones of a scalar root called
// without `grad` (micrograd's `loss.grad = 1`), whose value the host knows without reading the
// device. A backward function that would multiply by its incoming gradient may skip the multiply
// for it: x * 1 == x exactly in IEEE arithmetic, so the bits are the same either way
// (autograd/classifier.cpp). Any other gradient, ones passed by the caller included, is false.
bool is_unit_seed(const Tensor& g);

// A part of the tape, for activation recomputation (autograd/checkpoint.h): the nodes with ids >=
// first_id, reached from `outputs`. Its exits are the edges that leave it (to an older node or to a
// leaf), each target once, in the order a depth-first walk from the outputs meets them.
std::vector<Edge> region_exits(const std::vector<Tensor>& outputs, int64_t first_id);
// backward() on that part only: `grads` (one per root; undefined: none) flow back from `roots`
// through the nodes with ids >= first_id, in descending id as backward() runs them, and what
// reaches each of `exits` is returned (summed over the edges to it) instead of handed on.
std::vector<Tensor> backward_region(const std::vector<Tensor>& roots,
                                    const std::vector<Tensor>& grads, int64_t first_id,
                                    const std::vector<Edge>& exits);

}  // namespace glass
