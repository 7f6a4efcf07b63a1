// DataParallel: keeps the replicas of a model equal across the ranks of a Communicator.
//
// At start, rank 0's parameters are broadcast to every rank. During backward, gradients are
// grouped into buckets of about `bucket_mb` MiB in reverse parameter order (the order backward
// finishes them); as soon as the last gradient of a bucket is ready (a leaf grad-ready hook), the
// bucket is copied into one flat buffer and all-reduced (average) on the communicator's side
// stream, while backward goes on. finish_gradient_sync() is the optimizer's gate: it waits for
// every bucket (bounded by the communicator's time-out) and copies the averages back into .grad.
// In a CUDA graph capture (train_gpt --cuda-graph on cuda) the all-reduces are captured on the
// communicator's stream forked into the graph, and the gate is a stream wait on the GPU (the
// join), so the graph holds the whole data-parallel step; the caller bounds the host's wait for a
// replay with Communicator::wait_for_current_stream.
//
// Sharded (ZeRO-1, comm/zero_adamw.h): each bucket's flat buffer is padded with zeros to a
// multiple of the world size N and reduce-scattered (average) instead of all-reduced, with the same
// overlap with backward; rank r then holds the averaged gradients of chunk r of every bucket
// (elements [r * chunk, (r + 1) * chunk) of `flat`), which finish_gradient_sync leaves there (.grad
// keeps this rank's own, unreduced gradients: only ZeroAdamW reads the chunks).
//
// Launches carry the bucket as their op ("ddp_bucket_2"), so a trace shows the bucket schedule:
// the copy in on the compute lane, the all-reduce on the comm lane, the copy back at the gate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace glass::comm {

struct Bucket {
  std::string name;              // "ddp_bucket_<i>": the op of its launches
  std::vector<Tensor> params;    // in reverse parameter order
  std::vector<int64_t> offsets;  // where each gradient sits in `flat`
  Tensor flat;                   // the bucket's gradients, back to back (sharded: then padding)
  int64_t numel = 0;             // the gradients' elements in `flat`, padding excluded
  int64_t chunk = 0;             // sharded: each rank's elements of `flat` (flat = N * chunk)
  size_t ready = 0;              // gradients delivered in this backward
  bool launched = false;         // its all-reduce has been called
};

class DataParallel {
 public:
  // Registers grad-ready hooks on `params` (deduplicated: a tied weight counts once). Every
  // parameter must be a floating tensor on the communicator's device, of one dtype.
  DataParallel(Communicator& comm, const NamedTensors& params, double bucket_mb,
               bool sharded = false);
  ~DataParallel();  // the hooks stay registered but do nothing
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // Copies rank 0's parameter values to every rank.
  void broadcast_parameters();
  // Whether the coming backward passes all-reduce: off for the micro-steps of gradient
  // accumulation before the last one, and for a rank's pass of its own (the step explorer's
  // gradient norms, train/step.h): the grad-ready hooks then count nothing and start nothing.
  void set_sync(bool on);
  bool syncing() const;
  // Waits for every bucket's all-reduce (in a capture: on the GPU) and writes the averaged
  // gradients into .grad (sharded: waits for the reduce-scatters and leaves each rank's averaged
  // chunk in the buckets). A bucket
  // whose gradients did not all arrive (a parameter unused in this step) is reduced here, in
  // bucket order, with zeros where a gradient is missing.
  void finish_gradient_sync();

  const std::vector<Bucket>& buckets() const;
  bool sharded() const;
  Communicator& communicator() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Fails on every rank at once, with a message naming `what`, when some rank's `summary` differs
// from rank 0's (compared by a 64-bit hash): flags, model shape, data.
void check_same_on_all_ranks(Communicator& comm, const std::string& what,
                             const std::string& summary);

}  // namespace glass::comm
