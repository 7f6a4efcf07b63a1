// The fused classifier (autograd/classifier.cpp, kernels/{cpu,cuda}/classifier.*) against the
// unfused reference on cpu: log-softmax + cross-entropy (kernels/cpu/softmax.cpp) over the class
// columns, and its backward. The fused kernels share no code with that path. Also a loop in double
// for the loss. V = 65 (a character model, no padding, and padded to 128) and GPT-2's 50257 padded
// to 50304; some rows ignored. cpu and emu both run the fused op; padded columns get exactly 0.
// In bf16 on emu (logits and their gradient bf16, the loss f32) against the same f32 reference.
// backward(loss) itself skips the multiply by its seed, 1, and gives the bits the multiply gives.
#include <cmath>
#include <vector>

#include "autograd/ops.h"
#include "engine/device_flags.h"
#include "engine/launch.h"
#include "nn/gpt.h"
#include "tests/testing.h"

namespace glass {
namespace {

using testing::all_close;
using testing::contains_all;
using testing::error_of;

struct ClassifierCase {
  int64_t rows, vocab, padded;
};

std::vector<int32_t> targets_for(const ClassifierCase& c) {
  std::vector<int32_t> t(static_cast<size_t>(c.rows));
  for (int64_t r = 0; r < c.rows; ++r)
    t[r] = r % 4 == 3 ? -100 : static_cast<int32_t>((r * 7919 + 13) % c.vocab);
  t[0] = static_cast<int32_t>(c.vocab - 1);  // the last class, next to the padding
  return t;
}

// mean over counted rows of logsumexp(x[r, :V]) - x[r, t_r], in double
double naive_loss(const std::vector<double>& x, const std::vector<int32_t>& t,
                  const ClassifierCase& c) {
  double total = 0;
  int counted = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    if (t[r] == -100) continue;
    const double* row = x.data() + r * c.padded;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < c.vocab; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < c.vocab; ++j) s += std::exp(row[j] - m);
    total += m + std::log(s) - row[t[r]];
    ++counted;
  }
  return total / counted;
}

TEST(FusedClassifier, EqualsLogSoftmaxCrossEntropyAndItsBackward) {
  for (const ClassifierCase c :
       {ClassifierCase{7, 65, 65}, ClassifierCase{7, 65, 128}, ClassifierCase{6, 50257, 50304}}) {
    SCOPED_TRACE(fmt::format("rows {} vocab {} padded {}", c.rows, c.vocab, c.padded));
    Generator gen(42);
    // Logits with a spread like a model's (std 3), on cpu.
    const Tensor x = randn({c.rows, c.padded}, gen, 0, 3);
    const std::vector<int32_t> tv = targets_for(c);
    const Tensor t = from_vector(tv, {c.rows});
    // Reference: cross_entropy of the class columns, backward through the slice (padding: 0).
    Tensor xr = (x * 1.0).detach();  // a leaf copy
    xr.set_requires_grad(true);
    const Tensor ref = cross_entropy(slice(xr, 1, 0, c.vocab), t);
    backward(ref);
    // f32 sums of up to 50257 exponentials: relative 2e-5 (the double loop is exact to 1e-15).
    const double naive = naive_loss(testing::values(x), tv, c), tol = 2e-5 * std::abs(naive);
    EXPECT_NEAR(item(ref), naive, tol);
    for (const Device d : {kCPU, kEmu}) {
      SCOPED_TRACE(d.str());
      // A non-leaf input, as the GPT's logits are: its memory becomes dlogits.
      Tensor leaf = (to_device(x, d) * 1.0).detach();
      leaf.set_requires_grad(true);
      const Tensor logits = leaf * 1.0;
      const Tensor loss = fused_classifier(logits, to_device(t, d), c.vocab);
      backward(loss * 2.0);  // an incoming gradient of 2 scales dlogits
      EXPECT_NEAR(item(loss), naive, tol);
      const Tensor expected = xr.grad() * 2.0;
      EXPECT_TRUE(all_close(to_device(leaf.grad(), kCPU), expected, 1e-5));
      // The padded columns get exactly nothing.
      const std::vector<double> g = testing::values(to_device(leaf.grad(), kCPU));
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t j = c.vocab; j < c.padded; ++j) ASSERT_EQ(g[r * c.padded + j], 0.0);
    }
  }
}

