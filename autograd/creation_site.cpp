#include "autograd/creation_site.h"

#include <string_view>

namespace glass {

namespace {

thread_local bool has_site = false;
thread_local CallSite call_site;
thread_local const std::string* module_path = nullptr;

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

}  // namespace

CallSiteScope::CallSiteScope(const CallSite& site) : outermost_(!has_site) {
  if (!outermost_) return;
  has_site = true;
  call_site = site;
}

CallSiteScope::~CallSiteScope() {
  if (outermost_) has_site = false;
}

ModulePathScope::ModulePathScope(const std::string& path) : saved_(module_path) {
  module_path = &path;
}

ModulePathScope::~ModulePathScope() { module_path = saved_; }

std::string current_creation_site() {
  std::string s;
  if (has_site) {
    std::string_view file = call_site.file_name();
    const std::string_view root = source_root();
    if (!root.empty() && file.starts_with(root)) file.remove_prefix(root.size());
    s = fmt::format("{}:{}", file, call_site.line());
  }
  if (module_path && !module_path->empty()) s += (s.empty() ? "in " : " in ") + *module_path;
  return s;
}

}  // namespace glass
