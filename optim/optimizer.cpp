#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "engine/launch.h"
#include "kernels/backend.h"

namespace glass {

Optimizer::Optimizer(NamedTensors params, double lr, std::vector<std::string> buffer_names)
    : params_(std::move(params)), buffer_names_(std::move(buffer_names)) {
  set_lr(lr);
  std::set<std::string> names;
  std::set<const TensorImpl*> tensors;
  for (const auto& [name, p] : params_) {
    GLASS_CHECK(p.defined() && p.dtype() == DType::f32 && p.is_contiguous(),
                "optimizer: parameter '{}' must be a contiguous f32 tensor, got {}", name,
                p.describe());
    GLASS_CHECK(names.insert(name).second, "optimizer: parameter name '{}' appears twice", name);
    GLASS_CHECK(tensors.insert(p.unsafe_impl()).second,
                "optimizer: parameter '{}' is the same tensor as an earlier one", name);
  }
  for (size_t b = 0; b < buffer_names_.size(); ++b) {
    buffers_.emplace_back();
    for (const auto& [name, p] : params_) buffers_[b].push_back(zeros_like(p));
  }
}

void Optimizer::set_lr(double lr) {
  GLASS_CHECK(std::isfinite(lr) && lr >= 0, "optimizer: learning rate {} must be finite and >= 0",
              lr);
  lr_ = lr;
}

void Optimizer::step() {
  // Check every gradient first, so that a bad one leaves all parameters untouched.
  for (const auto& [param_name, p] : params_) {
    const Tensor g = p.grad();
    GLASS_CHECK(!g.defined() || (g.shape() == p.shape() && g.dtype() == p.dtype() &&
                                 g.device() == p.device() && g.is_contiguous()),
                "{}: gradient of '{}' is {}, but the parameter is {}", name(), param_name,
                g.describe(), p.describe());
  }
  ++step_;
  NoGradGuard no_grad;
  LaunchScope scope(name(), -1, Phase::optimizer);
  std::vector<size_t> with_grad;
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].second.grad().defined()) with_grad.push_back(i);
  if (!with_grad.empty()) update(with_grad);
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.set_grad(Tensor());
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  for (size_t b = 0; b < buffer_names_.size(); ++b)
    for (size_t i = 0; i < params_.size(); ++i)
      out.emplace_back(buffer_names_[b] + "." + params_[i].first, buffers_[b][i]);
  return out;
}

std::map<std::string, double> Optimizer::state_scalars() const {
  return {{"step", static_cast<double>(step_)}, {"lr", lr_}};
}

std::vector<const Tensor*> Optimizer::match_state_tensors(const NamedTensors& given,
                                                          const NamedTensors& expected,
                                                          const char* holder,
                                                          std::vector<std::string>& problems) {
  std::map<std::string, const Tensor*> left;
  for (const auto& [name, t] : given)
    if (!left.emplace(name, &t).second) problems.push_back(fmt::format("'{}' appears twice", name));
  std::vector<const Tensor*> matches(expected.size(), nullptr);
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, like] = expected[i];
    const auto it = left.find(name);
    if (it == left.end()) {
      problems.push_back(fmt::format("missing '{}' ({})", name, like.describe()));
      continue;
    }
    const Tensor& t = *it->second;
    if (!t.defined() || !is_floating(t.dtype()) || t.shape() != like.shape())
      problems.push_back(
          fmt::format("'{}' is {} but {} {}", name, t.describe(), holder, like.describe()));
    else
      matches[i] = &t;
    left.erase(it);
  }
  for (const auto& [name, t] : left)
    problems.push_back(fmt::format("unexpected '{}' ({})", name, t->describe()));
  return matches;
}

void Optimizer::load_state(const NamedTensors& tensors,
                           const std::map<std::string, double>& scalars) {
  // 1. Match every expected buffer; nothing changes until all is known to be well.
  std::vector<std::string> problems;
  const NamedTensors expected = Optimizer::state_tensors();  // this class's own buffers
  const std::vector<const Tensor*> given =
      match_state_tensors(tensors, expected, "the optimizer holds", problems);
  auto step_it = scalars.find("step");
  if (step_it == scalars.end())
    problems.push_back("missing scalar 'step'");
  else if (!(step_it->second >= 0 && step_it->second <= 0x1p53) ||  // exact in a double, fits int64
           step_it->second != std::floor(step_it->second))
    problems.push_back(fmt::format("scalar 'step' = {} is not a count", step_it->second));
  auto lr_it = scalars.find("lr");
  if (lr_it != scalars.end() && !(std::isfinite(lr_it->second) && lr_it->second >= 0))
    problems.push_back(fmt::format("scalar 'lr' = {} is not a learning rate", lr_it->second));
  GLASS_CHECK(problems.empty(), "{}::load_state: {} problem(s): {}", name(), problems.size(),
              fmt::join(problems, "; "));

  // 2. Copy the buffers in place (a cast first where the dtype differs) and set the scalars.
  NoGradGuard no_grad;
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor& src = *given[i];
    const Tensor& buf = expected[i].second;
    const Tensor value = src.dtype() == buf.dtype() ? src : cast(src, buf.dtype());
    kernels::backend(buf).copy(value.detach(), buf);
  }
  step_ = static_cast<int64_t>(step_it->second);
  if (lr_it != scalars.end()) lr_ = lr_it->second;
}

}  // namespace glass
