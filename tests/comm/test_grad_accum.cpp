// Gradient accumulation in one process: k micro-steps of batch B give the weights of one step of
// batch k·B (the same rows, each micro-step's loss scaled by 1/k), up to float rounding.
#include <gtest/gtest.h>

#include "tests/testing.h"
#include "tests/train/train_testing.h"

namespace glass {
namespace {

std::vector<double> weights_after(train::TrainOptions o) {
  train::Trainer t(o);
  while (t.step() < o.steps) t.train_step();
  std::vector<double> all;
  for (const auto& [name, p] : t.model().named_parameters()) {
    const std::vector<double> v = testing::values(p);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

TEST(GradAccum, KMicroStepsOfBatchBEqualOneStepOfBatchKB) {
  for (const char* device : {"cpu", "emu"}) {
    train::TrainOptions o = testing::tiny_options();
    o.device = device;
    o.dropout = 0;  // dropout masks depend on the batch shape
    o.steps = 3;
    o.batch = 6;
    const std::vector<double> one_step = weights_after(o);
    o.batch = 2;
    o.grad_accum = 3;
    const std::vector<double> accumulated = weights_after(o);
    EXPECT_TRUE(testing::all_close(accumulated, one_step, 1e-5, 1e-6)) << device;
    // and it is not trivially so: plain batch 2 trains to other weights
    o.grad_accum = 1;
    EXPECT_FALSE(testing::all_close(weights_after(o), one_step, 1e-5, 1e-6)) << device;
  }
}

TEST(GradAccum, RejectsLessThanOneMicroStep) {
  train::TrainOptions o = testing::tiny_options();
  o.grad_accum = 0;
  EXPECT_TRUE(testing::contains_all(testing::error_of([&] { train::Trainer t(o); }),
                                    {"--grad-accum", "at least 1"}));
}

}  // namespace
}  // namespace glass
