// Tensor: a handle to shared storage + offset + shape + strides + dtype + device (+ autograd meta).
//
// Copying a Tensor copies the handle (like PyTorch), so a parameter and its .grad stay one object
// however many places hold it. Views (as_strided, and the differentiable view ops in autograd/)
// share the storage and never copy. Strides and offsets count elements, not bytes.
// This header knows nothing about kernels or autograd: filling and copying tensors are kernel
// launches and live in kernels/; the autograd meta is only carried here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "engine/small_vector.h"

namespace glass {

// Sizes or strides, one per dimension; up to 6 dimensions without a heap allocation.
using Shape = SmallVector<int64_t, 6>;

std::string shape_str(const Shape& s);  // "[2, 3]"
// The product of the sizes (1 for a scalar). Inline: every op asks it several times.
inline int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}
Shape contiguous_strides(const Shape& s);
void set_contiguous_strides(const Shape& s, Shape& strides);  // the same, into `strides`

// A block of device memory obtained from the device's caching Allocator.
struct Storage {
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
};

struct Node;  // autograd/node.h
class Tensor;
struct AutogradMeta;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  Shape shape, strides;
  DType dtype = DType::f32;
  std::shared_ptr<AutogradMeta> autograd;  // leaves: requires_grad, .grad, hooks, name
  std::shared_ptr<Node> grad_fn;           // non-leaves: the node that produced this tensor
};

class Tensor {
 public:
  Tensor() = default;

  // Fresh, uninitialised, contiguous memory from the device's allocator.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = kCPU);
  // A contiguous tensor holding a copy of `n` host values of `dtype` (a memcpy, or a host-to-
  // device transfer on a GPU).
  static Tensor from_host(const void* src, const Shape& shape, DType dtype, Device device = kCPU);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t size(int d) const { return impl().shape[wrap_dim(d)]; }
  int64_t stride(int d) const { return impl().strides[wrap_dim(d)]; }
  int dim() const { return static_cast<int>(impl().shape.size()); }
  // Always inline (numel, is_contiguous): an op's checks and cost ask them several times each, and
  // out of line they were ~8% of a small op's instructions.
  [[gnu::always_inline]] int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  [[gnu::always_inline]] bool is_contiguous() const {
    const Shape &s = impl().shape, &st = impl().strides;
    int64_t expected = 1;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] != 1 && st[i] != expected) return false;
      expected *= s[i];
    }
    return true;
  }
  // Turns a possibly negative dimension index into 0..dim-1, or throws naming the tensor. The
  // common case, an index already in range, is inline.
  int wrap_dim(int d) const {
    const int n = dim();
    return d >= 0 && d < n ? d : wrap_negative_dim(d);
  }

  // Pointer to the first element. data<T>() checks that T matches the dtype.
  void* raw_data() const {
    return static_cast<char*>(impl().storage->data) + impl().offset * dtype_size(impl().dtype);
  }
  template <class T>
  T* data() const {
    GLASS_CHECK(dtype_of<T>() == dtype(), "Tensor::data: asked for {} but tensor is {}",
                dtype_name(dtype_of<T>()), describe());
    return static_cast<T*>(raw_data());
  }

  // A view with the given geometry over the same storage; checked against the storage bounds.
  // No autograd: the differentiable views are in autograd/views.h.
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  // A new handle to the same storage and geometry but without autograd history.
  Tensor detach() const;
  // Makes this tensor (every handle to it) use `src`'s storage, geometry and dtype, keeping its
  // autograd meta: how a module moves its parameters to another device in place.
  void set_data(const Tensor& src);

  // Copies a contiguous tensor to host memory (nbytes()). Throws on `meta` (require_data).
  void copy_to_host(void* dst) const;
  // Overwrites a contiguous tensor with nbytes() of host memory, in place (on a GPU: queued on
  // the current stream, no wait; `src` may be reused at once). On `meta` the values are dropped.
  void copy_from_host(const void* src) const;

  // --- autograd meta (the autograd layer gives it meaning) ---
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on);
  Tensor grad() const;
  void set_grad(const Tensor& g);
  std::shared_ptr<Node> grad_fn() const;
  bool is_leaf() const { return !defined() || impl_->grad_fn == nullptr; }
  // Gives the tensor the history `node` (an op's output, autograd/function.h). This handle is
  // reused when nothing else shares its TensorImpl and it has no autograd meta (a fresh output);
  // otherwise it becomes a new handle to the same storage and geometry (as detach() makes), so
  // that the tensor's other holders (an op's input returned as it is) keep their own history.
  void set_grad_fn(std::shared_ptr<Node> node);
  AutogradMeta& autograd_meta() const;  // created on first use
  bool has_autograd_meta() const { return defined() && impl_->autograd != nullptr; }

  // "f32[2, 3] on cpu" (plus strides when not contiguous); used in every error message.
  std::string describe() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // Nothing else can see or change this tensor's values: this is the only handle to its
  // TensorImpl, which is the only one on its storage and covers all of it contiguously, and it
  // has no autograd meta or history. Such a tensor may be taken over instead of copied.
  bool is_sole_handle() const;
  TensorImpl* unsafe_impl() const { return impl_.get(); }

 private:
  int wrap_negative_dim(int d) const;  // wrap_dim's other cases: negative, or the error
  // Every accessor goes through here: the check is one compare, the error out of line, so that
  // numel(), is_contiguous() and the rest stay small enough to inline.
  const TensorImpl& impl() const {
    if (impl_ == nullptr) [[unlikely]]
      fail_undefined();
    return *impl_;
  }
  [[noreturn, gnu::cold]] static void fail_undefined();
  std::shared_ptr<TensorImpl> impl_;
};

// Throws "meta tensors have no data: <what> of <t>" when t is on `meta` (engine/device.h); every
// host read of values (copy_to_host, item(), a sampled token, a NaN check) goes through it.
void require_data(const Tensor& t, const char* what);

// Tensors with names, in a meaningful order (registration order, file order).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Called with the finished gradient of a leaf, once per backward pass.
using GradReadyHook = std::function<void(const Tensor& grad)>;

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;  // leaves: accumulated over backward passes
  std::vector<GradReadyHook> grad_ready_hooks;
  std::string name;  // parameter name, shown by the tape printer
};

}  // namespace glass
