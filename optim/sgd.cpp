#include "optim/sgd.h"

#include "kernels/backend.h"

namespace glass {

SGD::SGD(NamedTensors params, const SGDOptions& options)
    : Optimizer(std::move(params), options.lr,
                // Without momentum there is nothing to remember between steps.
                options.momentum > 0 ? std::vector<std::string>{"momentum_buffer"}
                                     : std::vector<std::string>{}),
      options_(options) {
  GLASS_CHECK(options.momentum >= 0, "sgd: momentum {} must be >= 0", options.momentum);
  GLASS_CHECK(options.weight_decay >= 0, "sgd: weight_decay {} must be >= 0", options.weight_decay);
}

void SGD::update(const std::vector<size_t>& with_grad) {
  for (size_t i : with_grad) {
    const Tensor& p = params()[i].second;
    const Tensor buf = options_.momentum > 0 ? buffer(0, i) : Tensor();
    kernels::backend(p).sgd_step(p, p.grad(), buf, lr(), options_.momentum,
                                 decays(i) ? options_.weight_decay : 0.0, step_count() == 1);
  }
}

}  // namespace glass
