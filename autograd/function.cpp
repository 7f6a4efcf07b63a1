#include "autograd/function.h"

#include "autograd/anomaly.h"
#include "autograd/creation_site.h"
#include "engine/debug.h"

namespace glass {

OpScope::OpScope(const char* op, std::initializer_list<Tensor> inputs) : op_(op), inputs_(inputs) {
  init(op);
}

OpScope::OpScope(const char* op, const std::vector<Tensor>& inputs) : op_(op), inputs_(inputs) {
  init(op);
}

void OpScope::init(const char* op) {
  if (GradMode::enabled())
    for (const auto& t : inputs_)
      if (t.requires_grad()) needs_grad_ = true;
  // An op used inside a backward function or an optimizer step is part of that node or step:
  // its launches keep the caller's op, node id and phase. Anywhere else it is a forward op of its
  // own, with a fresh node id.
  const Phase outer = current_launch_context().phase;
  if (outer == Phase::backward || outer == Phase::optimizer || outer == Phase::comm) return;
  id_ = Tape::current().next_id();
  // The creation site is text made per op: only made when a node will hold it or a debug switch
  // (GLASS_SYNC, GLASS_CHECK_NAN, GLASS_BREAK_ON) may print it, not on the no-grad fast path.
  if (needs_grad_ || !detail::debug_switches_off.load(std::memory_order_relaxed))
    created_at_ = current_creation_site();
  scope_.emplace(op, id_, Phase::forward, created_at_.c_str());
}

Tensor OpScope::finish(Tensor out, std::vector<Tensor> saved, BackwardFn backward) {
  // Only a forward op of its own is checked: an op inside a backward function is part of that
  // node, whose gradients backward() checks.
  if (scope_ && check_nan_enabled())
    check_finite(out, node_label(id_, op_, created_at_) + " in forward", "its output");
  if (!needs_grad_) return out;
  if (id_ < 0) id_ = Tape::current().next_id();  // recorded although called inside another phase
  auto node = std::make_shared<Node>();
  node->id = id_;
  node->op = op_;
  node->created_at = created_at_;
  node->out_shape = out.shape();
  node->saved = std::move(saved);
  node->backward = std::move(backward);
  for (const auto& t : inputs_) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn())
        e.node = t.grad_fn();
      else
        e.leaf = t.unsafe_impl()->autograd;
      e.shape = t.shape();
      e.dtype = t.dtype();
    }
    node->inputs.push_back(std::move(e));
  }
  // The output is a new handle whose history is this node (it may share storage with an input).
  Tensor result = out.detach();
  result.autograd_meta().grad_fn = node;
  Tape::current().record(node);
  return result;
}

}  // namespace glass
