// Errors: glass never aborts and never returns a silently wrong answer. Every check that can fail
// on user input throws glass::Error with a message naming the op, shapes, dtypes and devices.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace glass {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace glass

// GLASS_CHECK(cond, "fmt {}", args...): throws glass::Error with the formatted message.
#define GLASS_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::glass::fail(__VA_ARGS__); \
  } while (0)
