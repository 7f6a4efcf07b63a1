#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "engine/atomic_file.h"
#include "nn/gpt_weights.h"
#include "nn/llama_state.h"
#include "nn/safetensors.h"

namespace glass::train {

namespace fs = std::filesystem;

namespace {

// Splits "prefix.rest" entries of a file into `out` (without the prefix).
void take_prefixed(const NamedTensors& all, const std::string& prefix, NamedTensors& out) {
  for (const auto& [name, t] : all)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
}

// The configuration decides what the trainer allocates before loading the weights: it must describe
// the tensors the file holds (the embedding tables, the number of blocks, and the parameter count
// these imply against the elements the tensors hold), so a corrupt or hostile configuration is
// refused before anything is allocated.
void check_config_matches_weights(const std::string& path, const LoadedCheckpoint& ck) {
  const GPTConfig& c = ck.state.config;
  c.validate();
  // A llama's parameters are all fixed by its configuration: each is checked by name and shape.
  if (c.arch == Arch::llama) {
    check_llama_state(ck.model, c, fmt::format("checkpoint '{}'", path));
    return;
  }
  auto shape_of = [&](const std::string& name) -> Shape {
    for (const auto& [n, t] : ck.model)
      if (n == name) return t.shape();
    fail("checkpoint '{}' has no tensor model.{}", path, name);
  };
  const bool gpt2 = c.arch == Arch::gpt2;
  const Shape table = shape_of(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
  GLASS_CHECK(table == Shape({c.table_rows(), c.n_embd}),
              "checkpoint '{}': its configuration ({}) does not match its token embedding {}", path,
              config_metadata(c), shape_str(table));
  if (gpt2) {
    const Shape wpe = shape_of("transformer.wpe.weight");
    GLASS_CHECK(wpe == Shape({c.block_size, c.n_embd}),
                "checkpoint '{}': its configuration ({}) does not match its position embedding {}",
                path, config_metadata(c), shape_str(wpe));
  }
  // Blocks: "transformer.h.<i>." (gpt2) or "model.layers.<i>." (llama).
  const std::string prefix = gpt2 ? "transformer.h." : "model.layers.";
  std::set<std::string> blocks;
  for (const auto& [n, t] : ck.model)
    if (n.rfind(prefix, 0) == 0) blocks.insert(n.substr(0, n.find('.', prefix.size())));
  GLASS_CHECK(static_cast<int64_t>(blocks.size()) == c.n_layer,
              "checkpoint '{}': its configuration says n_layer {} but it holds {} blocks", path,
              c.n_layer, blocks.size());
  check_state_dict_holds_model(ck.model, c, fmt::format("checkpoint '{}'", path));
}

}  // namespace

std::string latest_checkpoint_name(const std::string& dir) {
  std::ifstream in((fs::path(dir) / "latest").string());
  std::string file;
  if (in.good()) std::getline(in, file);
  return file;
}

void prune_checkpoints(const std::string& dir, int64_t keep_last, const std::string& keep_file) {
  const std::string own_tmp = ".tmp." + std::to_string(::getpid());
  std::vector<std::pair<int64_t, fs::path>> ckpts;  // (step, path)
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // 1. A temp file of a writer that was killed: never published, so nobody reads it.
    const auto tmp = name.find(".tmp.");
    if (tmp != std::string::npos && (name.rfind("ckpt_", 0) == 0 || name.rfind("latest", 0) == 0)) {
      if (name.compare(tmp, std::string::npos, own_tmp) != 0) fs::remove(entry.path(), ec);
      continue;
    }
    // 2. A complete checkpoint: ckpt_<digits>.safetensors.
    constexpr std::string_view kPrefix = "ckpt_", kSuffix = ".safetensors";
    if (!entry.is_regular_file(ec) || name.size() <= kPrefix.size() + kSuffix.size() ||
        name.rfind(kPrefix, 0) != 0 ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
      continue;
    const std::string digits =
        name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        digits.size() > 18)
      continue;
    ckpts.emplace_back(std::stoll(digits), entry.path());
  }
  if (keep_last <= 0 || static_cast<int64_t>(ckpts.size()) <= keep_last) return;
  // 3. The newest keep_last by step stay; so does keep_file, whatever its step.
  std::sort(ckpts.begin(), ckpts.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = static_cast<size_t>(keep_last); i < ckpts.size(); ++i)
    if (ckpts[i].second.filename() != keep_file) fs::remove(ckpts[i].second, ec);
}

std::string save_checkpoint(const std::string& dir, const CheckpointState& state,
                            const CausalLM& model, const Optimizer& optimizer, int64_t keep_last) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GLASS_CHECK(!ec, "checkpoint: cannot create directory '{}': {}", dir, ec.message());

