#include "train/tokenizer/gpt2_vocab.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "engine/error.h"

namespace glass::train {

namespace {

// Bytes that are printable Latin-1 characters keep their code point in the map.
bool prints_as_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// code point -> byte (-1: not in the map). Built once from the forward map.
const std::array<int, 512>& unicode_to_byte_table() {
  static const std::array<int, 512> table = [] {
    std::array<int, 512> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[gpt2_byte_to_unicode(static_cast<uint8_t>(b))] = b;
    return t;
  }();
  return table;
}

// The next code point of UTF-8 text at s[i] (advancing i), or -1 for a malformed sequence.
int64_t next_code_point(std::string_view s, size_t& i) {
  const auto c0 = static_cast<uint8_t>(s[i]);
  const int len = c0 < 0x80           ? 1
                  : (c0 >> 5) == 0x6  ? 2
                  : (c0 >> 4) == 0xE  ? 3
                  : (c0 >> 3) == 0x1E ? 4
                                      : 0;
  if (len == 0 || i + static_cast<size_t>(len) > s.size()) return -1;
  int64_t cp = len == 1 ? c0 : c0 & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    const auto c = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
    if ((c & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (c & 0x3F);
  }
  i += static_cast<size_t>(len);
  return cp;
}

uint32_t read_u32(std::string_view b, size_t offset) {
  uint32_t v;
  std::memcpy(&v, b.data() + offset, 4);
  return v;
}

}  // namespace

char32_t gpt2_byte_to_unicode(uint8_t b) {
  if (prints_as_itself(b)) return b;
  // The n-th byte (in byte order) that does not print as itself becomes 256 + n.
  int n = 0;
  for (int x = 0; x < b; ++x) n += prints_as_itself(x) ? 0 : 1;
  return static_cast<char32_t>(256 + n);
}

std::string gpt2_unicode_to_bytes(std::string_view spelled, std::string_view what) {
  const auto& table = unicode_to_byte_table();
  std::string bytes;
  for (size_t i = 0; i < spelled.size();) {
    const size_t at = i;
    const int64_t cp = next_code_point(spelled, i);
    GLASS_CHECK(cp >= 0, "{}: token {:?} is not UTF-8 (byte {})", what, spelled, at);
    GLASS_CHECK(cp < 512 && table[static_cast<size_t>(cp)] >= 0,
                "{}: token {:?} holds U+{:04X}, which is not in GPT-2's byte-to-unicode map", what,
                spelled, cp);
    bytes.push_back(static_cast<char>(table[static_cast<size_t>(cp)]));
  }
  return bytes;
}

Gpt2Vocab parse_gpt2_vocab(std::string_view encoder_json, std::string_view vocab_bpe) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(encoder_json);
  } catch (const nlohmann::json::exception& e) {
    fail("encoder.json: not JSON: {}", e.what());
  }
  GLASS_CHECK(j.is_object() && !j.empty(), "encoder.json: expected an object of token -> id");
  Gpt2Vocab v;
  v.tokens.resize(j.size());
  std::vector<bool> seen(j.size(), false);
  std::unordered_map<std::string, int32_t> id_of;
  for (const auto& [spelled, id] : j.items()) {
    GLASS_CHECK(id.is_number_integer(), "encoder.json: the id of {:?} is not an integer", spelled);
    const int64_t i = id.get<int64_t>();
    GLASS_CHECK(i >= 0 && i < static_cast<int64_t>(j.size()),
                "encoder.json: id {} of {:?} is outside 0..{} (ids must have no gaps)", i, spelled,
                j.size() - 1);
    GLASS_CHECK(!seen[static_cast<size_t>(i)], "encoder.json: id {} appears twice", i);
    seen[static_cast<size_t>(i)] = true;
    std::string bytes = gpt2_unicode_to_bytes(spelled, "encoder.json");
    GLASS_CHECK(!bytes.empty(), "encoder.json: the empty token (id {})", i);
    GLASS_CHECK(id_of.emplace(bytes, static_cast<int32_t>(i)).second,
                "encoder.json: token {:?} appears twice", spelled);
    v.tokens[static_cast<size_t>(i)] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b)
    GLASS_CHECK(id_of.count(std::string(1, static_cast<char>(b))),
                "encoder.json: byte 0x{:02X} has no token of its own", b);