// bf16 logits on emu against the f32 cpu reference on the same (bf16-rounded) logits. The loss is
// f32 and nothing on its path is stored in bf16 (bf16 loads are exact, the max, sum and log are
// f32), so it keeps the f32 bound, 2e-5. The gradient is rounded to bf16 once, when it overwrites
// the row (at most 2^-8 of its magnitude), then scaled by the incoming 2 (exact in bf16): 2 units
// of 2^-8 against the reference's largest magnitude. Padded columns: exactly 0.
TEST(FusedClassifier, Bf16OnEmuMatchesTheF32ReferenceWithinBf16Rounding) {
  constexpr double kUnit = 1.0 / 256;  // 2^-8
  for (const ClassifierCase c : {ClassifierCase{7, 65, 65}, ClassifierCase{6, 50257, 50304}}) {
    SCOPED_TRACE(fmt::format("bf16 rows {} vocab {} padded {}", c.rows, c.vocab, c.padded));
    Generator gen(43);
    const Tensor x = cast(cast(randn({c.rows, c.padded}, gen, 0, 3), DType::bf16), DType::f32);
    const std::vector<int32_t> tv = targets_for(c);
    const Tensor t = from_vector(tv, {c.rows});
    Tensor xr = (x * 1.0).detach();
    xr.set_requires_grad(true);
    const Tensor ref = cross_entropy(slice(xr, 1, 0, c.vocab), t);
    backward(ref * 2.0);
    const double naive = naive_loss(testing::values(x), tv, c);

    Tensor leaf = to_device(cast(x, DType::bf16), kEmu);
    leaf.set_requires_grad(true);
    const Tensor logits = leaf * 1.0;  // a non-leaf, as the GPT's logits are
    ASSERT_EQ(logits.dtype(), DType::bf16);
    const Tensor loss = fused_classifier(logits, to_device(t, kEmu), c.vocab);
    EXPECT_EQ(loss.dtype(), DType::f32);
    backward(loss * 2.0);
    EXPECT_NEAR(item(loss), naive, 2e-5 * std::abs(naive));
    const Tensor grad = to_device(leaf.grad(), kCPU);
    EXPECT_EQ(grad.dtype(), DType::bf16);
    EXPECT_TRUE(all_close(grad, xr.grad(), 2 * kUnit));
    const std::vector<double> g = testing::values(grad);
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t j = c.vocab; j < c.padded; ++j) ASSERT_EQ(g[r * c.padded + j], 0.0);
  }
  // f32 and bf16 only
  EXPECT_TRUE(contains_all(error_of([&] {
                             fused_classifier(zeros({2, 8}, DType::f64, kEmu),
                                              from_vector<int32_t>({0, 1}, {2}, kEmu), 8);
                           }),
                           {"fused_classifier", "f64", "f32 or bf16"}));
}

// backward(loss) with no gradient: the seed is 1, known on the host, so the gradient forward left
// is the answer and backward launches nothing for the classifier. With the caller's seed of ones
// (a value on the device) the multiply runs; both give the same bits, in f32 (cpu, emu) and bf16.
TEST(FusedClassifier, BackwardOfTheLossItselfLaunchesNothingAndEqualsAnExplicitSeedOfOne) {
  Generator gen(44);
  const ClassifierCase c{7, 65, 128};
  const Tensor x = randn({c.rows, c.padded}, gen, 0, 3);
  const Tensor t = from_vector(targets_for(c), {c.rows});
  for (const auto& [d, dtype] :
       {std::pair{kCPU, DType::f32}, std::pair{kEmu, DType::f32}, std::pair{kEmu, DType::bf16}}) {
    SCOPED_TRACE(fmt::format("{} {}", d.str(), dtype_name(dtype)));
    Tensor grads[2];
    for (const bool explicit_seed : {false, true}) {
      Tensor leaf = to_device(cast(x, dtype), d);
      leaf.set_requires_grad(true);
      const Tensor loss = fused_classifier(leaf * 1.0, to_device(t, d), c.vocab);
      testing::LaunchLog log;
      if (explicit_seed)
        backward(loss, full({}, 1.0, loss.dtype(), d));
      else
        backward(loss);
      EXPECT_EQ(log.kernels_of_op("fused_classifier").empty(), !explicit_seed);
      grads[explicit_seed] = to_device(leaf.grad(), kCPU);
    }
    EXPECT_EQ(testing::values(grads[0]), testing::values(grads[1]));
  }
}

