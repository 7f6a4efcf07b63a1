// The differentiable ops: what models are written with.
//
// Each family lives in its own file with every op's forward and backward side by side:
//   factory.cpp      zeros, ones, full, randn, from_vector, to_vector, item, cast, empty_like,
//                    compute_copy
//   views.cpp        view, reshape, transpose, permute, slice, split, concat, contiguous, expand
//   elementwise.cpp  add, sub, mul, div (NumPy broadcasting), scalar ops, pow, gelu, dropout
//   reduce.cpp       sum, mean
//   matmul.cpp       matmul (batched, broadcast), linear, mlp (fused linear-GELU-linear)
//   softmax.cpp      softmax, log_softmax, cross_entropy
//   classifier.cpp   fused_classifier (cross-entropy with dlogits in forward, padded vocabulary)
//   layernorm.cpp    layer_norm, residual_layer_norm (the residual add fused with it)
//   rmsnorm.cpp      rms_norm, residual_rms_norm (Llama's; the residual add fused with it)
//   swiglu.cpp       swiglu (Llama's MLP activation on the fused gate/up projection)
//   rope.cpp         rotary_embedding (Llama's rotary position embedding on the fused qkv)
//   attention.cpp    causal_attention
//   embedding.cpp    embedding
//
// What each op's backward computes (dy = the gradient of the op's output) and the Backend kernels
// (kernels/backend.h) that run it; a one-line comment beside each backward says the same:
// clang-format off
//   op                derivative rule                               kernels: forward / backward
//   add, sub          da = dy, db = +-dy (summed over broadcast)    binary / affine, sum_dim
//   mul               da = dy b, db = dy a                          binary / binary
//   div               da = dy / b, db = -dy a / b^2                 binary / binary, affine
//   add/mul scalar    dx = dy mul                                   affine / affine
//   pow               dx = dy p x^(p-1)                             pow_scalar / pow_scalar,
//                                                                   affine, binary
//   gelu              dx = dy gelu'(x)                              gelu_forward / gelu_backward
//   dropout           dx = dy mask / (1 - p)                        dropout_forward / _backward
//   sum, mean         dx = dy broadcast back (/ count for mean)     sum_dim / copy, affine
//   matmul            dA = dC B^T, dB = A^T dC                      gemm / gemm x2
//   linear            dx = dy W, dW = dy^T x, db = sum_rows(dy)     gemm / gemm x2, sum_dim
//   mlp               the chain rule through linear, GELU, linear   gemm_epilogue / the same
//   softmax           dx = y (dy - sum(dy y))                       softmax_forward / _backward
//   log_softmax       dx = dy - softmax(x) sum(dy)                  log_softmax_forward / _backward
//   cross_entropy     dz = (softmax(z) - onehot) dloss / N          cross_entropy_forward / _bwd
//   fused_classifier  dlogits made in forward, scaled by dloss      fused_classifier / binary
//                     (no launch when dloss is backward()'s seed 1)
//   layer_norm        dx = rstd (w dy - mean(w dy)                  layernorm_forward / _backward
//                     - xhat mean(w dy xhat)),
//                     dw = sum(dy xhat), db = sum(dy)
//   rms_norm          dx = rstd (w dy - xhat mean(w dy xhat)),      rmsnorm_forward / _backward
//                     dw = sum(dy xhat), xhat = x rstd
//   residual_*_norm   d(x) = d(delta) = dresidual + the norm's dx   residual_layernorm_*,
//                                                                   residual_rmsnorm_*
//   swiglu            dgate = dy up silu'(gate),                    swiglu_forward / _backward
//                     dup = dy silu(gate)
//   rotary_embedding  dx = dy rotated by -angle (v: dx = dy)        rope_forward / rope_backward
//   causal_attention  dV = P^T dO, dS = P (dP - rowsum(dP P)),      attention_forward / _backward
//                     dP = dO V^T, dQ = dS K s, dK = dS^T Q s       (naive); flash_attention_*
//                     (GQA: dK, dV summed over a kv head's query heads)
//   embedding         dtable[id] += dy row                          embedding_forward / _backward
//   views             dy mapped back to the input's geometry        none / copy, fill, sum_dim
//   contiguous,concat dx = dy (its part of dy)                      copy / copy
//   compute_copy      dmaster = cast(dy) to the master's dtype      none / cast
// clang-format on
//
// Errors name the op and the offending tensors' dtype, shape and device.
// Every op that records a node takes a defaulted last parameter `site`: where it was called from,
// shown as the node's creation site (autograd/creation_site.h). Leave it to its default.
#pragma once

