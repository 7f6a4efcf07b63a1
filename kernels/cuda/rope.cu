// CUDA kernel for the rotary position embedding (Llama) on a fused qkv [B, T, (H + 2 Hkv) D], with
// its host launchers (contracts in kernels/kernel_list.inc; the cpu reference is
// kernels/cpu/rope.cpp): the H q heads and Hkv k heads (the first (H + Hkv) D columns of a row) are
// rotated pair by pair, the Hkv v heads are copied. Hugging Face's rotate-half convention: pair i <
// D/2 of a head is (x[i], x[i + D/2]), and at row t (position p = start_pos + t) with angle = p
// inv_freq_i (kernels/rope_math.h, the cpu's formula):
//
//   forward:  out[i] = x[i] cos - x[i + D/2] sin,  out[i + D/2] = x[i + D/2] cos + x[i] sin
//   backward: the rotation by -angle (sin negated), v's gradient copied.
//
// Thread mapping: one block per row (b, t), a 2-D block: threadIdx.x strides over the pair index
// i < D/2, threadIdx.y over the rotated heads. A thread computes its pair's angle, cos and sin
// once (in f32; f64 for f64 tensors: pow, cos and sin are a few dozen instructions, against the 4
// to 8 bytes a pair moves) and applies them to every head it visits; a warp reads 32 consecutive
// x[i] and 32 consecutive x[i + D/2] of one head (coalesced). Then all the block's threads copy
// the v columns. bf16 elements are loaded exactly, rotated in f32 and rounded once. out may be the
// input: each pair is read by the thread that writes it, before it writes it.
#include <algorithm>

#include "kernels/costs/rope.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/rope_math.h"

namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD {

namespace {

constexpr int kRopeMaxThreadsPerRow = 256;

// Row r = b T + t of in/out [B, T, width]: rotate its q and k heads by +angle (sign 1) or -angle
// (sign -1), copy its v heads (unless out is in).
template <class T>
__global__ void rope_kernel(const T* in, T* out, int64_t T_len, int64_t width,
                            int64_t rotated_heads, int64_t D, double theta, int64_t start_pos,
                            float sign) {
  using C = compute_t<T>;
  const int64_t r = blockIdx.x;
  const int64_t half = D / 2;
  const int64_t position = start_pos + r % T_len;
  const T* x = in + r * width;
  T* y = out + r * width;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    const RopeRotation<C> rot = rope_rotation<C>(position, i, D, theta);
    const C s = static_cast<C>(sign) * rot.sin;
    for (int64_t h = threadIdx.y; h < rotated_heads; h += blockDim.y) {
      const C a = to_compute(x[h * D + i]), b = to_compute(x[h * D + i + half]);
      y[h * D + i] = from_compute<T>(a * rot.cos - b * s);
      y[h * D + i + half] = from_compute<T>(b * rot.cos + a * s);
    }
  }
  if (x == y) return;
  const int64_t threads = static_cast<int64_t>(blockDim.x) * blockDim.y;
  for (int64_t j = rotated_heads * D + threadIdx.y * blockDim.x + threadIdx.x; j < width;
       j += threads)
    y[j] = x[j];
}

void launch_rope(const char* kernel, const Tensor& in, const Tensor& out, int64_t n_head,
                 int64_t n_kv_head, double theta, int64_t start_pos, float sign) {
  const RopeShape g(kernel, in, out, n_head, n_kv_head);
  const int64_t rows = g.B * g.T;
  if (rows == 0) return;
  const int64_t pairs = (n_head + n_kv_head) * (g.D / 2);
  // the rotation, and the angles each thread computes (kernels/costs/rope.h)
  LaunchCost cost = rope_cost(in, out, static_cast<double>(rows * pairs));
  cost.flops += kRopeAngleFlopsPerPair * static_cast<double>(rows * pairs);
  // threadIdx.x over the D/2 pairs of a head, threadIdx.y over as many heads as fill the block
  const int64_t pair_threads = std::min<int64_t>(g.D / 2, kRopeMaxThreadsPerRow);
  const int64_t head_threads =
      std::clamp<int64_t>(kRopeMaxThreadsPerRow / pair_threads, 1, n_head + n_kv_head);
  LaunchInfo info = kernel_launch_info(
      kernel, in, dim3(static_cast<unsigned>(rows)),
      dim3(static_cast<unsigned>(pair_threads), static_cast<unsigned>(head_threads)), 0, cost.flops,
      cost.bytes);
  info.function = "rope";  // rope_kernel, both ways
  visit_element(in, kernel, [&]<class T>() {
    launch_cuda_kernel(info, rope_kernel<T>, in.data<T>(), out.data<T>(), g.T, g.width,
                       n_head + n_kv_head, g.D, theta, start_pos, sign);
  });
}

}  // namespace

void rope_forward(const Tensor& qkv, const Tensor& out, int64_t n_head, int64_t n_kv_head,
                  double theta, int64_t start_pos) {
  launch_rope("rope_forward", qkv, out, n_head, n_kv_head, theta, start_pos, 1.0f);
}

void rope_backward(const Tensor& dout, const Tensor& dqkv, int64_t n_head, int64_t n_kv_head,
                   double theta, int64_t start_pos) {
  launch_rope("rope_backward", dout, dqkv, n_head, n_kv_head, theta, start_pos, -1.0f);
}

}  // namespace glass::kernels::cuda::inline GLASS_CUDA_BUILD
