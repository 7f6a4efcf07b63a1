#include "autograd/checkpoint.h"

#include <set>

#include "autograd/backward.h"
#include "autograd/creation_site.h"
#include "autograd/node.h"
#include "engine/launch.h"

namespace glass {

namespace {

// RAII: grad mode on (a backward function runs with it off), restored after.
class GradOn {
 public:
  GradOn() : prev_(GradMode::enabled()) { GradMode::set_enabled(true); }
  ~GradOn() { GradMode::set_enabled(prev_); }
  GradOn(const GradOn&) = delete;
  GradOn& operator=(const GradOn&) = delete;

 private:
  bool prev_;
};

// RAII: the generators put back at the offsets the original forward started from, and returned to
// where they stand now afterwards (the next forward draws fresh numbers).
class ReplayGenerators {
 public:
  ReplayGenerators(const std::vector<Generator*>& gens, const std::vector<uint64_t>& offsets)
      : gens_(gens) {
    for (size_t i = 0; i < gens_.size(); ++i) {
      now_.push_back(gens_[i]->offset());
      gens_[i]->set_state(gens_[i]->seed(), offsets[i]);
    }
  }
  ~ReplayGenerators() {
    for (size_t i = 0; i < gens_.size(); ++i) gens_[i]->set_state(gens_[i]->seed(), now_[i]);
  }
  ReplayGenerators(const ReplayGenerators&) = delete;
  ReplayGenerators& operator=(const ReplayGenerators&) = delete;

 private:
  const std::vector<Generator*>& gens_;
  std::vector<uint64_t> now_;
};

// The outputs that the part made (those with history recorded inside it), by index.
std::vector<size_t> recorded_outputs(const std::vector<Tensor>& outs, int64_t first_id) {
  std::vector<size_t> made;
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].defined() && outs[i].grad_fn() && outs[i].grad_fn()->id >= first_id)
      made.push_back(i);
  return made;
}

std::set<std::pair<const void*, int>> targets(const std::vector<Edge>& edges) {
  std::set<std::pair<const void*, int>> t;
  for (const Edge& e : edges)
    t.insert(e.node ? std::pair<const void*, int>{e.node.get(), e.output}
                    : std::pair<const void*, int>{e.leaf.get(), 0});
  return t;
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               const std::vector<Generator*>& generators) {
  if (!GradMode::enabled()) return fn(inputs);
  std::vector<uint64_t> offsets;
  for (const Generator* g : generators) offsets.push_back(g->offset());
  const int64_t first_id = Tape::current().next_id();
  std::vector<Tensor> outs = fn(inputs);
  const std::vector<size_t> made = recorded_outputs(outs, first_id);
  if (made.empty()) return outs;  // nothing needs a gradient
  std::vector<Tensor> made_outs;
  for (size_t i : made) made_outs.push_back(outs[i]);
  const std::vector<Edge> exits = region_exits(made_outs, first_id);

  auto node = std::make_shared<Node>();
  node->id = Tape::current().next_id();  // after the part's nodes, before its outputs' consumers
  node->op = "checkpoint";
  node->created_at = current_creation_site();
  node->out_shape = outs[made[0]].shape();
  node->saved = inputs;
  for (const Edge& e : exits) node->inputs.push_back(e);
  node->backward = [fn, generators, offsets, made](Node& self, const Tensor& dy) -> InputGrads {
    // d(outputs): output 0's arrives as dy, the others' in output_grads.
    std::vector<Tensor> douts(made.size());
    for (size_t j = 0; j < made.size(); ++j) douts[j] = j == 0 ? dy : self.output_grad(j);
    std::vector<Tensor> again;
    int64_t rerun_first_id = 0;
    {
      LaunchScope scope(self.op, self.id, Phase::recompute);
      GradOn grad_on;
      ReplayGenerators replay(generators, offsets);
      rerun_first_id = Tape::current().next_id();
      const std::vector<Tensor> outs = fn(self.saved);
      for (size_t i : made) again.push_back(outs[i]);
    }
    const std::vector<Edge> exits(self.inputs.begin(), self.inputs.end());
    // The re-run must read what the forward read: a gradient to anything else would be lost.
    const auto known = targets(exits);
    for (const auto& t : targets(region_exits(again, rerun_first_id)))
      GLASS_CHECK(known.count(t) != 0,
                  "checkpoint #{}: the re-run forward read a tensor the original forward did not; "
                  "a checkpointed function must compute the same thing from the same inputs",
                  self.id);
    return backward_region(again, douts, rerun_first_id, exits);
  };
  NodeExtras& extras = node->extra();
  for (size_t i : made) {
    outs[i].set_grad_fn(node);
    extras.outputs.push_back(outs[i].unsafe_impl());
  }
  extras.output_grads.resize(made.size());
  return outs;
}

}  // namespace glass
