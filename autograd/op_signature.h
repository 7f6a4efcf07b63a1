// What a traced launch says about its op's tensors: "f32[4, 8, 16], bf16[48, 16]" (dtype and shape
// of each input, in order) and the dtype of the first floating input ("bf16"), as interned text
// (engine/interned.h) that LaunchContext::shapes and ::dtype point at.
//
// Formatting and interning cost a few hundred nanoseconds per op, so the ops compute it only while
// a launch observer is subscribed (a trace, a report); otherwise both are "".
#pragma once

#include "autograd/node.h"
#include "engine/launch.h"

namespace glass {

struct OpSignature {
  const char* shapes = "";
  const char* dtype = "";
};

// A forward op's inputs (undefined tensors are written "-").
OpSignature op_signature(const SmallVector<const Tensor*, 6>& inputs);
// A node's backward: the inputs it sends gradients to, "-" for the others (no gradient flows).
OpSignature node_signature(const Node& node);

// True when a launch observer is subscribed: the signature is worth computing.
inline bool launches_observed() {
  return detail::observer_count.load(std::memory_order_relaxed) > 0;
}

}  // namespace glass
