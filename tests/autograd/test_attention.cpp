// causal_attention: the f32 kernels against naive loops in double, gradcheck in f64 (odd sizes and
// the transposed views a model passes in), f32 gradients against f64 ones, causality, results
// independent of the thread count, the launch record (FLOPs as documented), and the errors for bad
// shapes.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/backend.h"
#include "tests/testing.h"

namespace glass {
namespace {

using namespace testing;

// out[s, i] = sum_{j <= i} softmax_j(q_i . k_j / sqrt(D)) v_j for every (b, h) slice s, in double.
std::vector<double> naive_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const size_t S = static_cast<size_t>(q.size(0) * q.size(1)), T = static_cast<size_t>(q.size(2)),
               D = static_cast<size_t>(q.size(3));
  const std::vector<double> qv = values(q), kv = values(k), vv = values(v);
  std::vector<double> out(qv.size(), 0.0);
  for (size_t s = 0; s < S; ++s)
    for (size_t i = 0; i < T; ++i) {
      std::vector<double> p(i + 1);
      double m = -INFINITY, sum = 0;
      for (size_t j = 0; j <= i; ++j) {
        for (size_t d = 0; d < D; ++d) p[j] += qv[(s * T + i) * D + d] * kv[(s * T + j) * D + d];
        p[j] /= std::sqrt(static_cast<double>(D));
        m = std::max(m, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - m));
      for (size_t j = 0; j <= i; ++j)
        for (size_t d = 0; d < D; ++d)
          out[(s * T + i) * D + d] += p[j] / sum * vv[(s * T + j) * D + d];
    }
  return out;
}

// causal_attention(q, k, v) as a function of its inputs.
const GradcheckFn kAttention = [](const std::vector<Tensor>& in) {
  return causal_attention(in[0], in[1], in[2]);
};

TEST(Attention, ForwardF32MatchesNaive) {
  Generator gen(21);
  for (const Shape& shape : {Shape{2, 3, 5, 4}, Shape{1, 2, 33, 8}}) {
    const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
    EXPECT_TRUE(
        all_close(causal_attention(q, k, v), from_vector(naive_attention(q, k, v), shape), 1e-5))
        << shape_str(shape);
  }
}

TEST(Attention, Gradcheck) {
  Generator gen(22);
  auto input = [&] { return rnd({2, 3, 5, 4}, gen); };
  EXPECT_TRUE(gradcheck_passes(kAttention, {input(), input(), input()}));
  // [B, T, H, D] transposed to [B, H, T, D], as a model splits its heads: non-contiguous inputs
  auto heads = [&] { return transpose(rnd({2, 5, 3, 4}, gen), 1, 2); };
  EXPECT_TRUE(gradcheck_passes(kAttention, {heads(), heads(), heads()}));
}

TEST(Attention, BackwardF32MatchesF64) {
  Generator gen(23);
  const Shape shape{2, 2, 17, 8};
  const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
  const Tensor dout = randn(shape, gen);
  auto grads = [&](DType dt) {
    return output_and_grads(kAttention, {cast(q, dt), cast(k, dt), cast(v, dt)}, cast(dout, dt));
  };
  const auto g32 = grads(DType::f32), g64 = grads(DType::f64);
  for (size_t i = 0; i < 3; ++i)  // [0] is the output, then the gradients of q, k, v
    EXPECT_TRUE(all_close(g32[i + 1], g64[i + 1], 1e-5)) << "gradient of input " << i;
}

TEST(Attention, IsCausalAndProbsAreMasked) {
  Generator gen(24);
  const int64_t T = 9, D = 4, cut = 4;
  const Tensor q = randn({1, 2, T, D}, gen), k = randn({1, 2, T, D}, gen);
  const Tensor v = randn({1, 2, T, D}, gen);
  // k and v changed at positions >= cut must not change the outputs before cut
  std::vector<float> k2 = to_vector<float>(k), v2 = to_vector<float>(v);
  for (size_t i = 0; i < k2.size(); ++i)
    if (static_cast<int64_t>(i / D) % T >= cut) k2[i] += 1, v2[i] -= 2;
  const std::vector<float> out1 = to_vector<float>(causal_attention(q, k, v));
  const std::vector<float> out2 = to_vector<float>(
      causal_attention(q, from_vector(k2, {1, 2, T, D}), from_vector(v2, {1, 2, T, D})));
  for (size_t i = 0; i < out1.size(); ++i) {
    if (static_cast<int64_t>(i / D) % T < cut) {
      EXPECT_EQ(out1[i], out2[i]) << "element " << i;
    } else {
      EXPECT_NE(out1[i], out2[i]) << "element " << i;
    }
  }
  // the saved probabilities: zero above the diagonal, rows summing to 1
  const Tensor out = empty_like(q), probs = Tensor::empty({1, 2, T, T});
  kernels::backend(q).attention_forward(q, k, v, out, probs, 0.5);
  const std::vector<float> p = to_vector<float>(probs);
  for (int64_t s = 0; s < 2; ++s)
    for (int64_t i = 0; i < T; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < T; ++j) {
        const float pij = p[static_cast<size_t>((s * T + i) * T + j)];
        if (j > i) {
          EXPECT_EQ(pij, 0.0f) << "row " << i << " column " << j;
        }
        sum += pij;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << i;
    }
}

TEST(Attention, BitIdenticalForAnyThreadCount) {
  Generator gen(26);
  const Shape shape{2, 2, 16, 64};  // big enough to run the slices in parallel
  const Tensor q = randn(shape, gen), k = randn(shape, gen), v = randn(shape, gen);
  const Tensor dout = randn(shape, gen);
  auto run = [&] { return f32_values(output_and_grads(kAttention, {q, k, v}, dout)); };
  EXPECT_EQ(with_threads(1, run), with_threads(2, run));
}

TEST(Attention, LaunchesCountTheDocumentedFlopsAndLeaveBlasThreadsAlone) {
  Generator gen(25);
  const Shape shape{2, 3, 16, 8};
  const Tensor q = randn(shape, gen).set_requires_grad(true), k = randn(shape, gen);
  const Tensor v = randn(shape, gen);
  const int blas_threads = openblas_get_num_threads();
  const Tensor dout = ones(shape);
  std::vector<LaunchInfo> seen;
  {
    LaunchLog log;
    backward(causal_attention(q, k, v), dout);
    seen = log.launches("attention_");
  }
  EXPECT_EQ(openblas_get_num_threads(), blas_threads);
  ASSERT_EQ(seen.size(), 2u);
  // full T x T x D GEMMs (2 forward, 4 backward) plus 5 or 4 FLOPs per causal entry, per slice
  const double square = 2.0 * 16 * 16 * 8, triangle = 16 * 17 / 2;
  EXPECT_STREQ(seen[0].kernel, "attention_forward");
  EXPECT_STREQ(seen[0].op, "attention");
  EXPECT_EQ(seen[0].phase, Phase::forward);
  EXPECT_EQ(seen[0].flops, 6 * (2 * square + 5 * triangle));
  EXPECT_STREQ(seen[1].kernel, "attention_backward");
  EXPECT_EQ(seen[1].phase, Phase::backward);
  EXPECT_EQ(seen[1].flops, 6 * (4 * square + 4 * triangle));
}

TEST(Attention, RejectsBadShapes) {
  const Tensor q = zeros({2, 3, 5, 4});
  EXPECT_TRUE(contains_all(error_of([&] {
                             causal_attention(zeros({3, 5, 4}), q, q);
                           }),
                           {"[B, H, T, D]"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             causal_attention(q, zeros({2, 3, 6, 4}), q);
                           }),
                           {"f32[2, 3, 6, 4]"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             causal_attention(q, q, zeros({2, 3, 5, 4}, DType::f64));
                           }),
                           {"f64[2, 3, 5, 4]"}));
}

