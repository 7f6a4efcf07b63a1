#include "train/data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "autograd/ops.h"
#include "engine/atomic_file.h"
#include "engine/rng.h"
#include "train/tokenizer/gpt2_tokenizer.h"

namespace glass::train {

namespace {

constexpr int32_t kShardMagic = 20240520;
constexpr int32_t kShardVersion = 1;
constexpr int64_t kShardHeaderInts = 256;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GLASS_CHECK(in.good(), "cannot open data file '{}': {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void split_val(Dataset& d, std::vector<int32_t> tokens, double val_fraction) {
  GLASS_CHECK(val_fraction >= 0 && val_fraction < 1, "validation fraction {} is not in [0, 1)",
              val_fraction);
  const auto n_val = static_cast<size_t>(static_cast<double>(tokens.size()) * val_fraction);
  d.val.assign(tokens.end() - static_cast<std::ptrdiff_t>(n_val), tokens.end());
  tokens.resize(tokens.size() - n_val);
  d.train = std::move(tokens);
}

// GPT-2's tokenizer for GPT-2 token shards: encoder.json + vocab.bpe where they are found (encode
// and decode), else the llm.c decode table `table` when given (decode only), else none.
std::shared_ptr<const Tokenizer> gpt2_tokenizer_for(int64_t vocab_size, const std::string& table) {
  if (vocab_size != 50257) return nullptr;
  const std::string dir = Gpt2Tokenizer::default_dir();
  if (std::filesystem::exists(dir + "/encoder.json") && std::filesystem::exists(dir + "/vocab.bpe"))
    return std::make_shared<Gpt2Tokenizer>(Gpt2Tokenizer::from_dir(dir));
  if (!table.empty()) return std::make_shared<Gpt2Tokenizer>(Gpt2Tokenizer::from_llmc_file(table));
  return nullptr;
}

}  // namespace

CharVocab CharVocab::from_text(const std::string& text, int32_t specials) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  CharVocab v;
  v.specials_ = specials;
  std::fill(std::begin(v.index_), std::end(v.index_), -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      v.index_[c] = specials + static_cast<int32_t>(v.chars_.size());
      v.chars_.push_back(static_cast<char>(c));
    }
  return v;
}

int32_t special_tokens(Arch arch) {
  return arch == Arch::llama ? static_cast<int32_t>(std::size(kLlamaSpecialPieces)) : 0;
}

std::vector<int32_t> CharVocab::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t id = index_[static_cast<unsigned char>(text[i])];
    GLASS_CHECK(id >= 0, "character {:?} at position {} is not in the vocabulary", text[i], i);
    ids[i] = id;
  }
  return ids;
}

std::string CharVocab::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) {
    GLASS_CHECK(id >= 0 && id < size(), "token {} is outside the vocabulary of {}", id, size());
    if (id >= specials_) s.push_back(chars_[static_cast<size_t>(id - specials_)]);
  }
  return s;
}

std::string char_vocab_metadata(const CharVocab& vocab) {
  std::string hex;
  for (unsigned char c : vocab.chars()) hex += fmt::format("{:02x}", c);
  return hex;
}

std::vector<int32_t> sample_context(const Tokenizer& tokenizer, std::string_view prompt) {
  std::vector<int32_t> context = tokenizer.encode(prompt);
  if (!context.empty()) return context;
  if (const auto* chars = dynamic_cast<const CharVocab*>(&tokenizer)) {
    const size_t newline = chars->chars().find('\n');
    return {chars->specials() + static_cast<int32_t>(newline == std::string::npos ? 0 : newline)};
  }
  return {Gpt2Tokenizer::kEndOfText};
}

CharVocab char_vocab_from_metadata(const std::string& hex) {
  GLASS_CHECK(hex.size() % 2 == 0 && !hex.empty() &&
                  hex.find_first_not_of("0123456789abcdef") == std::string::npos,
              "char_vocab metadata {:?} is not hex digits in pairs", hex.substr(0, 40));
  std::string chars;
  for (size_t i = 0; i < hex.size(); i += 2)
    chars.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  const CharVocab v = CharVocab::from_text(chars);
  GLASS_CHECK(v.chars() == chars,
              "char_vocab metadata: the characters are not sorted and distinct");
  return v;
}

std::vector<std::string> token_pieces(const Tokenizer& tokenizer, int64_t n) {
  std::vector<std::string> pieces;
  pieces.reserve(static_cast<size_t>(n));
  const auto* chars = dynamic_cast<const CharVocab*>(&tokenizer);
  const int64_t specials = chars ? chars->specials() : 0;
  for (int64_t id = 0; id < n; ++id)
    pieces.push_back(id < specials                 ? kLlamaSpecialPieces[id]
                     : id < tokenizer.vocab_size() ? tokenizer.decode({static_cast<int32_t>(id)})
                                                   : std::string());
  return pieces;
}

