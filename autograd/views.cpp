// Differentiable views and the copies around them: view, reshape, transpose, permute, slice,
// split, expand (no copy: new shape and strides over the same storage), contiguous and concat
// (visible copy launches), and the broadcasting helpers broadcast_shapes and sum_to.
//
// A view's backward maps the gradient back to the input's geometry: reshape it back, permute it
// by the inverse permutation, place it into a zero tensor (slice), or sum it over the broadcast
// dimensions (expand). Gradients coming out of view backwards may themselves be views.
#include <algorithm>
#include <optional>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// Records `x` seen through new geometry (same storage); backward maps dy back to x.
Tensor make_view(const char* op, const Tensor& x, const Shape& shape, const Shape& strides,
                 int64_t offset, BackwardFn backward) {
  OpScope scope(op, {x});
  return scope.finish(x.as_strided(shape, strides, offset), {}, std::move(backward));
}

// `shape` with its one -1 (if any) replaced so that the element count matches x's.
Shape infer_shape(const char* op, const Tensor& x, Shape shape) {
  int64_t known = 1;
  auto unknown = shape.end();
  for (auto it = shape.begin(); it != shape.end(); ++it) {
    if (*it == -1) {
      GLASS_CHECK(unknown == shape.end(), "{}: shape {} has more than one -1", op,
                  shape_str(shape));
      unknown = it;
    } else {
      GLASS_CHECK(*it >= 0, "{}: shape {} has a negative size", op, shape_str(shape));
      known *= *it;
    }
  }
  if (unknown != shape.end() && known != 0 && x.numel() % known == 0) *unknown = x.numel() / known;
  GLASS_CHECK(unknown == shape.end() || *unknown != -1,
              "{}: cannot infer the -1 in shape {} for {}", op, shape_str(shape), x.describe());
  GLASS_CHECK(shape_numel(shape) == x.numel(), "{}: shape {} does not hold the {} elements of {}",
              op, shape_str(shape), x.numel(), x.describe());
  return shape;
}

// Strides that read x's elements, in row-major order, as `shape` without moving them; none when
// x's strides do not allow it. x's dimensions are taken in chunks that are contiguous among
// themselves (each steps by the size times the stride of the next); within a chunk memory is
// regular, so the new dimensions covering exactly that chunk get strides from its base stride.
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.numel() == 0 || x.dim() == 0) return contiguous_strides(shape);
  Shape strides(shape.size());
  int new_d = static_cast<int>(shape.size()) - 1;
  int64_t chunk_stride = x.stride(-1), chunk_numel = 1, view_numel = 1;
  for (int d = x.dim() - 1; d >= 0; --d) {
    chunk_numel *= x.size(d);
    const bool chunk_ends =
        d == 0 || (x.size(d - 1) != 1 && x.stride(d - 1) != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    // The new dimensions that multiply up to this chunk (and any size-1 ones around it).
    while (new_d >= 0 && (view_numel < chunk_numel || shape[new_d] == 1)) {
      strides[new_d] = view_numel * chunk_stride;
      view_numel *= shape[new_d];
      --new_d;
    }
    if (view_numel != chunk_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = x.stride(d - 1);
      chunk_numel = view_numel = 1;
    }
  }
  if (new_d != -1) return std::nullopt;
  return strides;
}

Tensor permuted(const char* op, const Tensor& x, const std::vector<int>& dims) {
  GLASS_CHECK(static_cast<int>(dims.size()) == x.dim(), "{}: {} dims given for {}", op, dims.size(),
              x.describe());
  std::vector<int> perm(dims.size()), inverse(dims.size(), -1);
  Shape shape(dims.size()), strides(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    perm[i] = x.wrap_dim(dims[i]);
    GLASS_CHECK(inverse[perm[i]] == -1, "{}: dims {} are not a permutation of {}'s", op,
                fmt::join(dims, ", "), x.describe());
    inverse[perm[i]] = static_cast<int>(i);
    shape[i] = x.size(perm[i]);
    strides[i] = x.stride(perm[i]);
  }
  // Backward: the inverse permutation puts every dimension of dy back where it came from.
  return make_view(
      op, x, shape, strides, x.offset(),
      [inverse](Node&, const Tensor& dy) -> InputGrads { return {permute(dy, inverse)}; });
}

}  // namespace

