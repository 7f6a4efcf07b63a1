#include "autograd/tape_record.h"

#include <fmt/format.h>

#include "autograd/node.h"

namespace glass {

std::vector<TapeNode> record_tape(const Tensor& root) {
  std::vector<TapeNode> out;
  for (const Node* n : reachable_nodes(root)) {
    TapeNode t;
    t.id = n->id;
    t.op = n->op;
    t.out_shape = shape_str(n->out_shape);
    if (n->created_at.module) t.module = *n->created_at.module;
    if (n->created_at.file) t.site = fmt::format("{}:{}", n->created_at.file, n->created_at.line);
    for (const Edge& e : n->inputs) {
      TapeInput in;
      in.grad = e.defined();
      if (e.node) in.node = e.node->id;
      if (e.leaf) in.leaf = e.leaf->name.empty() ? "leaf" : e.leaf->name;
      int64_t numel = 1;
      for (int64_t d : e.shape) numel *= d;
      in.bytes = e.defined() ? numel * static_cast<int64_t>(dtype_size(e.dtype)) : 0;
      t.inputs.push_back(std::move(in));
    }
    for (const Tensor& s : n->saved) {
      if (!s.defined()) continue;
      t.saved.push_back({s.storage().get(), static_cast<int64_t>(s.storage()->nbytes),
                         fmt::format("{}{}", dtype_name(s.dtype()), shape_str(s.shape()))});
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace glass
