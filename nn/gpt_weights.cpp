// GPT weights in glass's, Hugging Face's and llm.c's layouts; see gpt_weights.h.
#include "nn/gpt_weights.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/ops.h"
#include "engine/atomic_file.h"
#include "nn/hf_llama_weights.h"
#include "nn/hf_weights.h"
#include "nn/llama2c_weights.h"
#include "nn/llama_state.h"
#include "nn/llmc_weights.h"

namespace glass {

namespace {

constexpr int64_t kMaxLlamaBlockSize = int64_t{1} << 24;

constexpr std::pair<WeightLayout, const char*> kLayoutNames[] = {
    {WeightLayout::glass, "glass"},
    {WeightLayout::hf, "hf"},
    {WeightLayout::llmc, "llmc"},
    {WeightLayout::llama2c, "llama2c"}};

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  GLASS_CHECK(in.good() || in.eof(), "{}: read failed", path);
  return std::move(bytes).str();
}

// The first bytes of the file (fewer when it is shorter).
std::string read_prefix(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open: {}", path, std::strerror(errno));
  std::string bytes(n, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(n));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

// The metadata every glass-written safetensors file carries: PyTorch's format tag and the shape,
// with the caller's entries.
std::map<std::string, std::string> metadata_for(GPTConfig config,
                                                std::map<std::string, std::string> extra) {
  extra["format"] = "pt";
  extra["config"] = config_metadata(config);
  return extra;
}

// The shape's fields, by their names in both forms of the "config" metadata.
int64_t* config_field(GPTConfig& c, const std::string& key) {
  return key == "vocab_size"          ? &c.vocab_size
         : key == "block_size"        ? &c.block_size
         : key == "n_layer"           ? &c.n_layer
         : key == "n_head"            ? &c.n_head
         : key == "n_embd"            ? &c.n_embd
         : key == "padded_vocab_size" ? &c.padded_vocab_size
         : key == "n_kv_head"         ? &c.n_kv_head
         : key == "ffn_hidden"        ? &c.ffn_hidden
                                      : nullptr;
}

// The JSON form. The five shape fields must be there (a file without one describes no model);
// padded_vocab_size and dropout may be missing (0), a llama's fields too (a file without "arch" is
// a gpt2), and fields of a later version are skipped. Integers must be JSON integers: 1e300 or
// "65" is refused, not converted.
GPTConfig parse_config_json(const std::string& text, const std::string& what) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  GLASS_CHECK(j.is_object(), "{}: config '{}' is not valid JSON", what, text);
  GPTConfig c;
  for (const char* key : {"vocab_size", "block_size", "n_layer", "n_head", "n_embd"})
    GLASS_CHECK(j.contains(key), "{}: config '{}' has no {}", what, text, key);
  for (const auto& [key, value] : j.items()) {
    if (key == "dropout" || key == "rope_theta" || key == "norm_eps") {
      GLASS_CHECK(value.is_number(), "{}: config '{}': {} {} is not a number", what, text, key,
                  value.dump());
      (key == "dropout"      ? c.dropout
       : key == "rope_theta" ? c.rope_theta
                             : c.norm_eps) = value.get<double>();
      continue;
    }
    if (key == "arch") {
      GLASS_CHECK(value.is_string(), "{}: config '{}': arch {} is not a string", what, text,
                  value.dump());
      try {
        c.arch = parse_arch(value.get<std::string>());
      } catch (const Error& e) {
        fail("{}: config '{}': {}", what, text, e.what());
      }
      continue;
    }
    if (key == "tie_embeddings") {
      GLASS_CHECK(value.is_boolean(), "{}: config '{}': tie_embeddings {} is not true or false",
                  what, text, value.dump());
      c.tie_embeddings = value.get<bool>();
      continue;
    }
    int64_t* field = config_field(c, key);
    if (field == nullptr) continue;
    GLASS_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0,
                "{}: config '{}': {} = {} is not a non-negative integer", what, text, key,
                value.dump());
    *field = value.get<int64_t>();
  }
  return c;
}

