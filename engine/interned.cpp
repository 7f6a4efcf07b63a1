#include "engine/interned.h"

#include <mutex>
#include <unordered_set>

namespace glass {

namespace {
// Hashes and compares std::string and std::string_view alike, so that looking a text up makes no
// std::string (no allocation for a path longer than the small-string buffer).
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};
}  // namespace

// A node-based set: an element keeps its address however the set grows.
const std::string& interned(std::string_view text) {
  static std::mutex mu;
  static std::unordered_set<std::string, TextHash, std::equal_to<>> texts;
  const std::lock_guard lock(mu);
  if (const auto it = texts.find(text); it != texts.end()) return *it;
  return *texts.emplace(text).first;
}

}  // namespace glass
