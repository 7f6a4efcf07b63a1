// llm.c's checkpoint file; see llmc_weights.h for the layout.
#include "nn/llmc_weights.h"

#include <bit>
#include <cstdint>
#include <cstring>

#include "autograd/ops.h"

namespace glass {

static_assert(std::endian::native == std::endian::little,
              "llm.c's files are little-endian; glass reads and writes them as-is");

namespace {

// The header fields after magic and version, as llm.c names them.
constexpr const char* kFieldNames[] = {"maxT", "V", "L", "H", "C", "Vp"};

// One block's parameters in llm.c's group order, each with its shape for width C.
struct LayerParam {
  const char* suffix;
  int64_t rows_per_c;  // rows in units of C (0: a vector of `cols_per_c` * C)
  int64_t cols_per_c;
};
constexpr LayerParam kLayerParams[] = {
    {"ln_1.weight", 0, 1},      {"ln_1.bias", 0, 1},          {"attn.c_attn.weight", 3, 1},
    {"attn.c_attn.bias", 0, 3}, {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 0, 1},
    {"ln_2.weight", 0, 1},      {"ln_2.bias", 0, 1},          {"mlp.c_fc.weight", 4, 1},
    {"mlp.c_fc.bias", 0, 4},    {"mlp.c_proj.weight", 1, 4},  {"mlp.c_proj.bias", 0, 1}};

// Every parameter in file order, with glass's name and shape.
std::vector<std::pair<std::string, Shape>> file_order(const GPTConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<std::pair<std::string, Shape>> order = {
      {"transformer.wte.weight", {c.table_rows(), C}},
      {"transformer.wpe.weight", {c.block_size, C}}};
  for (const LayerParam& p : kLayerParams)
    for (int64_t l = 0; l < c.n_layer; ++l)
      order.emplace_back(
          fmt::format("transformer.h.{}.{}", l, p.suffix),
          p.rows_per_c ? Shape{p.rows_per_c * C, p.cols_per_c * C} : Shape{p.cols_per_c * C});
  order.emplace_back("transformer.ln_f.weight", Shape{C});
  order.emplace_back("transformer.ln_f.bias", Shape{C});
  return order;
}

int32_t header_field(std::string_view bytes, int index) {
  int32_t v = 0;
  std::memcpy(&v, bytes.data() + 4 * index, 4);
  return v;
}

}  // namespace

bool looks_like_llmc(std::string_view bytes) {
  return bytes.size() >= 4 && header_field(bytes, 0) == kLlmcMagic;
}

GPTWeights parse_llmc_weights(std::string_view bytes, const std::string& name) {
  // 1. The header: present, llm.c's magic, a version we read, positive sizes.
  GLASS_CHECK(bytes.size() >= kLlmcHeaderBytes,
              "llm.c checkpoint {}: the file is {} bytes, shorter than the {}-byte header", name,
              bytes.size(), kLlmcHeaderBytes);
  GLASS_CHECK(header_field(bytes, 0) == kLlmcMagic,
              "llm.c checkpoint {}: magic number {} at byte 0, expected {}", name,
              header_field(bytes, 0), kLlmcMagic);
  const int32_t version = header_field(bytes, 1);
  GLASS_CHECK(version == kLlmcVersionF32 || version == kLlmcVersionBF16,
              "llm.c checkpoint {}: version {} at byte 4; glass reads {} (f32) and {} (bf16)", name,
              version, kLlmcVersionF32, kLlmcVersionBF16);
  int64_t field[6];
  for (int i = 0; i < 6; ++i) {
    field[i] = header_field(bytes, 2 + i);
    GLASS_CHECK(field[i] > 0, "llm.c checkpoint {}: header field {} (byte {}) is {}, must be > 0",
                name, kFieldNames[i], 4 * (2 + i), field[i]);
  }
  const int64_t maxT = field[0], V = field[1], L = field[2], H = field[3], C = field[4],
                Vp = field[5];
  GLASS_CHECK(C % H == 0, "llm.c checkpoint {}: C={} is not divisible by H={}", name, C, H);
  GLASS_CHECK(Vp >= V, "llm.c checkpoint {}: padded V {} is smaller than V {}", name, Vp, V);
  const GPTConfig config{.vocab_size = V,
                         .block_size = maxT,
                         .n_layer = L,
                         .n_head = H,
                         .n_embd = C,
                         .dropout = 0,
                         .padded_vocab_size = Vp == V ? 0 : Vp};

  // 2. The bytes the header implies must be exactly the bytes that follow it, checked before any
  //    allocation, in 128-bit arithmetic that no header can overflow (each field < 2^31).
  const DType dtype = version == kLlmcVersionF32 ? DType::f32 : DType::bf16;
  using u128 = unsigned __int128;
  const u128 c = static_cast<u128>(C);
  u128 per_layer = 0;
  for (const LayerParam& p : kLayerParams)
    per_layer += p.rows_per_c ? static_cast<u128>(p.rows_per_c * p.cols_per_c) * c * c
                              : static_cast<u128>(p.cols_per_c) * c;
  const u128 params = static_cast<u128>(Vp) * c + static_cast<u128>(maxT) * c +
                      static_cast<u128>(L) * per_layer + 2 * c;  // wte, wpe, blocks, ln_f
  const u128 need = params * dtype_size(dtype);
  const uint64_t have = bytes.size() - kLlmcHeaderBytes;
  GLASS_CHECK(need == have,
              "llm.c checkpoint {}: the header (maxT={} V={} L={} H={} C={} Vp={}, {}) needs {} "
              "bytes of parameters after the {}-byte header, but the file has {}{}",
              name, maxT, V, L, H, C, Vp, dtype_name(dtype),
              need > static_cast<u128>(UINT64_MAX) ? UINT64_MAX : static_cast<uint64_t>(need),
              kLlmcHeaderBytes, have, need > have ? " (truncated?)" : " (trailing bytes)");
  config.validate();

  // 3. Each parameter, copied out of its place in the file.
  GPTWeights w{
      .path = name, .layout = WeightLayout::llmc, .state = {}, .config = config, .metadata = {}};
  size_t offset = kLlmcHeaderBytes;
  for (const auto& [n, shape] : file_order(config)) {
    Tensor t = Tensor::empty(shape, dtype, kCPU);
    std::memcpy(t.raw_data(), bytes.data() + offset, t.nbytes());
    offset += t.nbytes();
    w.state.emplace_back(n, std::move(t));
  }
  return w;
}

std::string llmc_weights_bytes(const CausalLM& model, DType dtype) {
  GLASS_CHECK(dtype == DType::f32 || dtype == DType::bf16,
              "llm.c checkpoint: parameters are f32 or bf16, not {}", dtype_name(dtype));
  const GPTConfig& c = model.config;
  // 1. The header.
  int32_t header[256] = {};
  const int64_t values[8] = {kLlmcMagic,   dtype == DType::f32 ? kLlmcVersionF32 : kLlmcVersionBF16,
                             c.block_size, c.vocab_size,
                             c.n_layer,    c.n_head,
                             c.n_embd,     c.table_rows()};
  for (int i = 0; i < 8; ++i) header[i] = static_cast<int32_t>(values[i]);
  std::string bytes(reinterpret_cast<const char*>(header), sizeof(header));

  // 2. The parameters in llm.c's order, each copied to the host in the file's dtype.
  const NamedTensors params = model.named_parameters();
  for (const auto& [name, shape] : file_order(c)) {
    const Tensor* p = nullptr;
    for (const auto& [n, t] : params)
      if (n == name) p = &t;
    GLASS_CHECK(p != nullptr && p->shape() == shape,
                "llm.c checkpoint: the model has no parameter '{}' of shape {}", name,
                shape_str(shape));
    Tensor host = to_device(p->detach(), kCPU);
    if (host.dtype() != dtype) host = cast(host, dtype);
    host = contiguous(host);
    const size_t at = bytes.size();
    bytes.resize(at + host.nbytes());
    host.copy_to_host(bytes.data() + at);
  }
  return bytes;
}

}  // namespace glass