// causal_attention(qkv, H, kernel) on the fused layout [B, T, 3C] as a function of qkv.
GradcheckFn qkv_attention(int64_t H, AttentionKernel kernel) {
  return [H, kernel](const std::vector<Tensor>& in) { return causal_attention(in[0], H, kernel); };
}

// qkv [B, T, 3C] split into heads [B, H, T, D] (q, k, v) by views, for the [B, H, T, D] op.
std::vector<Tensor> heads_of(const Tensor& qkv, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  std::vector<Tensor> parts = split(qkv, C, 2);
  for (Tensor& t : parts) t = transpose(view(t, {B, T, H, C / H}), 1, 2);
  return parts;
}

TEST(Attention, QkvLayoutGradcheckForEveryCpuKernel) {
  Generator gen(26);
  for (const AttentionKernel kernel : {AttentionKernel::naive, AttentionKernel::flash}) {
    SCOPED_TRACE(attention_kernel_name(kernel));
    // B 2, T 5, H 3, D 4 (the cpu flash entries take any head dim)
    EXPECT_TRUE(gradcheck_passes(qkv_attention(3, kernel), {rnd({2, 5, 36}, gen)}));
  }
  // T 131: the cpu flash kernel's later blocks of 64 query rows (the last one partial) see keys
  // the first block did not, and dK, dV gather from every block
  EXPECT_TRUE(gradcheck_passes(qkv_attention(1, AttentionKernel::flash), {rnd({1, 131, 3}, gen)}));
}