CharVocab char_vocab_from_pieces(const std::vector<std::string>& pieces) {
  const size_t specials = std::size(kLlamaSpecialPieces);
  const bool reserved = pieces.size() > specials &&
                        std::equal(pieces.begin(), pieces.begin() + specials, kLlamaSpecialPieces);
  std::string chars;
  for (size_t id = reserved ? specials : 0; id < pieces.size(); ++id) {
    GLASS_CHECK(
        pieces[id].size() == 1 && (chars.empty() || static_cast<unsigned char>(chars.back()) <
                                                        static_cast<unsigned char>(pieces[id][0])),
        "token {} is {:?}: not a character vocabulary (one byte per token, sorted and "
        "distinct), which is what glass decodes",
        id, pieces[id]);
    chars += pieces[id];
  }
  GLASS_CHECK(!chars.empty(), "an empty vocabulary is not a character vocabulary");
  return CharVocab::from_text(chars, reserved ? static_cast<int32_t>(specials) : 0);
}

Dataset load_text(const std::string& path, double val_fraction) {
  const std::string text = read_file(path);
  GLASS_CHECK(text.size() >= 2, "data file '{}' holds {} bytes: too little text to train on", path,
              text.size());
  Dataset d;
  d.path = path;
  d.vocab = CharVocab::from_text(text);
  d.vocab_size = d.vocab->size();
  d.tokenizer = std::make_shared<CharVocab>(*d.vocab);
  split_val(d, d.vocab->encode(text), val_fraction);
  return d;
}

void reserve_special_tokens(Dataset& data, Arch arch) {
  const int32_t specials = special_tokens(arch);
  if (!data.vocab || data.vocab->specials() == specials) return;
  const int32_t shift = specials - data.vocab->specials();
  for (std::vector<int32_t>* ids : {&data.train, &data.val})
    for (int32_t& id : *ids) id += shift;
  data.vocab = data.vocab->with_specials(specials);
  data.vocab_size = data.vocab->size();
  data.tokenizer = std::make_shared<CharVocab>(*data.vocab);
}

std::vector<int32_t> read_shard(const std::string& path, int64_t vocab_size) {
  const std::string bytes = read_file(path);
  GLASS_CHECK(static_cast<int64_t>(bytes.size()) >= kShardHeaderInts * 4,
              "token shard '{}': {} bytes is shorter than the 1024-byte header", path,
              bytes.size());
  int32_t header[kShardHeaderInts];
  std::memcpy(header, bytes.data(), sizeof(header));
  GLASS_CHECK(header[0] == kShardMagic, "token shard '{}': bad magic {} (expected {})", path,
              header[0], kShardMagic);
  GLASS_CHECK(header[1] == kShardVersion, "token shard '{}': unsupported version {} (expected {})",
              path, header[1], kShardVersion);
  const int64_t count = header[2];
  const int64_t expected = kShardHeaderInts * 4 + count * 2;
  GLASS_CHECK(count >= 0 && static_cast<int64_t>(bytes.size()) == expected,
              "token shard '{}': header says {} tokens ({} bytes) but the file has {} bytes", path,
              count, expected, bytes.size());
  GLASS_CHECK(vocab_size > 0, "token shard '{}': pass --vocab-size (the shard does not say it)",
              path);
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  const char* p = bytes.data() + kShardHeaderInts * 4;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t t;
    std::memcpy(&t, p + 2 * i, 2);
    GLASS_CHECK(t < vocab_size, "token shard '{}': token {} at position {} >= vocab size {}", path,
                t, i, vocab_size);
    tokens[static_cast<size_t>(i)] = t;
  }
  return tokens;
}

Dataset load_shard(const std::string& path, int64_t vocab_size, double val_fraction) {
  Dataset d;
  d.path = path;
  d.vocab_size = vocab_size;
  split_val(d, read_shard(path, vocab_size), val_fraction);
  d.tokenizer = gpt2_tokenizer_for(vocab_size, "");
  return d;
}

void write_shard(const std::string& path, const std::vector<int32_t>& tokens) {
  GLASS_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX),
              "token shard '{}': {} tokens do not fit the int32 count of the header", path,
              tokens.size());
  std::string bytes(kShardHeaderInts * 4 + tokens.size() * 2, '\0');
  const int32_t header[3] = {kShardMagic, kShardVersion, static_cast<int32_t>(tokens.size())};
  std::memcpy(bytes.data(), header, sizeof(header));
  for (size_t i = 0; i < tokens.size(); ++i) {
    GLASS_CHECK(tokens[i] >= 0 && tokens[i] < 65536,
                "token shard '{}': token {} at position {} does not fit uint16", path, tokens[i],
                i);
    const auto t = static_cast<uint16_t>(tokens[i]);
    std::memcpy(bytes.data() + kShardHeaderInts * 4 + 2 * i, &t, 2);
  }
  write_file_atomic(path, bytes);
}

