// GPT-2's pre-tokenisation: text is cut into pieces before BPE, and no merge crosses a piece's
// border. The pattern, with Unicode letter (\p{L}) and number (\p{N}) classes:
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// contractions; a word, a number or a run of other symbols, each with at most one leading space;
// and whitespace, where a run followed by a word leaves its last space to that word.
// PCRE2 matches it (UTF mode, Unicode properties, JIT where available). Bytes that are not UTF-8
// never match (PCRE2_MATCH_INVALID_UTF); each run of them between matches becomes a piece of its
// own, so that every byte string is cut into pieces that concatenate back to it.
#pragma once

#include <functional>
#include <string_view>

namespace glass::train {

// Calls `piece` for each piece of `text`, in order; the pieces concatenate to `text`.
void gpt2_pretokenize(std::string_view text, const std::function<void(std::string_view)>& piece);

// The first position p >= at where `text` can be cut without changing its pieces (the pieces of
// text[0, p) and of text[p, end) are those of text), or text.size(): the start of an ASCII
// whitespace byte that follows a printable ASCII byte other than space. Every piece is either all
// whitespace or holds whitespace only as its first character, so no piece runs across such a
// point, and the lookahead (?!\S) looks forward only. Lets long texts be encoded in chunks.
size_t gpt2_safe_cut(std::string_view text, size_t at);

}  // namespace glass::train
