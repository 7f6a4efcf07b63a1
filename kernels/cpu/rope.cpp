// cpu kernels for the rotary position embedding (Llama) on a fused qkv [B, T, (H + 2 Hkv) D]: the
// H q heads and the Hkv k heads (the first (H + Hkv) D columns of a row) are rotated pair by pair,
// the Hkv v heads are copied. Hugging Face's rotate-half convention: pair i < D/2 of a head is
// (x[i], x[i + D/2]), and at row t (position p = start_pos + t) with angle = p inv_freq_i
// (kernels/rope_math.h):
//
//   forward:  out[i] = x[i] cos - x[i + D/2] sin,  out[i + D/2] = x[i + D/2] cos + x[i] sin
//   backward: the transpose of that rotation, the rotation by -angle (sin negated); v's gradient
//             is copied.
//
// The cos and sin of every (t, i) are computed once per call into a table [T, D/2] (they do not
// depend on the batch or the head), then rows run in parallel, each head's pairs vectorised.
// Every element is computed on its own, so the results do not depend on the threads. out may be
// the input itself: each pair is read before it is written.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rope_math.h"

namespace glass::kernels::cpu {

namespace {

// FLOPs per rotated pair: 4 multiplies, 2 adds (the table's trig is per (t, i), not counted).
constexpr double kRopeFlopsPerPair = 6;
constexpr int64_t kRopeTrigWork = 32;

// in and out [B, T, (n_head + 2 n_kv_head) D], rotated by +angle (sign 1) or -angle (sign -1).
void rope_rows(const char* kernel, const Tensor& in, const Tensor& out, int64_t n_head,
               int64_t n_kv_head, double theta, int64_t start_pos, int sign) {
  const RopeShape g(kernel, in, out, n_head, n_kv_head);
  const int64_t half = g.D / 2;
  const double pairs = static_cast<double>(g.B * g.T * (n_head + n_kv_head) * half);
  launch(cpu_launch_info(kernel, g.B * g.T, kRopeFlopsPerPair * pairs,
                         static_cast<double>(in.nbytes() + out.nbytes())),
         [&] {
           visit_float(in, kernel, [&]<class T>() {
             // 1. cos and sin (sign folded into sin) of every (t, i); a pow, a cos and a sin
             //    weigh about as much as kRopeTrigWork elements of a plain loop
             std::vector<T> cos_table(static_cast<size_t>(g.T * half)), sin_table(cos_table.size());
             for_each_row(g.T, g.T * half * kRopeTrigWork, [&](int64_t t) {
               for (int64_t i = 0; i < half; ++i) {
                 const RopeRotation<T> rot = rope_rotation<T>(start_pos + t, i, g.D, theta);
                 cos_table[t * half + i] = rot.cos;
                 sin_table[t * half + i] = static_cast<T>(sign) * rot.sin;
               }
             });
             // 2. rotate the q and k heads of every row, copy v (unless out is the input)
             const T* src = in.data<T>();
             T* dst = out.data<T>();
             const int64_t W = g.width, rotated = (n_head + n_kv_head) * g.D;
             for_each_row(g.B * g.T, in.numel(), [&](int64_t r) {
               const T* c = cos_table.data() + (r % g.T) * half;
               const T* s = sin_table.data() + (r % g.T) * half;
               for (int64_t h = 0; h < n_head + n_kv_head; ++h) {
                 const T* x = src + r * W + h * g.D;
                 T* y = dst + r * W + h * g.D;
#pragma omp simd
                 for (int64_t i = 0; i < half; ++i) {
                   const T a = x[i], b = x[i + half];
                   y[i] = a * c[i] - b * s[i];
                   y[i + half] = b * c[i] + a * s[i];
                 }
               }
               if (dst != src)
                 std::copy(src + r * W + rotated, src + (r + 1) * W, dst + r * W + rotated);
             });
           });
         });
}

}  // namespace

void rope_forward(const Tensor& qkv, const Tensor& out, int64_t n_head, int64_t n_kv_head,
                  double theta, int64_t start_pos) {
  rope_rows("rope_forward", qkv, out, n_head, n_kv_head, theta, start_pos, 1);
}

void rope_backward(const Tensor& dout, const Tensor& dqkv, int64_t n_head, int64_t n_kv_head,
                   double theta, int64_t start_pos) {
  rope_rows("rope_backward", dout, dqkv, n_head, n_kv_head, theta, start_pos, -1);
}

}  // namespace glass::kernels::cpu
