#include "autograd/node.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

namespace glass {

namespace {
thread_local bool grad_enabled = true;
std::atomic<int64_t> nodes_alive{0};

std::string edge_str(const Edge& e) {
  if (e.node) return fmt::format("#{} {}", e.node->id, e.node->op);
  if (e.leaf)
    return e.leaf->name.empty() ? fmt::format("leaf{}", shape_str(e.shape))
                                : fmt::format("leaf {}", e.leaf->name);
  return "-";
}
}  // namespace

bool GradMode::enabled() { return grad_enabled; }
void GradMode::set_enabled(bool on) { grad_enabled = on; }

std::string Node::str() const {
  std::vector<std::string> ins;
  for (const auto& e : inputs) ins.push_back(edge_str(e));
  std::string s =
      fmt::format("#{} {} out {} <- {}", id, op, shape_str(out_shape), fmt::join(ins, ", "));
  if (const std::string at = created_at.str(); !at.empty()) s += "  (created at " + at + ")";
  return s;
}

// Destroying a node releases its inputs' nodes, which release theirs: left to the shared_ptrs, a
// chain of N ops would be freed N destructor calls deep, and a long enough chain (a long RNN-like
// loop, an unrolled optimisation) would overflow the stack. Instead the node takes its inputs'
// nodes out of its edges and frees them here, one at a time: a node this loop holds the last
// reference to gives up its own inputs to the loop first, so that it dies with no input left and
// nothing recurses. A node first lets go of its saved tensors, which hold their producers too, so
// that "the last reference" is seen where it is.
Node::Node() { nodes_alive.fetch_add(1, std::memory_order_relaxed); }

Node::~Node() {
  nodes_alive.fetch_sub(1, std::memory_order_relaxed);
  std::vector<std::shared_ptr<Node>> orphans;  // allocated only when some input dies with us
  auto take_dying_inputs = [&orphans](Node& n) {
    n.saved.clear();  // a saved input holds its producer too: let go of that first
    for (Edge& e : n.inputs)
      if (e.node && e.node.use_count() == 1) orphans.push_back(std::move(e.node));
  };
  take_dying_inputs(*this);
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    take_dying_inputs(*n);
  }  // n is released here, with no dying input left to free
}

int Node::output_index(const Tensor& t) const {
  if (!extras) return 0;
  for (size_t i = 0; i < extras->outputs.size(); ++i)
    if (extras->outputs[i] == t.unsafe_impl()) return static_cast<int>(i);
  return 0;
}

NodeExtras& Node::extra() {
  if (!extras) extras = std::make_unique<NodeExtras>();
  return *extras;
}

Tape& Tape::current() {
  thread_local Tape tape;
  return tape;
}

int64_t Tape::live_nodes() { return nodes_alive.load(std::memory_order_relaxed); }

std::vector<Node*> reachable_nodes(const Tensor& root) {
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  if (root.grad_fn()) stack.push_back(root.grad_fn().get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    nodes.push_back(n);
    for (auto& e : n->inputs)
      if (e.node) stack.push_back(e.node.get());
  }
  std::sort(nodes.begin(), nodes.end(), [](Node* a, Node* b) { return a->id < b->id; });
  return nodes;
}

std::string tape_string(const Tensor& root, bool with_saved) {
  const std::vector<Node*> nodes = reachable_nodes(root);
  std::string s = fmt::format("tape: {} nodes reachable from {}\n", nodes.size(), root.describe());
  for (Node* n : nodes) {
    s += "  " + n->str() + "\n";
    if (with_saved)
      for (size_t i = 0; i < n->saved.size(); ++i)
        s += fmt::format("      saved[{}]: {}\n", i, n->saved[i].describe());
  }
  return s;
}

}  // namespace glass
