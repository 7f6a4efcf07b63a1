#include "autograd/function.h"

#include "autograd/anomaly.h"
#include "autograd/creation_site.h"
#include "autograd/op_signature.h"
#include "engine/debug.h"
#include "engine/object_pool.h"

namespace glass {

OpScope::OpScope(const char* op, std::initializer_list<std::reference_wrapper<const Tensor>> inputs)
    : op_(op) {
  for (const Tensor& t : inputs) inputs_.push_back(&t);
  init(op);
}

OpScope::OpScope(const char* op, const std::vector<Tensor>& inputs) : op_(op) {
  for (const Tensor& t : inputs) inputs_.push_back(&t);
  init(op);
}

void OpScope::init(const char* op) {
  if (GradMode::enabled())
    for (const Tensor* t : inputs_)
      if (t->requires_grad()) needs_grad_ = true;
  // An op used inside a backward function or an optimizer step is part of that node or step:
  // its launches keep the caller's op, node id and phase. Anywhere else it is a forward op of its
  // own, with a fresh node id; inside a recomputation (autograd/checkpoint.h) it is that forward
  // op again, and its launches carry Phase::recompute.
  const Phase outer = current_launch_context().phase;
  if (outer == Phase::backward || outer == Phase::optimizer || outer == Phase::comm) return;
  const Phase phase = outer == Phase::recompute ? Phase::recompute : Phase::forward;
  id_ = Tape::current().next_id();
  // The creation site is kept as its parts (three words); it becomes text only while a debug
  // switch (GLASS_SYNC, GLASS_CHECK_NAN, GLASS_BREAK_ON) may print it with a launch.
  site_ = current_creation_site();
  if (!detail::debug_switches_off.load(std::memory_order_relaxed)) site_text_ = site_.str();
  LaunchContext ctx{op, id_, phase, site_text_.c_str()};
  if (site_.module) ctx.module = site_.module->c_str();
  if (launches_observed()) {
    const OpSignature sig = op_signature(inputs_);
    ctx.shapes = sig.shapes;
    ctx.dtype = sig.dtype;
  }
  scope_.emplace(ctx);
}

std::shared_ptr<Node> OpScope::make_node(const Shape& out_shape, std::vector<Tensor> saved,
                                         BackwardFn backward) {
  if (id_ < 0) id_ = Tape::current().next_id();  // recorded although called inside another phase
  // Default-initialised (every member has its initialiser): value-initialising would first zero
  // all of the node, inline edges included, which costs more than the rest of make_node.
  auto node = std::allocate_shared_for_overwrite<Node>(PooledAllocator<Node>());
  node->id = id_;
  node->op = op_;
  node->created_at = site_;
  node->out_shape = out_shape;
  node->saved = std::move(saved);
  node->backward = std::move(backward);
  node->inputs.reserve(inputs_.size());  // 3 or more edges: one heap block of exactly that many
  for (const Tensor* t : inputs_) {
    Edge& e = node->inputs.emplace_back();
    if (t->requires_grad()) {
      const TensorImpl& impl = *t->unsafe_impl();
      if (impl.grad_fn) {
        e.node = impl.grad_fn;
        e.output = e.node->output_index(*t);
      } else {
        e.leaf = impl.autograd;
      }
      e.shape = impl.shape;
      e.dtype = impl.dtype;
    }
  }
  return node;
}

Tensor OpScope::finish(Tensor out, std::vector<Tensor> saved, BackwardFn backward) {
  // Only a forward op of its own is checked: an op inside a backward function is part of that
  // node, whose gradients backward() checks.
  if (scope_ && check_nan_enabled())
    check_finite(out, node_label(id_, op_, site_.str()) + " in forward", "its output");
  if (!needs_grad_) return out;
  auto node = make_node(out.shape(), std::move(saved), std::move(backward));
  // The output's history is this node: its own handle, or a new one when an input shares it.
  out.set_grad_fn(std::move(node));
  return out;
}

std::vector<Tensor> OpScope::finish_outputs(std::vector<Tensor> outs, std::vector<Tensor> saved,
                                            BackwardFn backward) {
  if (scope_ && check_nan_enabled())
    for (size_t i = 0; i < outs.size(); ++i)
      check_finite(outs[i], node_label(id_, op_, site_.str()) + " in forward",
                   fmt::format("its output {}", i));
  if (!needs_grad_) return outs;
  auto node = make_node(outs[0].shape(), std::move(saved), std::move(backward));
  // Each output a new handle whose history is this node; the node knows which is which.
  NodeExtras& extras = node->extra();
  for (Tensor& out : outs) {
    out.set_grad_fn(node);
    extras.outputs.push_back(out.unsafe_impl());
  }
  extras.output_grads.resize(outs.size());
  return outs;
}

}  // namespace glass
