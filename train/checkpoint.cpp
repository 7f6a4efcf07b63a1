#include "train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/atomic_file.h"
#include "nn/safetensors.h"

namespace glass::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "glass-checkpoint-1";

nlohmann::json config_json(const GPTConfig& c) {
  return {{"vocab_size", c.vocab_size},
          {"block_size", c.block_size},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"dropout", c.dropout},
          {"padded_vocab_size", c.padded_vocab_size}};
}

GPTConfig config_from_json(const nlohmann::json& j) {
  GPTConfig c;
  c.vocab_size = j.at("vocab_size");
  c.block_size = j.at("block_size");
  c.n_layer = j.at("n_layer");
  c.n_head = j.at("n_head");
  c.n_embd = j.at("n_embd");
  c.dropout = j.at("dropout");
  c.padded_vocab_size = j.value("padded_vocab_size", int64_t{0});  // older checkpoints: none
  return c;
}

// Splits "prefix.rest" entries of a file into `out` (without the prefix).
void take_prefixed(const NamedTensors& all, const std::string& prefix, NamedTensors& out) {
  for (const auto& [name, t] : all)
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
}

}  // namespace

std::string save_checkpoint(const std::string& dir, const CheckpointState& state, const GPT& model,
                            const Optimizer& optimizer) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GLASS_CHECK(!ec, "checkpoint: cannot create directory '{}': {}", dir, ec.message());

  NamedTensors tensors;
  for (const auto& [name, t] : model.named_parameters()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : optimizer.state_tensors()) tensors.emplace_back("optim." + name, t);

  nlohmann::json optim_scalars = optimizer.state_scalars();
  const std::map<std::string, std::string> meta{
      {"format", kFormat},
      {"step", std::to_string(state.step)},
      {"rng_seed", std::to_string(state.rng_seed)},
      {"rng_offset", std::to_string(state.rng_offset)},
      {"data_position", std::to_string(state.data_position)},
      {"config", config_json(state.config).dump()},
      {"optimizer", optimizer.name()},
      {"optimizer_scalars",
       optim_scalars.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict)},
      {"data_path", state.data_path},
  };
  const std::string file = fmt::format("ckpt_{:08d}.safetensors", state.step);
  const std::string path = (fs::path(dir) / file).string();
  save_safetensors(path, tensors, meta);
  write_file_atomic((fs::path(dir) / "latest").string(), file + "\n");
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
    GLASS_CHECK(!file.empty() && file.find('/') == std::string::npos,
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
  GLASS_CHECK(meta("format") == kFormat, "checkpoint '{}': format '{}' is not '{}'", path,
              meta("format"), kFormat);

  LoadedCheckpoint ck;
  ck.path = path;
  try {
    ck.state.step = std::stoll(meta("step"));
    ck.state.rng_seed = std::stoull(meta("rng_seed"));
    ck.state.rng_offset = std::stoull(meta("rng_offset"));
    ck.state.data_position = std::stoll(meta("data_position"));
    ck.state.config = config_from_json(nlohmann::json::parse(meta("config")));
    ck.state.data_path = meta("data_path");
    const nlohmann::json scalars = nlohmann::json::parse(meta("optimizer_scalars"));
    for (const auto& [k, v] : scalars.items()) ck.optimizer_scalars[k] = v.get<double>();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("checkpoint '{}': unreadable metadata ({})", path, e.what());
  }
  take_prefixed(f.tensors, "model.", ck.model);
  take_prefixed(f.tensors, "optim.", ck.optimizer);
  GLASS_CHECK(!ck.model.empty(), "checkpoint '{}' holds no model weights", path);
  return ck;
}

}  // namespace glass::train
