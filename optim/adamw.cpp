#include "optim/adamw.h"

#include "engine/device_runtime.h"
#include "kernels/backend.h"
#include "kernels/optim_math.h"

namespace glass {

AdamW::AdamW(NamedTensors params, const AdamWOptions& options)
    : AdamW(std::move(params), options, std::vector<std::string>{"exp_avg", "exp_avg_sq"}) {}

AdamW::AdamW(NamedTensors params, const AdamWOptions& options, WithoutBuffers)
    : AdamW(std::move(params), options, std::vector<std::string>{}) {}

AdamW::AdamW(NamedTensors params, const AdamWOptions& options,
             std::vector<std::string> buffer_names)
    : Optimizer(std::move(params), options.lr, std::move(buffer_names)), options_(options) {
  GLASS_CHECK(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
              "adamw: betas ({}, {}) must be in [0, 1)", options.beta1, options.beta2);
  GLASS_CHECK(options.eps > 0, "adamw: eps {} must be positive", options.eps);
  GLASS_CHECK(options.weight_decay >= 0, "adamw: weight_decay {} must be >= 0",
              options.weight_decay);
}

namespace {

kernels::AdamWHyper hyper_of(const AdamWOptions& o, double lr, int64_t step) {
  return {lr, o.beta1, o.beta2, o.eps, step, Tensor()};
}

}  // namespace

kernels::AdamWParam AdamW::param_entry(size_t i) const {
  return {params()[i].second, {}, {}, {}, decays(i) ? options_.weight_decay : 0.0};
}

void AdamW::stage_scalars(int64_t step, double lr) {
  const Device device = params()[0].second.device();
  if (!capabilities(device).device_scalars) return;  // cpu reads the hyper-parameters on the host
  std::vector<kernels::AdamWParam> all;
  for (size_t i = 0; i < params().size(); ++i) all.push_back(param_entry(i));
  const std::vector<float> table = kernels::adamw_scalar_table(all, hyper_of(options_, lr, step));
  // Into the same device memory every time (a captured update reads it there): one upload.
  if (!scalars_.defined())
    scalars_ = Tensor::empty({static_cast<int64_t>(table.size())}, DType::f32, device);
  scalars_.copy_from_host(table.data());
  staged_step_ = step;
  staged_lr_ = lr;
}

void AdamW::set_compute_copies(std::vector<Tensor> copies) {
  check_compute_copies(copies);
  copies_ = std::move(copies);
}

void AdamW::check_compute_copies(const std::vector<Tensor>& copies) const {
  GLASS_CHECK(copies.empty() || copies.size() == params().size(),
              "adamw: {} compute copies for {} parameters", copies.size(), params().size());
  for (size_t i = 0; i < copies.size(); ++i) {
    const Tensor& c = copies[i];
    const Tensor& p = params()[i].second;
    GLASS_CHECK(!c.defined() || (c.dtype() == DType::bf16 && c.is_contiguous() &&
                                 c.shape() == p.shape() && c.device() == p.device()),
                "adamw: the compute copy {} of parameter '{}' {} must be contiguous bf16 of its "
                "shape, on its device",
                c.describe(), params()[i].first, p.describe());
  }
}

void AdamW::update(const std::vector<size_t>& with_grad) {
  std::vector<kernels::AdamWParam> batch;
  for (size_t i : with_grad) {
    kernels::AdamWParam entry = param_entry(i);
    entry.grad = entry.param.grad();
    entry.m = buffer(0, i);
    entry.v = buffer(1, i);
    if (!copies_.empty()) entry.copy = copies_[i];
    batch.push_back(entry);
  }
  kernels::AdamWHyper hyper = hyper_of(options_, lr(), step_count());
  hyper.finite = finite_;
  // The staged table has an entry per parameter: it serves when every parameter has a gradient.
  if (with_grad.size() == params().size() && capabilities(batch[0].param.device()).device_scalars) {
    if (staged_step_ != step_count() || staged_lr_ != lr()) stage_scalars(step_count(), lr());
    hyper.scalars = scalars_;
  }
  kernels::backend(batch[0].param).adamw_step(batch, hyper);
}

}  // namespace glass
