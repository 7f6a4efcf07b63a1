// kernels/cuda/cudnn_attention: what can be checked without a GPU.
// - The strided views cuDNN is given (cudnn_sdpa_layout) select exactly the q, k, v heads of the
//   fused qkv [B, T, (H + 2 Hkv) D] (multi-head [B, T, 3C], and grouped-query with fewer key/value
//   heads) and the heads of out [B, T, C]: compared with the split the model does with
//   view/slice/permute (autograd ops, independent code).
// - The math the SDPA graphs describe (stats = max + log sum exp, P recomputed from stats,
//   dS = (dO V^T - rowsum(dO * O)) * P * scale, ...), evaluated step by step on the host through
//   those views, agrees with the cpu attention kernels: the graphs compute the contract, and
//   cuDNN's stats are the contract's lse without conversion.
// - cuDNN accepts every tensor and operation descriptor of both graphs (where the build has cuDNN:
//   building descriptors needs no GPU).
// - Bad arguments are refused with messages naming the tensor; on emu the functions refuse.
// The operation graphs, plans and executions run only on a GPU: there, the cuda build's functions
// against the cpu flash kernels, tensor by tensor (scripts/gpu_check.sh runs them).
#include <cmath>

#include "kernels/cuda/cudnn_attention.h"
#include "tests/cuda_kernels/kernel_test.h"
#if defined(GLASS_TEST_CUDNN_GRAPHS)
#include "engine/cuda/runtime.h"
#endif

namespace glass {
namespace {

using kernels::cuda::CudnnSdpaLayout;
using kernels::cuda::CudnnView;
using testing::all_close;
using testing::contains_all;
using testing::device_empty;
using testing::error_of;

// The view as a tensor of its own (a copy), read through dims, strides and offset as cuDNN reads.
Tensor through(const Tensor& base, const CudnnView& v) {
  return contiguous(base.as_strided(Shape(v.dims.begin(), v.dims.end()),
                                    Shape(v.strides.begin(), v.strides.end()),
                                    base.offset() + v.offset));
}

// Head split of the model: [B, T, C] -> [B, H, T, D].
Tensor heads(const Tensor& x, int64_t H) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2) / H;
  return contiguous(permute(view(contiguous(x), {B, T, H, D}), {0, 2, 1, 3}));
}

TEST(CudnnAttention, ViewsSelectTheHeadsOfTheFusedLayouts) {
  Generator gen(31);
  for (auto [B, T, H, Hkv, D] : {std::array<int64_t, 5>{2, 5, 3, 3, 8},
                                 {1, 7, 2, 2, 16},
                                 {2, 5, 4, 2, 8},
                                 {1, 3, 4, 1, 16}}) {
    const int64_t C = H * D, KV = Hkv * D;
    const Tensor qkv = randn({B, T, C + 2 * KV}, gen), out = randn({B, T, C}, gen);
    const CudnnSdpaLayout l = kernels::cuda::cudnn_sdpa_layout(B, T, H, Hkv, D);
    const Tensor q = heads(slice(qkv, 2, 0, C), H), k = heads(slice(qkv, 2, C, C + KV), Hkv);
    const Tensor v = heads(slice(qkv, 2, C + KV, C + 2 * KV), Hkv);
    EXPECT_TRUE(all_close(through(qkv, l.q), q, 0));
    EXPECT_TRUE(all_close(through(qkv, l.k), k, 0));
    EXPECT_TRUE(all_close(through(qkv, l.v), v, 0));
    EXPECT_TRUE(all_close(through(qkv, l.k_t), contiguous(transpose(k, 2, 3)), 0));
    EXPECT_TRUE(all_close(through(qkv, l.v_t), contiguous(transpose(v, 2, 3)), 0));
    EXPECT_TRUE(all_close(through(out, l.o), heads(out, H), 0));
    const Tensor lse = randn({B, H, T}, gen);
    EXPECT_TRUE(all_close(through(lse, l.stats), view(lse, {B, H, T, 1}), 0));
  }
}

// Row-major [rows, cols] products of doubles: c = a b^T (a [m, k], b [n, k]).
std::vector<double> mul_bt(const std::vector<double>& a, const std::vector<double>& b, int64_t m,
                           int64_t n, int64_t k) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t x = 0; x < k; ++x) c[i * n + j] += a[i * k + x] * b[j * k + x];
  return c;
}
std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