// The key=value form (GPTConfig::str()) of the weights files glass wrote before the metadata was
// JSON. dropout is skipped: a training setting, not part of the shape.
GPTConfig parse_config_key_values(const std::string& text, const std::string& what) {
  GPTConfig c;
  std::istringstream in(text);
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    GLASS_CHECK(eq != std::string::npos,
                "{}: config '{}': '{}' is not key=value (and the config is not JSON)", what, text,
                item);
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    int64_t* field = config_field(c, key);
    if (field == nullptr) continue;  // dropout, or a field of a later version
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), *field);
    GLASS_CHECK(ec == std::errc() && end == value.data() + value.size() && *field >= 0,
                "{}: config '{}': {} = '{}' is not a non-negative integer", what, text, key, value);
  }
  return c;
}

// A training checkpoint (train/checkpoint.h, format "glass-checkpoint-N") holds the weights as
// "model.<name>" beside the optimizer's state, "optim.<buffer>.<name>". --init and generate start
// from the weights alone, so only those are taken (--resume is what continues with the rest).
bool is_checkpoint(const std::map<std::string, std::string>& metadata) {
  const auto format = metadata.find("format");
  return format != metadata.end() && format->second.starts_with(kCheckpointFormatPrefix);
}

NamedTensors checkpoint_weights(const NamedTensors& tensors, const std::string& path) {
  constexpr std::string_view kPrefix = "model.";
  NamedTensors weights;
  for (const auto& [name, t] : tensors)
    if (name.starts_with(kPrefix)) weights.emplace_back(name.substr(kPrefix.size()), t);
  GLASS_CHECK(!weights.empty(), "{}: a glass checkpoint without model.* tensors (no weights)",
              path);
  return weights;
}

}  // namespace

WeightLayout parse_weight_layout(const std::string& name) {
  for (const auto& [layout, n] : kLayoutNames)
    if (name == n) return layout;
  fail("weight layout '{}': expected glass, hf, llmc or llama2c", name);
}

const char* weight_layout_name(WeightLayout layout) {
  for (const auto& [l, n] : kLayoutNames)
    if (l == layout) return n;
  fail("weight layout {}: unknown", static_cast<int>(layout));
}

void check_layout_holds(WeightLayout layout, Arch arch) {
  GLASS_CHECK(layout != WeightLayout::llmc || arch == Arch::gpt2,
              "--save-format llmc: llm.c's checkpoint holds a gpt2, not a {}; save a llama as "
              "glass, hf or llama2c",
              arch_name(arch));
  GLASS_CHECK(layout != WeightLayout::llama2c || arch == Arch::llama,
              "--save-format llama2c: llama2.c's checkpoint holds a llama, not a {}; save a gpt2 "
              "as glass, hf or llmc",
              arch_name(arch));
}

std::string config_metadata(const GPTConfig& c) {
  nlohmann::json j{{"vocab_size", c.vocab_size},
                   {"block_size", c.block_size},
                   {"n_layer", c.n_layer},
                   {"n_head", c.n_head},
                   {"n_embd", c.n_embd},
                   {"dropout", c.dropout},
                   {"padded_vocab_size", c.padded_vocab_size},
                   {"arch", arch_name(c.arch)}};
  if (c.arch == Arch::llama) {
    j["n_kv_head"] = c.n_kv_head;
    j["ffn_hidden"] = c.ffn_hidden;
    j["rope_theta"] = c.rope_theta;
    j["norm_eps"] = c.norm_eps;
    j["tie_embeddings"] = c.tie_embeddings;
  }
  return j.dump();
}

GPTConfig parse_config_metadata(const std::string& text, const std::string& what) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return parse_config_json(text, what);
  return parse_config_key_values(text, what);
}

