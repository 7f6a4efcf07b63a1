#include "autograd/anomaly.h"

#include <cmath>
#include <vector>

#include "kernels/backend.h"

namespace glass {

namespace {

// The elements of `t` in row-major order as host values of type T (t's own dtype). A strided
// tensor is first copied to a contiguous one by the device's copy kernel (not the contiguous op,
// which would record a node and shift node ids between checked and unchecked runs).
template <class T>
std::vector<T> host_values(const Tensor& t) {
  require_data(t, "the non-finite check of GLASS_CHECK_NAN");
  Tensor c = t;
  if (!c.is_contiguous()) {
    c = Tensor::empty(t.shape(), t.dtype(), t.device());
    kernels::backend(t).copy(t, c);
  }
  std::vector<T> out(static_cast<size_t>(c.numel()));
  c.copy_to_host(out.data());
  return out;
}

float as_float(bf16 v) { return v.to_float(); }
template <class T>
T as_float(T v) {
  return v;
}

// True while a MaskValuesScope is alive on this thread: -inf is then a mask value.
thread_local bool mask_values_allowed = false;

// The index of the first element that is not finite (nor a -inf mask value, when those are
// allowed), and its value; index -1 when there is none.
struct NonFinite {
  int64_t index = -1;
  double value = 0;
};

template <class T>
NonFinite first_non_finite(const Tensor& t) {
  const std::vector<T> v = host_values<T>(t);
  const bool allow_neg_inf = mask_values_allowed;
  for (size_t i = 0; i < v.size(); ++i) {
    const double x = as_float(v[i]);
    if (std::isfinite(x) || (allow_neg_inf && std::isinf(x) && x < 0)) continue;
    return {static_cast<int64_t>(i), x};
  }
  return {};
}

}  // namespace

MaskValuesScope::MaskValuesScope() : saved_(mask_values_allowed) { mask_values_allowed = true; }
MaskValuesScope::~MaskValuesScope() { mask_values_allowed = saved_; }

std::string node_label(int64_t id, const char* op, const std::string& created_at) {
  std::string s = fmt::format("node #{} {}", id, op);
  if (!created_at.empty()) s += fmt::format(" (created at {})", created_at);
  return s;
}

void check_finite(const Tensor& t, const std::string& producer, const std::string& what) {
  if (!t.defined()) return;
  NonFinite bad;
  switch (t.dtype()) {
    case DType::f32:
      bad = first_non_finite<float>(t);
      break;
    case DType::f64:
      bad = first_non_finite<double>(t);
      break;
    case DType::bf16:
      bad = first_non_finite<bf16>(t);
      break;
    case DType::i32:
      return;
  }
  GLASS_CHECK(bad.index < 0, "GLASS_CHECK_NAN: {} produced {} at element {} of {} {}", producer,
              std::isnan(bad.value) ? "nan"
              : bad.value > 0       ? "inf"
                                    : "-inf",
              bad.index, what, t.describe());
}

}  // namespace glass
