// gradcheck: compares every analytic gradient with central finite differences.
//
// For y = f(inputs), a fixed random r of y's shape turns y into the scalar L = <r, y>. backward(y,
// r) gives dL/dx analytically; the numerical value for element j of input x is (L(x + eps e_j) -
// L(x - eps e_j)) / (2 eps). Use f64 inputs (on `cpu`): in f32 the difference quotient drowns in
// round-off. Non-floating inputs (token ids) are passed through unchanged. Inputs keep their
// strides, so non-contiguous inputs are checked as they are.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace glass {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-6;
  double rtol = 1e-4;  // |analytic - numeric| <= atol + rtol * |numeric|
  uint64_t seed = 1234;
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  std::string report;  // the first mismatches, naming input, element, analytic and numeric values
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

GradcheckResult gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt = {});

}  // namespace glass
