// Warp operations of the block scheduler: __syncwarp, shuffles and votes.
//
// Lanes of a warp run one after another, so a warp operation is a small barrier per warp: each
// lane deposits its value and waits; the lane that completes the operation hands every lane its
// result and releases them. Operations are matched by mask, as on sm_70 and later: lanes that
// call a shuffle with the same mask exchange values even from different lines of code.
#include <bit>
#include <string>

#include "engine/emu/block_scheduler.h"
#include "engine/emu/describe.h"
#include "engine/emu/error.h"

namespace glass::emu::detail {
namespace {

// The lane a shuffle reads, by the rules of PTX's shfl.sync (which the CUDA intrinsics compile
// to, with c = ((32 - width) << 8) | clamp): lanes form segments of `width`; `up` must stay at or
// above the segment's first lane, the other modes at or below its last; a lane whose source is
// out of range reads its own value. `lane_arg` counts only with its low 5 bits.
unsigned source_lane(ShuffleMode mode, unsigned lane, int lane_arg, int width) {
  const unsigned c = (static_cast<unsigned>(32 - width) << 8) | (mode == ShuffleMode::up ? 0 : 31);
  const unsigned segmask = (c >> 8) & 31;
  const unsigned b = static_cast<unsigned>(lane_arg) & 31;
  const int max_lane = static_cast<int>((lane & segmask) | (c & 31 & ~segmask));
  const int min_lane = static_cast<int>(lane & segmask);
  int j = 0;
  bool in_range = false;
  switch (mode) {
    case ShuffleMode::up:
      j = static_cast<int>(lane) - static_cast<int>(b);
      in_range = j >= max_lane;
      break;
    case ShuffleMode::down:
      j = static_cast<int>(lane + b);
      in_range = j <= max_lane;
      break;
    case ShuffleMode::butterfly:
      j = static_cast<int>(lane ^ b);
      in_range = j <= max_lane;
      break;
    case ShuffleMode::index:
      j = min_lane | static_cast<int>(b & ~segmask);
      in_range = j <= max_lane;
      break;
  }
  return in_range ? static_cast<unsigned>(j) : lane;
}

}  // namespace

// Every lane that exists: lanes run one after another, so "exited" would differ from lane to lane
// of a converged warp, and lanes would disagree on the mask. Warp operations treat lanes that
// have exited as arrived, so naming them in a mask is harmless.
unsigned BlockScheduler::active_mask() const { return warps_[current_->tid >> 5].present; }

WarpCollective* BlockScheduler::open_collective(WarpState& w, WaitKind kind, unsigned mask) {
  for (WarpCollective* c : w.open) {
    if (c->mask != mask) continue;
    if (c->kind != kind) c->divergent = true;
    return c;
  }
  if (free_collectives_.empty()) {
    collectives_.push_back(std::make_unique<WarpCollective>());
    free_collectives_.push_back(collectives_.back().get());
  }
  WarpCollective* c = free_collectives_.back();
  free_collectives_.pop_back();
  c->kind = kind;
  c->mask = mask;
  c->arrived = 0;
  c->divergent = false;
  w.open.push_back(c);
  return c;
}

// Inline into the device entry points below (see switch_context for why).
[[gnu::always_inline]] inline uint64_t BlockScheduler::warp_collective(WaitKind kind, unsigned mask,
                                                                       uint64_t value,
                                                                       unsigned source_lane,
                                                                       Site site) {
  Fiber& self = *current_;
  const unsigned lane = self.tid & 31;
  if (!(mask >> lane & 1u))
    throw EmuError("warp operation at " + describe(site) + " called by lane " +
                   std::to_string(lane) + " with mask " + describe_mask(mask) +
                   ", which does not include the calling lane");
  WarpState& w = warps_[self.tid >> 5];
  WarpCollective& c = *open_collective(w, kind, mask);
  if (kind == WaitKind::warp_matrix) {
    if (c.arrived == 0) c.site = site;
    if (!(c.site == site))
      throw EmuError("lane " + std::to_string(lane) + " executes a Tensor Core instruction at " +
                     describe(site) + " while lanes " + describe_mask(c.arrived) +
                     " of its warp execute one at " + describe(c.site) +
                     ": every lane of the warp must execute the same mma/ldmatrix (.sync.aligned)");
  }
  c.arrived |= 1u << lane;
  c.value[lane] = value;
  c.source[lane] = static_cast<uint8_t>(source_lane);
  c.fiber[lane] = &self;
  if (collective_done(w, c)) {
    const uint64_t result = complete_collective(w, c, &self);
    if (aborting_) throw CancelledThread{};  // the instruction failed: complete_collective said so
    return result;
  }
  suspend(Wait{kind, site, mask});
  return self.collective_result;
}

// A Tensor Core instruction is a warp collective of all 32 lanes (.sync.aligned); each lane
// deposits a pointer to its operands, which stay on its stack while it waits.
void BlockScheduler::matrix_instruction(MatrixOperands& operands, Site site) {
  warp_collective(WaitKind::warp_matrix, ~0u, reinterpret_cast<uintptr_t>(&operands), 0, site);
}

// Hands every lane that took part its result, releases them, and retires `c`. `caller`, when
// not null, is the lane completing it, which gets its result as the return value.
uint64_t BlockScheduler::complete_collective(WarpState& w, WarpCollective& c, const Fiber* caller) {
  if (c.kind == WaitKind::warp_matrix) {
    // Runs the instruction for the whole warp; on an error the block fails and every lane
    // unwinds (abort_block retires `c`).
    std::string error = matrix_lanes_error(w, c);
    if (error.empty()) {
      try {
        run_matrix_instruction(c);
      } catch (const EmuError& e) {
        error = e.what();
      }
    }
    if (!error.empty()) {
      const Fiber& blamed = caller ? *caller : *c.fiber[std::countr_zero(c.arrived)];
      // The caller runs, it does not wait: abort_block must not queue it as a waiting lane.
      if (caller) c.arrived &= ~(1u << (caller->tid & 31));
      fail(std::make_exception_ptr(EmuError(error)), blamed);
      return 0;
    }
  }
  uint64_t votes = 0;
  if (c.kind == WaitKind::warp_vote) {
    for (unsigned lanes = c.arrived; lanes; lanes &= lanes - 1) {
      const unsigned lane = std::countr_zero(lanes);
      if (c.value[lane] != 0) votes |= 1u << lane;
    }
    votes |= static_cast<uint64_t>(c.arrived) << 32;
  }
  std::array<Fiber*, 32> released;
  size_t nreleased = 0;
  uint64_t caller_result = 0;
  for (unsigned lanes = c.arrived; lanes; lanes &= lanes - 1) {
    const unsigned lane = std::countr_zero(lanes);
    uint64_t r = 0;
    if (c.kind == WaitKind::warp_shuffle) {
      // A source lane that did not take part (exited, absent, outside the mask) has no value:
      // undefined in CUDA; here the lane keeps its own.
      const unsigned src = c.source[lane];
      r = c.arrived >> src & 1u ? c.value[src] : c.value[lane];
    } else if (c.kind == WaitKind::warp_vote) {
      r = votes;
    }
    if (c.fiber[lane] == caller) {
      caller_result = r;
    } else {
      c.fiber[lane]->collective_result = r;
      released[nreleased++] = c.fiber[lane];
    }
  }
  std::erase(w.open, &c);
  free_collectives_.push_back(&c);
  if (make_ready(std::span(released.data(), nreleased), caller != nullptr)) yield_to_released();
  return caller_result;
}

void sync_warp(unsigned mask, Site site) {
  running_scheduler("__syncwarp()", site).warp_collective(WaitKind::warp_sync, mask, 0, 0, site);
}

uint64_t shuffle(uint64_t bits, unsigned mask, ShuffleMode mode, int lane_arg, int width,
                 Site site) {
  BlockScheduler& s = running_scheduler("a warp shuffle", site);
  const unsigned src = source_lane(mode, s.lane(), lane_arg, width);
  return s.warp_collective(WaitKind::warp_shuffle, mask, bits, src, site);
}

uint64_t vote(unsigned mask, int predicate, Site site) {
  return running_scheduler("a warp vote", site)
      .warp_collective(WaitKind::warp_vote, mask, predicate != 0, 0, site);
}

}  // namespace glass::emu::detail
