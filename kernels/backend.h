// The dispatch point: a table of kernel entry points per device.
//
// autograd/ and optim/ call `backend(t.device()).layernorm_forward(...)`; which code runs is
// decided here and nowhere else. kernels/cpu fills the `cpu` table; `cuda` and `emu` get tables of
// their own, filled from kernels/cuda. Every entry launches through glass::launch, so each call is
// one or more visible launches.
//
// Conventions for every entry:
// - Outputs are allocated by the caller, contiguous, of the right shape, dtype and device; the
//   kernel overwrites them (it never accumulates, unless it says so).
// - Inputs are contiguous unless the entry says "any strides".
// - Floating entries take f32 or f64 (f64 for gradcheck on `cpu`), on emu/cuda also bf16, whose
//   statistics are accum_dtype (f32); shapes are checked by autograd/, entries assert bounds only.
#pragma once

#include <cstdint>
#include <span>

#include "engine/rng.h"
#include "engine/tensor.h"

namespace glass::kernels {

// One parameter of an AdamW step: the parameter, its gradient and both moments (f32, contiguous,
// one shape, one device), and the weight decay that applies to it (0 for biases and norms).
struct AdamWParam {
  Tensor param, grad, m, v;
  double weight_decay = 0;
};
// The step's hyper-parameters; `step` counts from 1 (bias correction).
struct AdamWHyper {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  int64_t step = 0;
  // emu and cuda: the step's scalars in device memory, f32 [adamw_table_size(n)] on the params'
  // device, filled with adamw_scalar_table(params, *this) (kernels/optim_math.h) by the caller,
  // so that a CUDA graph that captured the launch reads each replay's values (optim/adamw.h);
  // undefined: the launcher uploads them itself. cpu reads the fields above.
  Tensor scalars{};
  // The finite gate (optim/step_status.h): f64 [1] on the params' device, read by the kernel;
  // 0 there leaves every parameter and moment as it is (a step whose loss or gradient norm is
  // not finite). Undefined: always update.
  Tensor finite{};
};

enum class BinaryOp : uint8_t { add, sub, mul, div };
const char* binary_op_name(BinaryOp op);

// Row-major, strided-batched GEMM, the shape cuBLAS takes (in column-major clothes):
//   C[i] = alpha * op(A[i]) @ op(B[i]) (+ bias broadcast over rows) + beta * C[i],  i < batch
// op(A) is m x k: A is stored m x k (lda >= k) or, with trans_a, k x m (lda >= m). Likewise B.
// A batch stride of 0 reuses one matrix for every batch entry. `bias` (n values) may be undefined.
struct GemmArgs {
  Tensor a, b, c, bias;  // data pointers come from these; their shapes are not read
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  double alpha = 1, beta = 0;
};

// --- GEMM epilogues: what cuBLASLt fuses into a GEMM, in GemmArgs' row-major terms ---
// C is m x n (row i, column j), contiguous (ldc == n), batch 1, and
//   pre[i][j] = alpha (op(A) op(B))[i][j] (+ bias[j]) + beta C[i][j].
// activation:
//   none           C = pre
//   gelu           aux = pre, C = gelu(pre)     (forward; aux is kept for backward)
//   gelu_backward  C = pre * gelu'(aux)         (aux: the pre-activation gelu saw in forward)
// bias_grad (an output, undefined for none; GemmArgs' bias must then be undefined):
//   rows_of_a      bias_grad[i] = sum over l of op(A)[i][l]   ([m]; dB of y = x W^T + b with
//                                                             A = dy^T)
//   columns_of_c   bias_grad[j] = sum over i of C[i][j]       ([n]; only with gelu_backward)
// aux is m x n with row stride aux_ld = gemm_aux_ld(n) (cuBLASLt wants a multiple of 8), of C's
// dtype. gelu is the tanh approximation of gelu_forward.
enum class GemmActivation : uint8_t { none, gelu, gelu_backward };
enum class GemmBiasGrad : uint8_t { none, rows_of_a, columns_of_c };
struct GemmEpilogue {
  GemmActivation activation = GemmActivation::none;
  Tensor aux{};
  int64_t aux_ld = 0;
  GemmBiasGrad bias_grad_of = GemmBiasGrad::none;
  Tensor bias_grad{};
};
inline int64_t gemm_aux_ld(int64_t n) { return (n + 7) / 8 * 8; }
void check_gemm_epilogue(const GemmArgs& g, const GemmEpilogue& e);  // throws naming the problem
const char* gemm_epilogue_name(const GemmEpilogue& e);  // e.g. "gelu_bias", "dgelu_bgrad"
// After a GEMM has written pre into C: the epilogue's activation and C's column sums as separate
// launches of C's device's kernels (aux = pre by a copy, gelu_forward or gelu_backward in place,
// sum_dim). cpu's epilogue is the GEMM and this; so is cuda's where cuBLASLt has no algorithm.
void gemm_epilogue_passes(const GemmArgs& g, const GemmEpilogue& e);
// cuda and emu: every GEMM cuBLASLt would run (a bias, an epilogue, TF32) as a cuBLAS GEMM and
// separate launches instead, as for a shape cuBLASLt has no algorithm for (TF32 is then not used).
// Off by default; for tests, and for timing the fused path against the unfused one on a GPU.
void set_gemm_epilogues_in_passes(bool enabled);
bool gemm_epilogues_in_passes();

// TF32 for f32 GEMMs on cuda and emu (cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to
// 10 mantissa bits, f32 accumulation). Off by default, so that f32 stays the reference; a
// process-wide switch (train_gpt --tf32). cpu has no TF32 and ignores it.
void set_tf32(bool enabled);
bool tf32_enabled();

struct Backend {
  const char* name;

