#include "autograd/backward.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "autograd/anomaly.h"
#include "autograd/node.h"
#include "autograd/op_signature.h"
#include "autograd/ops.h"
#include "engine/debug.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

thread_local BackwardNow backward_now;

namespace {

// The seed backward() made itself (is_unit_seed), while that backward() runs.
thread_local const TensorImpl* unit_seed = nullptr;

// RAII: marks `seed` as the unit seed for one backward(), and restores the outer one (a backward
// function may itself call backward()) however that ends.
struct UnitSeedScope {
  explicit UnitSeedScope(const Tensor& seed) : outer(unit_seed) { unit_seed = seed.unsafe_impl(); }
  ~UnitSeedScope() { unit_seed = outer; }
  const TensorImpl* outer;
};

// RAII: sets backward_now for one node's backward function, and clears it however that ends.
struct RunningNode {
  RunningNode(const Node* n, const Tensor& g) { backward_now = {n, &g}; }
  ~RunningNode() { backward_now = {}; }
};

// The node's context (its id, module and shapes) for the sums of gradients done on its behalf.
LaunchContext grad_accumulate_context() {
  LaunchContext ctx = current_launch_context();
  ctx.op = "grad_accumulate";
  ctx.phase = Phase::backward;
  return ctx;
}

// a + b into a fresh tensor: gradients are never summed in place, because a backward function
// may hand the same tensor to several inputs.
Tensor accumulate(const Tensor& a, const Tensor& b) {
  LaunchScope scope(grad_accumulate_context());
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
void check_gradients(const Node& n, const InputGrads& grads) {
  for (size_t i = 0; i < grads.size(); ++i)
    check_finite(grads[i], "backward of " + node_label(n.id, n.op, n.created_at.str()),
                 fmt::format("the gradient for input {}", i));
}

// Which gradient an edge carries: the producing node's output, or the leaf.
std::pair<const void*, int> exit_key(const Edge& e) {
  return e.node ? std::pair<const void*, int>{e.node.get(), e.output}
                : std::pair<const void*, int>{e.leaf.get(), 0};
}

// The lists a pass grows as it finds nodes: each node's gradient slot, the nodes in reverse tape
// order, and the search's stack. They are kept for the next pass on this thread (emptied, their
// capacity kept): grown from nothing, a chain of 20,000 nodes reallocated them a dozen times per
// backward(), the large blocks fresh pages from the kernel each time, which was half of the
// backward walk's time per node (bench/op_overhead). A pass that starts while another runs
// (backward() called inside a backward function, or a checkpointed region's) finds them taken and
// makes its own; lists longer than kKeptNodes are not kept.
struct PassLists {
  static constexpr size_t kKeptNodes = size_t{1} << 18;
  std::vector<Tensor> grads;  // by pass_slot: each node's output grad
  std::vector<Node*> order, stack;
};
thread_local std::unique_ptr<PassLists> spare_pass_lists;

// One run of backward(): the three steps as methods, with the bookkeeping they share.
class BackwardPass {
 public:
  BackwardPass()
      : lists_(spare_pass_lists ? std::move(spare_pass_lists) : std::make_unique<PassLists>()) {}
  ~BackwardPass() {
    lists_->grads.clear();
    lists_->order.clear();
    lists_->stack.clear();
    if (!spare_pass_lists && lists_->grads.capacity() <= PassLists::kKeptNodes)
      spare_pass_lists = std::move(lists_);
  }
  BackwardPass(const BackwardPass&) = delete;
  BackwardPass& operator=(const BackwardPass&) = delete;

  // Step 1, dependency counting: from the root, find every node it was computed from, and count
  // for each leaf how many edges will deliver to it (so it knows when its gradient is complete).
  // Returns the nodes in reverse tape order (descending id; the pass's own list, valid while it
  // lives): each node comes before the nodes that produced its inputs, so a node runs only once
  // every gradient flowing into it has been summed.
  const std::vector<Node*>& count_dependencies(Node* root) {
    return count_dependencies_from({root});
  }
  const std::vector<Node*>& count_dependencies_from(const std::vector<Node*>& roots) {
    std::vector<Node*>& order = lists_->order;
    std::vector<Node*>& stack = lists_->stack;
    for (Node* r : roots)
      if (find(r)) stack.push_back(r);
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      GLASS_CHECK(!n->has_run(),
                  "backward: node #{} {} already ran; the graph was run backward once already",
                  n->id, n->op);
      for (const Edge& e : n->inputs) {
        if (is_exit(e)) continue;  // a region's pass stops at its edge (backward_region)
        if (e.node) {
          if (find(e.node.get())) stack.push_back(e.node.get());
        } else if (e.leaf) {
          leaf_deps_[e.leaf.get()]++;
        }
      }
    }
    // A chain comes out of the search in order already; a graph with branches does not.
    const auto later_first = [](Node* a, Node* b) { return a->id > b->id; };
    if (!std::is_sorted(order.begin(), order.end(), later_first))
      std::sort(order.begin(), order.end(), later_first);
    return order;
  }

  // Step 2, the reverse walk: each node turns the gradient of its output into gradients of its
  // inputs (its backward function, made of visible launches) and hands them on; then it drops
  // what it saved.
  void walk(const std::vector<Node*>& order, const Tensor& root, const Tensor& seed) {
    add_seed(root, seed);
    walk(order);
  }

  // The seed is the gradient of a root: output 0 of its node, or one of a multi-output node's.
  void add_seed(const Tensor& root, const Tensor& seed) {
    Node* root_node = root.grad_fn().get();
    Tensor& acc = root_node->output_index(root) > 0
                      ? root_node->extras->output_grads[root_node->output_index(root)]
                      : grad_of(*root_node);
    acc = acc.defined() ? accumulate(acc, seed) : seed;
  }

  void walk(const std::vector<Node*>& order) {
    NoGradGuard no_grad;  // backward functions launch kernels; they record nothing
    for (Node* n : order) {
      Tensor g = std::move(grad_of(*n));
      // Everything launched for this node, its gradient sums included, carries its id.
      // The creation site as text only while a debug switch may print it with a launch.
      const std::string site =
          detail::debug_switches_off.load(std::memory_order_relaxed) ? "" : n->created_at.str();
      LaunchContext ctx{n->op, n->id, Phase::backward, site.c_str()};
      if (n->created_at.module) ctx.module = n->created_at.module->c_str();
      if (launches_observed()) {
        const OpSignature sig = node_signature(*n);
        ctx.shapes = sig.shapes;
        ctx.dtype = sig.dtype;
      }
      LaunchScope scope(ctx);
      // The module whose forward made the node, for an out-of-memory error's message.
      const ModulePathScope module(n->created_at.module);
      // A multi-output node runs when any of its outputs received a gradient.
      const bool other_output_grads =
          n->extras && std::any_of(n->extras->output_grads.begin(), n->extras->output_grads.end(),
                                   [](const Tensor& t) { return t.defined(); });
      InputGrads input_grads = g.defined() || other_output_grads ? run_node(*n, g) : InputGrads{};
      // Saved tensors and captured state go as soon as the node has run.
      n->saved.clear();
      if (n->extras) n->extras->output_grads.clear();
      n->backward = nullptr;
      for (size_t i = 0; i < n->inputs.size(); ++i)
        hand_on(*n, i, i < input_grads.size() ? std::move(input_grads[i]) : Tensor());
    }
  }

  // Step 3, delivery to leaves: gradients for one leaf are summed over all its edges; when the last
  // edge has delivered, the sum goes into .grad and the leaf's gradient-ready hooks fire.
  void deliver_to_leaf(AutogradMeta* leaf, Tensor g) {
    Tensor& acc = leaf_grads_[leaf];
    acc = acc.defined() ? accumulate(acc, g) : std::move(g);
    if (--leaf_deps_[leaf] > 0) return;
    Tensor sum = std::move(acc);
    leaf_grads_.erase(leaf);
    // Last contribution: add this pass's sum into .grad, which the leaf owns (a private tensor:
    // an optimizer or clipping changes it in place later). A sum nothing else holds or views (a
    // backward function's fresh result, or a sum made above) becomes .grad as it is, as PyTorch's
    // AccumulateGrad steals it; any other is copied (the seed, a gradient handed to several
    // inputs, a view).
    LaunchScope scope(grad_accumulate_context());
    if (leaf->grad.defined()) {
      kernels::backend(sum).binary(kernels::BinaryOp::add, leaf->grad, sum, leaf->grad);
    } else if (sum.is_sole_handle()) {
      leaf->grad = std::move(sum);
    } else {
      leaf->grad = Tensor::empty(sum.shape(), sum.dtype(), sum.device());
      kernels::backend(sum).copy(sum, leaf->grad);
    }
    for (auto& hook : leaf->grad_ready_hooks) hook(leaf->grad);
  }

  // backward() on a leaf itself: it receives the seed.
  void deliver_to_root_leaf(AutogradMeta* leaf, const Tensor& seed) {
    leaf_deps_[leaf] = 1;
    deliver_to_leaf(leaf, seed);
  }

 private:
  // A node's backward function with its hooks around it; one gradient per input, checked.
  static InputGrads run_node(Node& n, const Tensor& g) {
    if (n.extras)
      for (auto& hook : n.extras->pre_hooks) hook(n, g);
    // (made in place by the backward function's return: no move of the list and its tensors)
    InputGrads input_grads = [&] {
      RunningNode running(&n, g);
      return n.backward(n, g);
    }();
    GLASS_CHECK(input_grads.size() == n.inputs.size(),
                "backward of #{} {}: returned {} gradients for {} inputs", n.id, n.op,
                input_grads.size(), n.inputs.size());
    if (check_nan_enabled()) check_gradients(n, input_grads);
    if (n.extras)
      for (auto& hook : n.extras->post_hooks) hook(n, input_grads);
    return input_grads;
  }

  // Input i's gradient g (undefined: none flows) to the node that produced the input, summed with
  // what other consumers sent it, or to the leaf it is.
  void hand_on(const Node& n, size_t i, Tensor g) {
    const Edge& e = n.inputs[i];
    if (g.defined() && e.defined()) check_grad(n, i, g);
    if (is_exit(e)) {
      if (!g.defined()) return;
      Tensor& acc = exit_grads_[exit_key(e)];
      acc = acc.defined() ? accumulate(acc, g) : std::move(g);
      return;
    }
    if (e.node) {
      if (!g.defined()) return;
      // Output 0's gradient waits in the pass's slot for it, a multi-output node's others in the
      // node.
      Tensor& acc = e.output == 0 ? grad_of(*e.node) : e.node->extras->output_grads[e.output];
      acc = acc.defined() ? accumulate(acc, g) : std::move(g);
    } else if (e.leaf) {
      AutogradMeta* leaf = e.leaf.get();
      if (g.defined()) return deliver_to_leaf(leaf, std::move(g));
      if (--leaf_deps_[leaf] == 0 && leaf_grads_.count(leaf)) {
        // The last edge carried nothing, but earlier ones did: finish the leaf with what came.
        Tensor sum = std::move(leaf_grads_[leaf]);
        leaf_deps_[leaf] = 1;
        leaf_grads_.erase(leaf);
        deliver_to_leaf(leaf, std::move(sum));
      }
    }
  }

  // A region's pass (backward_region): its edge leaves the nodes with ids >= first_id_; the
  // gradients reaching it are kept in exit_grads_, summed per target, instead of handed on.
  int64_t first_id_ = 0;
  bool is_exit(const Edge& e) const {
    return first_id_ > 0 && e.defined() && (e.leaf || e.node->id < first_id_);
  }
  std::map<std::pair<const void*, int>, Tensor> exit_grads_;

 public:
  void stop_below(int64_t first_id) { first_id_ = first_id; }
  // What reached exit `e` (undefined: nothing).
  Tensor exit_grad(const Edge& e) {
    auto it = exit_grads_.find(exit_key(e));
    return it == exit_grads_.end() ? Tensor() : it->second;
  }

 private:
  // Marks `n` as found by this pass and gives it a gradient slot; false if it was found already.
  bool find(Node* n) {
    if (n->found_by_pass == id_) return false;
    n->found_by_pass = id_;
    n->pass_slot = static_cast<uint32_t>(lists_->grads.size());
    lists_->grads.emplace_back();
    return true;
  }
  // The gradient of the output (output 0) of a node this pass found, summed so far.
  Tensor& grad_of(const Node& n) {
    GLASS_CHECK(n.found_by_pass == id_, "backward: node #{} {} was not found by this pass", n.id,
                n.op);
    return lists_->grads[n.pass_slot];
  }

  // This pass's number: unique in the process, so that the marks of an earlier (or an enclosing)
  // pass never read as this one's.
  static uint64_t next_pass_id() {
    static std::atomic<uint64_t> passes{0};
    return passes.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  const uint64_t id_ = next_pass_id();
  std::unique_ptr<PassLists> lists_;
  std::unordered_map<AutogradMeta*, int> leaf_deps_;      // edges still to deliver to each leaf
  std::unordered_map<AutogradMeta*, Tensor> leaf_grads_;  // each leaf's sum so far
};

// The gradient backward starts from: `grad`, or 1 for a one-element root.
Tensor seed_gradient(const Tensor& root, const Tensor& grad) {
  Tensor seed = grad;
  if (!seed.defined()) {
    GLASS_CHECK(root.numel() == 1, "backward: root {} is not a scalar; pass its gradient",
                root.describe());
    seed = full(root.shape(), 1.0, root.dtype(), root.device());
  }
  GLASS_CHECK(seed.shape() == root.shape(), "backward: gradient {} does not match root {}",
              seed.describe(), root.describe());
  return seed;
}

}  // namespace

bool is_unit_seed(const Tensor& g) {
  return g.defined() && unit_seed != nullptr && g.unsafe_impl() == unit_seed;
}

void backward(const Tensor& root, const Tensor& grad) {
  GLASS_CHECK(root.requires_grad(), "backward: {} does not require grad", root.describe());
  const Tensor seed = seed_gradient(root, grad);
  // The caller's gradient is a value on the device; only the ones made here are known to be 1.
  const UnitSeedScope known(grad.defined() ? Tensor() : seed);
  BackwardPass pass;
  if (!root.grad_fn()) return pass.deliver_to_root_leaf(root.unsafe_impl()->autograd.get(), seed);
  const std::vector<Node*>& order = pass.count_dependencies(root.grad_fn().get());
  pass.walk(order, root, seed);
}

std::vector<Edge> region_exits(const std::vector<Tensor>& outputs, int64_t first_id) {
  std::vector<Edge> exits;
  std::set<std::pair<const void*, int>> seen;
  std::vector<Node*> stack;
  std::unordered_set<Node*> visited;
  const auto visit = [&](const std::shared_ptr<Node>& n) {
    if (n && n->id >= first_id && visited.insert(n.get()).second) stack.push_back(n.get());
  };
  for (const Tensor& t : outputs)
    if (t.defined()) visit(t.grad_fn());
  // Depth-first from the outputs; the exits in the order found (deterministic: edges in order).
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs) {
      if (!e.defined()) continue;
      if (e.leaf || e.node->id < first_id) {
        if (seen.insert(exit_key(e)).second) exits.push_back(e);
      } else {
        visit(e.node);
      }
    }
  }
  return exits;
}

