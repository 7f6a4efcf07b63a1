// Differentiable reductions: sum and mean over all elements or over chosen dimensions.
//
// Forward: x (made contiguous) is viewed with each run of adjacent reduced dimensions merged
// into one, so [B, T, C] summed over (0, 1) is a single sum_dim launch over [B*T, C]; the runs
// are then summed innermost first, one launch each. Backward broadcasts dy back over the reduced
// dimensions (a stride-0 view, materialised by one copy) and scales it by 1/count for mean.
#include <algorithm>

#include "autograd/creation_site.h"
#include "autograd/function.h"
#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {

// x (contiguous) summed over the dimensions flagged in `reduced`; the result has the kept
// dimensions, contiguous.
Tensor sum_dims(const Tensor& x, const std::vector<bool>& reduced) {
  Shape merged;
  std::vector<bool> merged_reduced;
  for (int d = 0; d < x.dim(); ++d) {
    if (reduced[d] && !merged_reduced.empty() && merged_reduced.back()) {
      merged.back() *= x.size(d);
    } else {
      merged.push_back(x.size(d));
      merged_reduced.push_back(reduced[d]);
    }
  }
  // Nothing to reduce (a 0-d tensor summed whole): sum over a leading dimension of size 1.
  if (std::find(merged_reduced.begin(), merged_reduced.end(), true) == merged_reduced.end()) {
    merged.insert(merged.begin(), 1);
    merged_reduced.insert(merged_reduced.begin(), true);
  }
  Tensor cur = x.as_strided(merged, contiguous_strides(merged), x.offset());
  for (int d = static_cast<int>(merged.size()) - 1; d >= 0; --d) {
    if (!merged_reduced[d]) continue;
    Shape rest = cur.shape();
    rest.erase(rest.begin() + d);
    Tensor out = Tensor::empty(rest, x.dtype(), x.device());
    kernels::backend(x).sum_dim(cur, out, d);
    cur = out;
  }
  return cur;
}

// sum (mean when `average`) of x over `dims` (all dimensions when empty).
Tensor reduce(const char* op, const Tensor& x_in, const std::vector<int>& dims, bool keepdim,
              bool average) {
  GLASS_CHECK(is_floating(x_in.dtype()), "{}: expects a floating tensor, got {}", op,
              x_in.describe());
  std::vector<bool> reduced(x_in.dim(), dims.empty());
  for (int d : dims) {
    const int w = x_in.wrap_dim(d);
    GLASS_CHECK(!reduced[w], "{}: dimension {} is listed twice for {}", op, d, x_in.describe());
    reduced[w] = true;
  }
  const Tensor x = contiguous(x_in);
  OpScope scope(op, {x});
  // keep_shape: x's shape with 1 for every reduced dimension; out_shape drops them unless keepdim.
  Shape keep_shape = x.shape(), out_shape;
  int64_t count = 1;
  for (int d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      count *= x.size(d);
      keep_shape[d] = 1;
    }
    if (!reduced[d] || keepdim) out_shape.push_back(keep_shape[d]);
  }
  const double scale = average ? 1.0 / static_cast<double>(count) : 1.0;
  Tensor out = sum_dims(x, reduced);
  if (average) kernels::backend(out).affine(out, out, scale, 0);
  out = out.as_strided(out_shape, contiguous_strides(out_shape), out.offset());
  // dx = dy broadcast over the reduced dims (times 1/count for mean)
  return scope.finish(
      out, {}, [reduced, keepdim, keep_shape, scale, x_shape = x.shape()](Node&, const Tensor& dy) {
        // dx = dy (scaled) repeated over the reduced dimensions: dy seen with x's rank (size 1 and
        // stride 0 where reduced), broadcast by stride 0, then copied into a contiguous tensor.
        Shape strides(keep_shape.size(), 0);
        for (size_t d = 0, src = 0; d < keep_shape.size(); ++d) {
          if (!reduced[d]) strides[d] = dy.stride(static_cast<int>(src));
          if (!reduced[d] || keepdim) ++src;
        }
        const Tensor dy_keep = dy.as_strided(keep_shape, strides, dy.offset());
        Tensor dx = Tensor::empty(x_shape, dy.dtype(), dy.device());
        const kernels::Backend& k = kernels::backend(dy);
        k.copy(expand(dy_keep, x_shape), dx);
        if (scale != 1) k.affine(dx, dx, scale, 0);
        return std::vector<Tensor>{dx};
      });
}

}  // namespace

Tensor sum(const Tensor& x, CallSite site) {
  CallSiteScope at(site);
  return reduce("sum", x, {}, false, false);
}
Tensor sum(const Tensor& x, const std::vector<int>& dims, bool keepdim, CallSite site) {
  CallSiteScope at(site);
  return reduce("sum", x, dims, keepdim, false);
}
Tensor mean(const Tensor& x, CallSite site) {
  CallSiteScope at(site);
  return reduce("mean", x, {}, false, true);
}
Tensor mean(const Tensor& x, const std::vector<int>& dims, bool keepdim, CallSite site) {
  CallSiteScope at(site);
  return reduce("mean", x, dims, keepdim, true);
}

}  // namespace glass