  size_t line_no = 0;
  for (size_t pos = 0; pos < vocab_bpe.size();) {
    size_t end = vocab_bpe.find('\n', pos);
    if (end == std::string_view::npos) end = vocab_bpe.size();
    std::string_view line = vocab_bpe.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.substr(0, 9) == "#version:")) continue;
    const size_t space = line.find(' ');
    GLASS_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string_view::npos,
                "vocab.bpe: line {} is {:?}, not two tokens separated by one space", line_no, line);
    const std::string left = gpt2_unicode_to_bytes(line.substr(0, space), "vocab.bpe");
    const std::string right = gpt2_unicode_to_bytes(line.substr(space + 1), "vocab.bpe");
    const auto l = id_of.find(left), r = id_of.find(right), m = id_of.find(left + right);
    GLASS_CHECK(l != id_of.end() && r != id_of.end() && m != id_of.end(),
                "vocab.bpe: line {} merges {:?}: a half or the merged token is not in encoder.json",
                line_no, line);
    v.merges.emplace_back(l->second, r->second);
  }
  return v;
}

LlmcTokenizer parse_llmc_tokenizer(std::string_view bin) {
  constexpr size_t kHeader = 256 * 4;
  GLASS_CHECK(bin.size() >= kHeader,
              "gpt2_tokenizer.bin: {} bytes is shorter than the {}-byte header", bin.size(),
              kHeader);
  const uint32_t magic = read_u32(bin, 0), version = read_u32(bin, 4), n = read_u32(bin, 8);
  GLASS_CHECK(magic == kLlmcTokenizerMagic, "gpt2_tokenizer.bin: bad magic {} (expected {})", magic,
              kLlmcTokenizerMagic);
  GLASS_CHECK(version == 1 || version == 2,
              "gpt2_tokenizer.bin: unsupported version {} (expected 1 or 2)", version);
  // Every token takes at least 2 bytes: bounds n before anything is allocated.
  GLASS_CHECK(n > 0 && n <= (bin.size() - kHeader) / 2,
              "gpt2_tokenizer.bin: header says {} tokens, which {} bytes cannot hold", n,
              bin.size());
  LlmcTokenizer t;
  if (version == 2) {
    const uint32_t eot = read_u32(bin, 12);
    GLASS_CHECK(eot < n, "gpt2_tokenizer.bin: <|endoftext|> id {} is outside the {} tokens", eot,
                n);
    t.eot = static_cast<int32_t>(eot);
  }
  t.tokens.reserve(n);
  size_t at = kHeader;
  for (uint32_t i = 0; i < n; ++i) {
    GLASS_CHECK(at < bin.size(), "gpt2_tokenizer.bin: ends at byte {} inside token {} of {}", at, i,
                n);
    const auto len = static_cast<uint8_t>(bin[at]);
    GLASS_CHECK(len > 0, "gpt2_tokenizer.bin: token {} has length 0 (byte {})", i, at);
    GLASS_CHECK(at + 1 + len <= bin.size(),
                "gpt2_tokenizer.bin: token {} of {} bytes runs past the end (byte {})", i, len, at);
    t.tokens.emplace_back(bin.substr(at + 1, len));
    at += 1 + len;
  }
  GLASS_CHECK(at == bin.size(), "gpt2_tokenizer.bin: {} bytes left after the {} tokens",
              bin.size() - at, n);
  return t;
}

std::string llmc_tokenizer_bytes(const std::vector<std::string>& tokens, int32_t eot) {
  GLASS_CHECK(eot >= 0 && static_cast<size_t>(eot) < tokens.size(),
              "llm.c tokenizer: <|endoftext|> id {} is outside the {} tokens", eot, tokens.size());
  std::string out(256 * 4, '\0');
  const uint32_t header[4] = {kLlmcTokenizerMagic, 2, static_cast<uint32_t>(tokens.size()),
                              static_cast<uint32_t>(eot)};
  std::memcpy(out.data(), header, sizeof(header));
  for (size_t i = 0; i < tokens.size(); ++i) {
    GLASS_CHECK(!tokens[i].empty() && tokens[i].size() <= 255,
                "llm.c tokenizer: token {} is {} bytes long (1..255 fit)", i, tokens[i].size());
    out.push_back(static_cast<char>(tokens[i].size()));
    out += tokens[i];
  }
  return out;
}

}  // namespace glass::train
