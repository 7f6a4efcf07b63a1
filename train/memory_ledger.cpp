#include "train/memory_ledger.h"

#include <algorithm>
#include <map>

#include "engine/allocator.h"

namespace glass::train {

namespace {

// What the step's device's allocator holds for a tensor of `bytes` (its size class: cpu's small
// blocks round to 64 bytes, the rest as cuda's caching allocator does).
int64_t rounded(const Allocator& allocator, int64_t bytes) {
  return bytes > 0 ? static_cast<int64_t>(allocator.class_of(static_cast<size_t>(bytes))) : 0;
}

// Where the nodes of the tape run in the step's launches. Forward creates nodes in ascending id
// and backward runs them in descending id, so "node n's forward has started" is the first forward
// launch with node_id >= n, and "node n's backward is done" the first backward launch after it
// with node_id < n (or the end of backward). Views launch nothing: these bounds still hold.
struct Positions {
  std::vector<const TracedLaunch*> ls;
  size_t backward_end = 0;  // the first launch after the last backward one

  size_t forward_start(int64_t n) const {
    for (size_t i = 0; i < ls.size(); ++i)
      if (ls[i]->record.info.phase == Phase::forward && ls[i]->record.info.node_id >= n) return i;
    return ls.size();
  }
  size_t backward_start(int64_t n) const {
    for (size_t i = 0; i < ls.size(); ++i)
      if (ls[i]->record.info.phase == Phase::backward && ls[i]->record.info.node_id >= 0 &&
          ls[i]->record.info.node_id <= n)
        return i;
    return backward_end;
  }
  size_t backward_done(int64_t n) const {
    for (size_t i = backward_start(n); i < backward_end; ++i)
      if (ls[i]->record.info.phase == Phase::backward && ls[i]->record.info.node_id >= 0 &&
          ls[i]->record.info.node_id < n)
        return i;
    return backward_end;
  }
};

// A tensor alive over launches [from, to).
struct Span {
  size_t from = 0, to = 0;
  int64_t bytes = 0;
  LiveTensor what;
};

}  // namespace

MemoryLedger build_memory_ledger(const std::vector<TracedLaunch>& step,
                                 const std::vector<TapeNode>& tape, const LedgerState& state) {
  Positions pos;
  for (const TracedLaunch& l : step) pos.ls.push_back(&l);
  std::sort(pos.ls.begin(), pos.ls.end(), [](const TracedLaunch* a, const TracedLaunch* b) {
    return a->record.seq < b->record.seq;
  });
  const size_t n = pos.ls.size();
  for (size_t i = 0; i < n; ++i)
    if (pos.ls[i]->record.info.phase == Phase::backward) pos.backward_end = i + 1;
  // zero_grad follows the optimizer's update: the gradients go after its last launch (the bf16
  // copies' refresh, where there is one (ZeRO), comes after zero_grad).
  size_t zero_grad = n;
  for (size_t i = 0; i < n; ++i) {
    const LaunchInfo& info = pos.ls[i]->record.info;
    if (info.phase == Phase::optimizer && std::string_view(info.op) != "refresh_compute_copies")
      zero_grad = i + 1;
  }

  const Allocator& allocator =
      Allocator::for_device(pos.ls.empty() ? kCPU : pos.ls.front()->record.info.device);
  std::vector<Span> spans;
  // Saved storages: each once, from its first saver's forward to its smallest saver's backward.
  std::map<const void*, std::pair<const TapeNode*, const TapeNode*>> savers;  // first, smallest id
  std::map<const void*, const TapeSaved*> saved_of;
  for (const TapeNode& node : tape)
    for (const TapeSaved& s : node.saved) {
      if (state.storages.count(s.storage)) continue;
      auto [it, added] = savers.try_emplace(s.storage, &node, &node);
      if (!added) it->second.second = &node;  // the tape is in ascending id: .first is smallest
      saved_of.try_emplace(s.storage, &s);
    }
  for (const auto& [storage, who] : savers) {
    const TapeSaved& s = *saved_of[storage];
    const TapeNode& first = *who.first;
    spans.push_back({pos.forward_start(first.id),
                     pos.backward_done(first.id),
                     rounded(allocator, s.bytes),
                     {rounded(allocator, s.bytes), "saved_activations", s.tensor, first.op,
                      first.module, first.id}});
  }
  // Gradients: a leaf's .grad is made by the last delivery to it, in the backward of the node with
  // the smallest id among those sending it one; counted from the end of that node's backward (while
  // it runs, the gradient it computes for the leaf is still a temporary).
  std::map<std::string, std::pair<const TapeNode*, int64_t>> leaves;  // name -> (node, bytes)
  for (const TapeNode& node : tape)
    for (const TapeInput& in : node.inputs)
      if (in.grad && !in.leaf.empty()) {
        auto [it, added] = leaves.try_emplace(in.leaf, &node, in.bytes);
        if (!added && node.id < it->second.first->id) it->second.first = &node;
      }
  for (const auto& [name, who] : leaves) {
    const size_t from = pos.backward_done(who.first->id);
    spans.push_back({from,
                     std::max(from, zero_grad),
                     rounded(allocator, who.second),
                     {rounded(allocator, who.second), "gradients", name, who.first->op,
                      who.first->module, who.first->id}});
  }

  MemoryLedger ledger;
  ledger.bytes.resize(n);
  int64_t most = -1;
  for (size_t i = 0; i < n; ++i) {
    auto& b = ledger.bytes[i];
    b.fill(0);
    b[0] = state.parameters;
    b[1] = state.master_weights;
    b[2] = state.optimizer_moments;
    for (const Span& s : spans)
      if (s.from <= i && i < s.to) b[s.what.category == "gradients" ? 3 : 4] += s.bytes;
    const int64_t allocated = pos.ls[i]->allocated_bytes;
    b[5] = std::max<int64_t>(0, allocated - b[0] - b[1] - b[2] - b[3] - b[4]);
    b[6] = std::max<int64_t>(0, pos.ls[i]->reserved_bytes - allocated);
    if (allocated > most) {
      most = allocated;
      ledger.peak = i;
    }
  }
  for (const Span& s : spans)
    if (n > 0 && s.from <= ledger.peak && ledger.peak < s.to)
      ledger.largest_at_peak.push_back(s.what);
  std::stable_sort(ledger.largest_at_peak.begin(), ledger.largest_at_peak.end(),
                   [](const LiveTensor& a, const LiveTensor& b) { return a.bytes > b.bytes; });
  if (ledger.largest_at_peak.size() > 12) ledger.largest_at_peak.resize(12);
  return ledger;
}

}  // namespace glass::train
