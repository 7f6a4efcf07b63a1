// Global-norm clipping and learning-rate schedules.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include "autograd/ops.h"
#include "engine/launch.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// Parameters of odd sizes whose gradients are random with the given scale.
std::vector<Tensor> params_with_grads(Generator& gen, double scale) {
  std::vector<Tensor> params;
  for (const Shape& s : {Shape{7, 13}, Shape{33}, Shape{5}}) {
    Tensor p = zeros(s);
    p.set_requires_grad(true);
    p.set_grad(randn(s, gen, 0, scale));
    params.push_back(p);
  }
  return params;
}

double global_norm(const std::vector<Tensor>& params) {
  double total = 0;
  for (const Tensor& p : params)
    for (double g : values(p.grad())) total += g * g;
  return std::sqrt(total);
}

TEST(ClipGradNorm, ScalesToExactlyMaxNorm) {
  Generator gen(1);
  std::vector<Tensor> params = params_with_grads(gen, 3.0);
  params.push_back(zeros({4}));  // a parameter without a gradient is skipped
  const double norm = global_norm({params[0], params[1], params[2]});
  const std::vector<double> g0 = values(params[0].grad());
  const double max_norm = norm / 3;
  EXPECT_NEAR(clip_grad_norm(params, max_norm), norm, 1e-6 * norm);
  EXPECT_NEAR(global_norm({params[0], params[1], params[2]}), max_norm, 1e-5 * max_norm);
  // Every gradient is scaled by the same factor, max_norm / (norm + 1e-6).
  std::vector<double> expected = g0;
  for (double& g : expected) g *= max_norm / (norm + 1e-6);
  EXPECT_TRUE(all_close(values(params[0].grad()), expected, 1e-6));
}

TEST(ClipGradNorm, LeavesSmallGradientsUntouched) {
  Generator gen(2);
  std::vector<Tensor> params = params_with_grads(gen, 0.01);
  const std::vector<float> before = to_vector<float>(params[1].grad());
  const double norm = clip_grad_norm(params, 1.0);
  EXPECT_NEAR(norm, global_norm(params), 1e-6 * norm);
  EXPECT_EQ(to_vector<float>(params[1].grad()), before);
}

#if defined(GLASS_HAS_EMU)
// On emu (the CUDA kernels) the scaling runs on the device from the sum of squares, with no host
// read (what lets a CUDA graph capture it); the result is the host formula's.
TEST(ClipGradNorm, OnTheDeviceWithoutAHostRead) {
  for (const double scale : {3.0, 0.01}) {  // clipped, and left alone
    Generator gen(4);
    std::vector<Tensor> host = params_with_grads(gen, scale);
    const double norm = global_norm(host);
    const double max_norm = 1.0;
    std::vector<Tensor> on_emu;
    for (const Tensor& p : host) {
      Tensor q = to_device(p, kEmu);
      q.set_requires_grad(true);
      q.set_grad(to_device(p.grad(), kEmu));
      on_emu.push_back(q);
    }
    const uint64_t syncs = host_sync_count();
    const Tensor sum_sq = clip_grad_norm_on_device(on_emu, max_norm);
    EXPECT_EQ(host_sync_count(), syncs) << "clip_grad_norm_on_device waited for the device";
    EXPECT_NEAR(std::sqrt(item(sum_sq)), norm, 1e-6 * norm);
    const double factor = norm > max_norm ? max_norm / (norm + 1e-6) : 1.0;
    for (size_t i = 0; i < host.size(); ++i) {
      std::vector<double> expected = values(host[i].grad());
      for (double& g : expected) g *= factor;
      EXPECT_TRUE(all_close(values(to_device(on_emu[i].grad(), kCPU)), expected, 1e-6)) << i;
    }
  }
}
#endif
// An infinite norm would give the scale max_norm / inf = 0: the finite gradients would become 0
// and the infinity a NaN. The gradients must stay bit for bit as they were, for the caller to see.
TEST(ClipGradNorm, ANonFiniteNormLeavesEveryGradientAsItWas) {
  for (const float bad : {std::numeric_limits<float>::infinity(), std::nanf("")}) {
    Generator gen(4);
    std::vector<Tensor> params = params_with_grads(gen, 3.0);
    std::vector<float> g1 = to_vector<float>(params[1].grad());
    g1[5] = bad;
    params[1].set_grad(from_vector(g1, params[1].shape()));
    std::vector<std::vector<float>> before;
    for (const Tensor& p : params) before.push_back(to_vector<float>(p.grad()));
    const double norm = clip_grad_norm(params, 1.0);
    EXPECT_FALSE(std::isfinite(norm)) << bad;
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<float> after = to_vector<float>(params[i].grad());
      ASSERT_EQ(after.size(), before[i].size());
      EXPECT_EQ(std::memcmp(after.data(), before[i].data(), after.size() * sizeof(float)), 0)
          << "gradient " << i << " changed (non-finite element " << bad << ")";
    }
  }
}