Tensor view(const Tensor& x, Shape shape, CallSite site) {
  CallSiteScope at(site);
  shape = infer_shape("view", x, std::move(shape));
  const std::optional<Shape> strides = view_strides(x, shape);
  GLASS_CHECK(strides.has_value(),
              "view: {} cannot be seen as {} without a copy (its strides do not allow it); use "
              "reshape",
              x.describe(), shape_str(shape));
  return make_view("view", x, shape, *strides, x.offset(),
                   [in_shape = x.shape()](Node&, const Tensor& dy) -> InputGrads {
                     return {reshape(dy, in_shape)};
                   });
}

Tensor reshape(const Tensor& x, Shape shape, CallSite site) {
  CallSiteScope at(site);
  shape = infer_shape("reshape", x, std::move(shape));
  // A view when the strides allow it, otherwise a view of a contiguous copy.
  return view_strides(x, shape) ? view(x, shape) : view(contiguous(x), shape);
}

Tensor transpose(const Tensor& x, int d0, int d1, CallSite site) {
  CallSiteScope at(site);
  std::vector<int> dims(x.dim());
  for (int i = 0; i < x.dim(); ++i) dims[i] = i;
  std::swap(dims[x.wrap_dim(d0)], dims[x.wrap_dim(d1)]);
  return permuted("transpose", x, dims);
}

Tensor permute(const Tensor& x, const std::vector<int>& dims, CallSite site) {
  CallSiteScope at(site);
  return permuted("permute", x, dims);
}

Tensor slice(const Tensor& x, int dim, int64_t start, int64_t end, CallSite site) {
  CallSiteScope at(site);
  const int d = x.wrap_dim(dim);
  const int64_t n = x.size(d);
  // Negative bounds count from the end, as in Python.
  const int64_t lo = start < 0 ? start + n : start, hi = end < 0 ? end + n : end;
  GLASS_CHECK(0 <= lo && lo <= hi && hi <= n,
              "slice: [{}, {}) is not within dim {} (size {}) of {}", start, end, dim, n,
              x.describe());
  Shape shape = x.shape();
  shape[d] = hi - lo;
  // Backward: a zero gradient for x with dy copied into the sliced region.
  return make_view("slice", x, shape, x.strides(), x.offset() + lo * x.stride(d),
                   [d, lo, in_shape = x.shape()](Node&, const Tensor& dy) -> InputGrads {
                     Tensor dx = zeros(in_shape, dy.dtype(), dy.device());
                     const Tensor region =
                         dx.as_strided(dy.shape(), dx.strides(), lo * dx.stride(d));
                     kernels::backend(dy).copy(dy, region);
                     return {dx};
                   });
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int dim, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(size > 0, "split: chunk size {} must be positive for {}", size, x.describe());
  const int64_t n = x.size(dim);
  std::vector<Tensor> parts;
  for (int64_t start = 0; start < n; start += size)
    parts.push_back(slice(x, dim, start, std::min(n, start + size)));
  return parts;
}

