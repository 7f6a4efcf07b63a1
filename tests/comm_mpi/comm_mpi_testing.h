// Helpers for tests that run as every rank of an mpirun job.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "autograd/ops.h"
#include "comm/communicator.h"

namespace glass::testing {

// One communicator per device for the whole test program (making one is a collective).
inline comm::Communicator& communicator(Device d) {
  static std::unique_ptr<comm::Communicator> cpu, emu;
  auto& c = d == kCPU ? cpu : emu;
  if (!c) c = comm::make_communicator(d, {60.0});
  return *c;
}

// The number of ranks whose `bytes` differ from rank 0's (the same answer on every rank).
inline int ranks_differing_from_root(comm::Communicator& c, const std::vector<float>& values) {
  const Tensor root = from_vector(values, {static_cast<int64_t>(values.size())}, c.device());
  c.broadcast(root, 0);
  c.synchronize();
  const std::vector<float> mine = to_vector<float>(root);
  const bool same = std::memcmp(mine.data(), values.data(), values.size() * sizeof(float)) == 0;
  const Tensor count = from_vector(std::vector<int32_t>{same ? 0 : 1}, {1}, c.device());
  c.all_reduce(count, comm::ReduceOp::sum);
  c.synchronize();
  return to_vector<int32_t>(count)[0];
}

}  // namespace glass::testing
