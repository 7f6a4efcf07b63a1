// What the training loop needs to run as one rank of a data-parallel job (comm/): the share of
// each batch this rank reads, the check that all ranks run the same configuration, and the loss
// averaged over the ranks for logging.
#pragma once

#include <cstdint>
#include <string>

#include "comm/communicator.h"
#include "nn/gpt.h"
#include "train/run_config.h"

namespace glass::train {

// Rows [begin, end) of a global batch of `batch` rows that rank `rank` of `world` reads:
// [r B / N, (r + 1) B / N). Throws glass::Error when N does not divide B (the ranks' gradients
// would then be averaged with unequal weights, and N ranks would not compute what one does).
struct RowRange {
  int64_t begin = 0, end = 0;
};
RowRange rows_of_rank(int64_t batch, int rank, int world);

// Fails on every rank when the ranks disagree on the model or the flags that shape a step.
void check_same_run(comm::Communicator& comm, const TrainOptions& options, const GPTConfig& config);

// The mean of `value` over the ranks (the value itself in a world of one).
double mean_over_ranks(comm::Communicator& comm, double value);

}  // namespace glass::train