#include <string>
#include <vector>

#include "autograd/backward.h"
#include "autograd/creation_site.h"
#include "autograd/node.h"
#include "engine/rng.h"
#include "engine/tensor.h"

namespace glass {

// --- factories (no history) ---
Tensor empty_like(const Tensor& t);
Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = kCPU);
Tensor zeros_like(const Tensor& t);
// N(mean, std^2) from the generator's Philox stream (advances it).
Tensor randn(const Shape& shape, Generator& gen = default_generator(), double mean = 0,
             double std = 1, DType dtype = DType::f32, Device device = kCPU);
// U[lo, hi)
Tensor rand(const Shape& shape, Generator& gen = default_generator(), double lo = 0, double hi = 1,
            DType dtype = DType::f32, Device device = kCPU);
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = kCPU);
// All elements in row-major order (any strides, any device); T must match the dtype.
template <class T>
std::vector<T> to_vector(const Tensor& t);
// The value of a one-element floating or integer tensor, as a double. to_vector and item throw on
// `meta`, which holds no values ("meta tensors have no data: item() of ...").
double item(const Tensor& t);
// A copy converted to `dtype` (no history: casts are for storage, e.g. bf16 weights).
Tensor cast(const Tensor& t, DType dtype);
// Mixed precision: `copy` holds `master` converted to copy's dtype (the bf16 copy of an f32
// master weight, refreshed by a cast after each optimizer step: nn/module.h). Forward launches
// nothing and returns a view of `copy`; backward casts the gradient to master's dtype, so the
// master's .grad is f32 and accumulates in f32. This is the one place where a bf16 gradient
// becomes an f32 one.
Tensor compute_copy(const Tensor& master, const Tensor& copy, CallSite site = CallSite::current());
// A contiguous copy on `device` (no history), staged through host memory; `t` itself when it is
// already there. To `meta`: a fresh tensor of t's shape and dtype (nothing is read or copied);
// from `meta` to another device: an error (no data).
Tensor to_device(const Tensor& t, Device device);

// --- views: share storage, never copy (except contiguous/reshape/concat, which say so) ---
// One dim may be -1; x's strides must allow it.
Tensor view(const Tensor& x, Shape shape, CallSite site = CallSite::current());
// A view when possible, else a contiguous copy.
Tensor reshape(const Tensor& x, Shape shape, CallSite site = CallSite::current());
Tensor transpose(const Tensor& x, int d0, int d1, CallSite site = CallSite::current());
Tensor permute(const Tensor& x, const std::vector<int>& dims, CallSite site = CallSite::current());
// [start, end).
Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end,
             CallSite site = CallSite::current());
// Chunks of `size`.
std::vector<Tensor> split(const Tensor& x, int64_t size, int dim,
                          CallSite site = CallSite::current());
// A copy.
Tensor concat(const std::vector<Tensor>& xs, int dim, CallSite site = CallSite::current());
// x itself when it is contiguous, else a visible copy launch.
Tensor contiguous(const Tensor& x, CallSite site = CallSite::current());
// A broadcast view (stride 0); the gradient sums back.
Tensor expand(const Tensor& x, const Shape& shape, CallSite site = CallSite::current());
// The shape two shapes broadcast to (NumPy rules), or an error naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sums g down to `shape` (the inverse of broadcasting); used by backward functions.
Tensor sum_to(const Tensor& g, const Shape& shape, CallSite site = CallSite::current());

