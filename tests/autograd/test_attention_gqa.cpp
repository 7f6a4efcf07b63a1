// Grouped-query attention, causal_attention(qkv, n_head, n_kv_head, kernel) on qkv
// [B, T, (H + 2 Hkv) D], against multi-head attention on the same queries with each key/value head
// repeated for the H / Hkv query heads that read it (Hugging Face's repeat_kv, built here on the
// host): per kernel, device and dtype, the output and dQ are MHA's (the same arithmetic on the same
// numbers: the same bits), and dK, dV of a key/value head are the sums of MHA's over its query
// heads (summed here in f64; the kernels sum in their accumulators and round once, so in bf16 the
// two differ by a few roundings). Also: gradcheck in f64 on cpu (finite differences, independent
// of every kernel), the same bits run to run, the 4-D q/k/v op with fewer key/value heads, and the
// errors for n_kv_head not dividing n_head and a qkv whose last dim is not (H + 2 Hkv) D.
#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

constexpr double kBf16Unit = 1.0 / 256;  // bf16's relative rounding, 2^-8

// qkv [B, T, (H + 2 Hkv) D] -> the MHA qkv [B, T, 3 H D] whose key and value head h are key/value
// head h / (H / Hkv) of `qkv` (repeat_kv), of qkv's dtype, on `device`.
Tensor repeat_kv_heads(const Tensor& qkv, int64_t H, int64_t Hkv, Device device) {
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / (H + 2 * Hkv);
  const int64_t W = qkv.size(2), C = H * D, group = H / Hkv;
  const std::vector<double> in = values(to_device(qkv, kCPU));
  std::vector<double> out(static_cast<size_t>(B * T * 3 * C));
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t kv = h / group;
        out[r * 3 * C + h * D + d] = in[r * W + h * D + d];
        out[r * 3 * C + C + h * D + d] = in[r * W + C + kv * D + d];
        out[r * 3 * C + 2 * C + h * D + d] = in[r * W + C + (Hkv + kv) * D + d];
      }
  return to_device(cast(from_vector(out, {B, T, 3 * C}), qkv.dtype()), device);
}

// The MHA gradient dqkv [B, T, 3 H D] folded back to the GQA layout [B, T, (H + 2 Hkv) D]: dQ as
// it is, dK and dV of key/value head j the sum over query heads j * group .. (j + 1) * group - 1.
std::vector<double> sum_kv_groups(const Tensor& dqkv_mha, int64_t H, int64_t Hkv) {
  const int64_t B = dqkv_mha.size(0), T = dqkv_mha.size(1), C = dqkv_mha.size(2) / 3, D = C / H,
                W = (H + 2 * Hkv) * D, group = H / Hkv;
  const std::vector<double> in = values(to_device(dqkv_mha, kCPU));
  std::vector<double> out(static_cast<size_t>(B * T * W), 0.0);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t kv = h / group;
        out[r * W + h * D + d] = in[r * 3 * C + h * D + d];
        out[r * W + C + kv * D + d] += in[r * 3 * C + C + h * D + d];
        out[r * W + C + (Hkv + kv) * D + d] += in[r * 3 * C + 2 * C + h * D + d];
      }
  return out;
}

// The q columns (the first H D of each row) of a [B, T, W] tensor's values.
std::vector<double> q_columns(const std::vector<double>& v, int64_t W, int64_t C) {
  std::vector<double> q;
  for (size_t r = 0; r < v.size() / W; ++r)
    q.insert(q.end(), v.begin() + r * W, v.begin() + r * W + C);
  return q;
}

struct GqaCase {
  Device device;
  AttentionKernel kernel;
  DType dtype;
  int64_t B, T, H, Hkv, D;
};

