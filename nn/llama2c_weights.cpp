// llama2.c's legacy checkpoint; see llama2c_weights.h for the layout.
#include "nn/llama2c_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "autograd/ops.h"
#include "nn/llama_state.h"

namespace glass {

static_assert(std::endian::native == std::endian::little,
              "llama2.c's files are little-endian; glass reads and writes them as-is");

namespace {

// The header fields as llama2.c's Config names them, and the largest value glass believes: a size
// beyond it is a corrupt header, not a model (the largest Llamas have dim 16384, 126 layers).
struct HeaderField {
  const char* name;
  int64_t limit;
};
constexpr HeaderField kFields[7] = {
    {"dim", 1 << 16},        {"hidden_dim", 1 << 18}, {"n_layers", 1 << 12}, {"n_heads", 1 << 12},
    {"n_kv_heads", 1 << 12}, {"vocab_size", 1 << 24}, {"seq_len", 1 << 24}};

struct Header {
  int64_t field[7];
  int64_t C() const { return field[0]; }
  int64_t F() const { return field[1]; }
  int64_t L() const { return field[2]; }
  int64_t H() const { return field[3]; }
  int64_t Hkv() const { return field[4]; }
  int64_t V() const { return std::abs(field[5]); }
  bool shared() const { return field[5] > 0; }
  int64_t T() const { return field[6]; }
  int64_t D() const { return C() / H(); }
};

Header read_header(std::string_view bytes) {
  Header h;
  for (int i = 0; i < 7; ++i) {
    int32_t v = 0;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    h.field[i] = v;
  }
  return h;
}

using u128 = unsigned __int128;

// The f32 values after the header that a valid header implies, with the classifier shared or not.
u128 parameter_count(const Header& h, bool shared) {
  const u128 C = h.C(), F = h.F(), L = h.L(), V = h.V(), T = h.T(), D = h.D();
  const u128 kv_rows = static_cast<u128>(h.Hkv()) * D;
  return V * C                    // token_embedding_table
         + L * C                  // rms_att_weight
         + L * C * C              // wq
         + 2 * L * kv_rows * C    // wk, wv
         + L * C * C              // wo
         + L * C                  // rms_ffn_weight
         + 3 * L * F * C          // w1, w2, w3
         + C                      // rms_final_weight
         + T * D                  // freq_cis_real and freq_cis_imag, [T, D/2] each
         + (shared ? 0 : V * C);  // wcls
}

// The first header problem, or "" when each field is in range and they fit together.
std::string header_problem(const Header& h) {
  for (int i = 0; i < 7; ++i) {
    const int64_t v = i == 5 ? std::abs(h.field[i]) : h.field[i];
    if (v <= 0 || (i != 5 && h.field[i] < 0))
      return fmt::format("header field {} (byte {}) is {}, must be positive{}", kFields[i].name,
                         4 * i, h.field[i], i == 5 ? " or negative (unshared classifier)" : "");
    if (v > kFields[i].limit)
      return fmt::format("header field {} (byte {}) is {}: more than {}, not a model's size",
                         kFields[i].name, 4 * i, h.field[i], kFields[i].limit);
  }
  if (h.C() % h.H() != 0)
    return fmt::format("header: dim {} is not divisible by n_heads {}", h.C(), h.H());
  if (h.Hkv() > h.H() || h.H() % h.Hkv() != 0)
    return fmt::format("header: n_kv_heads {} does not divide n_heads {}", h.Hkv(), h.H());
  if (h.D() % 2 != 0)
    return fmt::format(
        "header: head dim dim / n_heads = {} / {} = {} is odd (RoPE pairs "
        "dimensions)",
        h.C(), h.H(), h.D());
  return "";
}

// Rows of a head-major block moved by `to_row(head, row within head)`.
Tensor permute_head_rows(const Tensor& w, int64_t heads, bool to_interleaved) {
  GLASS_CHECK(w.device() == kCPU && w.dim() == 2 && heads > 0 && w.size(0) % heads == 0 &&
                  (w.size(0) / heads) % 2 == 0,
              "RoPE row permutation: {} is not {} heads of an even head dim", w.describe(), heads);
  const Tensor src = contiguous(w);
  Tensor out = Tensor::empty(w.shape(), w.dtype(), kCPU);
  const int64_t D = w.size(0) / heads, half = D / 2;
  const size_t row_bytes = static_cast<size_t>(w.size(1)) * dtype_size(w.dtype());
  const char* in = static_cast<const char*>(src.raw_data());
  char* to = static_cast<char*>(out.raw_data());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < D; ++j) {
      // glass's dimension j of the head, and its row in llama2.c's order.
      const int64_t interleaved = j < half ? 2 * j : 2 * (j - half) + 1;
      const int64_t from = h * D + (to_interleaved ? j : interleaved);
      const int64_t dest = h * D + (to_interleaved ? interleaved : j);
      std::memcpy(to + dest * row_bytes, in + from * row_bytes, row_bytes);
    }
  return out;
}

// Reads consecutive f32 arrays out of the file.
struct Reader {
  std::string_view bytes;
  size_t offset = kLlama2cHeaderBytes;
  Tensor next(const Shape& shape) {
    Tensor t = Tensor::empty(shape, DType::f32, kCPU);
    std::memcpy(t.raw_data(), bytes.data() + offset, t.nbytes());
    offset += t.nbytes();
    return t;
  }
};

// Appends a tensor's values as f32.
void append_f32(std::string& out, const Tensor& t) {
  Tensor host = to_device(t.detach(), kCPU);
  if (host.dtype() != DType::f32) host = cast(host, DType::f32);
  host = contiguous(host);
  const size_t at = out.size();
  out.resize(at + host.nbytes());
  host.copy_to_host(out.data() + at);
}

}  // namespace