// The cpu flash kernel in f32 runs glass's GEMM told which tiles the causal mask lets it skip
// (sgemm's Causal); in f64 it runs OpenBLAS's dgemm over whole blocks (checked by gradcheck
// above). T 150 spans three query blocks, register tiles cut by the diagonal and tiles above it.
TEST(Attention, FlashF32MatchesF64AcrossQueryBlocks) {
  Generator gen(28);
  const int64_t B = 2, T = 150, H = 2, D = 16;
  const Tensor qkv = randn({B, T, 3 * H * D}, gen), dout = randn({B, T, H * D}, gen);
  auto run = [&](DType dt) {
    return output_and_grads(qkv_attention(H, AttentionKernel::flash), {cast(qkv, dt)},
                            cast(dout, dt));
  };
  const auto f32 = run(DType::f32), f64 = run(DType::f64);
  EXPECT_TRUE(all_close(f32[0], f64[0], 1e-5)) << "output";
  EXPECT_TRUE(all_close(f32[1], f64[1], 1e-5)) << "gradient of qkv";
}

TEST(Attention, QkvLayoutMatchesTheHeadsOpForEveryKernel) {
  Generator gen(27);
  const int64_t B = 2, T = 11, H = 2, D = 16, C = H * D;
  const Tensor qkv = randn({B, T, 3 * C}, gen), dout = randn({B, T, C}, gen);
  // reference: the [B, H, T, D] op on split views, its output put back to [B, T, C]
  const GradcheckFn heads_op = [&](const std::vector<Tensor>& in) {
    const std::vector<Tensor> qkvh = heads_of(in[0], H);
    return reshape(transpose(causal_attention(qkvh[0], qkvh[1], qkvh[2]), 1, 2), {B, T, C});
  };
  const std::vector<Tensor> ref = output_and_grads(heads_op, {qkv}, dout);
  for (const Device device : {kCPU, kEmu})
    for (const AttentionKernel kernel : {AttentionKernel::naive, AttentionKernel::flash}) {
      SCOPED_TRACE(device.str() + " " + attention_kernel_name(kernel));
      const std::vector<Tensor> got = output_and_grads(
          qkv_attention(H, kernel), {to_device(qkv, device)}, to_device(dout, device));
      EXPECT_TRUE(all_close(to_device(got[0], kCPU), ref[0], 1e-5));
      EXPECT_TRUE(all_close(to_device(got[1], kCPU), ref[1], 1e-5));
    }
}

TEST(Attention, QkvLayoutIsOneNodeAndFlashCopiesNothing) {
  Generator gen(28);
  const int64_t B = 1, T = 9, H = 2, C = 32;
  const Tensor qkv = to_device(randn({B, T, 3 * C}, gen), kEmu).set_requires_grad(true);
  for (const AttentionKernel kernel : {AttentionKernel::naive, AttentionKernel::flash}) {
    SCOPED_TRACE(attention_kernel_name(kernel));
    LaunchLog log;
    const Tensor y = causal_attention(qkv, H, kernel);
    EXPECT_EQ(y.grad_fn()->op, std::string("attention"));
    backward(y, to_device(randn({B, T, C}, gen), kEmu));  // a contiguous dO: no copy of it
    const std::vector<std::string> fwd = log.kernels_of_op("attention");
    if (kernel == AttentionKernel::flash) {
      // forward and backward of the op: the flash kernels alone, no copy around them
      EXPECT_EQ(fwd, (std::vector<std::string>{"flash_attention_forward",
                                               "flash_attention_backward_query",
                                               "flash_attention_backward_key"}));
    } else {
      // q, k, v copied out, the output copied back; backward: dO out, dq, dk, dv back
      EXPECT_EQ(std::count(fwd.begin(), fwd.end(), "copy"), 4 + 4);
    }
  }
}

