#include "autograd/backward.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/anomaly.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/debug.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

thread_local BackwardNow backward_now;

namespace {

// RAII: sets backward_now for one node's backward function, and clears it however that ends.
struct RunningNode {
  RunningNode(const Node* n, const Tensor& g) { backward_now = {n, &g}; }
  ~RunningNode() { backward_now = {}; }
};

// a + b into a fresh tensor: gradients are never summed in place, because a backward function
// may hand the same tensor to several inputs.
Tensor accumulate(const Tensor& a, const Tensor& b) {
  LaunchScope scope("grad_accumulate", current_launch_context().node_id, Phase::backward);
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  kernels::backend(a).binary(kernels::BinaryOp::add, a, b, out);
  return out;
}

void check_grad(const Node& n, size_t i, const Tensor& g) {
  const Edge& e = n.inputs[i];
  GLASS_CHECK(g.shape() == e.shape && g.dtype() == e.dtype,
              "backward of #{} {}: gradient for input {} is {} but the input was {}{}", n.id, n.op,
              i, g.describe(), dtype_name(e.dtype), shape_str(e.shape));
}

// Anomaly mode: the gradients a node returned, each checked for NaN/Inf.
void check_gradients(const Node& n, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i)
    check_finite(grads[i], "backward of " + node_label(n.id, n.op, n.created_at),
                 fmt::format("the gradient for input {}", i));
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad) {
  GLASS_CHECK(root.requires_grad(), "backward: {} does not require grad", root.describe());
  Tensor seed = grad;
  if (!seed.defined()) {
    GLASS_CHECK(root.numel() == 1, "backward: root {} is not a scalar; pass its gradient",
                root.describe());
    seed = full(root.shape(), 1.0, root.dtype(), root.device());
  }
  GLASS_CHECK(seed.shape() == root.shape(), "backward: gradient {} does not match root {}",
              seed.describe(), root.describe());

  // A leaf root (backward on a parameter itself) just receives the seed.
  std::vector<Node*> order;
  std::unordered_map<Node*, int> node_deps;
  std::unordered_map<AutogradMeta*, int> leaf_deps;
  if (root.grad_fn()) {
    std::vector<Node*> stack{root.grad_fn().get()};
    node_deps[stack.back()] = 0;
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      GLASS_CHECK(!n->has_run(),
                  "backward: node #{} {} already ran; the graph was run backward once already",
                  n->id, n->op);
      for (auto& e : n->inputs) {
        if (e.node) {
          if (node_deps[e.node.get()]++ == 0) stack.push_back(e.node.get());
        } else if (e.leaf) {
          leaf_deps[e.leaf.get()]++;
        }
      }
    }
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->id > b->id; });

  std::unordered_map<Node*, Tensor> grads;
  std::unordered_map<AutogradMeta*, Tensor> leaf_grads;
  auto deliver_leaf = [&](AutogradMeta* leaf, const Tensor& g) {
    Tensor& sum = leaf_grads[leaf];
    sum = sum.defined() ? accumulate(sum, g) : g;
    if (--leaf_deps[leaf] > 0) return;
    // Last contribution: add this pass's sum into .grad, which the leaf owns (a private copy).
    LaunchScope scope("grad_accumulate", current_launch_context().node_id, Phase::backward);
    if (leaf->grad.defined()) {
      kernels::backend(sum).binary(kernels::BinaryOp::add, leaf->grad, sum, leaf->grad);
    } else {
      leaf->grad = Tensor::empty(sum.shape(), sum.dtype(), sum.device());
      kernels::backend(sum).copy(sum, leaf->grad);
    }
    leaf_grads.erase(leaf);
    for (auto& hook : leaf->grad_ready_hooks) hook(leaf->grad);
  };

  if (!root.grad_fn()) {
    auto* leaf = root.unsafe_impl()->autograd.get();
    leaf_deps[leaf] = 1;
    deliver_leaf(leaf, seed);
    return;
  }
  // The seed is the gradient of the root: output 0 of its node, or one of a multi-output node's.
  if (const int k = root.grad_fn()->output_index(root); k > 0)
    root.grad_fn()->output_grads[k] = seed;
  else
    grads[root.grad_fn().get()] = seed;

  NoGradGuard no_grad;  // backward functions launch kernels; they record nothing
  for (Node* n : order) {
    Tensor g = std::move(grads[n]);
    grads.erase(n);
    // Everything launched for this node, its gradient sums included, carries its id.
    LaunchScope scope(n->op, n->id, Phase::backward, n->created_at.c_str());
    std::vector<Tensor> input_grads;
    const bool other_output_grads = std::any_of(n->output_grads.begin(), n->output_grads.end(),
                                                [](const Tensor& t) { return t.defined(); });
    if (g.defined() || other_output_grads) {
      for (auto& hook : n->pre_hooks) hook(*n, g);
      {
        RunningNode running(n, g);
        input_grads = n->backward(*n, g);
      }
      GLASS_CHECK(input_grads.size() == n->inputs.size(),
                  "backward of #{} {}: returned {} gradients for {} inputs", n->id, n->op,
                  input_grads.size(), n->inputs.size());
      if (check_nan_enabled()) check_gradients(*n, input_grads);
      for (auto& hook : n->post_hooks) hook(*n, input_grads);
    }
    // Saved tensors and captured state go as soon as the node has run.
    n->saved.clear();
    n->output_grads.clear();
    n->backward = nullptr;
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Edge& e = n->inputs[i];
      const bool has_grad = i < input_grads.size() && input_grads[i].defined();
      if (has_grad && e.defined()) check_grad(*n, i, input_grads[i]);
      if (e.node) {
        if (has_grad) {
          // Output 0's gradient waits in `grads`, a multi-output node's others in the node.
          Tensor& acc = e.output == 0 ? grads[e.node.get()] : e.node->output_grads[e.output];
          acc = acc.defined() ? accumulate(acc, input_grads[i]) : input_grads[i];
        }
      } else if (e.leaf) {
        if (has_grad) {
          deliver_leaf(e.leaf.get(), input_grads[i]);
        } else if (--leaf_deps[e.leaf.get()] == 0 && leaf_grads.count(e.leaf.get())) {
          // The last edge carried nothing, but earlier ones did: finish the leaf with what came.
          Tensor sum = leaf_grads[e.leaf.get()];
          leaf_deps[e.leaf.get()] = 1;
          leaf_grads.erase(e.leaf.get());
          deliver_leaf(e.leaf.get(), sum);
        }
      }
    }
  }
}

}  // namespace glass
