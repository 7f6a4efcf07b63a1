// glass's Llama state dict; see llama_state.h.
#include "nn/llama_state.h"

#include <cstring>
#include <map>
#include <set>

#include "autograd/ops.h"

namespace glass {

namespace {

constexpr const char* kLayerSuffixes[] = {
    "input_layernorm.weight",          "self_attn.qkv_proj.weight", "self_attn.o_proj.weight",
    "post_attention_layernorm.weight", "mlp.gate_up_proj.weight",   "mlp.down_proj.weight"};

const std::string kLayerPrefix = "model.layers.";

// The layer index of "model.layers.{i}.{suffix}" with a known suffix, or -1 for any other name.
int64_t layer_of(const std::string& name) {
  if (!name.starts_with(kLayerPrefix)) return -1;
  const size_t dot = name.find('.', kLayerPrefix.size());
  if (dot == std::string::npos) return -1;
  const std::string index = name.substr(kLayerPrefix.size(), dot - kLayerPrefix.size());
  if (index.empty() || index.size() > 9 ||
      index.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  const std::string suffix = name.substr(dot + 1);
  for (const char* s : kLayerSuffixes)
    if (suffix == s) return std::stoll(index);
  return -1;
}

// Compares the state dict with the parameters of a llama of `c`; the qkv rows only when
// `qkv_rows_known` (n_head given).
void check_against(const NamedTensors& state, const GPTConfig& c, bool qkv_rows_known,
                   const std::string& what) {
  std::map<std::string, Shape> expected;
  for (auto& [name, shape] : llama_parameter_shapes(c)) expected.emplace(name, shape);
  const std::string model = qkv_rows_known ? c.str() : c.str() + " (heads not known)";
  std::set<std::string> seen;
  for (const auto& [name, t] : state) {
    const auto it = expected.find(name);
    GLASS_CHECK(it != expected.end(), "{}: tensor '{}' {} is not a parameter of a llama with {}",
                what, name, t.describe(), model);
    GLASS_CHECK(seen.insert(name).second, "{}: tensor '{}' appears twice", what, name);
    Shape want = it->second;
    if (!qkv_rows_known && name.ends_with(".self_attn.qkv_proj.weight") && t.dim() == 2)
      want[0] = t.size(0);
    GLASS_CHECK(t.shape() == want, "{}: tensor '{}' is {}, but a llama with {} has {}", what, name,
                shape_str(t.shape()), model, shape_str(want));
  }
  for (const auto& [name, shape] : expected)
    GLASS_CHECK(seen.contains(name), "{}: no tensor '{}' (a llama with {} has it, {})", what, name,
                model, shape_str(shape));
}

}  // namespace

std::string llama_layer_name(int64_t layer, const char* suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<std::pair<std::string, Shape>> llama_parameter_shapes(const GPTConfig& c) {
  GLASS_CHECK(c.n_head > 0 && c.n_embd % c.n_head == 0,
              "llama_parameter_shapes: n_head {} must divide n_embd {}", c.n_head, c.n_embd);
  const int64_t C = c.n_embd, D = c.head_dim(), F = c.ffn();
  std::vector<std::pair<std::string, Shape>> shapes = {{kLlamaEmbedding, {c.table_rows(), C}}};
  for (int64_t l = 0; l < c.n_layer; ++l) {
    shapes.emplace_back(llama_layer_name(l, "input_layernorm.weight"), Shape{C});
    shapes.emplace_back(llama_layer_name(l, "self_attn.qkv_proj.weight"),
                        Shape{(c.n_head + 2 * c.kv_heads()) * D, C});
    shapes.emplace_back(llama_layer_name(l, "self_attn.o_proj.weight"), Shape{C, c.n_head * D});
    shapes.emplace_back(llama_layer_name(l, "post_attention_layernorm.weight"), Shape{C});
    shapes.emplace_back(llama_layer_name(l, "mlp.gate_up_proj.weight"), Shape{2 * F, C});
    shapes.emplace_back(llama_layer_name(l, "mlp.down_proj.weight"), Shape{C, F});
  }
  shapes.emplace_back(kLlamaFinalNorm, Shape{C});
  if (!c.tie_embeddings) shapes.emplace_back(kLlamaLmHead, Shape{c.table_rows(), C});
  return shapes;
}

bool is_llama_state(const NamedTensors& state) {
  for (const auto& [name, t] : state)
    if (name == kLlamaEmbedding) return true;
  return false;
}

const Tensor& find_tensor(const NamedTensors& state, const std::string& name,
                          const std::string& what) {
  for (const auto& [n, t] : state)
    if (n == name) return t;
  fail("{}: no tensor '{}'", what, name);
}

GPTConfig llama_config_from_state_dict(const NamedTensors& state, int64_t n_head,
                                       const std::string& what) {
  const Tensor& embed = find_tensor(state, kLlamaEmbedding, what);
  GLASS_CHECK(embed.dim() == 2 && embed.size(0) > 0 && embed.size(1) > 0,
              "{}: tensor '{}' is {}, not [vocabulary, n_embd]", what, kLlamaEmbedding,
              embed.describe());
  std::set<int64_t> layers;
  bool lm_head = false;
  for (const auto& [name, t] : state) {
    const int64_t layer = layer_of(name);
    if (layer >= 0) layers.insert(layer);
    lm_head = lm_head || name == kLlamaLmHead;
    GLASS_CHECK(
        layer >= 0 || name == kLlamaEmbedding || name == kLlamaFinalNorm || name == kLlamaLmHead,
        "{}: tensor '{}' is not a parameter of a llama", what, name);
  }
  const auto n_layer = static_cast<int64_t>(layers.size());
  GLASS_CHECK(n_layer > 0 && *layers.rbegin() == n_layer - 1,
              "{}: llama layer indices must be 0..n_layer-1, found [{}]", what,
              fmt::join(layers, ", "));
  const int64_t C = embed.size(1);
  const Tensor& down = find_tensor(state, llama_layer_name(0, "mlp.down_proj.weight"), what);
  GLASS_CHECK(down.dim() == 2 && down.size(0) == C && down.size(1) > 0,
              "{}: tensor '{}' is {}, not [n_embd={}, ffn_hidden]", what,
              llama_layer_name(0, "mlp.down_proj.weight"), down.describe(), C);
  GPTConfig c{.vocab_size = embed.size(0),
              .block_size = 0,
              .n_layer = n_layer,
              .n_head = n_head,
              .n_embd = C,
              .dropout = 0,
              .padded_vocab_size = 0,
              .arch = Arch::llama,
              .n_kv_head = 0,
              .ffn_hidden = down.size(1),
              .tie_embeddings = !lm_head};
  if (n_head <= 0) {
    c.n_head = 1;  // o_proj is [C, H D] = [C, C] whatever H is; only qkv's rows depend on it
    check_against(state, c, /*qkv_rows_known=*/false, what);
    c.n_head = 0;
    return c;
  }
  const std::string qkv_name = llama_layer_name(0, "self_attn.qkv_proj.weight");
  const Tensor& qkv = find_tensor(state, qkv_name, what);
  GLASS_CHECK(C % n_head == 0, "{}: n_head {} does not divide n_embd {} (tensor '{}' is {})", what,
              n_head, C, kLlamaEmbedding, shape_str(embed.shape()));
  const int64_t D = C / n_head;
  const int64_t rows = qkv.dim() == 2 ? qkv.size(0) : 0;
  const int64_t kv_rows = rows - n_head * D;  // 2 Hkv D
  GLASS_CHECK(kv_rows > 0 && kv_rows % (2 * D) == 0 && n_head % (kv_rows / (2 * D)) == 0,
              "{}: tensor '{}' is {}: with n_head {} (head dim {}) its rows must be "
              "(n_head + 2 n_kv_head) * {} for an n_kv_head dividing n_head",
              what, qkv_name, qkv.describe(), n_head, D, D);
  c.n_kv_head = kv_rows / (2 * D);
  check_against(state, c, /*qkv_rows_known=*/true, what);
  return c;
}

void check_llama_state(const NamedTensors& state, const GPTConfig& config,
                       const std::string& what) {
  check_against(state, config, /*qkv_rows_known=*/true, what);
}

Tensor row_range(const Tensor& t, int64_t begin, int64_t end) {
  GLASS_CHECK(t.device() == kCPU && t.dim() == 2 && 0 <= begin && begin <= end && end <= t.size(0),
              "row_range: rows [{}, {}) of {}", begin, end, t.describe());
  const Tensor src = contiguous(t);
  Tensor out = Tensor::empty({end - begin, t.size(1)}, t.dtype(), kCPU);
  const size_t row_bytes = static_cast<size_t>(t.size(1)) * dtype_size(t.dtype());
  std::memcpy(out.raw_data(), static_cast<const char*>(src.raw_data()) + begin * row_bytes,
              out.nbytes());
  return out;
}

Tensor stack_rows(const std::vector<Tensor>& parts) {
  GLASS_CHECK(!parts.empty(), "stack_rows: nothing to stack");
  int64_t rows = 0;
  for (const Tensor& p : parts) {
    GLASS_CHECK(p.device() == kCPU && p.dim() == 2 && p.size(1) == parts[0].size(1) &&
                    p.dtype() == parts[0].dtype(),
                "stack_rows: {} does not stack with {}", p.describe(), parts[0].describe());
    rows += p.size(0);
  }
  Tensor out = Tensor::empty({rows, parts[0].size(1)}, parts[0].dtype(), kCPU);
  char* at = static_cast<char*>(out.raw_data());
  for (const Tensor& p : parts) {
    const Tensor src = contiguous(p);
    std::memcpy(at, src.raw_data(), src.nbytes());
    at += src.nbytes();
  }
  return out;
}

}  // namespace glass