TEST(CudnnAttention, GraphMathMatchesTheCpuKernelsAndLseContract) {
  Generator gen(32);
  const int64_t B = 2, T = 9, H = 3, D = 8, C = H * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const Tensor qkv = randn({B, T, 3 * C}, gen), dout = randn({B, T, C}, gen);
  const CudnnSdpaLayout l = kernels::cuda::cudnn_sdpa_layout(B, T, H, H, D);
  // the cpu reference on the model's split
  const Tensor q = heads(slice(qkv, 2, 0, C), H), k = heads(slice(qkv, 2, C, 2 * C), H);
  const Tensor v = heads(slice(qkv, 2, 2 * C, 3 * C), H), d_o = heads(dout, H);
  const Shape bhtd{B, H, T, D};
  const Tensor out_ref = Tensor::empty(bhtd), probs = Tensor::empty({B, H, T, T});
  const Tensor dq_ref = Tensor::empty(bhtd), dk_ref = Tensor::empty(bhtd),
               dv_ref = Tensor::empty(bhtd);
  kernels::cpu::attention_forward(q, k, v, out_ref, probs, scale);
  kernels::cpu::attention_backward(q, k, v, probs, d_o, dq_ref, dk_ref, dv_ref, scale);

  // the graphs' steps, per (batch, head), reading through the views cuDNN is given
  const std::vector<double> Q = testing::values(through(qkv, l.q));
  const std::vector<double> KT = testing::values(through(qkv, l.k_t));
  const std::vector<double> V = testing::values(through(qkv, l.v));
  const std::vector<double> VT = testing::values(through(qkv, l.v_t));
  const std::vector<double> dO = testing::values(through(dout, l.o));
  std::vector<double> O(B * H * T * D), lse(B * H * T), dQ(O.size()), dK(O.size()), dV(O.size());
  const double neg_inf = -INFINITY;
  for (int64_t s = 0; s < B * H; ++s) {
    const double* q_s = &Q[s * T * D];
    const std::vector<double> k_s = transposed({&KT[s * D * T], &KT[(s + 1) * D * T]}, D, T);
    const std::vector<double> q_vec(q_s, q_s + T * D), v_s(&V[s * T * D], &V[(s + 1) * T * D]);
    const std::vector<double> do_s(&dO[s * T * D], &dO[(s + 1) * T * D]);
    // forward: S = Q K^T * scale, masked; stats = M + log Z; P = E / Z; O = P V
    std::vector<double> S = mul_bt(q_vec, k_s, T, T, D), P(T * T);
    for (int64_t i = 0; i < T; ++i) {
      double m = neg_inf, z = 0;
      for (int64_t j = 0; j < T; ++j) {
        S[i * T + j] = j <= i ? S[i * T + j] * scale : neg_inf;
        m = std::max(m, S[i * T + j]);
      }
      for (int64_t j = 0; j < T; ++j) z += std::exp(S[i * T + j] - m);
      lse[s * T + i] = m + std::log(z);
      for (int64_t j = 0; j < T; ++j) P[i * T + j] = std::exp(S[i * T + j] - m) / z;
    }
    const std::vector<double> o_s = mul_bt(P, transposed(v_s, T, D), T, D, T);
    std::copy(o_s.begin(), o_s.end(), O.begin() + s * T * D);
    // backward: Dsum = rowsum(dO * O); P = exp(S - stats); dV = P^T dO;
    // dS = (dO V^T - Dsum) * P * scale; dK = dS^T Q; dQ = dS K
    std::vector<double> Pb(T * T);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) Pb[i * T + j] = std::exp(S[i * T + j] - lse[s * T + i]);
    const std::vector<double> dv_s = mul_bt(transposed(Pb, T, T), transposed(do_s, T, D), T, D, T);
    const std::vector<double> dP =
        mul_bt(do_s, transposed({&VT[s * D * T], &VT[(s + 1) * D * T]}, D, T), T, T, D);
    std::vector<double> dS(T * T);
    for (int64_t i = 0; i < T; ++i) {
      double dsum = 0;
      for (int64_t d = 0; d < D; ++d) dsum += do_s[i * D + d] * o_s[i * D + d];
      for (int64_t j = 0; j < T; ++j)
        dS[i * T + j] = (dP[i * T + j] - dsum) * Pb[i * T + j] * scale;
    }
    const std::vector<double> dk_s = mul_bt(transposed(dS, T, T), transposed(q_vec, T, D), T, D, T);
    const std::vector<double> dq_s = mul_bt(dS, transposed(k_s, T, D), T, D, T);
    std::copy(dv_s.begin(), dv_s.end(), dV.begin() + s * T * D);
    std::copy(dk_s.begin(), dk_s.end(), dK.begin() + s * T * D);
    std::copy(dq_s.begin(), dq_s.end(), dQ.begin() + s * T * D);
  }
  EXPECT_TRUE(all_close(O, testing::values(out_ref), 1e-5));
  EXPECT_TRUE(all_close(dQ, testing::values(dq_ref), 1e-5));
  EXPECT_TRUE(all_close(dK, testing::values(dk_ref), 1e-5));
  EXPECT_TRUE(all_close(dV, testing::values(dv_ref), 1e-5));
  // the contract's lse from the cpu probabilities: P[i][0] = exp(S[i][0] - lse[i]) (key 0 is
  // never masked), so lse[i] = S[i][0] - log P[i][0]
  const std::vector<double> p = testing::values(probs), qv = testing::values(q);
  const std::vector<double> kv = testing::values(k);
  std::vector<double> lse_ref(B * H * T);
  for (int64_t s = 0; s < B * H; ++s)
    for (int64_t i = 0; i < T; ++i) {
      double s0 = 0;
      for (int64_t d = 0; d < D; ++d) s0 += qv[(s * T + i) * D + d] * kv[s * T * D + d];
      lse_ref[s * T + i] = s0 * scale - std::log(p[(s * T + i) * T]);
    }
  EXPECT_TRUE(all_close(lse, lse_ref, 1e-5));
}

