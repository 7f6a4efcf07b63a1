// cpu kernels for causal scaled-dot-product attention:
// q, out [B, H, T, D], k, v [B, Hkv, T, D] and probs [B, H, T, T], all contiguous; query head h
// reads key/value head h / (H / Hkv) (grouped-query attention; Hkv = H is multi-head).
//
//   forward:  S = Q K^T * scale; P[i] = softmax of S[i, 0..i], P[i, j > i] = 0 (the causal mask);
//             out = P V. P is stored in probs for backward.
//   backward: dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dP * P));
//             dQ = dS K * scale; dK = dS^T Q * scale.
//   grouped: a key/value head's dK and dV are the sums of those of its H / Hkv query heads.
//
// The B*H (batch, head) slices are independent: they run in parallel (backward: the B*Hkv
// key/value slices, each summing its query heads in head order, so the result is deterministic),
// and inside a slice every product is one GEMM on the calling thread (glass's sgemm sees it is
// inside a parallel region; OpenBLAS, which f64 uses, has its own threads switched off while the
// kernels run: on top of ours they oversubscribe the cores, several times slower). GEMM computes
// the full T x T square although above the diagonal P is zero and S unused; at the default model's
// sizes that is still faster than causal-only loops (bench/RESULTS.md). The FLOPs reported count
// that full square, the work actually done; the softmax FLOPs count the causal triangle it touches.
#include <cblas.h>

#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace glass::kernels::cpu {

namespace {

// While alive, OpenBLAS runs each call on the calling thread only.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~SingleThreadedBlas() { openblas_set_num_threads(saved_); }
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int saved_;
};

// The cpu kernels' FLOPs and work on top of the shared checks: full T x T products.
struct AttentionWork : AttentionShape {
  using AttentionShape::AttentionShape;
  // the per-slice FLOPs: `gemms` full T x T x D products plus `per_entry` per causal entry
  double flops(int gemms, int per_entry) const {
    const double t = static_cast<double>(T), d = static_cast<double>(D);
    return static_cast<double>(slices) * (gemms * 2.0 * t * t * d + per_entry * t * (t + 1) / 2);
  }
  // the elements of work, all slices together: what decides threading
  int64_t work() const { return slices * T * T * D; }
};

