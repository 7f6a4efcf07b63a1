// checkpoint(): the gradients through a checkpointed part against finite differences (gradcheck),
// with the part reading a tensor from outside that is not one of its inputs (a weight), with two
// outputs, and with a gradient flowing into only one of them; the part's nodes are gone after
// forward; dropout inside replays its mask.
#include <gtest/gtest.h>

#include "autograd/checkpoint.h"
#include "autograd/gradcheck.h"
#include "autograd/ops.h"
#include "tests/testing.h"

namespace glass {
namespace {

TEST(Checkpoint, GradientsMatchFiniteDifferences) {
  Generator gen(7);
  const Tensor x = randn({3, 4}, gen, 0, 1, DType::f64), w = randn({5, 4}, gen, 0, 1, DType::f64);
  const Tensor b = randn({5}, gen, 0, 1, DType::f64);
  const GradcheckFn f = [](const std::vector<Tensor>& in) {
    const Tensor& w = in[1];
    const Tensor& b = in[2];
    // The part reads w and b from outside (captured, as a module's parameters are): they must
    // still receive their gradients, through the checkpoint's exits.
    const std::vector<Tensor> out = checkpoint(
        [&w, &b](const std::vector<Tensor>& x) {
          const Tensor h = gelu(linear(x[0], w, b));
          return std::vector<Tensor>{h * h, h + 1.0};
        },
        {in[0]});
    return out[0] + out[1] * 3.0;
  };
  const GradcheckResult r = gradcheck(f, {x, w, b});
  EXPECT_TRUE(r.ok) << r.report;
}

TEST(Checkpoint, OnlyTheInputsStayAfterForwardAndOneOutputMayGoUnused) {
  Generator gen(3);
  Tensor x = randn({2, 3}, gen), w = randn({3, 3}, gen);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const int64_t before = Tape::live_nodes();
  const std::vector<Tensor> out = checkpoint(
      [&w](const std::vector<Tensor>& in) {
        const Tensor h = gelu(matmul(in[0], w));
        return std::vector<Tensor>{h, h * 2.0};
      },
      {x});
  // One checkpoint node is alive, not the part's three.
  EXPECT_EQ(Tape::live_nodes() - before, 1);
  backward(sum(out[0]));  // no gradient reaches out[1]
  ASSERT_TRUE(x.grad().defined());
  ASSERT_TRUE(w.grad().defined());
  // The same without the checkpoint.
  Tensor x2 = x.detach(), w2 = w.detach();
  x2.set_requires_grad(true);
  w2.set_requires_grad(true);
  backward(sum(gelu(matmul(x2, w2))));
  EXPECT_EQ(to_vector<float>(x.grad()), to_vector<float>(x2.grad()));
  EXPECT_EQ(to_vector<float>(w.grad()), to_vector<float>(w2.grad()));
}

TEST(Checkpoint, DropoutInsideReplaysItsMask) {
  Generator gen(11), drop_gen(5);
  Tensor x = randn({64}, gen);
  x.set_requires_grad(true);
  const Tensor y = checkpoint(
      [&drop_gen](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{dropout(in[0], 0.5, true, drop_gen)};
      },
      {x}, {&drop_gen})[0];
  const uint64_t after_forward = drop_gen.offset();
  backward(sum(y));
  // The gradient is the mask / (1 - p): zero exactly where forward dropped the element.
  const std::vector<float> g = to_vector<float>(x.grad()), out = to_vector<float>(y);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i] == 0, out[i] == 0) << i;
  EXPECT_EQ(drop_gen.offset(), after_forward) << "the generator was not put back";
}

}  // namespace
}  // namespace glass
