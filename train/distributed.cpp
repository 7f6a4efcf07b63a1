#include "train/distributed.h"

#include "autograd/ops.h"
#include "comm/data_parallel.h"

namespace glass::train {

RowRange rows_of_rank(int64_t batch, int rank, int world) {
  GLASS_CHECK(batch % world == 0,
              "--batch {} is the global batch and must split evenly over the {} ranks", batch,
              world);
  return {rank * batch / world, (rank + 1) * batch / world};
}

void check_same_run(comm::Communicator& comm, const TrainOptions& o, const GPTConfig& config) {
  if (comm.size() == 1) return;
  const std::string summary = fmt::format(
      "model {} | data {} | batch {} x {} | steps {} | grad-accum {} | lr {} ({}, warmup {}) | "
      "wd {} | betas {} {} | eps {} | clip {} | seed {} | shuffle {} | dtype {} | device {} | "
      "zero {}",
      config.str(), o.data, o.batch, o.seq_len, o.steps, o.grad_accum, o.lr, o.lr_schedule,
      o.warmup, o.weight_decay, o.beta1, o.beta2, o.eps, o.grad_clip, o.seed, o.shuffle, o.dtype,
      o.device,
      o.zero);  // the flag, not the device: on cuda each rank has its own GPU (cuda:<rank>)
  comm::check_same_on_all_ranks(comm, "the run's configuration", summary);
}

double mean_over_ranks(comm::Communicator& comm, double value) {
  if (comm.size() == 1) return value;
  const Tensor t = from_vector(std::vector<double>{value}, {1}, comm.device());
  comm.all_reduce(t, comm::ReduceOp::avg);
  comm.synchronize();
  return to_vector<double>(t)[0];
}

}  // namespace glass::train
