#include "engine/emu/gpu_memory.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/emu/device_limits.h"
#include "engine/emu/error.h"

namespace glass::emu {

namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The bytes one `unit` stands for (case-insensitive; "" and "B": 1), or 0 for an unknown unit.
double unit_bytes(std::string_view unit) {
  std::string u;
  for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.empty() || u == "b") return 1;
  const char* prefixes = "kmgt";
  for (int i = 0; i < 4; ++i) {
    if (u[0] != prefixes[i]) continue;
    const std::string_view rest = std::string_view(u).substr(1);
    if (rest == "b") return std::pow(1000.0, i + 1);
    if (rest == "ib") return std::pow(1024.0, i + 1);
  }
  return 0;
}

}  // namespace

std::optional<size_t> parse_byte_size(std::string_view text) {
  text = trimmed(text);
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = trimmed(text.substr(digits));
  if (number.empty() || number.front() == '.' || number.back() == '.') return std::nullopt;
  const double scale = unit_bytes(unit);
  if (scale == 0) return std::nullopt;
  const bool fraction = number.find('.') != std::string_view::npos;
  if (!fraction) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), n);
    if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
    const double bytes = static_cast<double>(n) * scale;
    if (n == 0 || bytes > 0x1p62) return std::nullopt;
    return scale == 1 ? static_cast<size_t>(n) : static_cast<size_t>(bytes);
  }
  if (scale == 1) return std::nullopt;  // a fraction of a byte
  double v = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), v);
  if (ec != std::errc() || end != number.data() + number.size()) return std::nullopt;
  const double bytes = std::floor(v * scale);
  if (bytes < 1 || bytes > 0x1p62) return std::nullopt;
  return static_cast<size_t>(bytes);
}

size_t gpu_memory_bytes() {
  static const size_t bytes = [] {
    const char* v = std::getenv("GLASS_EMU_GPU_MEMORY");
    if (v == nullptr || *v == '\0') return kH200.global_memory_bytes;
    const std::optional<size_t> parsed = parse_byte_size(v);
    if (!parsed)
      throw EmuError(std::string("GLASS_EMU_GPU_MEMORY='") + v +
                     "': expected a size in bytes, e.g. 1073741824, 2GiB, 512MiB or 1.5GB (units "
                     "kB MB GB TB: powers of 1000; KiB MiB GiB TiB: powers of 1024)");
    return *parsed;
  }();
  return bytes;
}

}  // namespace glass::emu