std::vector<Tensor> backward_region(const std::vector<Tensor>& roots,
                                    const std::vector<Tensor>& grads, int64_t first_id,
                                    const std::vector<Edge>& exits) {
  GLASS_CHECK(roots.size() == grads.size(), "backward_region: {} roots but {} gradients",
              roots.size(), grads.size());
  BackwardPass pass;
  pass.stop_below(first_id);
  std::vector<Node*> root_nodes;
  for (size_t i = 0; i < roots.size(); ++i)
    if (grads[i].defined() && roots[i].defined() && roots[i].grad_fn() &&
        roots[i].grad_fn()->id >= first_id)
      root_nodes.push_back(roots[i].grad_fn().get());
  if (!root_nodes.empty()) {
    const std::vector<Node*>& order = pass.count_dependencies_from(root_nodes);
    for (size_t i = 0; i < roots.size(); ++i)
      if (grads[i].defined() && roots[i].defined() && roots[i].grad_fn() &&
          roots[i].grad_fn()->id >= first_id)
        pass.add_seed(roots[i], grads[i]);
    pass.walk(order);
  }
  std::vector<Tensor> out;
  out.reserve(exits.size());
  for (const Edge& e : exits) out.push_back(pass.exit_grad(e));
  return out;
}

}  // namespace glass
