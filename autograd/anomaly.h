// Anomaly mode (GLASS_CHECK_NAN=1, engine/debug.h): the first NaN or infinity is reported where it
// was made.
//
// OpScope::finish checks each forward op's output and backward() checks the gradients each node
// returns, so the first check that fails names the node that produced the value, not one of the
// many nodes it later spread through. The scan reads the tensor in host memory (a copy on a device
// whose memory is not host memory), so the mode is slow and meant for hunting a NaN down.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace glass {

// Throws glass::Error when `t` holds a NaN or an infinity: "GLASS_CHECK_NAN: <producer> produced
// nan at element 3 of <what> f32[4, 5] on cpu". Integer tensors always pass; -inf passes inside a
// MaskValuesScope.
void check_finite(const Tensor& t, const std::string& producer, const std::string& what);

// While one is alive on this thread, -inf in a tensor that check_finite scans is a mask value, not
// an anomaly: attention's causal mask sets the scores of future positions to -inf on purpose (after
// softmax, probability 0). NaN and +inf are still reported. Keep the scope to the ops that build
// the masked scores: a -inf made by the ops before them (q k^T) is reported where they made it, and
// a row that is -inf throughout gives a NaN in softmax, which is reported there.
class MaskValuesScope {
 public:
  MaskValuesScope();
  ~MaskValuesScope();
  MaskValuesScope(const MaskValuesScope&) = delete;
  MaskValuesScope& operator=(const MaskValuesScope&) = delete;

 private:
  bool saved_;
};

// "node #7 log (created at tests/autograd/test_debug.cpp:40)": how errors name a node.
std::string node_label(int64_t id, const char* op, const std::string& created_at);

}  // namespace glass
