// The backward engine itself: reverse tape order, gradient summing, leaf accumulation, hooks,
// early release of saved tensors, NoGradGuard, detach and the tape printer.
#include <gtest/gtest.h>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::leaf;

TEST(Tape, GradientsMeetingInOneTensorAreSummed) {
  Tensor x = leaf({1, 2, 3}, {3});
  // y = x*x + 3x: dy/dx = 2x + 3, with x reaching y along three edges.
  Tensor y = sum(x * x + x * 3.0);
  backward(y);
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{5, 7, 9}));
}

TEST(Tape, LeafGradientsAccumulateOverBackwardPasses) {
  Tensor x = leaf({1, -2}, {2});
  backward(sum(x * 2.0));
  backward(sum(x * x));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{2 + 2, 2 - 4}));
}

// The delivery into an undefined .grad: a gradient nothing else holds becomes .grad as it is (no
// launch); one that is also held elsewhere (the caller's seed, one tensor handed to two leaves)
// is copied, so that changing one .grad in place changes nothing else.
TEST(Tape, AFreshLeafGradientIsTakenOverAndASharedOneIsCopied) {
  Tensor x = leaf({1, -2}, {2});
  {
    testing::LaunchLog log;
    backward(sum(x * 3.0));
    EXPECT_TRUE(log.kernels_of_op("grad_accumulate").empty());
  }
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{3, 3}));

  // add hands its incoming gradient to both inputs: the two .grads must not share memory.
  Tensor a = leaf({1, 2}, {2}), b = leaf({3, 4}, {2});
  backward(sum(a + b));
  EXPECT_NE(a.grad().storage(), b.grad().storage());
  kernels::backend(a.grad()).fill(a.grad(), 7.0);
  EXPECT_EQ(to_vector<double>(b.grad()), (std::vector<double>{1, 1}));

  // backward on a leaf with the caller's gradient: .grad is a copy of it.
  Tensor r = leaf({5, 6}, {2});
  const Tensor seed = from_vector(std::vector<double>{1, 2}, {2});
  backward(r, seed);
  EXPECT_NE(r.grad().storage(), seed.storage());
  kernels::backend(seed).fill(seed, 0.0);
  EXPECT_EQ(to_vector<double>(r.grad()), (std::vector<double>{1, 2}));
}

TEST(Tape, NodesRunInReverseTapeOrderWithHooks) {
  Tensor x = leaf({0.5, 1.5}, {2});
  Tensor a = x * 2.0;
  Tensor b = gelu(a);
  Tensor c = sum(b);
  std::vector<int64_t> order;
  for (const Tensor& t : {a, b, c}) {
    t.grad_fn()->extra().pre_hooks.push_back(
        [&](Node& n, const Tensor&) { order.push_back(n.id); });
  }
  int post_calls = 0;
  b.grad_fn()->extra().post_hooks.push_back([&](Node& n, const InputGrads& grads) {
    ++post_calls;
    EXPECT_EQ(grads.size(), 1u);
    EXPECT_EQ(grads[0].shape(), (Shape{2}));
  });
  backward(c);
  ASSERT_EQ(order.size(), 3u);
  EXPECT_GT(order[0], order[1]);
  EXPECT_GT(order[1], order[2]);
  EXPECT_EQ(post_calls, 1);
}

// An op whose output is its input's own handle (y = x, returned as is).
Tensor pass_through(const Tensor& x) {
  OpScope op("pass_through", {x});
  return op.finish(x, {}, [](Node&, const Tensor& dy) -> InputGrads { return {dy}; });
}

TEST(Tape, AnOutputSharingItsInputsHandleLeavesTheInputsHistoryAlone) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = pass_through(x);
  // The output got a handle of its own (same storage) with the new node; x is still the leaf.
  EXPECT_FALSE(y.is_same(x));
  EXPECT_EQ(y.storage(), x.storage());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_STREQ(y.grad_fn()->op, "pass_through");
  EXPECT_TRUE(x.is_leaf());
  backward(sum(y * 3.0));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{3, 3}));
}

