// SGD with momentum, PyTorch's semantics (torch.optim.SGD, dampening 0, no Nesterov), one sgd_step
// kernel launch per parameter:
//   g  += wd * p                   (L2 weight decay; only on >= 2-D parameters, as AdamW)
//   buf = momentum * buf + g       (buf = g on the first step)
//   p  -= lr * buf
// With momentum 0 this is plain p -= lr * g and there is no state; otherwise the state buffer is
// "momentum_buffer.<param>".
#pragma once

#include "optim/optimizer.h"

namespace glass {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0;
  double weight_decay = 0;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SGDOptions& options);
  const char* name() const override { return "sgd"; }
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const std::vector<size_t>& with_grad) override;

 private:
  SGDOptions options_;
};

}  // namespace glass
