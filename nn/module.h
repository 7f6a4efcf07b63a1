// Module: a tree of layers with named parameters, as in PyTorch.
//
// A module registers its own parameters and its child modules; named_parameters() walks the tree
// in registration order and joins names with dots, so GPT's parameters read
// "transformer.h.0.attn.c_attn.weight" exactly as nanoGPT's do, and state dicts move between glass
// and PyTorch through safetensors. Registering sets each parameter's requires_grad and its full
// name in AutogradMeta::name (the tape printer shows it).
//
// A Module holds pointers to its children (usually its own members), so modules are neither
// copied nor moved: build them in place (e.g. std::make_unique<GPT>(config)).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autograd/creation_site.h"
#include "engine/tensor.h"
#include "nn/safetensors.h"

namespace glass {

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its descendants, with its dotted name, in registration
  // order (own parameters first, then each child's in the order the children were registered).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;

  // Moves every parameter to `device` in place (each handle, in the module and outside it, sees
  // the move). Build the optimizer after this: its state lives where the parameters are.
  void to(Device device);

  // Training mode (dropout active) for this module and every descendant.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // The dotted path of this module in the tree ("transformer.h.1.ln_2"; "" for the root). Each
  // forward opens a ModulePathScope with it, so the nodes it creates say where they come from.
  const std::string& path() const { return path_; }

  // --- mixed precision (README, "bf16 mixed precision") ---
  // The parameters stay the master weights (f32: what the optimizer updates, what is saved and
  // loaded). With a compute dtype other than theirs (bf16), every parameter of this module and its
  // descendants also gets a copy in that dtype, made by the cast kernel, and forward reads each
  // parameter through param(): the copy, joined to its master by compute_copy (autograd/ops.h),
  // so that its bf16 gradient reaches the master's .grad as f32. The copies follow the masters
  // only when refreshed: set_compute_dtype, to() and load_state_dict refresh them; after any
  // other change of the masters (an optimizer step, unless it writes them itself:
  // AdamW::set_compute_copies) call refresh_compute_copies().
  void set_compute_dtype(DType dtype);
  DType compute_dtype() const { return compute_dtype_; }
  // Casts every master into its copy (one cast launch per parameter; none in f32).
  void refresh_compute_copies();
  // Every compute copy of this module and its descendants (none in f32): what, beside the
  // masters, the weights take in memory (the step explorer's memory ledger).
  std::vector<Tensor> compute_copies() const;
  // One entry per parameter, in parameters()' order: its compute copy, undefined where it has
  // none (f32). An optimizer that writes the copies in its own pass takes these
  // (optim/adamw.h: AdamW::set_compute_copies).
  std::vector<Tensor> parameter_copies() const;
  // What forward uses for parameter p of this module: p itself, or its compute copy.
  Tensor param(const Tensor& p) const;

  // The parameters themselves (handles, not copies: detach or save them, don't modify them).
  NamedTensors state_dict() const { return named_parameters(); }
  // Copies `state` into the parameters, in place (so optimizer references stay valid). Floating
  // tensors of another dtype (BF16, F64) are cast to the parameter's dtype. Everything is checked
  // before anything is copied: with `strict`, a missing or unexpected name is an error; a shape
  // mismatch or a non-floating tensor always is. The error lists every problem.
  void load_state_dict(const NamedTensors& state, bool strict = true);

 protected:
  // Makes `t` a parameter called `name` and returns it (a handle to the same tensor: the module
  // and the caller's member see one object).
  Tensor register_parameter(const std::string& name, Tensor t);
  // Adds `child` (which must outlive this module, typically a member) under `name`.
  template <class M>
  M& register_module(const std::string& name, M& child) {
    add_child(name, child);
    return child;
  }

 private:
  void add_child(const std::string& name, Module& child);
  // Sets AutogradMeta::name of every parameter under this module to prefix + its dotted name, and
  // each module's path.
  void name_parameters(const std::string& prefix);
  void collect(const std::string& prefix, NamedTensors& out) const;

  std::vector<std::pair<std::string, Tensor>> params_;
  DType compute_dtype_ = DType::f32;
  std::vector<Tensor> copies_;  // params_[i]'s compute copy, undefined when of its own dtype
  std::vector<std::pair<std::string, Module*>> children_;
  std::string path_;
  bool training_ = true;
};

}  // namespace glass