TEST(FusedClassifier, WithoutGradTheLogitsAreKept) {
  Generator gen(3);
  const Tensor x = randn({5, 64}, gen, 0, 2);
  const Tensor t = from_vector<int32_t>({1, 2, 3, 4, 60}, {5});
  for (const Device d : {kCPU, kEmu}) {
    const Tensor logits = to_device(x, d);
    NoGradGuard no_grad;
    const double loss = item(fused_classifier(logits, to_device(t, d), 61));
    EXPECT_NEAR(loss, item(cross_entropy(slice(x, 1, 0, 61), t)), 1e-5) << d.str();
    EXPECT_TRUE(all_close(to_device(logits, kCPU), x, 0)) << d.str();
  }
}

TEST(FusedClassifier, BadTargetIsNamedAtTheNextReadWithoutAnExtraSync) {
  const Tensor x = zeros({4, 64});
  const std::vector<int32_t> bad{0, 2, 61, 1};  // 61 is padding: never a target
  const std::string cpu = error_of([&] { fused_classifier(x, from_vector(bad, {4}), 61); });
  EXPECT_TRUE(contains_all(cpu, {"fused_classifier: target 61 at row 2 is outside [0, 61)"}));
  // emu: the call queues a device flag and returns; the read of the loss throws, and the check
  // costs no synchronisation of its own.
  const Tensor xe = to_device(x, kEmu), te = from_vector(bad, {4}, kEmu);
  check_device_flags(kEmu);  // nothing pending from earlier tests
  const uint64_t before = host_sync_count();
  Tensor loss;
  ASSERT_NO_THROW(loss = fused_classifier(xe, te, 61));
  EXPECT_EQ(host_sync_count(), before);
  const std::string emu = error_of([&] { item(loss); });
  EXPECT_TRUE(contains_all(emu, {"fused_classifier: target 61 at row 2 is outside [0, 61)"}));
  EXPECT_NO_THROW(check_device_flags(kEmu));  // reported once
  // Good targets: the flag is read along with the loss, in the loss's one synchronisation.
  const uint64_t good = host_sync_count();
  const Tensor ok = fused_classifier(xe, from_vector<int32_t>({0, 2, 60, 1}, {4}, kEmu), 61);
  EXPECT_NEAR(item(ok), std::log(61.0), 1e-5);  // zero logits: uniform over 61 classes
  EXPECT_EQ(host_sync_count(), good + 1);
}

TEST(FusedClassifier, ShapesAreChecked) {
  const Tensor t = from_vector<int32_t>({0, 1}, {2});
  EXPECT_TRUE(contains_all(error_of([&] {
                             fused_classifier(zeros({2, 8}), t, 9);
                           }),
                           {"the vocabulary 9 must be in [1, 8]"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             fused_classifier(zeros({3, 8}), t, 8);
                           }),
                           {"targets i32[2] on cpu must be contiguous i32 with 3 elements"}));
}

// A GPT with a padded vocabulary (65 classes in 128 rows of wte): its loss on emu (the fused
// classifier) equals cpu's (cross_entropy of the class columns), and the padded rows of wte get
// no gradient on either.
TEST(FusedClassifier, GptLossWithPaddedVocabularyMatchesCpu) {
  const GPTConfig c{.vocab_size = 65,
                    .block_size = 8,
                    .n_layer = 1,
                    .n_head = 2,
                    .n_embd = 16,
                    .padded_vocab_size = GPTConfig::padded(65)};
  ASSERT_EQ(c.table_rows(), 128);
  std::vector<int32_t> xv(16), yv(16);
  for (int i = 0; i < 16; ++i) {
    xv[i] = (i * 11 + 3) % 65;
    yv[i] = (i * 7 + 5) % 65;
  }
  double losses[2];
  Tensor grads[2];
  for (int k = 0; k < 2; ++k) {
    const Device d = k == 0 ? kCPU : kEmu;
    GPT model(c);
    Generator gen(7);
    model.init(gen);
    model.to(d);
    const Tensor loss =
        model.loss(model.forward(from_vector(xv, {2, 8}, d)), from_vector(yv, {2, 8}, d));
    backward(loss);
    losses[k] = item(loss);
    grads[k] = to_device(model.wte.weight.grad(), kCPU);
    const std::vector<double> g = testing::values(grads[k]);
    for (int64_t i = 65 * 16; i < 128 * 16; ++i) ASSERT_EQ(g[i], 0.0) << d.str() << " at " << i;
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-5);
  EXPECT_TRUE(all_close(grads[1], grads[0], 1e-4));
}

}  // namespace
}  // namespace glass
