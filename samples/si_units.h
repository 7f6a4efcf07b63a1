// Numbers with an SI prefix, for the reports of samples/roofline.
#pragma once

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace glass::samples {

// v with an SI prefix, from n to P: 9.6e-11 s -> "0.0955 ns", 1.07e9 FLOP -> "1.074 GFLOP".
inline std::string si(double v, const char* unit) {
  static const char* prefixes[] = {"n", "µ", "m", "", "K", "M", "G", "T", "P"};
  int i = 3;
  while (std::abs(v) >= 1000 && i < 8) {
    v /= 1000;
    ++i;
  }
  while (v != 0 && std::abs(v) < 1 && i > 0) {
    v *= 1000;
    --i;
  }
  return fmt::format("{:.4g} {}{}", v, prefixes[i], unit);
}

}  // namespace glass::samples
