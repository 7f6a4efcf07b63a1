#include "autograd/gradcheck.h"

#include <cmath>

#include "autograd/ops.h"

namespace glass {

namespace {

// Storage offset (in elements) of the j-th element of t in row-major order.
int64_t element_offset(const Tensor& t, int64_t j) {
  int64_t off = t.offset();
  for (int d = t.dim() - 1; d >= 0; --d) {
    off += (j % t.size(d)) * t.stride(d);
    j /= t.size(d);
  }
  return off;
}

double dot(const std::vector<double>& a, const Tensor& y) {
  const std::vector<double> b = to_vector<double>(y);
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  std::vector<Tensor> leaves;
  for (const auto& x : inputs) {
    Tensor leaf = x.detach();
    if (is_floating(x.dtype())) {
      GLASS_CHECK(x.dtype() == DType::f64 && x.device() == kCPU,
                  "gradcheck: input {} must be f64 on cpu", x.describe());
      leaf.set_requires_grad(true);
    }
    leaves.push_back(leaf);
  }

  Tensor y = f(leaves);
  GLASS_CHECK(y.dtype() == DType::f64, "gradcheck: output {} must be f64", y.describe());
  Generator gen(opt.seed);
  const Tensor r = randn(y.shape(), gen, 0, 1, DType::f64);
  const std::vector<double> rv = to_vector<double>(r);
  backward(y, r);

  GradcheckResult res;
  int reported = 0;
  NoGradGuard no_grad;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad()) continue;
    Tensor g = leaves[i].grad();
    const std::vector<double> analytic =
        g.defined() ? to_vector<double>(g) : std::vector<double>(leaves[i].numel(), 0.0);
    double* base = static_cast<double*>(leaves[i].storage()->data);
    for (int64_t j = 0; j < leaves[i].numel(); ++j) {
      double& xj = base[element_offset(leaves[i], j)];
      const double orig = xj;
      xj = orig + opt.eps;
      const double lp = dot(rv, f(leaves));
      xj = orig - opt.eps;
      const double lm = dot(rv, f(leaves));
      xj = orig;
      const double numeric = (lp - lm) / (2 * opt.eps);
      const double err = std::abs(analytic[j] - numeric);
      res.max_abs_error = std::max(res.max_abs_error, err);
      if (!(err <= opt.atol + opt.rtol * std::abs(numeric))) {
        res.ok = false;
        if (reported++ < 8)
          res.report += fmt::format("input {} {} element {}: analytic {:.10g} numeric {:.10g}\n", i,
                                    leaves[i].describe(), j, analytic[j], numeric);
      }
    }
  }
  return res;
}

}  // namespace glass