TEST(Tape, GradReadyHookFiresOnceWithTheFinishedGradient) {
  Tensor x = leaf({1, 2}, {2});
  std::vector<std::vector<double>> seen;
  x.autograd_meta().grad_ready_hooks.push_back(
      [&](const Tensor& g) { seen.push_back(to_vector<double>(g)); });
  backward(sum(x * x + x * 5.0 + x));  // three contributions, one hook call
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{8, 10}));
}

TEST(Tape, SavedTensorsAreReleasedAfterTheNodeRunsAndASecondBackwardFails) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor y = x * x;  // saves both inputs
  Tensor loss = sum(y);
  Node* mul_node = y.grad_fn().get();
  EXPECT_FALSE(mul_node->saved.empty());
  backward(loss);
  EXPECT_TRUE(mul_node->saved.empty());
  EXPECT_TRUE(mul_node->has_run());
  EXPECT_THROW(backward(loss), Error);
}

TEST(Tape, NoGradGuardAndDetachRecordNothing) {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard guard;
    Tensor y = x * 3.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
  }
  Tensor d = (x * 3.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_THROW(backward(sum(d)), Error);
  // A detached branch contributes nothing: only the attached one reaches x.
  Tensor y = sum(x * 2.0 + (x * x).detach());
  backward(y);
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{2, 2}));
}

TEST(Tape, PrinterListsNodesInTapeOrderWithLeafNames) {
  Tensor w = leaf({1, 2, 3, 4}, {2, 2});
  w.autograd_meta().name = "layer.weight";
  Tensor x = from_vector<double>({1, 1}, {1, 2});
  Tensor loss = sum(matmul(x, w));
  const std::string s = tape_string(loss, true);
  EXPECT_NE(s.find("2 nodes"), std::string::npos) << s;
  EXPECT_NE(s.find("leaf layer.weight"), std::string::npos) << s;
  EXPECT_LT(s.find("matmul"), s.find("sum")) << s;
  EXPECT_NE(s.find("saved[0]"), std::string::npos) << s;
}

// A graph is freed without recursion (Node::~Node): dropping a chain of 200,000 recorded ops,
// each holding the previous one through its edge (and mul also through its saved input), must
// neither overflow the stack (with one destructor frame per op it did, under ASan) nor leave a
// node alive.
TEST(Tape, ALongChainIsFreedWithoutRecursion) {
  const int64_t alive_before = Tape::live_nodes();
  {
    Tensor y = leaf({1, 2}, {2});
    const Tensor w = leaf({0.5, 0.25}, {2});
    for (int i = 0; i < 100000; ++i) y = y * w + 1.0;
    EXPECT_EQ(Tape::live_nodes(), alive_before + 200000);
  }
  EXPECT_EQ(Tape::live_nodes(), alive_before);
}

TEST(Tape, BackwardNeedsAScalarOrAGradient) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y = x * 2.0;
  EXPECT_THROW(backward(y), Error);
  backward(y, from_vector<double>({1, 10}, {2}));
  EXPECT_EQ(to_vector<double>(x.grad()), (std::vector<double>{2, 20}));
  EXPECT_THROW(backward(from_vector<double>({1}, {1})), Error);  // nothing requires grad
}

// A node keeps two edges inline; an op with more inputs has its edges in one heap block reserved
// for exactly its inputs (docs/design.md, "What a recorded op costs"), not grown by doubling.
TEST(Tape, ANodeWithThreeInputsHoldsExactlyThreeEdges) {
  const Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor w = leaf({1, 0, -1, 2, 1, 0}, {2, 3});
  const Tensor b = leaf({0.5, -0.5}, {2});
  const Tensor y = linear(x, w, b);
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->inputs.size(), 3u);
  EXPECT_EQ(y.grad_fn()->inputs.capacity(), 3u);
  const Tensor z = add(x, x);
  EXPECT_EQ(z.grad_fn()->inputs.capacity(), 2u) << "two inputs stay inline";
}

}  // namespace
}  // namespace glass