// --- elementwise ---
Tensor add(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor sub(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor mul(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor div(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
Tensor add(const Tensor& a, double s, CallSite site = CallSite::current());
Tensor mul(const Tensor& a, double s, CallSite site = CallSite::current());
Tensor neg(const Tensor& a, CallSite site = CallSite::current());
Tensor pow(const Tensor& a, double p, CallSite site = CallSite::current());
// Tanh approximation, as GPT-2.
Tensor gelu(const Tensor& x, CallSite site = CallSite::current());
// Inverted dropout with probability p from `gen`; identity when !training or p == 0.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator(),
               CallSite site = CallSite::current());

inline Tensor operator+(SitedTensor a, const Tensor& b) { return add(a.tensor, b, a.site); }
inline Tensor operator-(SitedTensor a, const Tensor& b) { return sub(a.tensor, b, a.site); }
inline Tensor operator*(SitedTensor a, const Tensor& b) { return mul(a.tensor, b, a.site); }
inline Tensor operator/(SitedTensor a, const Tensor& b) { return div(a.tensor, b, a.site); }
inline Tensor operator+(SitedTensor a, double s) { return add(a.tensor, s, a.site); }
inline Tensor operator-(SitedTensor a, double s) { return add(a.tensor, -s, a.site); }
inline Tensor operator*(SitedTensor a, double s) { return mul(a.tensor, s, a.site); }
inline Tensor operator/(SitedTensor a, double s) { return mul(a.tensor, 1.0 / s, a.site); }
inline Tensor operator*(double s, SitedTensor a) { return mul(a.tensor, s, a.site); }
inline Tensor operator-(SitedTensor a) { return neg(a.tensor, a.site); }

// --- reductions ---
// All elements -> shape [].
Tensor sum(const Tensor& x, CallSite site = CallSite::current());
Tensor sum(const Tensor& x, const std::vector<int>& dims, bool keepdim = false,
           CallSite site = CallSite::current());
Tensor mean(const Tensor& x, CallSite site = CallSite::current());
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim = false,
            CallSite site = CallSite::current());

// --- matrix multiply ---
// a [..., m, k] @ b [..., k, n]: batch dims broadcast; 1-D operands are not accepted. Transposed
// views are passed to the GEMM as op flags, never copied.
Tensor matmul(const Tensor& a, const Tensor& b, CallSite site = CallSite::current());
// x [..., in] @ w[out, in]^T + b[out] (b may be undefined). On cuda and emu the bias is added by
// the GEMM's epilogue, and backward's dW GEMM computes db too.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor(),
              CallSite site = CallSite::current());
// linear(gelu(linear(x, w_fc, b_fc)), w_proj, b_proj) as one op (the transformer's MLP), whose
// bias adds, GELU, GELU gradient and bias gradients are all fused into its GEMMs on cuda and emu
// (cuBLASLt epilogues). Biases may be undefined. recompute_gelu: the GELU's output is not saved
// for backward but rebuilt there from its input (train_gpt --recompute gelu), with the same bits.
Tensor mlp(const Tensor& x, const Tensor& w_fc, const Tensor& b_fc, const Tensor& w_proj,
           const Tensor& b_proj, bool recompute_gelu = false, CallSite site = CallSite::current());

// --- softmax family (last dimension) ---
Tensor softmax(const Tensor& x, CallSite site = CallSite::current());
Tensor log_softmax(const Tensor& x, CallSite site = CallSite::current());
// Mean over the positions whose target != ignore_index. logits [..., V], targets i32 [...].
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     CallSite site = CallSite::current());
// The same mean cross-entropy for logits [rows, Vp] whose classes are the columns [0, vocab)
// (the rest is padding: never a target, no probability, no gradient), computed with the gradient
// of the logits in one fused kernel (kernels/backend.h: fused_classifier). When a gradient is
// needed the logits' memory is overwritten by it: the logits are consumed.
Tensor fused_classifier(const Tensor& logits, const Tensor& targets, int64_t vocab,
                        int64_t ignore_index = -100, CallSite site = CallSite::current());

// --- normalisation ---
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5,
                  CallSite site = CallSite::current());
// The residual stream's add fused with the LayerNorm after it, as one node with two outputs:
//   residual = x + delta,  normed = layer_norm(residual, weight, bias, eps)
// (x, delta [..., C] of one shape). Backward: d(x) = d(delta) = d(residual) + layer_norm's dx.
struct ResidualNorm {
  Tensor residual, normed;
};
ResidualNorm residual_layer_norm(const Tensor& x, const Tensor& delta, const Tensor& weight,
                                 const Tensor& bias, double eps = 1e-5,
                                 CallSite site = CallSite::current());

// --- Llama's layers (autograd/rmsnorm.cpp, autograd/swiglu.cpp, autograd/rope.cpp) ---
// RMSNorm over the last dimension: y = x * rsqrt(mean(x^2) + eps) * weight, weight [C]; the
// statistic rstd [rows] in f32 also for bf16 x.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-5,
                CallSite site = CallSite::current());
// The residual add fused with the RMSNorm after it (as residual_layer_norm):
//   residual = x + delta,  normed = rms_norm(residual, weight, eps)
ResidualNorm residual_rms_norm(const Tensor& x, const Tensor& delta, const Tensor& weight,
                               double eps = 1e-5, CallSite site = CallSite::current());