  NamedTensors tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : optimizer.state_tensors()) tensors.emplace_back("optim." + name, t);

  nlohmann::json optim_scalars = optimizer.state_scalars();
  const std::map<std::string, std::string> meta{
      {"format", std::string(kCheckpointFormat)},
      {"step", std::to_string(state.step)},
      {"rng_seed", std::to_string(state.rng_seed)},
      {"rng_offset", std::to_string(state.rng_offset)},
      {"data_position", std::to_string(state.data_position)},
      {"config", config_metadata(state.config)},  // the weights files' form: --init reads it
      {"optimizer", optimizer.name()},
      {"optimizer_scalars",
       optim_scalars.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict)},
      {"data_path", state.data_path},
      {"seq_len", std::to_string(state.seq_len)},
      {"char_vocab", state.char_vocab.value_or("")},
  };
  const std::string file = fmt::format("ckpt_{:08d}.safetensors", state.step);
  const std::string path = (fs::path(dir) / file).string();
  // 1. The checkpoint, then `latest` naming it: each step is atomic, so at every instant `latest`
  //    names a complete file. A failure names what is still there to resume from.
  try {
    save_safetensors(path, tensors, meta);
    write_file_atomic((fs::path(dir) / "latest").string(), file + "\n");
  } catch (const Error& e) {
    const std::string previous = latest_checkpoint_name(dir);
    fail("checkpoint at step {} was not written: {}; {}", state.step, e.what(),
         previous.empty() ? "there is no earlier checkpoint in " + dir
                          : "'latest' still names " + previous + ", the last complete checkpoint");
  }
  // 2. Only now, with a newer complete checkpoint published, may older ones go.
  prune_checkpoints(dir, keep_last, file);
  return path;
}

LoadedCheckpoint load_checkpoint(const std::string& where) {
  std::string path = where;
  if (fs::is_directory(where)) {
    const std::string latest = (fs::path(where) / "latest").string();
    std::ifstream in(latest);
    GLASS_CHECK(in.good(), "checkpoint: directory '{}' has no 'latest' file: nothing to resume",
                where);
    std::string file;
    std::getline(in, file);
    GLASS_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." &&
                    file != ".." && file.find('\0') == std::string::npos,
                "checkpoint: '{}' does not name a checkpoint file", latest);
    path = (fs::path(where) / file).string();
  }
  const SafeTensorsFile f = load_safetensors(path);
  auto meta = [&](const char* key) -> const std::string& {
    auto it = f.metadata.find(key);
    GLASS_CHECK(it != f.metadata.end(),
                "checkpoint '{}': metadata has no '{}': not a glass checkpoint", path, key);
    return it->second;
  };
  GLASS_CHECK(meta("format") == kCheckpointFormat, "checkpoint '{}': format '{}' is not '{}'", path,
              meta("format"), kCheckpointFormat);

  LoadedCheckpoint ck;
  ck.path = path;
  try {
    ck.state.step = std::stoll(meta("step"));
    ck.state.rng_seed = std::stoull(meta("rng_seed"));
    ck.state.rng_offset = std::stoull(meta("rng_offset"));
    ck.state.data_position = std::stoll(meta("data_position"));
    ck.state.config = parse_config_metadata(meta("config"), fmt::format("checkpoint '{}'", path));
    ck.state.data_path = meta("data_path");
    // Recorded since these checks exist; an older checkpoint has neither.
    if (const auto it = f.metadata.find("seq_len"); it != f.metadata.end())
      ck.state.seq_len = std::stoll(it->second);
    if (const auto it = f.metadata.find("char_vocab"); it != f.metadata.end())
      ck.state.char_vocab = it->second;
    const nlohmann::json scalars = nlohmann::json::parse(meta("optimizer_scalars"));
    for (const auto& [k, v] : scalars.items()) ck.optimizer_scalars[k] = v.get<double>();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("checkpoint '{}': unreadable metadata ({})", path, e.what());
  }
  // A resumed run indexes its data with these: they must be counts, not negative.
  GLASS_CHECK(ck.state.step >= 0 && ck.state.data_position >= 0,
              "checkpoint '{}': step {} and data position {} must not be negative", path,
              ck.state.step, ck.state.data_position);
  take_prefixed(f.tensors, "model.", ck.model);
  take_prefixed(f.tensors, "optim.", ck.optimizer);
  GLASS_CHECK(!ck.model.empty(), "checkpoint '{}' holds no model weights", path);
  check_config_matches_weights(path, ck);
  GLASS_CHECK(ck.state.seq_len >= 0 && ck.state.seq_len <= ck.state.config.block_size,
              "checkpoint '{}': sequence length {} is not in [0, block size {}]", path,
              ck.state.seq_len, ck.state.config.block_size);
  return ck;
}

}  // namespace glass::train
