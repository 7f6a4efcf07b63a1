#include "train/tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <memory>

#include "engine/error.h"

namespace glass::train {

namespace {

constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// Compiled once per process. UCP: \s, \p{L}, \p{N} by Unicode properties, as in GPT-2's Python
// `regex` pattern (and the JavaScript encoder's /u pattern).
const pcre2_code* pattern() {
  static const std::unique_ptr<pcre2_code, CodeDeleter> code = [] {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* c =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (c == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      fail("GPT-2 pre-tokenisation pattern: PCRE2 error at {}: {}", offset,
           reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);  // without JIT support, the interpreter matches
    return std::unique_ptr<pcre2_code, CodeDeleter>(c);
  }();
  return code.get();
}

}  // namespace

void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece) {
  const pcre2_code* code = pattern();
  const std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(code, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  while (at < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), at, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      piece(text.substr(at));  // the rest is bytes that are not UTF-8
      return;
    }
    GLASS_CHECK(rc > 0, "GPT-2 pre-tokenisation: PCRE2 match error {} at byte {}", rc, at);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
    GLASS_CHECK(ov[1] > ov[0] && ov[0] >= at, "GPT-2 pre-tokenisation: empty match at byte {}", at);
    if (ov[0] > at) piece(text.substr(at, ov[0] - at));  // bytes that are not UTF-8
    piece(text.substr(ov[0], ov[1] - ov[0]));
    at = ov[1];
  }
}

size_t gpt2_safe_cut(std::string_view text, size_t at) {
  const auto ascii_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  for (size_t p = std::max<size_t>(at, 1); p < text.size(); ++p)
    if (ascii_space(text[p]) && text[p - 1] > ' ' && text[p - 1] < 0x7F) return p;
  return text.size();
}

}  // namespace glass::train