Dataset load_shard_dir(const std::string& dir, int64_t vocab_size) {
  namespace fs = std::filesystem;
  std::vector<std::string> train, val;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".bin") continue;
    if (name.rfind("train_", 0) == 0) train.push_back(e.path().string());
    if (name.rfind("val_", 0) == 0) val.push_back(e.path().string());
  }
  GLASS_CHECK(!train.empty(),
              "data directory '{}' holds no train_*.bin shards (samples/prepare_data "
              "writes them)",
              dir);
  std::sort(train.begin(), train.end());
  std::sort(val.begin(), val.end());
  const std::string table = dir + "/gpt2_tokenizer.bin";
  Dataset d;
  d.path = dir;
  if (vocab_size == 0 && fs::exists(table))
    vocab_size = Gpt2Tokenizer::from_llmc_file(table).vocab_size();
  d.vocab_size = vocab_size;
  for (const auto& f : train) {
    const auto t = read_shard(f, vocab_size);
    d.train.insert(d.train.end(), t.begin(), t.end());
  }
  for (const auto& f : val) {
    const auto t = read_shard(f, vocab_size);
    d.val.insert(d.val.end(), t.begin(), t.end());
  }
  d.tokenizer = gpt2_tokenizer_for(vocab_size, fs::exists(table) ? table : "");
  return d;
}

Dataset load_dataset(const std::string& path, int64_t vocab_size, double val_fraction) {
  if (std::filesystem::is_directory(path)) return load_shard_dir(path, vocab_size);
  // A .bin file is a shard whatever it holds, so that a corrupt one is reported, not read as text.
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".bin") == 0)
    return load_shard(path, vocab_size, val_fraction);
  std::ifstream in(path, std::ios::binary);
  GLASS_CHECK(in.good(), "cannot open data file '{}': {}", path, std::strerror(errno));
  int32_t magic = 0;
  in.read(reinterpret_cast<char*>(&magic), 4);
  if (in.gcount() == 4 && magic == kShardMagic) return load_shard(path, vocab_size, val_fraction);
  return load_text(path, val_fraction);
}

BatchLoader::BatchLoader(const std::vector<int32_t>* tokens, int64_t batch, int64_t seq_len,
                         bool shuffle, uint64_t seed)
    : tokens_(tokens), batch_(batch), seq_len_(seq_len), shuffle_(shuffle), seed_(seed) {
  GLASS_CHECK(batch > 0 && seq_len > 0, "batch {} and sequence length {} must be positive", batch,
              seq_len);
  GLASS_CHECK(static_cast<int64_t>(tokens->size()) > seq_len,
              "the data holds {} tokens: fewer than one sequence of {} plus its target",
              tokens->size(), seq_len);
}

Batch BatchLoader::batch(int64_t step, Device device) const {
  return rows(step, 0, batch_, device);
}

Batch BatchLoader::rows(int64_t step, int64_t row_begin, int64_t row_end, Device device) const {
  GLASS_CHECK(0 <= row_begin && row_begin < row_end && row_end <= batch_,
              "batch rows [{}, {}) are not inside a batch of {}", row_begin, row_end, batch_);
  const int64_t n = static_cast<int64_t>(tokens_->size());
  const int64_t rows = row_end - row_begin, T = seq_len_;
  std::vector<int32_t> x(static_cast<size_t>(rows * T)), y(x.size());
  for (int64_t b = row_begin; b < row_end; ++b) {
    int64_t start;
    if (shuffle_) {
      // A random window that fits without wrapping: (seed, step*B + b) -> one Philox word pair.
      const uint64_t i = static_cast<uint64_t>(step * batch_ + b);
      const uint64_t r = (static_cast<uint64_t>(philox_word(seed_, 0, 2 * i)) << 32) |
                         philox_word(seed_, 0, 2 * i + 1);
      start = static_cast<int64_t>(r % static_cast<uint64_t>(n - T));
    } else {
      start = ((step * batch_ + b) * T) % n;
    }
    for (int64_t t = 0; t < T; ++t) {
      const size_t dst = static_cast<size_t>((b - row_begin) * T + t);
      x[dst] = (*tokens_)[static_cast<size_t>((start + t) % n)];
      y[dst] = (*tokens_)[static_cast<size_t>((start + t + 1) % n)];
    }
  }
  return {from_vector(x, {rows, T}, device), from_vector(y, {rows, T}, device)};
}

}  // namespace glass::train
