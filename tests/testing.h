// Helpers shared by the test suites: comparisons whose tolerance scales with the reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/ops.h"

namespace glass::testing {

// Passes when |a - e| <= atol + rtol * max|e| for every element, where max|e| is the largest
// magnitude in the reference: errors are judged against the scale of the values, and a tensor of
// small entries next to large ones is not held to a tighter absolute bound than the large ones.
inline ::testing::AssertionResult all_close(const std::vector<double>& actual,
                                            const std::vector<double>& expected, double rtol,
                                            double atol = 0) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected size " << expected.size();
  double scale = 0;
  for (double e : expected) scale = std::max(scale, std::abs(e));
  const double tol = atol + rtol * scale;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << actual[i] << " vs expected " << expected[i]
             << " (tolerance " << tol << ", reference max " << scale << ")";
  return ::testing::AssertionSuccess();
}

// Any floating tensor as doubles, row-major.
inline std::vector<double> values(const Tensor& t) {
  Tensor c = t.dtype() == DType::f64 ? t : cast(t, DType::f64);
  return to_vector<double>(c);
}

inline ::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected,
                                            double rtol, double atol = 0) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure()
           << "shape " << actual.describe() << " != expected " << expected.describe();
  return all_close(values(actual), values(expected), rtol, atol);
}

}  // namespace glass::testing
