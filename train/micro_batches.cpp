#include "train/micro_batches.h"

#include "autograd/ops.h"
#include "engine/error.h"

namespace glass::train {

namespace {

// The micro-steps' tokens and targets back to back on the host, i32 [k, rows, T] each.
struct HostStack {
  Shape shape;
  std::vector<int32_t> x, y;
};

HostStack stack_on_host(const std::vector<Batch>& host) {
  GLASS_CHECK(!host.empty(), "a step needs at least one micro-step batch");
  const Shape shape = host[0].x.shape();
  HostStack s;
  for (const Batch& b : host) {
    for (const Tensor* t : {&b.x, &b.y})
      GLASS_CHECK(t->device().kind == DeviceKind::cpu && t->dtype() == DType::i32 &&
                      t->is_contiguous() && t->dim() == 2 && t->shape() == shape,
                  "a micro-step batch {} is not i32 {} [rows, T] contiguous on the host (the "
                  "step's batches are stacked there and uploaded once)",
                  t->describe(), shape_str(shape));
    s.x.insert(s.x.end(), b.x.data<int32_t>(), b.x.data<int32_t>() + b.x.numel());
    s.y.insert(s.y.end(), b.y.data<int32_t>(), b.y.data<int32_t>() + b.y.numel());
  }
  s.shape = {static_cast<int64_t>(host.size()), shape[0], shape[1]};
  return s;
}

// One upload each into `stacked` (a contiguous i32 pair of the stack's shape).
void upload_stack(const HostStack& s, const Batch& stacked) {
  GLASS_CHECK(s.shape == stacked.x.shape() && s.shape == stacked.y.shape(),
              "the step's batches stack to {}, the tensors they are uploaded into are {}",
              shape_str(s.shape), shape_str(stacked.x.shape()));
  stacked.x.copy_from_host(s.x.data());
  stacked.y.copy_from_host(s.y.data());
}

}  // namespace

MicroBatches upload_micro_batches(const std::vector<Batch>& host, Device device) {
  const HostStack s = stack_on_host(host);
  MicroBatches out;
  out.stacked = {Tensor::empty(s.shape, DType::i32, device),
                 Tensor::empty(s.shape, DType::i32, device)};
  upload_stack(s, out.stacked);
  // Micro-step m reads row m of the stacked tensors.
  const Shape rows_by_t{s.shape[1], s.shape[2]};
  for (int64_t m = 0; m < s.shape[0]; ++m)
    out.micro.push_back({view(slice(out.stacked.x, 0, m, m + 1), rows_by_t),
                         view(slice(out.stacked.y, 0, m, m + 1), rows_by_t)});
  return out;
}

void upload_micro_batches_into(const std::vector<Batch>& host, const Batch& stacked) {
  upload_stack(stack_on_host(host), stacked);
}

}  // namespace glass::train
