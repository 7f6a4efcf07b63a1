// The gradient norm of every node of a tape: for each node n reachable from the loss L, after one
// backward pass, |dL/d out(n)|_2 = sqrt(sum_i (dL/d out(n)_i)^2), the L2 norm of the gradient
// that flowed into n's output (summed over all its consumers; a node with several outputs: over
// all of them together). What the step explorer's tape graph shows on each node after backward.
//
// The norm is read where backward already has the gradient in hand: a pre-hook on every node
// (autograd/node.h) that backward() calls with the node's summed incoming gradient, just before
// the node's own backward function. Each hook queues one sum-of-squares reduction into its own
// f64 scalar on the device (kernels sum_squares); after the pass the scalars are joined and read
// in one copy to the host, so the pass waits for the device once, however many nodes it has. A
// node that no gradient reached (not on the loss's path, or every gradient into it undefined)
// has no norm.
//
// The hooks launch work, so this is for a pass of its own, never a step being profiled: the
// caller runs the recorded pass's forward and backward once more outside the trace, from the same
// inputs, and copies the norms onto the recorded pass's tape (copy_grad_norms): train_gpt
// (train/step.h, TrainStep::tape_with_grad_norms), profile_op (samples/op_timer.h) and debug_step.
#pragma once

#include <functional>
#include <vector>

#include "autograd/tape_record.h"
#include "engine/tensor.h"

namespace glass {

// The tape of `root` (record_tape), each node's grad_norm filled in from what flows into it while
// `run_backward` runs backward through root's graph (e.g. backward(root), or backward(root / k)).
std::vector<TapeNode> tape_with_grad_norms(const Tensor& root,
                                           const std::function<void()>& run_backward);

// Copies the norms of `measured` (a separate pass over the same graph) onto `tape` by position,
// when the two are the same graph: the same op and output shape at every position (the ids differ:
// every pass makes new nodes). Returns false, and leaves `tape` as it was, otherwise.
bool copy_grad_norms(const std::vector<TapeNode>& measured, std::vector<TapeNode>& tape);

}  // namespace glass
