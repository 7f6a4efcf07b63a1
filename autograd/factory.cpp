// Factories and host transfers, which record no history; and compute_copy, the mixed-precision
// link from a bf16 copy to its f32 master weight (its backward casts the gradient).
#include <cstring>

#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

Tensor empty_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), t.device()); }

Tensor full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  kernels::backend(device).fill(t, value);
  return t;
}

Tensor zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1, dtype, device);
}
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }

Tensor randn(const Shape& shape, Generator& gen, double mean, double std, DType dtype,
             Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  // Box-Muller pairs use two words per element pair: one word per element.
  const uint64_t offset = gen.reserve(static_cast<uint64_t>(t.numel()) + 1);
  kernels::backend(device).fill_normal(t, mean, std, gen.seed(), offset);
  return t;
}

Tensor rand(const Shape& shape, Generator& gen, double lo, double hi, DType dtype, Device device) {
  Tensor t = Tensor::empty(shape, dtype, device);
  const uint64_t offset = gen.reserve(static_cast<uint64_t>(t.numel()));
  kernels::backend(device).fill_uniform(t, lo, hi, gen.seed(), offset);
  return t;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  GLASS_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape),
              "from_vector: {} values do not fill shape {}", values.size(), shape_str(shape));
  return Tensor::from_host(values.data(), shape, dtype_of<T>(), device);
}

template <class T>
std::vector<T> to_vector(const Tensor& t) {
  GLASS_CHECK(t.dtype() == dtype_of<T>(), "to_vector<{}>: tensor is {}", dtype_name(dtype_of<T>()),
              t.describe());
  require_data(t, "to_vector");
  Tensor c = contiguous(t.detach());
  std::vector<T> out(static_cast<size_t>(c.numel()));
  c.copy_to_host(out.data());
  return out;
}

#define GLASS_INSTANTIATE(T)                                                   \
  template Tensor from_vector<T>(const std::vector<T>&, const Shape&, Device); \
  template std::vector<T> to_vector<T>(const Tensor&);
GLASS_INSTANTIATE(float)
GLASS_INSTANTIATE(double)
GLASS_INSTANTIATE(int32_t)
GLASS_INSTANTIATE(bf16)
#undef GLASS_INSTANTIATE

double item(const Tensor& t) {
  GLASS_CHECK(t.numel() == 1, "item: {} does not hold exactly one element", t.describe());
  require_data(t, "item()");
  Tensor c = contiguous(t.detach());
  switch (c.dtype()) {
    case DType::f32:
      return to_vector<float>(c)[0];
    case DType::f64:
      return to_vector<double>(c)[0];
    case DType::i32:
      return to_vector<int32_t>(c)[0];
    case DType::bf16:
      return to_vector<bf16>(c)[0].to_float();
  }
  return 0;
}

Tensor cast(const Tensor& t, DType dtype) {
  Tensor src = contiguous(t.detach());
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  kernels::backend(t).cast(src, out);
  return out;
}

Tensor compute_copy(const Tensor& master, const Tensor& copy, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(copy.shape() == master.shape() && copy.device() == master.device() &&
                  is_floating(copy.dtype()) && is_floating(master.dtype()),
              "compute_copy: copy {} must be a floating tensor of master {}'s shape and device",
              copy.describe(), master.describe());
  OpScope op("compute_copy", {master});
  // dmaster = cast(dy) to the master's dtype
  return op.finish(copy.detach(), {}, [dtype = master.dtype()](Node&, const Tensor& dy) {
    return std::vector<Tensor>{dy.dtype() == dtype ? dy : cast(dy, dtype)};
  });
}

Tensor to_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  // meta holds no values: a tensor moves there as its shape and dtype alone, and none comes back.
  if (!has_data(device)) return Tensor::empty(t.shape(), t.dtype(), device);
  require_data(t, "to_device");
  const Tensor src = contiguous(t.detach());
  std::vector<char> host(src.nbytes());
  src.copy_to_host(host.data());
  return Tensor::from_host(host.data(), src.shape(), src.dtype(), device);
}

}  // namespace glass
