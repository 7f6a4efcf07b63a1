// backward(): runs the tape in reverse.
//
// 1. Walk the graph from `root` and count, for every node and every leaf, how many edges lead to
//    it (its dependencies).
// 2. Visit the reachable nodes in descending id (reverse tape order). Each consumer was created
//    after its producers, so by the time a node runs, every gradient flowing into it has arrived
//    and been summed.
// 3. A node's gradients go to the nodes and leaves its edges name. Gradients meeting in one place
//    are summed (a visible "grad_accumulate" launch). A leaf's sum is added to its .grad once its
//    last dependency has delivered, and then the leaf's gradient-ready hooks fire.
// 4. A node drops its saved tensors and backward function right after it runs.
#pragma once

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

}  // namespace glass