  // --- memory and initialisation ---
  void (*fill)(const Tensor& dst, double value);
  void (*copy)(const Tensor& src, const Tensor& dst);  // same shape and dtype, any strides, both
  void (*cast)(const Tensor& src, const Tensor& dst);  // same shape, any dtypes
  // dst[i] = mean + std * N(0,1) from Philox stream (seed, offset), element i (see engine/rng.h)
  void (*fill_normal)(const Tensor& dst, double mean, double std, uint64_t seed, uint64_t offset);
  void (*fill_uniform)(const Tensor& dst, double lo, double hi, uint64_t seed, uint64_t offset);

  // --- elementwise ---
  // out = a op b. a and b have out's shape with any strides (a broadcast dimension has stride 0);
  // out may be the same memory as a or b.
  void (*binary)(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out);
  void (*affine)(const Tensor& x, const Tensor& out, double mul, double add);  // out = x*mul + add
  void (*pow_scalar)(const Tensor& x, const Tensor& out, double p);            // out = x^p
  // GELU, tanh approximation: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  void (*gelu_forward)(const Tensor& x, const Tensor& y);
  void (*gelu_backward)(const Tensor& x, const Tensor& dy, const Tensor& dx);
  // Inverted dropout: element i is kept when philox_uniform(rng.seed, philox_offset(rng), i) >= p,
  // and scaled by 1/(1-p). Backward regenerates the same mask from rng: nothing is stored. The
  // kernel reads rng.offset_base (engine/rng.h) when it runs, so a replayed graph draws anew.
  void (*dropout_forward)(const Tensor& x, const Tensor& y, double p, const PhiloxArgs& rng);
  void (*dropout_backward)(const Tensor& dy, const Tensor& dx, double p, const PhiloxArgs& rng);

  // --- reductions ---
  // out = x summed over dimension `dim`; out has x's shape without that dimension.
  void (*sum_dim)(const Tensor& x, const Tensor& out, int dim);
  // out[0] = sum over every x in xs of sum(x^2), for global-norm clipping: one value for many
  // tensors, in few launches (f32 or f64 out, accumulated in double in a fixed order).
  void (*sum_squares)(std::span<const Tensor> xs, const Tensor& out);
  // Global-norm clipping's scaling, with the norm read from device memory (no host round trip,
  // so a CUDA graph can capture it): x *= max_norm / (norm + 1e-6) in place when norm > max_norm,
  // norm = sqrt(sum_sq[0]); sum_sq is f64 [1] (sum_squares' out) on x's device (kernels/
  // optim_math.h: clip_factor, formed in double).
  void (*clip_scale)(const Tensor& x, const Tensor& sum_sq, double max_norm);
  // The step's status, what the host reads once per step and the finite gate AdamW reads on the
  // device: status = {loss[0], sqrt(sum_sq[0]), 1 if both are finite else 0}, f64 [3]; loss is a
  // one-element f32 or bf16 tensor, sum_sq f64 [1] (sum_squares' out), all on one device.
  void (*step_status)(const Tensor& loss, const Tensor& sum_sq, const Tensor& status);

