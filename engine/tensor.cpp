#include "engine/tensor.h"

#include <cstring>

#include "engine/allocator.h"
#include "engine/device_flags.h"
#include "engine/device_runtime.h"
#include "engine/object_pool.h"
#include "engine/out_of_memory.h"

namespace glass {

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

void set_contiguous_strides(const Shape& s, Shape& strides) {
  strides.resize(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = acc;
    acc *= s[i];
  }
}

Shape contiguous_strides(const Shape& s) {
  Shape st;
  set_contiguous_strides(s, st);
  return st;
}

Storage::Storage(size_t n, Device d) : nbytes(n), device(d) {
  data = Allocator::for_device(d).allocate(n);
}

Storage::~Storage() { Allocator::serving(device).release(data, nbytes); }

// TensorImpls are made default-initialised (every member has its initialiser), without zeroing
// their inline shape and strides first. They and their Storage come from this thread's object
// pool (engine/object_pool.h), not from malloc.
Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    GLASS_CHECK(d >= 0, "Tensor::empty: negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.impl_ = std::allocate_shared_for_overwrite<TensorImpl>(PooledAllocator<TensorImpl>());
  try {
    t.impl_->storage = std::allocate_shared<Storage>(
        PooledAllocator<Storage>(), shape_numel(shape) * dtype_size(dtype), device);
  } catch (OutOfMemoryError& e) {
    e.set_tensor(fmt::format("{} {}", shape_str(shape), dtype_name(dtype)));  // what asked
    throw;
  }
  t.impl_->shape = shape;
  set_contiguous_strides(shape, t.impl_->strides);
  t.impl_->dtype = dtype;
  return t;
}

Tensor Tensor::from_host(const void* src, const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.copy_from_host(src);
  return t;
}

void Tensor::copy_from_host(const void* src) const {
  GLASS_CHECK(is_contiguous(), "copy_from_host: tensor {} is not contiguous", describe());
  if (nbytes() == 0) return;  // memcpy with a null source is undefined even for 0 bytes
  // memcpy where device memory is host memory; on cuda through a pinned staging ring, on the
  // current stream, no wait; on meta the values are dropped (a planned upload).
  runtime_for(device()).copy_from_host(raw_data(), src, nbytes());
}

void Tensor::copy_to_host(void* dst) const {
  GLASS_CHECK(is_contiguous(), "copy_to_host: tensor {} is not contiguous", describe());
  require_data(*this, "copy_to_host");
  if (nbytes() == 0) return;
  // With the device's pending error flags, in one synchronisation (engine/device_flags.h).
  const HostRead read{dst, raw_data(), nbytes()};
  read_to_host(device(), std::span(&read, 1), "copy_to_host");
}

void require_data(const Tensor& t, const char* what) {
  GLASS_CHECK(has_data(t.device()),
              "meta tensors have no data: {} of {} (meta plans shapes and launches; run on cpu, "
              "emu or cuda to read values)",
              what, t.describe());
}

void Tensor::fail_undefined() { fail("use of an undefined Tensor"); }

int Tensor::wrap_negative_dim(int d) const {
  const int n = dim();
  GLASS_CHECK(d >= -n && d < n, "dimension {} out of range for {}", d, describe());
  return d < 0 ? d + n : d;
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  GLASS_CHECK(shape.size() == strides.size(), "as_strided: shape {} and strides {} differ in rank",
              shape_str(shape), shape_str(strides));
  // The furthest element the view can touch must lie inside the storage.
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    GLASS_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided: bad geometry shape {} strides {}",
                shape_str(shape), shape_str(strides));
    if (shape[i] == 0)
      empty = true;
    else
      last += (shape[i] - 1) * strides[i];
  }
  const int64_t capacity = static_cast<int64_t>(storage()->nbytes / dtype_size(dtype()));
  GLASS_CHECK(offset >= 0 && (empty || last < capacity),
              "as_strided: view shape {} strides {} offset {} exceeds storage of {} elements of {}",
              shape_str(shape), shape_str(strides), offset, capacity, describe());
  Tensor t;
  t.impl_ = std::allocate_shared_for_overwrite<TensorImpl>(PooledAllocator<TensorImpl>());
  t.impl_->storage = impl().storage;
  t.impl_->offset = offset;
  t.impl_->shape = shape;
  t.impl_->strides = strides;
  t.impl_->dtype = impl().dtype;
  return t;
}

Tensor Tensor::detach() const { return as_strided(shape(), strides(), offset()); }

void Tensor::set_data(const Tensor& src) {
  GLASS_CHECK(defined() && src.defined(), "set_data: both tensors must be defined");
  impl_->storage = src.storage();
  impl_->offset = src.offset();
  impl_->shape = src.shape();
  impl_->strides = src.strides();
  impl_->dtype = src.dtype();
}

bool Tensor::requires_grad() const {
  return defined() && (impl_->grad_fn || (impl_->autograd && impl_->autograd->requires_grad));
}

Tensor& Tensor::set_requires_grad(bool on) {
  GLASS_CHECK(!on || is_floating(dtype()), "set_requires_grad: {} is not a floating tensor",
              describe());
  GLASS_CHECK(is_leaf(), "set_requires_grad: {} is not a leaf (it has a grad_fn)", describe());
  autograd_meta().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return has_autograd_meta() ? impl_->autograd->grad : Tensor(); }
void Tensor::set_grad(const Tensor& g) { autograd_meta().grad = g; }
std::shared_ptr<Node> Tensor::grad_fn() const { return defined() ? impl_->grad_fn : nullptr; }

bool Tensor::is_sole_handle() const {
  return defined() && impl_.use_count() == 1 && impl_->storage.use_count() == 1 &&
         !impl_->autograd && !impl_->grad_fn && offset() == 0 && is_contiguous() &&
         impl_->storage->nbytes == nbytes();
}

void Tensor::set_grad_fn(std::shared_ptr<Node> node) {
  if (impl_.use_count() != 1 || impl_->autograd) *this = detach();
  impl_->grad_fn = std::move(node);
}

AutogradMeta& Tensor::autograd_meta() const {
  auto& meta = const_cast<TensorImpl&>(impl()).autograd;
  if (!meta) meta = std::make_shared<AutogradMeta>();
  return *meta;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined tensor";
  std::string s =
      fmt::format("{}{} on {}", dtype_name(dtype()), shape_str(shape()), device().str());
  if (!is_contiguous()) s += fmt::format(" (strides {})", shape_str(strides()));
  return s;
}

}  // namespace glass
