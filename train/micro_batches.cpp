#include "train/micro_batches.h"

#include "autograd/ops.h"
#include "engine/error.h"

namespace glass::train {

MicroBatches upload_micro_batches(const std::vector<Batch>& host, Device device) {
  GLASS_CHECK(!host.empty(), "a step needs at least one micro-step batch");
  const Shape shape = host[0].x.shape();
  // 1. The micro-steps' tokens and targets back to back on the host.
  std::vector<int32_t> x, y;
  for (const Batch& b : host) {
    for (const Tensor* t : {&b.x, &b.y})
      GLASS_CHECK(t->device().kind == DeviceKind::cpu && t->dtype() == DType::i32 &&
                      t->is_contiguous() && t->dim() == 2 && t->shape() == shape,
                  "a micro-step batch {} is not i32 {} [rows, T] contiguous on the host (the "
                  "step's batches are stacked there and uploaded once)",
                  t->describe(), shape_str(shape));
    x.insert(x.end(), b.x.data<int32_t>(), b.x.data<int32_t>() + b.x.numel());
    y.insert(y.end(), b.y.data<int32_t>(), b.y.data<int32_t>() + b.y.numel());
  }
  // 2. One upload each, then micro-step m's rows as views.
  const Shape all{static_cast<int64_t>(host.size()), shape[0], shape[1]};
  MicroBatches out;
  out.stacked = {Tensor::from_host(x.data(), all, DType::i32, device),
                 Tensor::from_host(y.data(), all, DType::i32, device)};
  for (int64_t m = 0; m < all[0]; ++m)
    out.micro.push_back({view(slice(out.stacked.x, 0, m, m + 1), shape),
                         view(slice(out.stacked.y, 0, m, m + 1), shape)});
  return out;
}

}  // namespace glass::train
