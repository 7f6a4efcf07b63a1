// Hugging Face's GPT-2 layout; see hf_weights.h for the mapping.
#include "nn/hf_weights.h"

#include <cstring>

#include "autograd/ops.h"

namespace glass {

namespace {

const std::string kPrefix = "transformer.";

// The weights Hugging Face keeps as Conv1D ([in, out]) where glass has nn.Linear ([out, in]).
bool is_conv1d_weight(const std::string& name) {
  for (const char* s :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(s)) return true;
  return false;
}

// A 2-D host tensor transposed into a new contiguous one.
Tensor transposed(const Tensor& t) { return contiguous(transpose(t.detach(), 0, 1)); }

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = contiguous(a), cb = contiguous(b);
  return std::memcmp(ca.raw_data(), cb.raw_data(), ca.nbytes()) == 0;
}

}  // namespace

bool looks_like_hf(const NamedTensors& state) {
  for (const auto& [name, t] : state) {
    if (name == "wte.weight" || name.starts_with("h.")) return true;
    if (name.ends_with(".attn.c_attn.weight") && t.dim() == 2 && t.size(1) == 3 * t.size(0))
      return true;
  }
  return false;
}

NamedTensors hf_to_glass(const NamedTensors& hf, const std::string& path) {
  NamedTensors out;
  const Tensor* lm_head = nullptr;
  for (const auto& [raw, t] : hf) {
    const std::string name = raw.starts_with(kPrefix) ? raw.substr(kPrefix.size()) : raw;
    if (name == "lm_head.weight" || raw == "lm_head.weight") {
      lm_head = &t;
      continue;
    }
    // The causal mask buffers some transformers versions save with the weights.
    if (name.starts_with("h.") &&
        (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")))
      continue;
    const bool known = name == "wte.weight" || name == "wpe.weight" || name.starts_with("h.") ||
                       name.starts_with("ln_f.");
    GLASS_CHECK(known, "{}: tensor '{}' is not part of Hugging Face's GPT-2 layout", path, raw);
    if (is_conv1d_weight(name)) {
      GLASS_CHECK(t.dim() == 2, "{}: Conv1D weight '{}' must be 2-D [in, out], got {}", path, raw,
                  t.describe());
      out.emplace_back(kPrefix + name, transposed(t));
    } else {
      out.emplace_back(kPrefix + name, t);
    }
  }
  // glass ties the LM head to wte: an lm_head that differs would be silently dropped.
  if (lm_head != nullptr) {
    const Tensor* wte = nullptr;
    for (const auto& [n, t] : out)
      if (n == "transformer.wte.weight") wte = &t;
    GLASS_CHECK(wte != nullptr && bitwise_equal(*lm_head, *wte),
                "{}: lm_head.weight {} is not wte's values; glass ties the LM head to wte", path,
                lm_head->describe());
  }
  return out;
}

NamedTensors glass_to_hf(const CausalLM& model) {
  NamedTensors out;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor host = to_device(p.detach(), kCPU);
    if (name == "transformer.wte.weight" && model.config.table_rows() != model.config.vocab_size)
      host = slice(host, 0, 0, model.config.vocab_size);
    const std::string hf_name = name.substr(kPrefix.size());
    out.emplace_back(hf_name, is_conv1d_weight(hf_name) ? transposed(host) : contiguous(host));
  }
  return out;
}

}  // namespace glass