  // --- matrix multiply ---
  void (*gemm)(const GemmArgs& args);
  // gemm with an epilogue fused in (GemmEpilogue above): one cuBLASLt call on cuda and emu; on
  // cpu the GEMM and then the epilogue's own passes.
  void (*gemm_epilogue)(const GemmArgs& args, const GemmEpilogue& epilogue);

  // --- softmax family, on the last dimension of x viewed as [rows, cols] ---
  void (*softmax_forward)(const Tensor& x, const Tensor& y);
  void (*softmax_backward)(const Tensor& y, const Tensor& dy, const Tensor& dx);
  void (*log_softmax_forward)(const Tensor& x, const Tensor& y);
  void (*log_softmax_backward)(const Tensor& y, const Tensor& dy, const Tensor& dx);
  // logits [N, V], targets i32 [N]. losses[r] = logsumexp(logits[r]) - logits[r, t_r], lse[r] the
  // logsumexp, and valid[0] = number of rows with t_r != ignore_index (ignored rows: loss 0).
  // A target outside [0, V) that is not ignore_index throws, naming the row and the value (on
  // emu/cuda at the next host read, as for fused_classifier).
  void (*cross_entropy_forward)(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                                const Tensor& lse, const Tensor& valid, int64_t ignore_index);
  // dlogits[r] = (softmax(logits[r]) - onehot(t_r)) * dlosses[r]; ignored rows get 0.
  void (*cross_entropy_backward)(const Tensor& logits, const Tensor& targets, const Tensor& lse,
                                 const Tensor& dlosses, const Tensor& dlogits,
                                 int64_t ignore_index);

  // --- the fused classifier: logits [N, Vp] whose classes are columns [0, V), V <= Vp (the
  // padded columns are never a target and get no probability), targets i32 [N] ---
  // losses[r] = logsumexp(logits[r, :V]) - logits[r, t_r] (0 for ignored rows) and valid[0] = the
  // number of rows with t_r != ignore_index. With write_dlogits, logits is overwritten, in the
  // same pass, by the gradient of the mean loss: (softmax(logits[r, :V]) - onehot(t_r)) / valid on
  // columns [0, V), 0 on the padded columns and on ignored rows. A target outside [0, V) that is
  // not ignore_index throws naming row and value: at once on cpu, at the next host read on
  // emu/cuda (a device flag, engine/device_flags.h; the row's loss is NaN meanwhile). losses and
  // valid are accum_dtype(logits): f32 for bf16 logits, whose gradient is written in bf16.
  void (*fused_classifier)(const Tensor& logits, const Tensor& targets, const Tensor& losses,
                           const Tensor& valid, int64_t vocab, int64_t ignore_index,
                           bool write_dlogits);

  // --- LayerNorm over the last dimension: x [N, C], weight/bias [C], mean/rstd [N] ---
  void (*layernorm_forward)(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps);
  void (*layernorm_backward)(const Tensor& dy, const Tensor& x, const Tensor& weight,
                             const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                             const Tensor& dweight, const Tensor& dbias);
  // The residual add of a transformer block fused with the LayerNorm that follows it (x, delta,
  // residual, y, dy, dresidual, dx [N, C]): residual = x + delta (stored in x's dtype) and y, mean,
  // rstd = layernorm_forward of the stored residual, in one pass over the rows.
  void (*residual_layernorm_forward)(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                     const Tensor& bias, const Tensor& residual, const Tensor& y,
                                     const Tensor& mean, const Tensor& rstd, double eps);
  // dx = dresidual + the LayerNorm backward of dy at `residual` (the gradient of both x and
  // delta), dweight and dbias as layernorm_backward; dx is written once, in the same pass.
  void (*residual_layernorm_backward)(const Tensor& dy, const Tensor& dresidual,
                                      const Tensor& residual, const Tensor& weight,
                                      const Tensor& mean, const Tensor& rstd, const Tensor& dx,
                                      const Tensor& dweight, const Tensor& dbias);

