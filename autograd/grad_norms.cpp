#include "autograd/grad_norms.h"

#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/error.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// sum_squares reads contiguous f32/f64; a bf16 gradient is widened first (exactly).
Tensor dense_f32_or_f64(const Tensor& g) {
  return g.dtype() == DType::f32 || g.dtype() == DType::f64 ? contiguous(g) : cast(g, DType::f32);
}

}  // namespace

std::vector<TapeNode> tape_with_grad_norms(const Tensor& root,
                                           const std::function<void()>& run_backward) {
  std::vector<TapeNode> tape = record_tape(root);  // before backward frees what nodes saved
  const std::vector<Node*> nodes = reachable_nodes(root);
  GLASS_CHECK(nodes.size() == tape.size(), "tape_with_grad_norms: {} nodes but a tape of {}",
              nodes.size(), tape.size());
  // sums[i]: node i's sum of squares, f64 [1] on the device; undefined while no gradient came.
  std::vector<Tensor> sums(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    nodes[i]->extra().pre_hooks.push_back([&sums, i](Node& n, const Tensor& g) {
      std::vector<Tensor> grads;  // every output's gradient that arrived
      if (g.defined()) grads.push_back(dense_f32_or_f64(g));
      for (size_t o = 1; o < n.extras->output_grads.size(); ++o)
        if (n.extras->output_grads[o].defined())
          grads.push_back(dense_f32_or_f64(n.extras->output_grads[o]));
      if (grads.empty()) return;
      LaunchScope scope("grad_norm", n.id, Phase::other);
      sums[i] = Tensor::empty({1}, DType::f64, grads[0].device());
      kernels::backend(sums[i]).sum_squares(grads, sums[i]);
    });
  }
  run_backward();
  // The hooks refer to `sums`: off the nodes before it goes (the graph may outlive this call).
  for (Node* n : nodes) n->extras->pre_hooks.pop_back();
  // One read for all of them: the scalars side by side, copied to the host once.
  std::vector<Tensor> defined;
  for (const Tensor& s : sums)
    if (s.defined()) defined.push_back(s);
  if (defined.empty()) return tape;
  const std::vector<double> values = to_vector<double>(concat(defined, 0));
  size_t k = 0;
  for (size_t i = 0; i < sums.size(); ++i)
    if (sums[i].defined()) tape[i].grad_norm = std::sqrt(values[k++]);
  return tape;
}

bool copy_grad_norms(const std::vector<TapeNode>& measured, std::vector<TapeNode>& tape) {
  if (measured.size() != tape.size()) return false;
  for (size_t i = 0; i < tape.size(); ++i)
    if (measured[i].op != tape[i].op || measured[i].out_shape != tape[i].out_shape) return false;
  for (size_t i = 0; i < tape.size(); ++i) tape[i].grad_norm = measured[i].grad_norm;
  return true;
}

}  // namespace glass
