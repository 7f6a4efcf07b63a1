// Flag values that several samples parse the same way.
#pragma once

#include <string>

#include "engine/dtype.h"
#include "engine/error.h"

namespace glass::samples {

// --dtype: the floating types a sample can compute in.
inline DType parse_dtype_flag(const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "bf16") return DType::bf16;
  fail("--dtype '{}': expected f32 or bf16", s);
}

}  // namespace glass::samples
