#include "autograd/creation_site.h"

#include <string_view>

#include "engine/interned.h"

#include "engine/out_of_memory.h"

namespace glass {

namespace {

thread_local bool has_site = false;
thread_local CallSite call_site;
thread_local const std::string* module_path = nullptr;  // interned

// The glass source root, from where this very file was compiled: file paths under it are shown
// relative to it ("nn/layers.cpp"), others (a user's program outside the tree) in full.
std::string_view source_root() {
  constexpr std::string_view self = "autograd/creation_site.cpp";
  static const std::string_view root = [&] {
    std::string_view file = std::source_location::current().file_name();
    return file.ends_with(self) ? file.substr(0, file.size() - self.size()) : std::string_view();
  }();
  return root;
}

// A relative file name without its leading "./" and "../" parts. The compiler writes a file's
// name as it was given, and a build that compiles through ccache with CCACHE_BASEDIR gives names
// relative to each object's build folder ("../../tests/autograd/x.cpp" from build/tests): the
// parts that remain are the path from the source root.
const char* without_leading_dots(const char* file) {
  for (;;) {
    const std::string_view f(file);
    if (f.starts_with("./"))
      file += 2;
    else if (f.starts_with("../"))
      file += 3;
    else
      return file;
  }
}

// `file` without the source root when it lies under it (a pointer into the same static text). The
// last answer is kept: an op's file is almost always the previous op's.
const char* relative_to_source_root(const char* file) {
  thread_local const char* last_file = nullptr;
  thread_local const char* last_relative = nullptr;
  if (file != last_file) {
    const std::string_view root = source_root();
    last_file = file;
    if (file[0] != '/')
      last_relative = without_leading_dots(file);
    else if (!root.empty() && std::string_view(file).starts_with(root))
      last_relative = file + root.size();
    else
      last_relative = file;
  }
  return last_relative;
}

// An out-of-memory error names the module that asked (engine/out_of_memory.h): the engine asks
// this file, installed when the autograd library is linked in.
[[maybe_unused]] const bool module_source_installed = [] {
  set_module_path_source([]() -> std::string { return module_path ? *module_path : ""; });
  return true;
}();

}  // namespace

CallSiteScope::CallSiteScope(const CallSite& site) : outermost_(!has_site) {
  if (!outermost_) return;
  has_site = true;
  call_site = site;
}

CallSiteScope::~CallSiteScope() {
  if (outermost_) has_site = false;
}

ModulePathScope::ModulePathScope(const std::string& path)
    : ModulePathScope(path.empty() ? nullptr : &interned(path)) {}

ModulePathScope::ModulePathScope(const std::string* interned_path) : saved_(module_path) {
  module_path = interned_path;
}

ModulePathScope::~ModulePathScope() { module_path = saved_; }

CreationSite current_creation_site() {
  CreationSite site;
  if (has_site) {
    site.file = relative_to_source_root(call_site.file_name());
    site.line = call_site.line();
  }
  site.module = module_path;
  return site;
}

std::string CreationSite::str() const {
  std::string s;
  if (file) s = fmt::format("{}:{}", file, line);
  if (module && !module->empty()) s += (s.empty() ? "in " : " in ") + *module;
  return s;
}

}  // namespace glass