GPTConfig config_of_weights(const NamedTensors& state, const GPTConfig& declared,
                            const std::string& what) {
  const bool llama = is_llama_state(state);
  GLASS_CHECK(llama || declared.arch != Arch::llama,
              "{}: the file declares a llama ({}), but its tensors are GPT-2's (no {})", what,
              declared.str(), kLlamaEmbedding);
  GPTConfig c;
  if (llama) {
    c = llama_config_from_state_dict(state, declared.n_head > 0 ? declared.n_head : 0, what);
    // No position table bounds a llama's block size by the file's bytes: a size no model has is
    // refused here, before a KV cache of it is allocated.
    GLASS_CHECK(declared.block_size <= kMaxLlamaBlockSize,
                "{}: block_size {} is more than {}, not a model's size", what, declared.block_size,
                kMaxLlamaBlockSize);
    if (declared.arch == Arch::llama) {  // what only the file's metadata says
      c.block_size = declared.block_size;
      c.rope_theta = declared.rope_theta;
      c.norm_eps = declared.norm_eps;
    } else {
      c.block_size = declared.block_size;
    }
  } else {
    try {
      c = GPT::config_from_state_dict(state, declared.n_head > 0 ? declared.n_head : 1);
    } catch (const Error& e) {
      fail("{}: {}", what, e.what());
    }
    if (declared.n_head <= 0) c.n_head = 0;  // not known from this file
  }
  // The tensors give table rows; a declared vocabulary says which of them are classes.
  if (declared.vocab_size > 0) {
    const int64_t rows = c.vocab_size;
    GLASS_CHECK(declared.table_rows() == rows || declared.vocab_size == rows,
                "{}: the file declares vocab_size={} padded_vocab_size={}, but {} has {} rows",
                what, declared.vocab_size, declared.padded_vocab_size,
                llama ? kLlamaEmbedding : "wte", rows);
    c.vocab_size = declared.vocab_size;
    c.padded_vocab_size = rows == declared.vocab_size ? 0 : rows;
  }
  GPTConfig wanted = declared;
  wanted.vocab_size = c.vocab_size;
  wanted.n_head = 0;
  if (llama && declared.arch != Arch::llama) {  // nothing llama's declared: the tensors say it
    wanted.arch = Arch::llama;
    wanted.ffn_hidden = c.ffn_hidden;
    wanted.tie_embeddings = c.tie_embeddings;
  }
  if (llama) wanted.block_size = c.block_size;
  if (!llama || declared.arch != Arch::llama || declared.n_head <= 0) wanted.n_kv_head = 0;
  const std::string diff = shape_differences(c, wanted);
  GLASS_CHECK(diff.empty(), "{}: the tensors disagree with the file's declared shape ({}): {}",
              what, declared.str(), diff);
  if (!llama) check_state_dict_holds_model(state, c, what);
  return c;
}

std::string shape_differences(const GPTConfig& file, const GPTConfig& wanted) {
  std::vector<std::string> diffs;
  auto compare = [&](const char* field, int64_t have, int64_t want) {
    if (have > 0 && want > 0 && have != want)
      diffs.push_back(fmt::format("{} {} vs {}", field, have, want));
  };
  compare("vocab_size", file.vocab_size, wanted.vocab_size);
  compare("block_size", file.block_size, wanted.block_size);
  compare("n_layer", file.n_layer, wanted.n_layer);
  compare("n_head", file.n_head, wanted.n_head);
  compare("n_embd", file.n_embd, wanted.n_embd);
  if (file.arch != wanted.arch)
    diffs.push_back(fmt::format("arch {} vs {}", arch_name(file.arch), arch_name(wanted.arch)));
  if (file.arch == Arch::llama && wanted.arch == Arch::llama) {
    if (file.n_head > 0 && wanted.n_head > 0)
      compare("n_kv_head", file.kv_heads(), wanted.kv_heads());
    else if (file.n_kv_head > 0 && wanted.n_kv_head > 0)
      compare("n_kv_head", file.n_kv_head, wanted.n_kv_head);
    if (file.n_embd > 0 && wanted.n_embd > 0) compare("ffn_hidden", file.ffn(), wanted.ffn());
    if (file.tie_embeddings != wanted.tie_embeddings)
      diffs.push_back(
          fmt::format("tie_embeddings {} vs {}", file.tie_embeddings, wanted.tie_embeddings));
  }
  return fmt::format("{}", fmt::join(diffs, ", "));
}

NamedTensors pad_vocab_rows(const NamedTensors& state, int64_t rows) {
  NamedTensors out = state;
  bool table = false;
  for (auto& [name, t] : out) {
    if (name != "transformer.wte.weight" && name != kLlamaEmbedding && name != kLlamaLmHead)
      continue;
    table = true;
    GLASS_CHECK(t.device() == kCPU && t.dim() == 2 && rows >= t.size(0),
                "pad_vocab_rows: cannot grow {} {} to {} rows",
                name == "transformer.wte.weight" ? "wte" : name, t.describe(), rows);
    if (rows == t.size(0)) continue;
    const Tensor src = contiguous(t);
    Tensor padded = zeros({rows, t.size(1)}, t.dtype(), kCPU);
    std::memcpy(padded.raw_data(), src.raw_data(), src.nbytes());
    t = padded;
  }
  GLASS_CHECK(table, "pad_vocab_rows: the state dict has no transformer.wte.weight or {}",
              kLlamaEmbedding);
  return out;
}

