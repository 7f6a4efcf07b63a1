#include "autograd/op_signature.h"

#include <fmt/format.h>

#include "engine/interned.h"

namespace glass {

namespace {

void append(std::string& s, bool defined, DType dtype, const Shape& shape) {
  if (!s.empty()) s += ", ";
  s += defined ? fmt::format("{}{}", dtype_name(dtype), shape_str(shape)) : "-";
}

OpSignature intern(const std::string& shapes, const char* dtype) {
  return {interned(shapes).c_str(), dtype};
}

// dtype_name's text as a C string with static life (string_views of literals).
const char* dtype_text(DType t) { return dtype_name(t).data(); }

}  // namespace

OpSignature op_signature(const SmallVector<const Tensor*, 6>& inputs) {
  std::string shapes;
  const char* dtype = "";
  for (const Tensor* t : inputs) {
    append(shapes, t->defined(), t->defined() ? t->dtype() : DType::f32,
           t->defined() ? t->shape() : Shape{});
    if (!*dtype && t->defined() && is_floating(t->dtype())) dtype = dtype_text(t->dtype());
  }
  return intern(shapes, dtype);
}

OpSignature node_signature(const Node& node) {
  std::string shapes;
  const char* dtype = "";
  for (const Edge& e : node.inputs) {
    append(shapes, e.defined(), e.dtype, e.shape);
    if (!*dtype && e.defined() && is_floating(e.dtype)) dtype = dtype_text(e.dtype);
  }
  return intern(shapes, dtype);
}

}  // namespace glass
