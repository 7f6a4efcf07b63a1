// The gradient norm of every tape node (autograd/grad_norms.h) against gradients worked out by
// hand: |dL/d out(n)| for each node of a small graph, summed over the node's consumers, scaled
// with the loss, and absent where no gradient reached the node; copy_grad_norms puts them onto
// another pass's tape of the same graph only.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/backward.h"
#include "autograd/function.h"
#include "autograd/grad_norms.h"
#include "autograd/ops.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::leaf;

double l2(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

const TapeNode& node_of(const std::vector<TapeNode>& tape, const std::string& op) {
  for (const TapeNode& n : tape)
    if (n.op == op) return n;
  throw std::runtime_error("no node " + op);
}

// L = sum(y*y) + sum(3y), y = x*w: dL/dy = 2y + 3 (two consumers summed), dL/d(y*y) = 1,
// dL/d(3y) = 1, dL/dL = 1; each node's norm is the L2 norm of those, by hand.
TEST(GradNorms, EveryNodeGetsTheNormOfItsOutputGradientByHand) {
  const std::vector<double> xv{1, -2, 3, 0.5, 4, -1}, wv{2, 1, -1, 3, 0.25, 2};
  Tensor x = leaf(xv, {2, 3}), w = leaf(wv, {2, 3});
  Tensor y = mul(x, w);
  Tensor loss = add(sum(mul(y, y)), sum(mul(y, 3.0)));
  const std::vector<TapeNode> tape = tape_with_grad_norms(loss, [&] { backward(loss); });
  ASSERT_EQ(tape.size(), 6u);  // mul(x,w), mul(y,y), sum, mul(y,3), sum, add
  std::vector<double> dy;
  for (size_t i = 0; i < xv.size(); ++i) dy.push_back(2 * xv[i] * wv[i] + 3);
  // Tape order: ascending id, the order forward made them.
  EXPECT_NEAR(*tape[0].grad_norm, l2(dy), 1e-5 * l2(dy));  // y = x * w
  EXPECT_NEAR(*tape[1].grad_norm, std::sqrt(6.0), 1e-6);   // y * y: ones [2, 3]
  EXPECT_NEAR(*tape[2].grad_norm, 1.0, 1e-7);              // sum(y * y): 1
  EXPECT_NEAR(*tape[3].grad_norm, std::sqrt(6.0), 1e-6);   // y * 3
  EXPECT_NEAR(*tape[4].grad_norm, 1.0, 1e-7);              // sum(y * 3)
  EXPECT_NEAR(*tape[5].grad_norm, 1.0, 1e-7);              // the loss itself
  // The pass is an ordinary backward: the leaves' gradients are the true ones.
  const std::vector<double> gx = to_vector<double>(x.grad());
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(gx[i], dy[i] * wv[i], 1e-5);
}

// backward(L / 4) (gradient accumulation over 4 micro-steps): every gradient is a quarter.
TEST(GradNorms, NormsFollowTheScaleOfTheBackwardPass) {
  Tensor x = leaf({1, 2, -2}, {3});
  Tensor loss = sum(mul(x, x));
  const std::vector<TapeNode> tape = tape_with_grad_norms(loss, [&] { backward(loss / 4.0); });
  ASSERT_EQ(tape.size(), 2u);
  EXPECT_NEAR(*tape[1].grad_norm, 0.25, 1e-7);                   // sum
  EXPECT_NEAR(*tape[0].grad_norm, 0.25 * std::sqrt(3.0), 1e-6);  // x * x: ones / 4
}

// A node whose only consumer sends it no gradient has no norm (the explorer shows "—").
TEST(GradNorms, ANodeNoGradientReachesHasNone) {
  Tensor x = leaf({1, 2}, {2});
  Tensor doubled = mul(x, 2.0);
  Tensor blocked;
  {
    OpScope op("block_gradient", {doubled});
    blocked = op.finish(contiguous(doubled.detach()), {},
                        [](Node&, const Tensor&) -> InputGrads { return {Tensor()}; });
  }
  Tensor loss = sum(add(blocked, x));
  const std::vector<TapeNode> tape = tape_with_grad_norms(loss, [&] { backward(loss); });
  ASSERT_EQ(tape.size(), 4u);  // x * 2, block_gradient, add, sum
  EXPECT_FALSE(tape[0].grad_norm.has_value());
  EXPECT_NEAR(*node_of(tape, "block_gradient").grad_norm, std::sqrt(2.0), 1e-6);
  EXPECT_NEAR(*tape[2].grad_norm, std::sqrt(2.0), 1e-6);  // add
  EXPECT_NEAR(*tape[3].grad_norm, 1.0, 1e-7);             // sum
}

// The norms go onto another pass's tape of the same graph by position (its ids are new); a tape of
// another graph (a node more, or another op or shape at a position) gets none.
TEST(GradNorms, CopiedOntoAnotherPassOfTheSameGraphOnly) {
  const auto pass = [](const std::vector<double>& xv) {
    Tensor x = leaf(xv, {static_cast<int64_t>(xv.size())});
    return sum(mul(x, x));
  };
  const Tensor measured_root = pass({1, 2, -2});
  const std::vector<TapeNode> measured =
      tape_with_grad_norms(measured_root, [&] { backward(measured_root); });
  std::vector<TapeNode> shown = record_tape(pass({1, 2, -2}));
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_NE(shown[0].id, measured[0].id);
  EXPECT_FALSE(shown[0].grad_norm.has_value());
  ASSERT_TRUE(copy_grad_norms(measured, shown));
  EXPECT_NEAR(*shown[0].grad_norm, std::sqrt(3.0), 1e-6);  // d sum / d(x * x): ones [3]
  EXPECT_NEAR(*shown[1].grad_norm, 1.0, 1e-7);

  Tensor y = leaf({1, 2, -2}, {3});
  std::vector<TapeNode> longer = record_tape(sum(mul(mul(y, y), 2.0)));
  EXPECT_FALSE(copy_grad_norms(measured, longer));
  std::vector<TapeNode> other_shape = record_tape(pass({1, 2, -2, 4}));
  EXPECT_FALSE(copy_grad_norms(measured, other_shape));
  for (const TapeNode& n : other_shape) EXPECT_FALSE(n.grad_norm.has_value());
}

}  // namespace
}  // namespace glass