Tensor concat(const std::vector<Tensor>& xs, int dim, CallSite site) {
  CallSiteScope at(site);
  GLASS_CHECK(!xs.empty(), "concat: no tensors given");
  const Tensor& first = xs[0];
  const int d = first.wrap_dim(dim);
  Shape shape = first.shape();
  std::vector<int64_t> starts;  // where each input begins along d
  shape[d] = 0;
  for (const Tensor& x : xs) {
    Shape other = x.shape(), expected = first.shape();
    if (x.dim() == first.dim()) other[d] = expected[d] = 0;
    GLASS_CHECK(other == expected && x.dtype() == first.dtype() && x.device() == first.device(),
                "concat: {} does not match {} outside dim {} (or differs in dtype or device)",
                x.describe(), first.describe(), dim);
    starts.push_back(shape[d]);
    shape[d] += x.size(d);
  }
  OpScope scope("concat", xs);
  Tensor out = Tensor::empty(shape, first.dtype(), first.device());
  // Each input is copied into its region of out.
  for (size_t i = 0; i < xs.size(); ++i)
    kernels::backend(out).copy(
        xs[i], out.as_strided(xs[i].shape(), out.strides(), starts[i] * out.stride(d)));
  // dx_i = the slice of dy where x_i was placed
  return scope.finish(std::move(out), {}, [d, starts](Node& n, const Tensor& dy) -> InputGrads {
    // Each input's gradient is its region of dy.
    InputGrads dxs;
    for (size_t i = 0; i < starts.size(); ++i)
      dxs.push_back(n.needs_input_grad(i)
                        ? slice(dy, d, starts[i], starts[i] + n.inputs[i].shape[d])
                        : Tensor());
    return dxs;
  });
}

Tensor contiguous(const Tensor& x, CallSite site) {
  CallSiteScope at(site);
  if (x.is_contiguous()) return x;
  OpScope scope("contiguous", {x});
  Tensor out = empty_like(x);
  kernels::backend(x).copy(x, out);
  // dx = dy
  return scope.finish(std::move(out), {},
                      [](Node&, const Tensor& dy) -> InputGrads { return {dy}; });
}

Tensor expand(const Tensor& x, const Shape& shape, CallSite site) {
  CallSiteScope at(site);
  const int lead = static_cast<int>(shape.size()) - x.dim();
  GLASS_CHECK(lead >= 0, "expand: shape {} has fewer dimensions than {}", shape_str(shape),
              x.describe());
  Shape out_shape(shape.size()), strides(shape.size(), 0);
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    const int xd = i - lead;  // x's dimension aligned to i from the right, or < 0 (new)
    if (xd < 0) {
      GLASS_CHECK(shape[i] >= 0, "expand: new dimension {} of shape {} cannot be {}", i,
                  shape_str(shape), shape[i]);
      out_shape[i] = shape[i];
    } else if (shape[i] == -1 || shape[i] == x.size(xd)) {
      out_shape[i] = x.size(xd);
      strides[i] = x.stride(xd);
    } else {
      GLASS_CHECK(x.size(xd) == 1, "expand: {} cannot be expanded to {} (dim {} is {}, not 1)",
                  x.describe(), shape_str(shape), xd, x.size(xd));
      out_shape[i] = shape[i];  // stride 0: every index reads the one element
    }
  }
  if (out_shape == x.shape()) return x;
  return make_view("expand", x, out_shape, strides, x.offset(),
                   [in_shape = x.shape()](Node&, const Tensor& dy) -> InputGrads {
                     return {sum_to(dy, in_shape)};
                   });
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  Shape out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    // Align from the right; a missing dimension counts as 1.
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    GLASS_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} do not broadcast", op,
                shape_str(a), shape_str(b));
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to(const Tensor& g, const Shape& shape, CallSite site) {
  if (g.shape() == shape) return g;  // nothing was broadcast: no op runs, no call site to set
  CallSiteScope at(site);
  const int lead = g.dim() - static_cast<int>(shape.size());
  GLASS_CHECK(lead >= 0, "sum_to: {} cannot be summed to {}", g.describe(), shape_str(shape));
  // Sum the leading dimensions broadcasting added, and those broadcast from size 1.
  std::vector<int> dims;
  for (int i = 0; i < g.dim(); ++i) {
    const int64_t target = i < lead ? 1 : shape[i - lead];
    GLASS_CHECK(target == g.size(i) || target == 1, "sum_to: {} cannot be summed to {}",
                g.describe(), shape_str(shape));
    if (target == 1 && g.size(i) != 1) dims.push_back(i);
  }
  return reshape(dims.empty() ? g : sum(g, dims, true), shape);
}

}  // namespace glass