TEST(Attention, KernelNamesAndRefusals) {
  EXPECT_EQ(parse_attention_kernel("flash"), AttentionKernel::flash);
  EXPECT_EQ(parse_attention_kernel("flash-simt"), AttentionKernel::flash_simt);
  EXPECT_EQ(parse_attention_kernel("flash-mma"), AttentionKernel::flash_mma);
  EXPECT_TRUE(contains_all(error_of([] { parse_attention_kernel("fast"); }),
                           {"'fast'", "naive, flash, flash-simt, flash-mma, cudnn"}));
  using K = AttentionKernel;
  const DType f32 = DType::f32, bf16 = DType::bf16;
  // automatic on emu and cuda: the Tensor Core kernel for bf16 with its head dims, the CUDA-core
  // one where only it suits the head dim, else naive; on cpu the cpu flash for any head dim
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kEmu, bf16, 64), K::flash_mma);
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kEmu, bf16, 48), K::flash_simt);
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kEmu, f32, 64), K::flash_simt);
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kEmu, f32, 4), K::naive);
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kCPU, bf16, 64), K::flash);
  EXPECT_EQ(resolve_attention_kernel(K::automatic, kCPU, f32, 4), K::flash);
  // flash: the device's best hand-written kernel
  EXPECT_EQ(resolve_attention_kernel(K::flash, kEmu, bf16, 128), K::flash_mma);
  EXPECT_EQ(resolve_attention_kernel(K::flash, kEmu, f32, 128), K::flash_simt);
  EXPECT_EQ(resolve_attention_kernel(K::flash, kCPU, bf16, 128), K::flash);
  EXPECT_EQ(resolve_attention_kernel(K::flash_simt, kEmu, bf16, 64), K::flash_simt);
  EXPECT_EQ(error_of([] { check_attention_kernel(K::cudnn, kEmu, f32, 64); }),
            "cudnn attention runs on cuda only (not on emu)");
  EXPECT_EQ(error_of([] { check_attention_kernel(K::flash_mma, kEmu, f32, 64); }),
            "flash-mma attention runs in bf16 only, not f32 (f32: --attention flash-simt)");
  EXPECT_EQ(error_of([] { check_attention_kernel(K::flash_mma, kEmu, bf16, 48); }),
            "flash-mma attention takes head dims 32, 64 and 128, not 48");
  EXPECT_EQ(error_of([] { check_attention_kernel(K::flash_simt, kEmu, f32, 4); }),
            "flash-simt attention takes head dims that are multiples of 8 in 16..128, not 4");
  for (const K kernel : {K::flash_simt, K::flash_mma})
    EXPECT_TRUE(contains_all(error_of([&] { check_attention_kernel(kernel, kCPU, bf16, 64); }),
                             {attention_kernel_name(kernel), "runs on emu and cuda only"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             causal_attention(zeros({1, 4, 96}), 2, K::flash_mma);
                           }),
                           {"flash-mma attention runs on emu and cuda only"}));
  const Tensor qkv = zeros({1, 4, 96});
  EXPECT_TRUE(contains_all(error_of([&] { causal_attention(qkv, 2, AttentionKernel::cudnn); }),
                           {"cudnn attention runs on cuda only (not on cpu)"}));
  EXPECT_TRUE(contains_all(error_of([&] {
                             causal_attention(zeros({1, 4, 96}), 5);
                           }),
                           {"qkv f32[1, 4, 96]", "(n_head + 2 n_kv_head) D", "(5 + 2 * 5) D"}));
}

}  // namespace
}  // namespace glass
