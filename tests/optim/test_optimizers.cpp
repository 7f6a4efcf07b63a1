// AdamW and SGD against hand-written reference updates (double precision, PyTorch's formulas),
// weight decay on >= 2-D parameters only, state export/import, and error messages.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "optim/adamw.h"
#include "optim/sgd.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// A leaf parameter with random values.
Tensor random_param(const Shape& shape, Generator& gen) {
  Tensor p = randn(shape, gen);
  p.set_requires_grad(true);
  return p;
}

// Parameters of both kinds: a matrix (decayed) and a vector (not), with odd sizes.
NamedTensors make_params(Generator& gen) {
  return {{"w", random_param({7, 13}, gen)}, {"b", random_param({13}, gen)}};
}

// Reference AdamW (torch.optim.AdamW) for one parameter, in double.
struct RefAdamW {
  std::vector<double> p, m, v;
  void step(const std::vector<double>& g, double lr, double b1, double b2, double eps, double wd,
            int t) {
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
};

TEST(AdamW, MatchesReferenceOverSeveralSteps) {
  Generator gen(1);
  NamedTensors params = make_params(gen);
  const AdamWOptions opt{.lr = 0.05, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  AdamW adamw(params, opt);
  std::vector<RefAdamW> ref;
  for (auto& [name, p] : params) {
    const size_t n = static_cast<size_t>(p.numel());
    ref.push_back({values(p), std::vector<double>(n), std::vector<double>(n)});
  }
  for (int t = 1; t <= 4; ++t) {
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = randn(params[i].second.shape(), gen);
      params[i].second.set_grad(g);
      const double wd = params[i].second.dim() >= 2 ? opt.weight_decay : 0.0;
      ref[i].step(values(g), opt.lr, opt.beta1, opt.beta2, opt.eps, wd, t);
    }
    adamw.step();
    EXPECT_EQ(adamw.step_count(), t);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(all_close(values(params[i].second), ref[i].p, 1e-6)) << params[i].first;
    EXPECT_TRUE(all_close(values(adamw.state_tensors()[i].second), ref[i].m, 1e-6));
  }
}

TEST(AdamW, WeightDecayOnlyOnMatrices) {
  // With zero gradients the moment update is exactly 0, so only the decay moves a parameter.
  Generator gen(2);
  NamedTensors params = make_params(gen);
  const std::vector<double> w0 = values(params[0].second), b0 = values(params[1].second);
  AdamW adamw(params, {.lr = 0.1, .weight_decay = 0.5});
  for (auto& [name, p] : params) p.set_grad(zeros_like(p));
  adamw.step();
  std::vector<double> w_expected = w0;
  for (double& w : w_expected) w *= 1 - 0.1 * 0.5;
  EXPECT_TRUE(all_close(values(params[0].second), w_expected, 1e-7));
  EXPECT_EQ(values(params[1].second), b0);  // the 1-D parameter is not decayed at all
}

TEST(SGD, MomentumAndWeightDecayMatchReference) {
  Generator gen(3);
  NamedTensors params = make_params(gen);
  const SGDOptions opt{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01};
  SGD sgd(params, opt);
  std::vector<std::vector<double>> p, buf(params.size());
  for (auto& [name, t] : params) p.push_back(values(t));
  for (int t = 1; t <= 3; ++t) {
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = randn(params[i].second.shape(), gen);
      params[i].second.set_grad(g);
      const std::vector<double> gv = values(g);
      const double wd = params[i].second.dim() >= 2 ? opt.weight_decay : 0.0;
      buf[i].resize(gv.size());
      for (size_t j = 0; j < gv.size(); ++j) {
        const double gj = gv[j] + wd * p[i][j];
        buf[i][j] = t == 1 ? gj : opt.momentum * buf[i][j] + gj;
        p[i][j] -= opt.lr * buf[i][j];
      }
    }
    sgd.step();
  }
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(all_close(values(params[i].second), p[i], 1e-6)) << params[i].first;
}

TEST(SGD, WithoutMomentumIsPlainGradientDescentWithNoState) {
  Generator gen(4);
  NamedTensors params = {{"w", random_param({5, 3}, gen)}};
  const std::vector<double> w0 = values(params[0].second);
  SGD sgd(params, {.lr = 0.5});
  EXPECT_TRUE(sgd.state_tensors().empty());
  Tensor g = randn({5, 3}, gen);
  params[0].second.set_grad(g);
  sgd.step();
  std::vector<double> expected = w0, gv = values(g);
  for (size_t j = 0; j < expected.size(); ++j) expected[j] -= 0.5 * gv[j];
  EXPECT_TRUE(all_close(values(params[0].second), expected, 1e-7));
}