GPTWeights load_gpt_weights(const std::string& path) {
  // llm.c's files start with their magic number; llama2.c's with 7 sizes that imply the file's
  // length; safetensors files with a header length and then the JSON header's '{'.
  const std::string prefix = read_prefix(path, 16);
  if (looks_like_llmc(prefix)) return parse_llmc_weights(read_whole_file(path), path);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const bool safetensors = prefix.size() > 8 && prefix[8] == '{';
  if (!ec && (looks_like_llama2c(prefix, size) || (!safetensors && size >= kLlama2cHeaderBytes)))
    return parse_llama2c_weights(read_whole_file(path), path);
  SafeTensorsFile file = load_safetensors(path, kCPU);
  GPTWeights w;
  w.path = path;
  std::optional<GPTConfig> hf_llama_config;
  if (is_checkpoint(file.metadata)) {
    w.layout = WeightLayout::glass;
    w.state = checkpoint_weights(file.tensors, path);
  } else if (looks_like_hf_llama(file.tensors)) {
    w.layout = WeightLayout::hf;
    hf_llama_config = read_hf_llama_config_beside(path);
    if (hf_llama_config) check_hf_llama_config(file.tensors, *hf_llama_config, path);
    w.state = hf_llama_to_glass(file.tensors, path);
  } else if (looks_like_hf(file.tensors)) {
    w.layout = WeightLayout::hf;
    w.state = hf_to_glass(file.tensors, path);
  } else {
    w.layout = WeightLayout::glass;
    w.state = std::move(file.tensors);
  }
  const auto config = file.metadata.find("config");
  const GPTConfig declared = config != file.metadata.end()
                                 ? parse_config_metadata(config->second, path + " metadata")
                             : hf_llama_config ? *hf_llama_config
                                               : GPTConfig{};
  w.config = config_of_weights(w.state, declared, path);
  w.metadata = std::move(file.metadata);
  return w;
}

void save_llama_weights(const std::string& path, WeightLayout layout, const NamedTensors& state,
                        const GPTConfig& config,
                        const std::map<std::string, std::string>& extra_metadata) {
  check_layout_holds(layout, config.arch);
  GLASS_CHECK(config.arch == Arch::llama, "save_llama_weights {}: the model is {}, not a llama",
              path, arch_name(config.arch));
  check_llama_state(state, config, "save " + path);
  switch (layout) {
    case WeightLayout::glass:
      save_safetensors(path, state, metadata_for(config, extra_metadata));
      return;
    case WeightLayout::hf: {
      GPTConfig unpadded = config;  // Hugging Face's embed_tokens has vocab_size rows
      unpadded.padded_vocab_size = 0;
      save_safetensors(path, glass_to_hf_llama(state, config),
                       metadata_for(unpadded, extra_metadata));
      write_file_atomic(hf_config_path(path), hf_llama_config_json(unpadded));
      return;
    }
    case WeightLayout::llama2c:
      write_file_atomic(path, llama2c_weights_bytes(state, config));
      return;
    case WeightLayout::llmc:
      break;  // refused above
  }
  fail("save_llama_weights {}: unknown layout", path);
}

void save_gpt_weights(const std::string& path, WeightLayout layout, const CausalLM& model,
                      DType llmc_dtype, const std::map<std::string, std::string>& extra_metadata) {
  if (model.config.arch == Arch::llama)
    return save_llama_weights(path, layout, model.named_parameters(), model.config, extra_metadata);
  check_layout_holds(layout, model.config.arch);
  switch (layout) {
    case WeightLayout::glass:
      save_safetensors(path, model.named_parameters(), metadata_for(model.config, extra_metadata));
      return;
    case WeightLayout::hf: {
      GPTConfig unpadded = model.config;  // Hugging Face's wte has vocab_size rows
      unpadded.padded_vocab_size = 0;
      save_safetensors(path, glass_to_hf(model), metadata_for(unpadded, extra_metadata));
      return;
    }
    case WeightLayout::llmc:
      write_file_atomic(path, llmc_weights_bytes(model, llmc_dtype));
      return;
    case WeightLayout::llama2c:
      break;  // refused above
  }
  fail("save_gpt_weights {}: unknown layout", path);
}

}  // namespace glass
