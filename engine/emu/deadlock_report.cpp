#include "engine/emu/deadlock_report.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/emu/describe.h"

namespace glass::emu::detail {
namespace {

constexpr size_t kThreadsListed = 8;

std::string describe(const Wait& w) {
  switch (w.kind) {
    case WaitKind::block_barrier:
      return "__syncthreads() at " + detail::describe(w.site);
    case WaitKind::warp_sync:
      return "__syncwarp(" + describe_mask(w.mask) + ") at " + detail::describe(w.site);
    case WaitKind::warp_shuffle:
      return "a shuffle with mask " + describe_mask(w.mask) + " at " + detail::describe(w.site);
    case WaitKind::warp_vote:
      return "a vote with mask " + describe_mask(w.mask) + " at " + detail::describe(w.site);
    case WaitKind::warp_matrix:
      return "a Tensor Core instruction (mma, ldmatrix) at " + detail::describe(w.site);
  }
  return "?";
}

bool same_wait(const Wait& a, const Wait& b) {
  return a.kind == b.kind && a.site == b.site && a.mask == b.mask;
}

}  // namespace

std::string deadlock_report(const LaunchJob& job, uint3 block, std::span<Fiber* const> waiting,
                            unsigned exited) {
  // Group the waiting threads by where they wait, in the order first seen.
  struct Group {
    Wait wait;
    std::vector<uint3> threads;
  };
  std::vector<Group> groups;
  for (const Fiber* f : waiting) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return same_wait(g.wait, f->wait); });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{f->wait, {}});
    it->threads.push_back(f->thread_idx);
  }
  std::string msg = "kernel '" + std::string(job.kernel) + "' deadlocked in block " +
                    describe(block) + " (blockDim " + describe(job.block) +
                    "): every live thread waits for threads that will never arrive.";
  for (const Group& g : groups) {
    msg += "\n  ";
    msg +=
        std::to_string(g.threads.size()) + " thread(s) wait at " + describe(g.wait) + ": threadIdx";
    for (size_t i = 0; i < g.threads.size() && i < kThreadsListed; ++i) {
      msg += ' ';
      msg += describe(g.threads[i]);
    }
    if (g.threads.size() > kThreadsListed)
      msg += " and " + std::to_string(g.threads.size() - kThreadsListed) + " more";
  }
  msg += "\n  ";
  msg += std::to_string(exited) + " thread(s) have exited.";
  msg +=
      "\nEvery thread of a block must reach the same __syncthreads() (an exited thread counts as "
      "arrived), and every lane named in a warp operation's mask must reach an operation of the "
      "same kind with the same mask.";
  return msg;
}

}  // namespace glass::emu::detail
