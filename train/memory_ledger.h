// The memory ledger of one recorded step: the allocator's measured bytes after every launch, split
// into what holds them (the course's "two ledgers": state that lives across steps, and what the
// step makes and frees).
//
//   parameters         the weights forward reads: the f32 masters, or under bf16 their bf16 copies
//   master_weights     the f32 masters when forward reads bf16 copies (0 in f32)
//   optimizer_moments  AdamW's m and v
//   gradients          each parameter's .grad, from the end of the backward node that delivers
//                      it last until zero_grad (after the optimizer's update)
//   saved_activations  what the step's nodes saved for backward (each storage once), from the
//                      forward of the first node that saves it until the backward of the last
//                      node holding it (descending ids: the one with the smallest id)
//   temporaries        the rest of what is allocated: allocated - the five above (never < 0)
//   allocator_cache    reserved - allocated: freed blocks the cache keeps for the next request
//
// The first five are attributed from the tape (autograd/tape_record.h) and the state's tensors,
// each storage rounded to the allocator's size class; allocated and reserved are measured. Where
// an attribution is early or late by a launch, temporaries absorbs the difference.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd/tape_record.h"
#include "engine/trace.h"

namespace glass::train {

inline constexpr std::array<const char*, 7> kLedgerCategories = {
    "parameters",        "master_weights", "optimizer_moments", "gradients",
    "saved_activations", "temporaries",    "allocator_cache"};

// What the step holds before it starts, by the tensors that hold it.
struct LedgerState {
  int64_t parameters = 0, master_weights = 0, optimizer_moments = 0;  // size-class rounded bytes
  std::unordered_set<const void*> storages;  // theirs: never counted as saved activations
};

struct LiveTensor {
  int64_t bytes = 0;
  std::string category;  // "saved_activations" or "gradients"
  std::string tensor;    // "f32[2, 8, 16]" or the parameter's name
  std::string op, module;
  int64_t node = -1;
};

struct MemoryLedger {
  // Per launch of the step (in launch order), the bytes of each category of kLedgerCategories.
  std::vector<std::array<int64_t, kLedgerCategories.size()>> bytes;
  size_t peak = 0;                          // the launch after which the most was allocated
  std::vector<LiveTensor> largest_at_peak;  // the largest tensors alive then, largest first
};

// `step`: one step's launches in launch order (seq); `tape`: that step's tape.
MemoryLedger build_memory_ledger(const std::vector<TracedLaunch>& step,
                                 const std::vector<TapeNode>& tape, const LedgerState& state);

}  // namespace glass::train
