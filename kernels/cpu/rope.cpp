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
// The cos and sin of every (t, i) form a table [T, D/2] (they do not depend on the batch or the
// head), then rows run in parallel, each head's pairs vectorised. The table depends only on
// (T, D, start_pos, theta, direction, dtype), the same for every layer of a model and every
// training step, so the last few tables are kept (RopeTableCache) and a call that finds its
// arguments there skips the trig; a table is filled with one pow per pair (inv_freq) and a cos
// and a sin per (t, i). Every element is computed on its own, so the results do not depend on the
// threads or on the cache. out may be the input itself: each pair is read before it is written.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/costs/rope.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/rope_math.h"

namespace glass::kernels::cpu {

namespace {

constexpr int64_t kRopeTrigWork = 32;
// Tables kept: training uses two (forward and backward, shared by every layer and step); a few
// more cover evaluation or generation at other lengths without growing with the positions seen.
constexpr size_t kRopeCachedTables = 4;

// cos and sin (the direction's sign folded into sin) of pair i at row t, at [t * D/2 + i].
template <class T>
struct RopeTable {
  std::vector<T> cos, sin;
};

struct RopeTableKey {
  int64_t T, D, start_pos;
  double theta;
  int sign;
  bool operator==(const RopeTableKey&) const = default;
};

// The table of `key`, computed here: D/2 pows, then T * D/2 cos and sin, rows of t in parallel.
template <class T>
std::shared_ptr<const RopeTable<T>> make_rope_table(const RopeTableKey& key) {
  const int64_t half = key.D / 2;
  std::vector<T> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) inv_freq[i] = rope_inv_freq<T>(i, key.D, key.theta);
  auto table = std::make_shared<RopeTable<T>>();
  table->cos.resize(static_cast<size_t>(key.T * half));
  table->sin.resize(table->cos.size());
  // a cos and a sin weigh about as much as kRopeTrigWork elements of a plain loop
  for_each_row(key.T, key.T * half * kRopeTrigWork, [&](int64_t t) {
    for (int64_t i = 0; i < half; ++i) {
      const RopeRotation<T> rot = rope_rotation_at<T>(key.start_pos + t, inv_freq[i]);
      table->cos[t * half + i] = rot.cos;
      table->sin[t * half + i] = static_cast<T>(key.sign) * rot.sin;
    }
  });
  return table;
}

// The last kRopeCachedTables tables of element type T, most recently used last. Thread-safe: the
// lock covers only the lookup and the insertion (a table is filled outside it, so two threads
// missing at once may both fill one: the same values, one kept), and a caller holds its table by a
// shared_ptr, so eviction never frees a table in use.
template <class T>
class RopeTableCache {
 public:
  static RopeTableCache& instance() {
    static RopeTableCache cache;
    return cache;
  }

  std::shared_ptr<const RopeTable<T>> get(const RopeTableKey& key) {
    {
      const std::lock_guard lock(mutex_);
      const auto hit = std::find_if(entries_.begin(), entries_.end(),
                                    [&](const Entry& e) { return e.key == key; });
      if (hit != entries_.end()) {
        std::rotate(hit, hit + 1, entries_.end());  // now the most recently used
        return entries_.back().table;
      }
    }
    std::shared_ptr<const RopeTable<T>> table = make_rope_table<T>(key);
    const std::lock_guard lock(mutex_);
    if (entries_.size() == kRopeCachedTables) entries_.erase(entries_.begin());
    entries_.push_back({key, table});
    return table;
  }

 private:
  struct Entry {
    RopeTableKey key;
    std::shared_ptr<const RopeTable<T>> table;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

// in and out [B, T, (n_head + 2 n_kv_head) D], rotated by +angle (sign 1) or -angle (sign -1).
void rope_rows(const char* kernel, const Tensor& in, const Tensor& out, int64_t n_head,
               int64_t n_kv_head, double theta, int64_t start_pos, int sign) {
  const RopeShape g(kernel, in, out, n_head, n_kv_head);
  const int64_t half = g.D / 2;
  const double pairs = static_cast<double>(g.B * g.T * (n_head + n_kv_head) * half);
  const LaunchCost cost = rope_cost(in, out, pairs);  // the table's trig is not counted
  launch(cpu_launch_info(kernel, g.B * g.T, cost.flops, cost.bytes), [&] {
    visit_element(in, kernel, [&]<class T>() {
      // 1. cos and sin (sign folded into sin) of every (t, i), cached or computed, in the
      // math's type (f32 for bf16, kernels/cpu/element.h)
      using A = compute_t<T>;
      const std::shared_ptr<const RopeTable<A>> table =
          RopeTableCache<A>::instance().get({g.T, g.D, start_pos, theta, sign});
      // 2. rotate the q and k heads of every row, copy v (unless out is the input)
      const T* src = in.data<T>();
      T* dst = out.data<T>();
      const int64_t W = g.width, rotated = (n_head + n_kv_head) * g.D;
      for_each_row(g.B * g.T, in.numel(), [&](int64_t r) {
        const A* c = table->cos.data() + (r % g.T) * half;
        const A* s = table->sin.data() + (r % g.T) * half;
        for (int64_t h = 0; h < n_head + n_kv_head; ++h) {
          const T* x = src + r * W + h * g.D;
          T* y = dst + r * W + h * g.D;
#pragma omp simd
          for (int64_t i = 0; i < half; ++i) {
            const A a = to_compute(x[i]), b = to_compute(x[i + half]);
            y[i] = from_compute<T>(a * c[i] - b * s[i]);
            y[i + half] = from_compute<T>(b * c[i] + a * s[i]);
          }
        }
        if (dst != src) std::copy(src + r * W + rotated, src + (r + 1) * W, dst + r * W + rotated);
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