  // --- RMSNorm over the last dimension (Llama): x [N, C], weight [C], rstd [N] (accum_dtype) ---
  // rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd * weight (rstd saved).
  void (*rmsnorm_forward)(const Tensor& x, const Tensor& weight, const Tensor& y,
                          const Tensor& rstd, double eps);
  // xhat = x * rstd: dx = rstd (w dy - xhat mean(w dy xhat)), dweight = sum over rows of dy xhat
  // (deterministic: fixed row chunks added in chunk order).
  void (*rmsnorm_backward)(const Tensor& dy, const Tensor& x, const Tensor& weight,
                           const Tensor& rstd, const Tensor& dx, const Tensor& dweight);
  // The residual add fused with the RMSNorm after it, as residual_layernorm_*: residual = x +
  // delta (stored in x's dtype) and y, rstd = rmsnorm_forward of the stored residual, one pass.
  void (*residual_rmsnorm_forward)(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                   const Tensor& residual, const Tensor& y, const Tensor& rstd,
                                   double eps);
  // dx = dresidual + the RMSNorm backward of dy at `residual`; dweight as rmsnorm_backward.
  void (*residual_rmsnorm_backward)(const Tensor& dy, const Tensor& dresidual,
                                    const Tensor& residual, const Tensor& weight,
                                    const Tensor& rstd, const Tensor& dx, const Tensor& dweight);

  // --- SwiGLU's activation (Llama's MLP): gate_up [N, 2F] (gate = columns [0, F), up = [F, 2F)),
  // out and dout [N, F] ---
  // out = silu(gate) * up, silu(g) = g sigmoid(g).
  void (*swiglu_forward)(const Tensor& gate_up, const Tensor& out);
  // dgate_up [N, 2F]: dgate = dout up silu'(gate), dup = dout silu(gate), with
  // silu'(g) = sigmoid(g) (1 + g (1 - sigmoid(g))).
  void (*swiglu_backward)(const Tensor& gate_up, const Tensor& dout, const Tensor& dgate_up);

  // --- rotary position embedding on a fused qkv [B, T, (n_head + 2 n_kv_head) D] ---
  // out = qkv with each of the n_head q heads and n_kv_head k heads (the first
  // (n_head + n_kv_head) D columns) rotated, Hugging Face's rotate-half convention, and the v
  // heads copied. Row t is at position p = start_pos + t; for i < D/2, angle = p inv_freq_i with
  // inv_freq_i = 1 / theta^(2i/D), both formed in f32 as Hugging Face does (in f64 for f64):
  //   out[i] = x[i] cos - x[i + D/2] sin,  out[i + D/2] = x[i + D/2] cos + x[i] sin.
  // out may be qkv itself (then v is not rewritten). D even, checked by autograd/rope.cpp.
  void (*rope_forward)(const Tensor& qkv, const Tensor& out, int64_t n_head, int64_t n_kv_head,
                       double theta, int64_t start_pos);
  // dqkv = dout with the q and k heads rotated by -angle (the transpose of the rotation), v's
  // gradient copied. dqkv may be dout itself.
  void (*rope_backward)(const Tensor& dout, const Tensor& dqkv, int64_t n_head, int64_t n_kv_head,
                        double theta, int64_t start_pos);

