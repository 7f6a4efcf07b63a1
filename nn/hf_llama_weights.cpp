// Hugging Face's Llama layout; see hf_llama_weights.h for the mapping.
#include "nn/hf_llama_weights.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "autograd/ops.h"
#include "nn/llama_state.h"

namespace glass {

namespace {

const std::string kLayerPrefix = "model.layers.";

// The tensors of one Hugging Face layer, and the glass tensor each goes into.
constexpr const char* kHfLayerSuffixes[] = {
    "input_layernorm.weight",  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
    "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",    "mlp.up_proj.weight",      "mlp.down_proj.weight"};

// The layer index of "model.layers.{i}.{rest}", or -1.
int64_t hf_layer_of(const std::string& name) {
  if (!name.starts_with(kLayerPrefix)) return -1;
  const size_t dot = name.find('.', kLayerPrefix.size());
  const std::string index = name.substr(kLayerPrefix.size(), dot - kLayerPrefix.size());
  if (dot == std::string::npos || index.empty() || index.size() > 9 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(index);
}

// The number of layers: the model.layers.{i} indices, which must be 0..L-1.
int64_t hf_layer_count(const NamedTensors& hf, const std::string& path) {
  std::set<int64_t> layers;
  for (const auto& [name, t] : hf)
    if (const int64_t l = hf_layer_of(name); l >= 0) layers.insert(l);
  GLASS_CHECK(!layers.empty() && *layers.rbegin() == static_cast<int64_t>(layers.size()) - 1,
              "{}: Hugging Face llama layer indices must be 0..L-1, found [{}]", path,
              fmt::join(layers, ", "));
  return static_cast<int64_t>(layers.size());
}

const Tensor& hf_tensor(const NamedTensors& hf, const std::string& name, const std::string& path) {
  for (const auto& [n, t] : hf)
    if (n == name) return t;
  fail("{}: no tensor '{}' (Hugging Face's llama layout has it)", path, name);
}

// A 2-D tensor with `cols` columns, or an error naming it.
const Tensor& matrix(const NamedTensors& hf, const std::string& name, int64_t cols,
                     const std::string& path) {
  const Tensor& t = hf_tensor(hf, name, path);
  GLASS_CHECK(t.dim() == 2 && t.size(0) > 0 && t.size(1) == cols,
              "{}: tensor '{}' is {}, not [rows, n_embd={}]", path, name, t.describe(), cols);
  return t;
}

int64_t json_int(const nlohmann::json& j, const char* key, const std::string& what) {
  GLASS_CHECK(j.contains(key), "{}: config.json has no {}", what, key);
  const auto& v = j.at(key);
  GLASS_CHECK(v.is_number_integer() && v.get<int64_t>() > 0 &&
                  v.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
              "{}: config.json: {} = {} is not a positive 32-bit integer", what, key, v.dump());
  return v.get<int64_t>();
}

double json_number(const nlohmann::json& j, const char* key, double fallback,
                   const std::string& what) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  GLASS_CHECK(j.at(key).is_number() && j.at(key).get<double>() > 0,
              "{}: config.json: {} = {} is not a positive number", what, key, j.at(key).dump());
  return j.at(key).get<double>();
}

}  // namespace

bool looks_like_hf_llama(const NamedTensors& tensors) {
  bool embed = false, q_proj = false;
  for (const auto& [name, t] : tensors) {
    embed = embed || name == kLlamaEmbedding;
    q_proj =
        q_proj || (name.starts_with(kLayerPrefix) && name.ends_with(".self_attn.q_proj.weight"));
  }
  return embed && q_proj;
}

NamedTensors hf_llama_to_glass(const NamedTensors& hf, const std::string& path) {
  // 1. Every name is one of the layout's (or the rotary buffer some versions save).
  std::set<std::string> known = {kLlamaEmbedding, kLlamaFinalNorm, kLlamaLmHead};
  const int64_t L = hf_layer_count(hf, path);
  for (int64_t l = 0; l < L; ++l)
    for (const char* s : kHfLayerSuffixes) known.insert(llama_layer_name(l, s));
  for (const auto& [name, t] : hf)
    GLASS_CHECK(known.contains(name) || name.ends_with(".self_attn.rotary_emb.inv_freq"),
                "{}: tensor '{}' is not part of Hugging Face's llama layout", path, name);

  // 2. The tensors in glass's order, q/k/v and gate/up stacked.
  const Tensor& embed = hf_tensor(hf, kLlamaEmbedding, path);
  GLASS_CHECK(embed.dim() == 2, "{}: tensor '{}' is {}, not [vocab_size, hidden_size]", path,
              kLlamaEmbedding, embed.describe());
  const int64_t C = embed.size(1);
  NamedTensors out = {{kLlamaEmbedding, embed}};
  for (int64_t l = 0; l < L; ++l) {
    auto name = [&](const char* suffix) { return llama_layer_name(l, suffix); };
    out.emplace_back(name("input_layernorm.weight"),
                     hf_tensor(hf, name("input_layernorm.weight"), path));
    out.emplace_back(name("self_attn.qkv_proj.weight"),
                     stack_rows({matrix(hf, name("self_attn.q_proj.weight"), C, path),
                                 matrix(hf, name("self_attn.k_proj.weight"), C, path),
                                 matrix(hf, name("self_attn.v_proj.weight"), C, path)}));
    out.emplace_back(name("self_attn.o_proj.weight"),
                     hf_tensor(hf, name("self_attn.o_proj.weight"), path));
    out.emplace_back(name("post_attention_layernorm.weight"),
                     hf_tensor(hf, name("post_attention_layernorm.weight"), path));
    const Tensor& gate = matrix(hf, name("mlp.gate_proj.weight"), C, path);
    const Tensor& up = matrix(hf, name("mlp.up_proj.weight"), C, path);
    GLASS_CHECK(gate.size(0) == up.size(0), "{}: tensor '{}' is {} but '{}' is {}", path,
                name("mlp.gate_proj.weight"), shape_str(gate.shape()), name("mlp.up_proj.weight"),
                shape_str(up.shape()));
    out.emplace_back(name("mlp.gate_up_proj.weight"), stack_rows({gate, up}));
    out.emplace_back(name("mlp.down_proj.weight"),
                     hf_tensor(hf, name("mlp.down_proj.weight"), path));
  }
  out.emplace_back(kLlamaFinalNorm, hf_tensor(hf, kLlamaFinalNorm, path));
  for (const auto& [n, t] : hf)
    if (n == kLlamaLmHead) out.emplace_back(kLlamaLmHead, t);
  return out;
}

NamedTensors glass_to_hf_llama(const NamedTensors& state, const GPTConfig& c) {
  const int64_t H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim(), F = c.ffn();
  NamedTensors out;
  for (const auto& [name, p] : state) {
    const Tensor host = contiguous(to_device(p.detach(), kCPU));
    if (name == kLlamaEmbedding || name == kLlamaLmHead) {
      out.emplace_back(name, row_range(host, 0, c.vocab_size));  // no padding rows
    } else if (name.ends_with(".self_attn.qkv_proj.weight")) {
      const std::string layer = name.substr(0, name.size() - std::string("qkv_proj.weight").size());
      out.emplace_back(layer + "q_proj.weight", row_range(host, 0, H * D));
      out.emplace_back(layer + "k_proj.weight", row_range(host, H * D, (H + Hkv) * D));
      out.emplace_back(layer + "v_proj.weight", row_range(host, (H + Hkv) * D, (H + 2 * Hkv) * D));
    } else if (name.ends_with(".mlp.gate_up_proj.weight")) {
      const std::string layer =
          name.substr(0, name.size() - std::string("gate_up_proj.weight").size());
      out.emplace_back(layer + "gate_proj.weight", row_range(host, 0, F));
      out.emplace_back(layer + "up_proj.weight", row_range(host, F, 2 * F));
    } else {
      out.emplace_back(name, host);
    }
  }
  return out;
}

std::string hf_llama_config_json(const GPTConfig& c) {
  const nlohmann::ordered_json j = {{"architectures", {"LlamaForCausalLM"}},
                                    {"model_type", "llama"},
                                    {"hidden_size", c.n_embd},
                                    {"intermediate_size", c.ffn()},
                                    {"num_attention_heads", c.n_head},
                                    {"num_key_value_heads", c.kv_heads()},
                                    {"num_hidden_layers", c.n_layer},
                                    {"vocab_size", c.vocab_size},
                                    {"max_position_embeddings", c.block_size},
                                    {"rms_norm_eps", c.norm_eps},
                                    {"rope_theta", c.rope_theta},
                                    {"tie_word_embeddings", c.tie_embeddings},
                                    {"hidden_act", "silu"},
                                    {"attention_bias", false},
                                    {"mlp_bias", false},
                                    {"rope_scaling", nullptr},
                                    {"torch_dtype", "float32"}};
  return j.dump(2) + "\n";
}

GPTConfig parse_hf_llama_config(const std::string& text, const std::string& what) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  GLASS_CHECK(j.is_object(), "{}: config.json is not a JSON object", what);
  if (j.contains("model_type"))
    GLASS_CHECK(j.at("model_type") == "llama",
                "{}: config.json: model_type {} is not \"llama\" (glass reads LlamaForCausalLM)",
                what, j.at("model_type").dump());
  for (const char* flag : {"attention_bias", "mlp_bias"})
    GLASS_CHECK(!j.contains(flag) || j.at(flag) == false,
                "{}: config.json: {} = {}: glass's llama has no biases", what, flag,
                j.at(flag).dump());
  GLASS_CHECK(!j.contains("rope_scaling") || j.at("rope_scaling").is_null(),
              "{}: config.json: rope_scaling = {}: glass's RoPE has no scaling", what,
              j.contains("rope_scaling") ? j.at("rope_scaling").dump() : "");
  GLASS_CHECK(!j.contains("hidden_act") || j.at("hidden_act") == "silu",
              "{}: config.json: hidden_act {} is not \"silu\" (SwiGLU)", what,
              j.contains("hidden_act") ? j.at("hidden_act").dump() : "");
  GPTConfig c;
  c.arch = Arch::llama;
  c.n_embd = json_int(j, "hidden_size", what);
  c.ffn_hidden = json_int(j, "intermediate_size", what);
  c.n_head = json_int(j, "num_attention_heads", what);
  c.n_kv_head = j.contains("num_key_value_heads") && !j.at("num_key_value_heads").is_null()
                    ? json_int(j, "num_key_value_heads", what)
                    : c.n_head;
  c.n_layer = json_int(j, "num_hidden_layers", what);
  c.vocab_size = json_int(j, "vocab_size", what);
  // LlamaConfig's defaults where a field is absent.
  c.block_size =
      j.contains("max_position_embeddings") ? json_int(j, "max_position_embeddings", what) : 2048;
  c.norm_eps = json_number(j, "rms_norm_eps", 1e-6, what);
  c.rope_theta = json_number(j, "rope_theta", 10000, what);
  if (j.contains("tie_word_embeddings")) {
    GLASS_CHECK(j.at("tie_word_embeddings").is_boolean(),
                "{}: config.json: tie_word_embeddings = {} is not true or false", what,
                j.at("tie_word_embeddings").dump());
    c.tie_embeddings = j.at("tie_word_embeddings").get<bool>();
  } else {
    c.tie_embeddings = false;
  }
  GLASS_CHECK(c.n_embd % c.n_head == 0,
              "{}: config.json: num_attention_heads {} does not divide hidden_size {}", what,
              c.n_head, c.n_embd);
  if (j.contains("head_dim") && !j.at("head_dim").is_null())
    GLASS_CHECK(j.at("head_dim") == c.n_embd / c.n_head,
                "{}: config.json: head_dim {} is not hidden_size / num_attention_heads = {}", what,
                j.at("head_dim").dump(), c.n_embd / c.n_head);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: config.json: {}", what, e.what());
  }
  return c;
}