// SwiGLU's activation on the fused gate/up projection: gate_up [..., 2F] (gate = the first F
// columns, up = the last F) -> silu(gate) * up [..., F].
Tensor swiglu(const Tensor& gate_up, CallSite site = CallSite::current());
// Rotary position embedding (Hugging Face's rotate-half convention) on the q and k heads of a
// fused qkv [B, T, (n_head + 2 n_kv_head) D]; v passes through. Position of row t: start_pos + t.
// Per head, for i < D/2 with angle = pos * theta^(-2i/D):
//   out[i] = x[i] cos - x[i + D/2] sin,   out[i + D/2] = x[i + D/2] cos + x[i] sin
// D must be even. Backward rotates the gradient by -angle.
Tensor rotary_embedding(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, double theta,
                        int64_t start_pos = 0, CallSite site = CallSite::current());

// --- attention: q [B, H, T, D], k and v [B, Hkv, T, D] -> [B, H, T, D], causal, scale
// 1/sqrt(D); Hkv divides H, query head h reads key/value head h / (H / Hkv) (Hkv = H: multi-head
// attention) ---
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        CallSite site = CallSite::current());

// The kernel behind causal self-attention on the fused qkv layout (below):
//   naive  the probs-based kernels: q, k, v copied out to [B, H, T, D], probs [B, H, T, T] saved
//          for backward, the output copied back to [B, T, C]
//   flash-simt  FlashAttention on the CUDA cores (kernels/cuda/flash_attention.cu), emu and cuda,
//          f32 and bf16, head dims flash_head_dim_ok: reads qkv in place, saves only out and the
//          per-row log-sum-exp [B, H, T]
//   flash-mma  FlashAttention-2 on the Tensor Cores (kernels/cuda/flash_attention_mma.cu), emu
//          and cuda, bf16, head dims 32, 64, 128 (flash_mma_head_dim_ok); same layouts and saved
//          tensors
//   flash  the device's best hand-written flash kernel: on cpu the cpu's (query blocks of GEMMs,
//          kernels/cpu/flash_attention.cpp, any head dim and dtype); on emu and cuda flash-mma
//          where it applies (bf16, its head dims), otherwise flash-simt
//   cudnn  cuDNN's fused attention, `cuda` only, same layouts and saved tensors as flash
//   automatic  flash on cpu; on emu and cuda flash-mma for bf16 with its head dims, else
//          flash-simt where the head dim suits it, otherwise naive
enum class AttentionKernel : uint8_t { automatic, naive, flash, flash_simt, flash_mma, cudnn };
const char* attention_kernel_name(AttentionKernel kernel);
// "naive" | "flash" | "flash-simt" | "flash-mma" | "cudnn" | "auto"; throws naming the valid
// names otherwise.
AttentionKernel parse_attention_kernel(const std::string& name);
// The kernel that runs for `kernel` on `device` for qkv of `dtype` and head dim D: automatic and
// (on emu and cuda) flash resolved as above; the others returned as they are.
AttentionKernel resolve_attention_kernel(AttentionKernel kernel, Device device, DType dtype,
                                         int64_t head_dim);
// Throws one line when `kernel` cannot run on `device` for `dtype` and head dim D: cudnn off cuda
// ("cudnn attention runs on cuda only") or not built; flash-simt and flash-mma on cpu;
// flash-simt with a head dim it does not take; flash-mma with f32 or a head dim it does not take.
void check_attention_kernel(AttentionKernel kernel, Device device, DType dtype, int64_t head_dim);

// Causal self-attention read from the fused c_attn output: qkv [B, T, 3C] (q, k, v side by side,
// each n_head heads of D = C / n_head) -> [B, T, C], scale 1/sqrt(D). One op and one tape node
// ("attention") whatever the kernel behind it. The n_kv_head == n_head case of the form below.
Tensor causal_attention(const Tensor& qkv, int64_t n_head,
                        AttentionKernel kernel = AttentionKernel::automatic,
                        CallSite site = CallSite::current());
// Grouped-query attention on qkv [B, T, (n_head + 2 n_kv_head) D]: n_head query heads, then
// n_kv_head key heads, then n_kv_head value heads; query head h reads key/value head
// h / (n_head / n_kv_head) (Hugging Face's repeat_kv). n_kv_head must divide n_head (the error
// names both; a qkv whose last dim is not (n_head + 2 n_kv_head) D is refused too).
// -> [B, T, n_head D]. Backward sums the gradients of the query heads sharing a key/value head into
// its dK and dV inside the kernels, in a fixed order (deterministic). Every kernel above takes it.
// n_kv_head == n_head is the form above.
Tensor causal_attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head,
                        AttentionKernel kernel = AttentionKernel::automatic,
                        CallSite site = CallSite::current());

// --- embedding: ids i32 [...] into table [V, C] -> [..., C] ---
Tensor embedding(const Tensor& ids, const Tensor& table, CallSite site = CallSite::current());

}  // namespace glass
