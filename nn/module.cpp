#include "nn/module.h"

#include <map>

#include "autograd/ops.h"
#include "kernels/backend.h"

namespace glass {

namespace {
void check_name(const std::string& name, const char* what) {
  GLASS_CHECK(!name.empty() && name.front() != '.' && name.back() != '.',
              "Module: invalid {} name '{}'", what, name);
}
}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_name(name, "parameter");
  GLASS_CHECK(t.defined() && is_floating(t.dtype()),
              "Module::register_parameter '{}': parameters are floating tensors, got {}", name,
              t.describe());
  for (const auto& [n, p] : params_)
    GLASS_CHECK(n != name, "Module::register_parameter: '{}' registered twice", name);
  t.set_requires_grad(true);
  t.autograd_meta().name = name;
  params_.emplace_back(name, t);
  return t;
}

void Module::add_child(const std::string& name, Module& child) {
  check_name(name, "module");
  GLASS_CHECK(&child != this, "Module::register_module '{}': a module cannot contain itself", name);
  for (const auto& [n, m] : children_)
    GLASS_CHECK(n != name, "Module::register_module: '{}' registered twice", name);
  children_.emplace_back(name, &child);
  // Parents register children after building them, so the outermost registration names last and
  // leaves the full dotted names.
  child.name_parameters(name + ".");
}

void Module::name_parameters(const std::string& prefix) {
  path_ = prefix.substr(0, prefix.size() - 1);  // without the trailing dot
  for (auto& [name, t] : params_) t.autograd_meta().name = prefix + name;
  for (auto& [name, child] : children_) child->name_parameters(prefix + name + ".");
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::to(Device device) {
  for (auto& [name, p] : named_parameters()) {
    Tensor handle = p;
    handle.set_data(to_device(p, device));
  }
  set_compute_dtype(compute_dtype_);  // the copies move too
}

void Module::set_compute_dtype(DType dtype) {
  GLASS_CHECK(is_floating(dtype), "Module::set_compute_dtype: {} is not a floating dtype",
              dtype_name(dtype));
  compute_dtype_ = dtype;
  copies_.clear();
  for (const auto& [name, p] : params_)
    copies_.push_back(p.dtype() == dtype ? Tensor() : Tensor::empty(p.shape(), dtype, p.device()));
  for (auto& [name, child] : children_) child->set_compute_dtype(dtype);
  refresh_compute_copies();
}

void Module::refresh_compute_copies() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < copies_.size(); ++i)
    if (copies_[i].defined()) kernels::backend(copies_[i]).cast(params_[i].second, copies_[i]);
  for (auto& [name, child] : children_) child->refresh_compute_copies();
}

std::vector<Tensor> Module::compute_copies() const {
  std::vector<Tensor> out;
  for (const Tensor& c : copies_)
    if (c.defined()) out.push_back(c);
  for (const auto& [name, child] : children_)
    for (Tensor& c : child->compute_copies()) out.push_back(std::move(c));
  return out;
}

std::vector<Tensor> Module::parameter_copies() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i)
    out.push_back(i < copies_.size() ? copies_[i] : Tensor());
  for (const auto& [name, child] : children_)
    for (Tensor& c : child->parameter_copies()) out.push_back(std::move(c));
  return out;
}

Tensor Module::param(const Tensor& p) const {
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].second.unsafe_impl() != p.unsafe_impl()) continue;
    return i < copies_.size() && copies_[i].defined() ? compute_copy(p, copies_[i]) : p;
  }
  fail("Module::param: {} is not a parameter of module '{}'", p.describe(), path_);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, const Tensor*> given;
  std::vector<std::string> problems;
  for (const auto& [name, t] : state)
    if (!given.emplace(name, &t).second)
      problems.push_back(fmt::format("'{}' appears twice", name));

  // 1. Match names and check shapes and dtypes; nothing is modified yet.
  const NamedTensors params = named_parameters();
  std::vector<std::pair<Tensor, const Tensor*>> copies;  // (parameter, source)
  for (const auto& [name, p] : params) {
    auto it = given.find(name);
    if (it == given.end()) {
      if (strict) problems.push_back(fmt::format("missing '{}' ({})", name, p.describe()));
      continue;
    }
    const Tensor& src = *it->second;
    if (!src.defined() || !is_floating(src.dtype()) || src.shape() != p.shape())
      problems.push_back(fmt::format("'{}' is {} in the state dict but {} in the model", name,
                                     src.describe(), p.describe()));
    else
      copies.emplace_back(p, &src);
    given.erase(it);
  }
  if (strict)
    for (const auto& [name, t] : given)
      problems.push_back(fmt::format("unexpected '{}' ({})", name, t->describe()));
  GLASS_CHECK(problems.empty(), "load_state_dict: {} problem(s): {}", problems.size(),
              fmt::join(problems, "; "));

  // 2. Copy each value into the existing parameter storage, converting the dtype if needed.
  NoGradGuard no_grad;
  for (auto& [param, src] : copies) {
    const Tensor on_device = to_device(*src, param.device());
    const Tensor value =
        on_device.dtype() == param.dtype() ? on_device : cast(on_device, param.dtype());
    kernels::backend(param).copy(value.detach(), param);
  }
  refresh_compute_copies();
}

}  // namespace glass