TEST(Optimizer, ZeroGradClearsAndStepSkipsParametersWithoutGradient) {
  Generator gen(5);
  NamedTensors params = make_params(gen);
  AdamW adamw(params, {});
  params[0].second.set_grad(randn({7, 13}, gen));
  const std::vector<double> b0 = values(params[1].second);
  adamw.step();  // "b" has no gradient: untouched
  EXPECT_EQ(values(params[1].second), b0);
  adamw.zero_grad();
  for (auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
}

TEST(Optimizer, StepLaunchesRunInOptimizerPhase) {
  Generator gen(6);
  NamedTensors params = make_params(gen);
  AdamW adamw(params, {});
  for (auto& [name, p] : params) p.set_grad(randn(p.shape(), gen));
  LaunchLog log;
  adamw.step();
  ASSERT_EQ(log.records.size(), 1u);  // one multi-tensor kernel for all parameters
  for (const LaunchInfo& info : log.launches()) {
    EXPECT_STREQ(info.kernel, "adamw_step");
    EXPECT_STREQ(info.op, "adamw");
    EXPECT_EQ(info.phase, Phase::optimizer);
  }
}

TEST(Optimizer, StateRoundTripResumesBitExactly) {
  Generator gen(7);
  NamedTensors a = make_params(gen), b;
  for (auto& [name, p] : a) b.emplace_back(name, cast(p, DType::f32));
  for (auto& [name, p] : b) p.set_requires_grad(true);
  const AdamWOptions opt{.lr = 0.01, .weight_decay = 0.1};
  AdamW first(a, opt);
  std::vector<std::vector<Tensor>> grads;
  for (int t = 0; t < 3; ++t) {
    grads.emplace_back();
    for (auto& [name, p] : a) grads.back().push_back(randn(p.shape(), gen));
  }
  // Two steps on `first`, then copy its weights and state into a fresh optimizer.
  for (int t = 0; t < 2; ++t) {
    for (size_t i = 0; i < a.size(); ++i) a[i].second.set_grad(grads[t][i]);
    first.step();
  }
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < a.size(); ++i)
      kernels::backend(b[i].second).copy(a[i].second, b[i].second);
  }
  AdamW second(b, opt);
  NamedTensors saved;
  for (auto& [name, t] : first.state_tensors()) saved.emplace_back(name, cast(t, DType::f32));
  second.load_state(saved, first.state_scalars());
  EXPECT_EQ(second.step_count(), 2);
  // The third step must agree bit for bit.
  for (size_t i = 0; i < a.size(); ++i) {
    a[i].second.set_grad(grads[2][i]);
    b[i].second.set_grad(grads[2][i]);
  }
  first.step();
  second.step();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(to_vector<float>(a[i].second), to_vector<float>(b[i].second)) << a[i].first;
}

TEST(Optimizer, StateNamesAreBufferDotParameter) {
  Generator gen(8);
  AdamW adamw(make_params(gen), {});
  std::vector<std::string> names;
  for (auto& [name, t] : adamw.state_tensors()) names.push_back(name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"exp_avg.w", "exp_avg.b", "exp_avg_sq.w", "exp_avg_sq.b"}));
}

TEST(Optimizer, LoadStateReportsEveryProblem) {
  Generator gen(9);
  AdamW adamw(make_params(gen), {});
  NamedTensors state = adamw.state_tensors();
  state.erase(state.begin());                      // missing exp_avg.w
  state[0].second = zeros({3});                    // exp_avg.b of the wrong shape
  state.emplace_back("exp_avg.nope", zeros({1}));  // unknown
  const std::string msg = error_of([&] { adamw.load_state(state, {}); });
  EXPECT_TRUE(contains_all(msg, {"missing 'exp_avg.w'", "'exp_avg.b' is f32[3]",
                                 "unexpected 'exp_avg.nope'", "missing scalar 'step'"}));
  EXPECT_EQ(adamw.step_count(), 0);  // nothing changed
}

TEST(Optimizer, BadParametersAndGradientsAreNamed) {
  Generator gen(10);
  Tensor w = random_param({3, 4}, gen);
  EXPECT_TRUE(contains_all(error_of([&] {
                             AdamW({{"w", w}, {"w", random_param({2}, gen)}}, {});
                           }),
                           {"'w' appears twice"}));
  EXPECT_TRUE(contains_all(error_of([&] { AdamW({{"w", w}, {"v", w}}, {}); }), {"same tensor"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             AdamW({{"x", rnd({3}, gen)}}, {});
                           }),
                           {"'x' must be a contiguous f32"}));
  EXPECT_TRUE(contains_all(error_of([&] { AdamW({{"w", w}}, {.beta1 = 1.0}); }), {"betas"}));
  AdamW adamw({{"w", w}}, {});
  w.set_grad(zeros({4, 3}));
  const std::string msg = error_of([&] { adamw.step(); });
  EXPECT_TRUE(contains_all(msg, {"gradient of 'w' is f32[4, 3]"}));
  EXPECT_EQ(adamw.step_count(), 0);
}

}  // namespace
}  // namespace glass