// With an infinite bound (train_gpt --grad-clip 0, which still wants the norm) the sum of squares
// is the one launch: one clip_scale per gradient would run only to find its factor 1, and the
// profile would count bytes it never moved. A finite bound launches one per gradient.
TEST(ClipGradNorm, AnInfiniteBoundLaunchesOnlyTheSum) {
  Generator gen(5);
  for (const double max_norm : {std::numeric_limits<double>::infinity(), 1.0}) {
    std::vector<Tensor> params = params_with_grads(gen, 3.0);
    const double norm = global_norm(params);
    const std::vector<float> before = to_vector<float>(params[0].grad());
    LaunchLog log;
    EXPECT_NEAR(std::sqrt(item(clip_grad_norm_on_device(params, max_norm))), norm, 1e-6 * norm);
    const std::vector<std::string> kernels = log.kernels();
    EXPECT_EQ(std::count(kernels.begin(), kernels.end(), "sum_squares"), 1) << max_norm;
    EXPECT_EQ(std::count(kernels.begin(), kernels.end(), "clip_scale"),
              std::isinf(max_norm) ? 0 : static_cast<long>(params.size()))
        << max_norm;
    if (std::isinf(max_norm)) {
      EXPECT_EQ(to_vector<float>(params[0].grad()), before);
    }
  }
}

// A profile's bytes are those a launch moves: on cpu clip_scale reads the sum, and reads and writes
// its gradient only when the norm is over the bound. Counting the gradient always put the launches
// that scale nothing above the bandwidth roof of train_gpt's kernel summary.
TEST(ClipGradNorm, CountsTheBytesItMovesOnCpu) {
  for (const double scale : {3.0, 0.01}) {  // clipped, and left alone
    Generator gen(6);
    std::vector<Tensor> params = params_with_grads(gen, scale);
    const bool scales = global_norm(params) > 1.0;
    LaunchLog log;
    clip_grad_norm_on_device(params, 1.0);
    const std::vector<LaunchInfo> launches = log.launches("clip_scale");
    ASSERT_EQ(launches.size(), params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      const double nbytes = static_cast<double>(params[i].grad().nbytes());
      EXPECT_EQ(launches[i].bytes, sizeof(double) + (scales ? 2 * nbytes : 0)) << scale;
      EXPECT_EQ(launches[i].flops, scales ? params[i].numel() : 0) << scale;
    }
  }
}

TEST(ClipGradNorm, RejectsNonPositiveMaxNorm) {
  Generator gen(3);
  EXPECT_THROW(clip_grad_norm(params_with_grads(gen, 1), 0), Error);
}

TEST(LrSchedule, ConstantWithWarmup) {
  const LrSchedule s = LrSchedule::constant(1e-3, 4);
  EXPECT_DOUBLE_EQ(s.at(0), 1e-3 * 1 / 4);
  EXPECT_DOUBLE_EQ(s.at(2), 1e-3 * 3 / 4);
  EXPECT_DOUBLE_EQ(s.at(3), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(1000), 1e-3);
  EXPECT_DOUBLE_EQ(LrSchedule::constant(0.5).at(0), 0.5);
}

TEST(LrSchedule, WarmupThenCosineToMinLr) {
  // max 1.0, min 0.1 (the default max/10), warmup 10, reaches min at step 110.
  const LrSchedule s = LrSchedule::cosine(1.0, 10, 110);
  EXPECT_DOUBLE_EQ(s.min_lr, 0.1);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);  // progress 0
  EXPECT_NEAR(s.at(35), 0.1 + 0.5 * (1 + std::cos(std::numbers::pi / 4)) * 0.9,
              1e-15);                  // progress 1/4
  EXPECT_NEAR(s.at(60), 0.55, 1e-15);  // progress 1/2
  EXPECT_DOUBLE_EQ(s.at(110), 0.1);
  EXPECT_DOUBLE_EQ(s.at(500), 0.1);
  EXPECT_DOUBLE_EQ(LrSchedule::cosine(1.0, 0, 10, 0.0).at(10), 0.0);
}

TEST(LrSchedule, ParseNamesTheKinds) {
  EXPECT_EQ(LrSchedule::parse("cosine", 1.0, 0, 10).kind, LrSchedule::Kind::cosine);
  EXPECT_EQ(LrSchedule::parse("constant", 1.0, 0, 10).kind, LrSchedule::Kind::constant);
  EXPECT_TRUE(contains_all(error_of([] { LrSchedule::parse("linear", 1.0, 0, 10); }),
                           {"'linear' (expected constant or cosine)"}));
  EXPECT_THROW(LrSchedule::cosine(1.0, 20, 10), Error);
  EXPECT_THROW(LrSchedule::constant(1.0).at(-1), Error);
}

}  // namespace
}  // namespace glass
