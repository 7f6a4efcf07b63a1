#include "engine/interned.h"

#include <mutex>
#include <unordered_set>

namespace glass {

// A node-based set: an element keeps its address however the set grows.
const std::string& interned(std::string_view text) {
  static std::mutex mu;
  static std::unordered_set<std::string> texts;
  const std::lock_guard lock(mu);
  return *texts.emplace(text).first;
}

}  // namespace glass