// A contiguous tensor's elements as compute_t<T>: the tensor's own memory for f32 and f64; for
// bf16 an f32 copy (read = converted now; an output's copy is rounded into the tensor by store()).
// The naive kernels run on bf16 this way: their math in f32, each output rounded once.
template <class T>
struct Staged {
  using C = compute_t<T>;
  std::vector<C> copy;
  const Tensor* tensor;
  C* data;
  explicit Staged(const Tensor& t, bool read = true) : tensor(&t) {
    if constexpr (std::is_same_v<T, C>) {
      data = t.data<T>();
    } else {
      copy.resize(static_cast<size_t>(t.numel()));
      data = copy.data();
      if (read) {
        const T* p = t.data<T>();
        for (int64_t i = 0; i < t.numel(); ++i) copy[i] = to_compute(p[i]);
      }
    }
  }
  void store() const {
    if constexpr (!std::is_same_v<T, C>) {
      T* p = tensor->data<T>();
      for (int64_t i = 0; i < tensor->numel(); ++i) p[i] = from_compute<T>(copy[i]);
    }
  }
};

}  // namespace

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& probs, double scale) {
  const char* kernel = "attention_forward";
  const AttentionWork g(kernel, q, {&out}, {&k, &v}, probs);
  const double bytes = bytes_of({&q, &k, &v, &out, &probs});
  if (q.numel() == 0) return;
  visit_element(q, kernel, [&]<class T>() {
    launch(cpu_launch_info(kernel, g.slices, g.flops(2, 5), bytes), [&] {
      using C = compute_t<T>;
      // bf16: the operands in f32 (Staged), the f32 path, the outputs rounded once
      const Staged<T> qs(q), ks(k), vs(v);
      Staged<T> os(out, false), ps(probs, false);
      const C* qp = qs.data;
      const C* kp = ks.data;
      const C* vp = vs.data;
      C* op = os.data;
      C* pp = ps.data;
      const int64_t Tn = g.T, D = g.D;
      SingleThreadedBlas one_thread;
      for_each_row(g.slices, g.work(), [&](int64_t s) {
        const C* Q = qp + s * Tn * D;
        const C* K = kp + s / g.group * Tn * D;
        const C* V = vp + s / g.group * Tn * D;
        C* P = pp + s * Tn * Tn;
        // 1. S = Q K^T * scale, into P
        blas_gemm(false, true, Tn, Tn, D, C(scale), Q, D, K, D, C(0), P, Tn);
        // 2. P = causal softmax of S, row by row: row i sees columns 0..i
        for (int64_t i = 0; i < Tn; ++i) masked_softmax_row(P + i * Tn, P + i * Tn, i + 1, Tn);
        // 3. out = P V
        blas_gemm(false, false, Tn, D, Tn, C(1), P, Tn, V, D, C(0), op + s * Tn * D, D);
      });
      os.store();
      ps.store();
    });
  });
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& probs,
                        const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        double scale) {
  const char* kernel = "attention_backward";
  const AttentionWork g(kernel, q, {&dout, &dq}, {&k, &v, &dk, &dv}, probs);
  const double bytes = bytes_of({&q, &k, &v, &probs, &dout, &dq, &dk, &dv});
  if (q.numel() == 0) return;
  visit_element(q, kernel, [&]<class T>() {
    launch(cpu_launch_info(kernel, g.slices, g.flops(4, 4), bytes), [&] {
      using C = compute_t<T>;  // the math's type below; bf16 is staged in f32 (Staged)
      const Staged<T> qs(q), ks(k), vs(v), ps(probs), dos(dout);
      Staged<T> dqs(dq, false), dks(dk, false), dvs(dv, false);
      const C* qp = qs.data;
      const C* kp = ks.data;
      const C* vp = vs.data;
      const C* pp = ps.data;
      const C* dop = dos.data;
      C* dqp = dqs.data;
      C* dkp = dks.data;
      C* dvp = dvs.data;
      const int64_t Tn = g.T, D = g.D;
      SingleThreadedBlas one_thread;
      // not for_each_row: each chunk of slices keeps one dP buffer for all its slices
      parallel_ranges(
          g.kv_slices(), worth_threading(g.kv_slices(), g.work()),
          [&](int64_t first, int64_t last) {
            std::vector<C> ds(static_cast<size_t>(Tn * Tn));  // this chunk's dP, then dS
            for (int64_t kv = first; kv < last; ++kv) {
              const int64_t kv_at = kv * Tn * D;
              // the key/value slice's query slices in order: the first writes dK and dV (beta 0),
              // the others add to them
              for (int64_t s = kv * g.group; s < (kv + 1) * g.group; ++s) {
                const int64_t at = s * Tn * D;
                const C* P = pp + s * Tn * Tn;
                const C gather = s == kv * g.group ? C(0) : C(1);
                // 1. dV += P^T dO
                blas_gemm(true, false, Tn, D, Tn, C(1), P, Tn, dop + at, D, gather, dvp + kv_at, D);
                // 2. dP = dO V^T
                blas_gemm(false, true, Tn, Tn, D, C(1), dop + at, D, vp + kv_at, D, C(0), ds.data(),
                          Tn);
                // 3. dS = P * (dP - rowsum(dP * P)), row by row
                for (int64_t i = 0; i < Tn; ++i) {
                  C* row = ds.data() + i * Tn;
                  masked_softmax_backward_row(P + i * Tn, row, row, i + 1, Tn);
                }
                // 4. dQ = dS K * scale, dK += dS^T Q * scale
                blas_gemm(false, false, Tn, D, Tn, C(scale), ds.data(), Tn, kp + kv_at, D, C(0),
                          dqp + at, D);
                blas_gemm(true, false, Tn, D, Tn, C(scale), ds.data(), Tn, qp + at, D, gather,
                          dkp + kv_at, D);
              }
            }
          });
      dqs.store();
      dks.store();
      dvs.store();
    });
  });
}

}  // namespace glass::kernels::cpu