TEST(AttentionGqa, EqualsMhaOnRepeatedKeyValueHeadsForEveryKernel) {
  const AttentionKernel naive = AttentionKernel::naive, flash = AttentionKernel::flash,
                        simt = AttentionKernel::flash_simt, mma = AttentionKernel::flash_mma;
  const DType f32 = DType::f32, bf16 = DType::bf16;
  // T: the cpu flash kernel's query blocks are 64 rows, flash-simt's tiles 16, flash-mma's 64
  // (its key kernel walks 64-row query tiles per query head for D <= 64): two of each, the last
  // partial, so a key/value head's sum spans several tiles of several query heads
  const GqaCase cases[] = {
      {kCPU, naive, f32, 2, 9, 4, 2, 8},  {kCPU, naive, f32, 1, 7, 3, 1, 8},
      {kCPU, flash, f32, 1, 70, 4, 2, 8}, {kCPU, flash, f32, 2, 9, 6, 2, 4},
      {kEmu, naive, f32, 1, 9, 4, 2, 16}, {kEmu, naive, bf16, 1, 9, 4, 1, 16},
      {kEmu, simt, f32, 1, 19, 4, 2, 16}, {kEmu, simt, bf16, 2, 19, 4, 1, 16},
      {kEmu, mma, bf16, 1, 67, 4, 2, 32}, {kEmu, mma, bf16, 1, 67, 4, 2, 64},
      {kEmu, mma, bf16, 1, 21, 4, 1, 32},
  };
  Generator gen(31);
  for (const GqaCase& c : cases) {
    SCOPED_TRACE(fmt::format("{} {} {} B {} T {} H {} Hkv {} D {}", c.device.str(),
                             attention_kernel_name(c.kernel), dtype_name(c.dtype), c.B, c.T, c.H,
                             c.Hkv, c.D));
    const int64_t C = c.H * c.D, W = (c.H + 2 * c.Hkv) * c.D;
    const Tensor qkv = to_device(cast(randn({c.B, c.T, W}, gen), c.dtype), c.device);
    const Tensor dout = to_device(cast(randn({c.B, c.T, C}, gen), c.dtype), c.device);
    const std::vector<Tensor> gqa = output_and_grads(
        [&](const std::vector<Tensor>& in) {
          return causal_attention(in[0], c.H, c.Hkv, c.kernel);
        },
        {qkv}, dout);
    const std::vector<Tensor> mha = output_and_grads(
        [&](const std::vector<Tensor>& in) { return causal_attention(in[0], c.H, c.kernel); },
        {repeat_kv_heads(qkv, c.H, c.Hkv, c.device)}, dout);
    ASSERT_EQ(gqa[0].shape(), Shape({c.B, c.T, C}));
    ASSERT_EQ(gqa[1].shape(), qkv.shape());
    // the output and dQ: the same computation per query head, the same bits
    EXPECT_TRUE(all_close(to_device(gqa[0], kCPU), to_device(mha[0], kCPU), 0)) << "output";
    const std::vector<double> want = sum_kv_groups(mha[1], c.H, c.Hkv);
    const std::vector<double> got = values(to_device(gqa[1], kCPU));
    EXPECT_TRUE(all_close(q_columns(got, W, C), q_columns(want, W, C), 0)) << "dQ";
    // dK and dV: sums over each group (f32: summation order only; bf16: MHA rounds each query
    // head's dK to bf16 before the sum, GQA the sum once)
    EXPECT_TRUE(all_close(got, want, c.dtype == f32 ? 1e-5 : 4 * kBf16Unit)) << "dqkv";
  }
}

// causal_attention(qkv, H, Hkv, kernel) as a function of qkv.
GradcheckFn gqa_attention(int64_t H, int64_t Hkv, AttentionKernel kernel) {
  return [=](const std::vector<Tensor>& in) { return causal_attention(in[0], H, Hkv, kernel); };
}

TEST(AttentionGqa, GradcheckOnCpu) {
  Generator gen(32);
  for (const AttentionKernel kernel : {AttentionKernel::naive, AttentionKernel::flash}) {
    SCOPED_TRACE(attention_kernel_name(kernel));
    // B 2, T 5, H 4, Hkv 2, D 3; and one key/value head (multi-query)
    EXPECT_TRUE(gradcheck_passes(gqa_attention(4, 2, kernel), {rnd({2, 5, 24}, gen)}));
    EXPECT_TRUE(gradcheck_passes(gqa_attention(3, 1, kernel), {rnd({1, 4, 10}, gen)}));
  }
}