  // --- causal scaled-dot-product attention: q, out [B, H, T, D]; k, v [B, Hkv, T, D]; probs
  // [B, H, T, T] ---
  // Hkv divides H (grouped-query attention: query head h reads key/value head h / (H / Hkv); Hkv
  // = H is multi-head attention). probs = softmax(q k^T * scale, causal mask), out = probs v.
  // probs is saved for backward; dk and dv [B, Hkv, T, D] sum the gradients of the H / Hkv query
  // heads sharing a key/value head, in a fixed order (deterministic).
  void (*attention_forward)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                            const Tensor& probs, double scale);
  void (*attention_backward)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                             const Tensor& dout, const Tensor& dq, const Tensor& dk,
                             const Tensor& dv, double scale);
  // The same attention without the T x T matrix, read straight from the fused qkv projection:
  // qkv [B, T, (n_head + 2 n_kv_head) D] (query head h at columns h*D.., key head j at
  // (n_head + j)*D.., value head j at (n_head + n_kv_head + j)*D..; query head h reads key/value
  // head h / (n_head / n_kv_head); n_kv_head = n_head is qkv [B, T, 3C]); out [B, T, C = n_head D];
  // lse f32 [B, n_head, T] = per-row log-sum-exp of the scaled, masked scores, saved for backward
  // (P_ij = exp(S_ij - lse_i) is recomputed from it). n_kv_head must divide n_head.
  // On emu and cuda D must be a multiple of 8 in 16..128 (hand-written FlashAttention on the CUDA
  // cores, kernels/cuda/flash_attention.cu: `--attention flash-simt`); the cpu entries take any D,
  // and f64.
  void (*flash_attention_forward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                  int64_t n_head, int64_t n_kv_head, double scale);
  // dout [B, T, C] -> dqkv like qkv (overwritten); a key/value head's dK and dV sum its query
  // heads' gradients. Deterministic: no float atomics, a fixed summation order.
  void (*flash_attention_backward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                   const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                                   int64_t n_kv_head, double scale);
  // FlashAttention-2 on the Tensor Cores (kernels/cuda/flash_attention_mma.cu), the flash
  // entries' contract for bf16 and D in {32, 64, 128} (flash_mma_head_dim_ok); emu and cuda only,
  // null in the cpu table.
  void (*flash_attention_forward_mma)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                      int64_t n_head, int64_t n_kv_head, double scale);
  void (*flash_attention_backward_mma)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                       const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                                       int64_t n_kv_head, double scale);
  // cuDNN's fused attention (cuDNN 9 graph API), the flash entries' contract; `cuda` only, null
  // in the other tables (autograd/attention.cpp refuses it there with one line).
  void (*cudnn_attention_forward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                  int64_t n_head, int64_t n_kv_head, double scale);
  void (*cudnn_attention_backward)(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                   const Tensor& dout, const Tensor& dqkv, int64_t n_head,
                                   int64_t n_kv_head, double scale);

  // --- embedding: ids i32 [N], table [V, C], out [N, C] ---
  // An id outside [0, V) throws, naming the position and the value (on emu/cuda at the next host
  // read: a device flag, engine/device_flags.h).
  void (*embedding_forward)(const Tensor& ids, const Tensor& table, const Tensor& out);
  // dtable = scatter-add of dout rows by id, deterministic (fixed summation order).
  void (*embedding_backward)(const Tensor& ids, const Tensor& dout, const Tensor& dtable);

  // --- optimizers (f32, updated in place) ---
  // PyTorch AdamW, for many parameters at once (cpu: one launch; cuda/emu: one multi-tensor
  // launch per 32 parameters), each with its own weight decay:
  //   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  //   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
  void (*adamw_step)(std::span<const AdamWParam> params, const AdamWHyper& hyper);
  // PyTorch SGD: g += wd*p; buf = momentum*buf + g (buf = g on the first step); p -= lr*buf.
  void (*sgd_step)(const Tensor& param, const Tensor& grad, const Tensor& buf, double lr,
                   double momentum, double weight_decay, bool first_step);
};

// The head dims the hand-written FlashAttention kernels of emu and cuda take.
constexpr int64_t kFlashMinHeadDim = 16, kFlashMaxHeadDim = 128;  // and multiples of 8
constexpr bool flash_head_dim_ok(int64_t D) {
  return D % 8 == 0 && D >= kFlashMinHeadDim && D <= kFlashMaxHeadDim;
}

// The head dims of the Tensor Core FlashAttention kernel (bf16).
constexpr bool flash_mma_head_dim_ok(int64_t D) { return D == 32 || D == 64 || D == 128; }

const Backend& backend(Device d);
inline const Backend& backend(const Tensor& t) { return backend(t.device()); }

}  // namespace glass::kernels