std::string hf_config_path(const std::string& weights_path) {
  return (std::filesystem::path(weights_path).parent_path() / "config.json").string();
}

std::optional<GPTConfig> read_hf_llama_config_beside(const std::string& weights_path) {
  const std::string path = hf_config_path(weights_path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_hf_llama_config(text.str(), path);
}

void check_hf_llama_config(const NamedTensors& hf, const GPTConfig& c, const std::string& what) {
  auto agree = [&](const char* field, int64_t json, const std::string& tensor, const Tensor& t,
                   int64_t have, const char* meaning) {
    GLASS_CHECK(json == have, "{}: config.json says {} {}, but tensor '{}' is {} ({} {})", what,
                field, json, tensor, shape_str(t.shape()), meaning, have);
  };
  const Tensor& embed = hf_tensor(hf, kLlamaEmbedding, what);
  GLASS_CHECK(embed.dim() == 2, "{}: tensor '{}' is {}", what, kLlamaEmbedding, embed.describe());
  agree("hidden_size", c.n_embd, kLlamaEmbedding, embed, embed.size(1), "hidden_size");
  agree("vocab_size", c.vocab_size, kLlamaEmbedding, embed, embed.size(0), "vocab_size");
  const int64_t L = hf_layer_count(hf, what);
  GLASS_CHECK(c.n_layer == L,
              "{}: config.json says num_hidden_layers {}, but the file holds {} "
              "layers (model.layers.0..{})",
              what, c.n_layer, L, L - 1);
  const int64_t D = c.n_embd / c.n_head;
  const std::string q = llama_layer_name(0, "self_attn.q_proj.weight");
  const std::string k = llama_layer_name(0, "self_attn.k_proj.weight");
  const std::string gate = llama_layer_name(0, "mlp.gate_proj.weight");
  const Tensor& qt = hf_tensor(hf, q, what);
  const Tensor& kt = hf_tensor(hf, k, what);
  const Tensor& gt = hf_tensor(hf, gate, what);
  if (qt.dim() == 2)
    agree("num_attention_heads * head_dim", c.n_head * D, q, qt, qt.size(0), "rows");
  if (kt.dim() == 2)
    agree("num_key_value_heads * head_dim", c.kv_heads() * D, k, kt, kt.size(0), "rows");
  if (gt.dim() == 2) agree("intermediate_size", c.ffn(), gate, gt, gt.size(0), "intermediate_size");
  bool lm_head = false;
  for (const auto& [n, t] : hf) lm_head = lm_head || n == kLlamaLmHead;
  GLASS_CHECK(lm_head != c.tie_embeddings,
              "{}: config.json says tie_word_embeddings {}, but the file {} lm_head.weight", what,
              c.tie_embeddings, lm_head ? "holds" : "has no");
}

}  // namespace glass