TEST(AttentionGqa, BackwardGivesTheSameBitsEveryRun) {
  Generator gen(33);
  struct Run {
    AttentionKernel kernel;
    DType dtype;
    int64_t D;
  };
  for (const Run r : {Run{AttentionKernel::flash_simt, DType::f32, 16},
                      Run{AttentionKernel::flash_mma, DType::bf16, 32},
                      Run{AttentionKernel::naive, DType::f32, 16}}) {
    SCOPED_TRACE(attention_kernel_name(r.kernel));
    const int64_t B = 1, T = 40, H = 4, Hkv = 2;
    const Tensor qkv = to_device(cast(randn({B, T, (H + 2 * Hkv) * r.D}, gen), r.dtype), kEmu);
    const Tensor dout = to_device(cast(randn({B, T, H * r.D}, gen), r.dtype), kEmu);
    const std::vector<Tensor> first =
        output_and_grads(gqa_attention(H, Hkv, r.kernel), {qkv}, dout);
    const std::vector<Tensor> second =
        output_and_grads(gqa_attention(H, Hkv, r.kernel), {qkv}, dout);
    EXPECT_EQ(values(to_device(first[1], kCPU)), values(to_device(second[1], kCPU)));
  }
}

// The [B, H, T, D] op with k and v of fewer heads: query head h reads key/value head h / group,
// as the fused layout does.
TEST(AttentionGqa, HeadsOpTakesFewerKeyValueHeads) {
  Generator gen(34);
  const int64_t B = 2, T = 6, H = 4, Hkv = 2, D = 8;
  const Tensor qkv = randn({B, T, (H + 2 * Hkv) * D}, gen), dout = randn({B, T, H * D}, gen);
  auto split_heads = [&](const Tensor& x, int64_t first, int64_t heads) {
    return transpose(
        view(contiguous(slice(x, 2, first * D, (first + heads) * D)), {B, T, heads, D}), 1, 2);
  };
  const GradcheckFn heads_op = [&](const std::vector<Tensor>& in) {
    const Tensor y = causal_attention(split_heads(in[0], 0, H), split_heads(in[0], H, Hkv),
                                      split_heads(in[0], H + Hkv, Hkv));
    return reshape(transpose(y, 1, 2), {B, T, H * D});
  };
  const std::vector<Tensor> got = output_and_grads(heads_op, {qkv}, dout);
  const std::vector<Tensor> want =
      output_and_grads(gqa_attention(H, Hkv, AttentionKernel::flash), {qkv}, dout);
  EXPECT_TRUE(all_close(got[0], want[0], 1e-5));
  EXPECT_TRUE(all_close(got[1], want[1], 1e-5));
  EXPECT_TRUE(contains_all(
      error_of([&] {
        causal_attention(zeros({B, H, T, D}), zeros({B, 3, T, D}), zeros({B, 3, T, D}));
      }),
      {"n_kv_head 3 must divide n_head 4"}));
}

TEST(AttentionGqa, RejectsKeyValueHeadsNotDividingAndWrongWidths) {
  EXPECT_TRUE(contains_all(error_of([] {
                             causal_attention(zeros({1, 4, 80}), 4, 3);
                           }),
                           {"causal_attention", "n_kv_head 3 must divide n_head 4"}));
  EXPECT_TRUE(contains_all(error_of([] {
                             causal_attention(zeros({1, 4, 80}), 4, 0);
                           }),
                           {"n_kv_head 0 must divide n_head 4"}));
  // (4 + 2 * 2) D = 8 D: 36 is not a multiple of 8
  EXPECT_TRUE(contains_all(error_of([] {
                             causal_attention(zeros({1, 4, 36}), 4, 2);
                           }),
                           {"qkv f32[1, 4, 36]", "(n_head + 2 n_kv_head) D", "(4 + 2 * 2) D"}));
  // the backend entries check the same
  const Tensor out = zeros({1, 4, 16}), lse = zeros({1, 4, 4});
  EXPECT_TRUE(contains_all(
      error_of([&] {
        kernels::backend(kCPU).flash_attention_forward(zeros({1, 4, 36}), out, lse, 4, 2, 0.5);
      }),
      {"flash_attention_forward", "(n_head + 2 n_kv_head) D = (4 + 2 * 2) D"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             kernels::backend(kEmu).flash_attention_forward(
                                 to_device(zeros({1, 4, 32}), kEmu), to_device(out, kEmu),
                                 to_device(lse, kEmu), 4, 3, 0.5);
                           }),
                           {"flash_attention_forward", "n_kv_head 3 must divide n_head 4"}));
}

}  // namespace
}  // namespace glass
