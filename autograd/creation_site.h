// Where forward created a node: the line of code that called the op, and the nn module whose
// forward was running. Node::created_at holds it as its parts (file, line, module), turned into
// text ("nn/layers.cpp:118 in transformer.h.0") only when tape printing, GLASS_SYNC errors or
// GLASS_CHECK_NAN errors show it: recording a node formats nothing. (tools/gdb/glass.py prints it
// as that text too.)
//
// The call site comes from std::source_location: every differentiable op in autograd/ops.h takes a
// defaulted last parameter `site` and opens a CallSiteScope with it. Only the outermost op sets
// the site, so an op made of other ops (linear's bias add, a reshape's copy) reports the line that
// called it, not a line inside autograd/. Overloaded operators cannot take a defaulted parameter;
// their tensor operand converts implicitly to SitedTensor, whose constructor can, and that records
// the line of the expression. The module path is pushed by each nn module's forward.
#pragma once

#include <cstdint>
#include <source_location>
#include <string>

#include "engine/tensor.h"

namespace glass {

using CallSite = std::source_location;

// RAII: the call site of the ops run while it lives, unless an enclosing scope set one already.
class CallSiteScope {
 public:
  explicit CallSiteScope(const CallSite& site);
  ~CallSiteScope();
  CallSiteScope(const CallSiteScope&) = delete;
  CallSiteScope& operator=(const CallSiteScope&) = delete;

 private:
  bool outermost_;
};

// RAII: the dotted path of the module whose forward runs ("transformer.h.1.ln_2"; "" for a root
// module). The scope keeps an interned copy of `path` (one per distinct path, for the life of the
// process), so that a node may outlive the module that created it and still name it.
class ModulePathScope {
 public:
  explicit ModulePathScope(const std::string& path);
  // A path interned already (a node's CreationSite::module, as backward reopens it), or null for
  // none: no lookup.
  explicit ModulePathScope(const std::string* interned_path);
  ~ModulePathScope();
  ModulePathScope(const ModulePathScope&) = delete;
  ModulePathScope& operator=(const ModulePathScope&) = delete;

 private:
  const std::string* saved_;
};

// A creation site as its parts, copied in three words; nothing is formatted until str().
struct CreationSite {
  // std::source_location's file name (static text), without the glass source root when it lies
  // under it ("nn/layers.cpp"; a user's program outside the tree in full; a relative name, as a
  // CCACHE_BASEDIR build writes them, without its leading "../"); null: no op scope open
  const char* file = nullptr;
  uint32_t line = 0;                    // its line
  const std::string* module = nullptr;  // the interned module path; null outside any module

  // "nn/layers.cpp:118 in transformer.h.0", "tests/autograd/test_anomaly.cpp:40", "in
  // transformer.h.0" (a module but no op scope) or "".
  std::string str() const;
};

// The call site and module of the ops running now on this thread.
CreationSite current_creation_site();

// An operator's tensor operand together with the line of the expression it appears in.
struct SitedTensor {
  SitedTensor(const Tensor& t, CallSite s = CallSite::current()) : tensor(t), site(s) {}
  const Tensor& tensor;
  CallSite site;
};

}  // namespace glass
