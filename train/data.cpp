#include "train/data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "autograd/ops.h"
#include "engine/rng.h"

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

}  // namespace

CharVocab CharVocab::from_text(const std::string& text) {
  bool seen[256] = {};
  for (unsigned char c : text) seen[c] = true;
  CharVocab v;
  std::fill(std::begin(v.index_), std::end(v.index_), -1);
  for (int c = 0; c < 256; ++c)
    if (seen[c]) {
      v.index_[c] = static_cast<int32_t>(v.chars_.size());
      v.chars_.push_back(static_cast<char>(c));
    }
  return v;
}

std::vector<int32_t> CharVocab::encode(const std::string& text) const {
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
    s.push_back(chars_[static_cast<size_t>(id)]);
  }
  return s;
}

Dataset load_text(const std::string& path, double val_fraction) {
  const std::string text = read_file(path);
  GLASS_CHECK(text.size() >= 2, "data file '{}' holds {} bytes: too little text to train on", path,
              text.size());
  Dataset d;
  d.path = path;
  d.vocab = CharVocab::from_text(text);
  d.vocab_size = d.vocab->size();
  split_val(d, d.vocab->encode(text), val_fraction);
  return d;
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
  return d;
}

Dataset load_dataset(const std::string& path, int64_t vocab_size, double val_fraction) {
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