Tensor rows_to_interleaved_rope(const Tensor& w, int64_t heads) {
  return permute_head_rows(w, heads, true);
}
Tensor rows_from_interleaved_rope(const Tensor& w, int64_t heads) {
  return permute_head_rows(w, heads, false);
}

bool looks_like_llama2c(std::string_view prefix, uint64_t file_size) {
  if (prefix.size() < kLlama2cHeaderBytes || file_size < kLlama2cHeaderBytes) return false;
  const Header h = read_header(prefix);
  if (!header_problem(h).empty()) return false;
  return parameter_count(h, h.shared()) * sizeof(float) == file_size - kLlama2cHeaderBytes;
}

GPTWeights parse_llama2c_weights(std::string_view bytes, const std::string& name) {
  // 1. The header: present, each size in range, sizes that fit together.
  GLASS_CHECK(bytes.size() >= kLlama2cHeaderBytes,
              "llama2.c checkpoint {}: the file is {} bytes, shorter than the {}-byte header", name,
              bytes.size(), kLlama2cHeaderBytes);
  const Header h = read_header(bytes);
  const std::string problem = header_problem(h);
  GLASS_CHECK(problem.empty(), "llama2.c checkpoint {}: {}", name, problem);

  // 2. The bytes the header implies must be exactly those after it, checked before allocating.
  const u128 need = parameter_count(h, h.shared()) * sizeof(float);
  const uint64_t have = bytes.size() - kLlama2cHeaderBytes;
  GLASS_CHECK(need == have,
              "llama2.c checkpoint {}: the header (dim={} hidden_dim={} n_layers={} n_heads={} "
              "n_kv_heads={} vocab_size={} seq_len={}) needs {} bytes of f32 weights after the "
              "{}-byte header, but the file has {}{}",
              name, h.C(), h.F(), h.L(), h.H(), h.Hkv(), h.field[5], h.T(),
              static_cast<uint64_t>(need), kLlama2cHeaderBytes, have,
              need > have ? " (truncated?)" : " (trailing bytes)");
  const GPTConfig config{.vocab_size = h.V(),
                         .block_size = h.T(),
                         .n_layer = h.L(),
                         .n_head = h.H(),
                         .n_embd = h.C(),
                         .dropout = 0,
                         .padded_vocab_size = 0,
                         .arch = Arch::llama,
                         .n_kv_head = h.Hkv(),
                         .ffn_hidden = h.F(),
                         .rope_theta = 10000,
                         .norm_eps = 1e-5,
                         .tie_embeddings = h.shared()};
  config.validate();

  // 3. The groups in file order, then regrouped by layer in glass's names.
  const int64_t C = h.C(), F = h.F(), L = h.L(), D = h.D(), kv_rows = h.Hkv() * D;
  Reader in{bytes};
  const Tensor embed = in.next({h.V(), C});
  const Tensor rms_att = in.next({L, C}), wq = in.next({L * C, C}), wk = in.next({L * kv_rows, C}),
               wv = in.next({L * kv_rows, C}), wo = in.next({L * C, C}), rms_ffn = in.next({L, C}),
               w1 = in.next({L * F, C}), w2 = in.next({L * C, F}), w3 = in.next({L * F, C});
  const Tensor rms_final = in.next({C});
  in.offset += static_cast<size_t>(h.T() * D) * sizeof(float);  // freq_cis_real and _imag
  GPTWeights w{
      .path = name, .layout = WeightLayout::llama2c, .state = {}, .config = config, .metadata = {}};
  w.state.emplace_back(kLlamaEmbedding, embed);
  auto vector_row = [&](const Tensor& group, int64_t l) {
    return reshape(row_range(group, l, l + 1), {C});
  };
  for (int64_t l = 0; l < L; ++l) {
    auto name_of = [&](const char* suffix) { return llama_layer_name(l, suffix); };
    w.state.emplace_back(name_of("input_layernorm.weight"), vector_row(rms_att, l));
    w.state.emplace_back(
        name_of("self_attn.qkv_proj.weight"),
        stack_rows(
            {rows_from_interleaved_rope(row_range(wq, l * C, (l + 1) * C), h.H()),
             rows_from_interleaved_rope(row_range(wk, l * kv_rows, (l + 1) * kv_rows), h.Hkv()),
             row_range(wv, l * kv_rows, (l + 1) * kv_rows)}));
    w.state.emplace_back(name_of("self_attn.o_proj.weight"), row_range(wo, l * C, (l + 1) * C));
    w.state.emplace_back(name_of("post_attention_layernorm.weight"), vector_row(rms_ffn, l));
    w.state.emplace_back(
        name_of("mlp.gate_up_proj.weight"),
        stack_rows({row_range(w1, l * F, (l + 1) * F), row_range(w3, l * F, (l + 1) * F)}));
    w.state.emplace_back(name_of("mlp.down_proj.weight"), row_range(w2, l * C, (l + 1) * C));
  }
  w.state.emplace_back(kLlamaFinalNorm, rms_final);
  if (!h.shared()) w.state.emplace_back(kLlamaLmHead, in.next({h.V(), C}));
  return w;
}