#if defined(GLASS_TEST_CUDNN_GRAPHS)
}  // namespace
// The cuda build's function (this file, compiled by the host compiler, sees the emu build's).
namespace kernels::cuda::on_gpu {
int64_t cudnn_attention_graph_ops(bool backward, int64_t B, int64_t T, int64_t n_head,
                                  int64_t n_kv_head, int64_t head_dim);
void cudnn_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                             int64_t n_head, int64_t n_kv_head, double scale);
void cudnn_attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                              int64_t n_kv_head, double scale);
}  // namespace kernels::cuda::on_gpu
namespace {

// cuDNN itself accepts every tensor and operation descriptor of both graphs (data types, dims,
// strides, by-value scalars, broadcasts, matmul shapes): cudnnBackendFinalize validates each one
// and needs no GPU. Only the operation graph, the heuristics and the plan are left to the GPU.
// Grouped-query attention adds the backward's two reductions of dK and dV over each group.
TEST(CudnnAttention, CudnnAcceptsEveryDescriptorOfBothGraphs) {
  for (auto [B, T, H, Hkv, D] : {std::array<int64_t, 5>{8, 1024, 12, 12, 64},
                                 {2, 37, 3, 3, 16},
                                 {1, 2, 1, 1, 128},
                                 {2, 37, 4, 2, 16},
                                 {1, 64, 8, 1, 64}}) {
    SCOPED_TRACE(fmt::format("B={} T={} H={} Hkv={} D={}", B, T, H, Hkv, D));
    EXPECT_EQ(kernels::cuda::on_gpu::cudnn_attention_graph_ops(false, B, T, H, Hkv, D), 14);
    EXPECT_EQ(kernels::cuda::on_gpu::cudnn_attention_graph_ops(true, B, T, H, Hkv, D),
              H == Hkv ? 21 : 23);
  }
}

// On a GPU (skipped without one): cuDNN's plans run, tensor by tensor against the cpu flash
// kernels in f32 on the same bf16-rounded inputs (tests/cuda_kernels/test_flash_attention.cpp
// checks those against the probs-based kernels), and the backward gives the same bits twice. The
// bounds in units of bf16's 2^-8 of the reference's largest magnitude: cuDNN rounds P to bf16
// before P V and stores O (out: 4 units); the backward also rounds dS and P for its products and
// stores dQ, dK, dV (dqkv: 8 units); lse stays f32 (1e-3: exp and log on the GPU's fast paths).
// A wrong mask, scale or operand order is off by far more. f32 tensors go through the same path
// converted to bf16 (cudnn_attention.cu), so bf16 tensors are what is tested.
TEST(CudnnAttention, OnAGpuMatchesTheCpuKernelsTensorByTensorAndRepeatsItsBits) {
  if (cuda::device_count() == 0)
    GTEST_SKIP() << "no GPU: cuDNN's plans and kernels run only on one (scripts/gpu_check.sh)";
  constexpr double kUnit = 1.0 / 256;
  auto on_gpu = [](const Tensor& host, DType dtype) {
    const Tensor t = cast(host, dtype);
    return Tensor::from_host(t.raw_data(), t.shape(), t.dtype(), kCUDA);
  };
  auto empty_gpu = [](const Shape& shape, DType dtype) {
    return Tensor::empty(shape, dtype, kCUDA);
  };
  auto as_f32 = [](const Tensor& t) { return cast(testing::to_cpu(t), DType::f32); };
  Generator gen(43);
  for (auto [B, T, H, Hkv, D] :
       {std::array<int64_t, 5>{2, 128, 3, 3, 64}, {1, 256, 2, 2, 128}, {2, 128, 4, 2, 64}}) {
    SCOPED_TRACE(fmt::format("B={} T={} H={} Hkv={} D={}", B, T, H, Hkv, D));
    const int64_t C = H * D, W = (H + 2 * Hkv) * D;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const Tensor qkv = cast(cast(randn({B, T, W}, gen, 0, 1.5), DType::bf16), DType::f32);
    const Tensor dout = cast(cast(randn({B, T, C}, gen), DType::bf16), DType::f32);
    const Tensor out_ref = Tensor::empty({B, T, C}), lse_ref = Tensor::empty({B, H, T});
    const Tensor dqkv_ref = Tensor::empty({B, T, W});
    kernels::cpu::flash_attention_forward(qkv, out_ref, lse_ref, H, Hkv, scale);
    kernels::cpu::flash_attention_backward(qkv, out_ref, lse_ref, dout, dqkv_ref, H, Hkv, scale);

    const Tensor gpu_qkv = on_gpu(qkv, DType::bf16), gpu_dout = on_gpu(dout, DType::bf16);
    const Tensor out = empty_gpu({B, T, C}, DType::bf16), lse = empty_gpu({B, H, T}, DType::f32);
    const Tensor dqkv = empty_gpu({B, T, W}, DType::bf16);
    kernels::cuda::on_gpu::cudnn_attention_forward(gpu_qkv, out, lse, H, Hkv, scale);
    kernels::cuda::on_gpu::cudnn_attention_backward(gpu_qkv, out, lse, gpu_dout, dqkv, H, Hkv,
                                                    scale);
    EXPECT_TRUE(all_close(as_f32(out), out_ref, 4 * kUnit));
    EXPECT_TRUE(all_close(as_f32(lse), lse_ref, 1e-3));
    EXPECT_TRUE(all_close(as_f32(dqkv), dqkv_ref, 8 * kUnit));
    const std::vector<unsigned char> first = testing::bytes_of(dqkv);
    kernels::cuda::on_gpu::cudnn_attention_backward(gpu_qkv, out, lse, gpu_dout, dqkv, H, Hkv,
                                                    scale);
    EXPECT_TRUE(testing::bytes_of(dqkv) == first) << "the backward's bits differ run to run";
  }
}
#endif

TEST(CudnnAttention, RejectsBadArgumentsNamingTheTensor) {
  const Tensor qkv = device_empty({2, 5, 3 * 32}), out = device_empty({2, 5, 32});
  const Tensor lse = device_empty({2, 4, 5});
  std::string msg =
      error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, out, lse, 3, 3, 1); });
  EXPECT_TRUE(
      contains_all(msg, {"cudnn_attention_forward", "qkv f32[2, 5, 96]", "[B, T, (3 + 2 * 3) D]"}))
      << msg;
  msg = error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, out, lse, 4, 3, 1); });
  EXPECT_TRUE(contains_all(msg, {"cudnn_attention_forward", "n_kv_head 3 must divide n_head 4"}))
      << msg;
  msg = error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, out, lse, 8, 8, 1); });
  EXPECT_TRUE(contains_all(msg, {"head dim D = C / n_head = 4", "multiples of 8"})) << msg;
  const Tensor lse_bf16 = device_empty({2, 4, 5}, DType::bf16);
  msg = error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, out, lse_bf16, 4, 4, 1); });
  EXPECT_TRUE(contains_all(msg, {"lse bf16[2, 4, 5]", "contiguous f32 [2, 4, 5]"})) << msg;
  const Tensor wide = device_empty({2, 5, 64});
  msg = error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, wide, lse, 4, 4, 1); });
  EXPECT_TRUE(contains_all(msg, {"out f32[2, 5, 64]", "[2, 5, 32]"})) << msg;
  msg =
      error_of([&] { kernels::cuda::cudnn_attention_backward(qkv, out, lse, out, out, 4, 4, 1); });
  EXPECT_TRUE(contains_all(msg, {"cudnn_attention_backward", "dqkv f32[2, 5, 32]"})) << msg;
  const Tensor ids = device_empty({2, 5, 96}, DType::i32);
  msg = error_of([&] { kernels::cuda::cudnn_attention_forward(ids, out, lse, 4, 4, 1); });
  EXPECT_TRUE(contains_all(msg, {"is i32", "takes bf16"})) << msg;
}

TEST(CudnnAttention, EmuRefusesWithOneLine) {
  EXPECT_FALSE(kernels::cuda::cudnn_attention_available());
  const Tensor qkv = device_empty({2, 5, 3 * 32}), out = device_empty({2, 5, 32});
  const Tensor lse = device_empty({2, 4, 5});
  for (const std::string& msg :
       {error_of([&] { kernels::cuda::cudnn_attention_forward(qkv, out, lse, 4, 4, 0.35); }),
        error_of([&] {
          kernels::cuda::cudnn_attention_backward(qkv, out, lse, out, qkv, 4, 4, 0.35);
        })}) {
    EXPECT_TRUE(contains_all(msg, {"runs on the cuda device only", "B=2 H=4 Hkv=4 T=5 D=8 f32"}))
        << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace glass