std::string llama2c_weights_bytes(const NamedTensors& state, const GPTConfig& c) {
  GLASS_CHECK(c.arch == Arch::llama, "llama2.c checkpoint: the model is {}, not a llama",
              arch_name(c.arch));
  check_llama_state(state, c, "llama2.c checkpoint");
  const int64_t L = c.n_layer, H = c.n_head, Hkv = c.kv_heads(), D = c.head_dim(), F = c.ffn();
  // The header's sizes within what the reader accepts (each far inside int32).
  Header sizes;
  const int64_t fields[7] = {
      c.n_embd, F, L, H, Hkv, c.tie_embeddings ? c.vocab_size : -c.vocab_size, c.block_size};
  std::copy(std::begin(fields), std::end(fields), sizes.field);
  const std::string problem = header_problem(sizes);
  GLASS_CHECK(problem.empty(), "llama2.c checkpoint of {}: {}", c.str(), problem);
  auto param = [&](const std::string& name) {
    return contiguous(to_device(find_tensor(state, name, "llama2.c checkpoint").detach(), kCPU));
  };
  auto layer = [&](int64_t l, const char* suffix) { return param(llama_layer_name(l, suffix)); };

  // 1. The header.
  int32_t header[7];
  for (int i = 0; i < 7; ++i) header[i] = static_cast<int32_t>(fields[i]);
  std::string out(reinterpret_cast<const char*>(header), sizeof(header));

  // 2. The groups, each over all layers; q and k rows in llama2.c's RoPE order.
  append_f32(out, row_range(param(kLlamaEmbedding), 0, c.vocab_size));
  for (int64_t l = 0; l < L; ++l) append_f32(out, layer(l, "input_layernorm.weight"));
  for (int64_t l = 0; l < L; ++l)
    append_f32(out, rows_to_interleaved_rope(
                        row_range(layer(l, "self_attn.qkv_proj.weight"), 0, H * D), H));
  for (int64_t l = 0; l < L; ++l)
    append_f32(out,
               rows_to_interleaved_rope(
                   row_range(layer(l, "self_attn.qkv_proj.weight"), H * D, (H + Hkv) * D), Hkv));
  for (int64_t l = 0; l < L; ++l)
    append_f32(out,
               row_range(layer(l, "self_attn.qkv_proj.weight"), (H + Hkv) * D, (H + 2 * Hkv) * D));
  for (int64_t l = 0; l < L; ++l) append_f32(out, layer(l, "self_attn.o_proj.weight"));
  for (int64_t l = 0; l < L; ++l) append_f32(out, layer(l, "post_attention_layernorm.weight"));
  for (int64_t l = 0; l < L; ++l)
    append_f32(out, row_range(layer(l, "mlp.gate_up_proj.weight"), 0, F));            // w1: gate
  for (int64_t l = 0; l < L; ++l) append_f32(out, layer(l, "mlp.down_proj.weight"));  // w2
  for (int64_t l = 0; l < L; ++l)
    append_f32(out, row_range(layer(l, "mlp.gate_up_proj.weight"), F, 2 * F));  // w3: up
  append_f32(out, param(kLlamaFinalNorm));

  // 3. freq_cis: cos and sin of t * theta^(-2j/D), [T, D/2] each (run.c computes its own).
  std::vector<float> real, imag;
  for (int64_t t = 0; t < c.block_size; ++t)
    for (int64_t j = 0; j < D / 2; ++j) {
      const double angle =
          static_cast<double>(t) *
          std::pow(c.rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(D));
      real.push_back(static_cast<float>(std::cos(angle)));
      imag.push_back(static_cast<float>(std::sin(angle)));
    }
  for (const auto* v : {&real, &imag})
    out.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(float));
  if (!c.tie_embeddings) append_f32(out, row_range(param(kLlamaLmHead), 0, c.vocab_size));
  return out;
}

}  // namespace glass
