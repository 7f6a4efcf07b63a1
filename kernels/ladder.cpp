// The kernel-ladder registry: the rungs of each op, running rung N on a device, and the selection
// (GLASS_KERNEL_VARIANT) that the emu/cuda backend entries follow. See kernels/ladder.h.
#include "kernels/ladder.h"

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <optional>

#include "engine/error.h"

namespace glass::kernels::ladder {

namespace {

constexpr const char* kVariable = "GLASS_KERNEL_VARIANT";

const Rung kSoftmaxRungs[kRungs] = {
    {0, "naive", "softmax_forward_naive",
     "one thread per row: a warp reads 32 rows at once, cols floats apart (uncoalesced)", false,
     false},
    {1, "coalesced", "softmax_forward_coalesced",
     "one block per row, threads stride over columns (coalesced); thread 0 adds the partials",
     false, false},
    {2, "shuffle", "softmax_forward",
     "production (softmax.cu): warp-shuffle butterfly reductions, log2 steps instead of blockDim",
     true, false},
    {3, "float4", "softmax_forward_float4",
     "128-bit loads and stores (scalar head and tail), a quarter of the memory instructions", false,
     false},
};

const Rung kLayerNormRungs[kRungs] = {
    {0, "naive", "layernorm_forward_naive",
     "one thread per row: a warp reads 32 rows at once, C floats apart (uncoalesced)", false,
     false},
    {1, "coalesced", "layernorm_forward_coalesced",
     "one block per row, threads stride over columns (coalesced); thread 0 adds the partials",
     false, false},
    {2, "shuffle", "layernorm_forward",
     "production (layernorm.cu): warp-shuffle butterfly reductions, log2 steps instead of blockDim",
     true, false},
    {3, "float4", "layernorm_forward_float4",
     "128-bit loads and stores of x and y (scalar head and tail), a quarter of the instructions",
     false, false},
};

// Both take bf16 x (f32 sums and rstd), so a bf16 Llama can run either.
const Rung kRmsNormLadder[kRmsNormRungs] = {
    {0, "naive", "rmsnorm_forward_naive",
     "one thread per row (uncoalesced, few threads), the LayerNorm naive rung less the mean", false,
     true},
    {1, "vector", "rmsnorm_forward",
     "production (rmsnorm.cu): a block per row, 16-byte vectors, one shuffle reduction (sum x^2)",
     true, true},
};

const Rung kMatmulLadder[kMatmulRungs] = {
    {0, "naive", "matmul_naive",
     "one thread per output, 2k loads from global memory for 2k FLOPs: no reuse", false, false},
    {1, "smem", "matmul_smem_tiled",
     "16x16 tiles of A and B staged in shared memory: each load serves 16 outputs", false, false},
    {2, "register", "matmul_register_tiled",
     "64x64 block tile, 4x4 outputs per thread in registers: 4x more reuse per shared read", false,
     false},
    {3, "cublas", "cublasSgemmStridedBatched",
     "production (gemm.cu): cuBLAS SGEMM (bf16: cublasGemmStridedBatchedEx)", true, true},
    {4, "tensor_core", "matmul_tensor_core_mma",
     "bf16 mma.sync on the Tensor Cores (f32 inputs rounded to bf16, f32 sums), ldmatrix, "
     "cp.async double-buffered 128x128x32 tiles",
     false, true},
};

const Rung kAttentionLadder[kAttentionRungs] = {
    {0, "naive", "attention_scores_naive",
     "three launches (scores, softmax, P V): S and P [B, H, T, T] written and read back", false,
     false},
    {1, "row-fused", "attention_row_fused",
     "scores + softmax in one launch per row, S in shared memory: only P goes through memory",
     false, false},
    {2, "tiled", "attention_forward_tiled",
     "FlashAttention: K, V tiles in shared memory, online softmax, thread per row: no T x T", false,
     false},
    {3, "flash", "flash_attention_forward",
     "production (flash_attention.cu): 8 threads per row share its scores and dims (shuffles)",
     true, true},
    {4, "mma", "flash_attention_forward_mma",
     "FlashAttention-2 on the Tensor Cores (flash_attention_mma.cu, bf16 only): S and P V by "
     "mma.sync, softmax on the accumulators, cp.async double-buffered K and V",
     false, true, false},
};

// "0 naive, 1 coalesced, 2 shuffle (production), 3 float4"
std::string rung_list(Op op) {
  std::string out;
  for (const Rung& r : rungs(op))
    out += fmt::format("{}{} {}{}", out.empty() ? "" : ", ", r.index, r.name,
                       r.production ? " (production)" : "");
  return out;
}

std::string op_list() {
  std::string out;
  for (Op op : kOps) out += fmt::format("{}{}", out.empty() ? "" : ", ", op_name(op));
  return out;
}

// The op called `name`, if any.
std::optional<Op> find_op(std::string_view name) {
  for (Op op : kOps)
    if (name == op_name(op)) return op;
  return std::nullopt;
}

// The rung `text` names (an index or a name), or -1.
int find_rung(Op op, std::string_view text) {
  int index = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (ec == std::errc() && end == text.data() + text.size())
    return index >= 0 && index < rung_count(op) ? index : -1;
  for (const Rung& r : rungs(op))
    if (text == r.name) return r.index;
  return -1;
}

// The active selection: read from the environment at first use (a bad value throws, and throws
// again at the next use), replaced by set_active_selection. Atomics: a cheap read per launch.
struct ActiveRungs {
  std::array<std::atomic<int>, kOps.size()> rung;
  std::atomic<bool> not_production{false};  // some op runs a rung other than its production one
  ActiveRungs() { store(selection_from_env()); }
  void store(const Selection& s) {
    for (size_t i = 0; i < rung.size(); ++i) rung[i].store(s.rung[i], std::memory_order_relaxed);
    not_production.store(!(s == default_selection()), std::memory_order_relaxed);
  }
};

ActiveRungs& active() {
  static ActiveRungs rungs;
  return rungs;
}

int active_rung(Op op) {
  return active().rung[static_cast<size_t>(op)].load(std::memory_order_relaxed);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::softmax:
      return "softmax";
    case Op::layernorm:
      return "layernorm";
    case Op::matmul:
      return "matmul";
    case Op::attention:
      return "attention";
    case Op::rmsnorm:
      return "rmsnorm";
  }
  return "?";
}

Op parse_op(std::string_view name) {
  if (const std::optional<Op> op = find_op(name)) return *op;
  fail("kernel ladder: unknown op '{}' (ops with a ladder: {})", name, op_list());
}

std::span<const Rung> rungs(Op op) {
  switch (op) {
    case Op::softmax:
      return kSoftmaxRungs;
    case Op::layernorm:
      return kLayerNormRungs;
    case Op::matmul:
      return kMatmulLadder;
    case Op::attention:
      return kAttentionLadder;
    case Op::rmsnorm:
      return kRmsNormLadder;
  }
  fail("kernel ladder: unknown op {}", static_cast<int>(op));
}

int rung_count(Op op) { return static_cast<int>(rungs(op).size()); }

const Rung& rung(Op op, int index) {
  GLASS_CHECK(index >= 0 && index < rung_count(op), "kernel ladder: {} has no rung {} (rungs: {})",
              op_name(op), index, rung_list(op));
  return rungs(op)[index];
}

int production_rung(Op op) {
  for (const Rung& r : rungs(op))
    if (r.production) return r.index;
  fail("kernel ladder: {} has no production rung", op_name(op));
}

#if defined(GLASS_HAS_EMU)
const LadderTable& emu_ladder_table();  // kernels/cuda/ladder/ladder_table.cu, compiled for emu
#endif
#if defined(GLASS_HAS_CUDA)
const LadderTable& cuda_ladder_table();  // kernels/cuda/ladder/ladder_table.cu, compiled by nvcc
#endif

const LadderTable& ladder_table(Device d) {
#if defined(GLASS_HAS_EMU)
  // meta plans the emu table's launches (engine/device.h)
  if (d.kind == DeviceKind::emu || d.kind == DeviceKind::meta) return emu_ladder_table();
#endif
#if defined(GLASS_HAS_CUDA)
  if (d.kind == DeviceKind::cuda) return cuda_ladder_table();
#endif
  fail(
      "kernel ladder: the rungs are CUDA kernels and run on emu or cuda (meta plans them); there "
      "are none for {}",
      d.str());
}

void run_softmax_forward(int index, const Tensor& x, const Tensor& y) {
  ladder_table(x.device()).softmax_forward[rung(Op::softmax, index).index](x, y);
}

void run_layernorm_forward(int index, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps) {
  ladder_table(x.device())
      .layernorm_forward[rung(Op::layernorm, index).index](x, weight, bias, y, mean, rstd, eps);
}

void run_rmsnorm_forward(int index, const Tensor& x, const Tensor& weight, const Tensor& y,
                         const Tensor& rstd, double eps) {
  ladder_table(x.device()).rmsnorm_forward[rung(Op::rmsnorm, index).index](x, weight, y, rstd, eps);
}

// The ladder of the device a GEMM writes to.
const LadderTable& gemm_table(const GemmArgs& args) {
  GLASS_CHECK(args.c.defined(), "kernel ladder: matmul without an output C");
  return ladder_table(args.c.device());
}

void run_gemm(int index, const GemmArgs& args) {
  gemm_table(args).gemm[rung(Op::matmul, index).index](args);
}

void run_matmul(int index, const Tensor& a, const Tensor& b, const Tensor& c) {
  GLASS_CHECK(a.dim() == 2 && b.dim() == 2 && c.dim() == 2 && a.size(1) == b.size(0) &&
                  c.size(0) == a.size(0) && c.size(1) == b.size(1) && a.is_contiguous() &&
                  b.is_contiguous() && c.is_contiguous(),
              "kernel ladder: matmul needs contiguous a [M, K], b [K, N], c [M, N]; got a {}, b "
              "{}, c {}",
              a.describe(), b.describe(), c.describe());
  GemmArgs g;
  g.a = a;
  g.b = b;
  g.c = c;
  g.m = a.size(0);
  g.k = a.size(1);
  g.n = b.size(1);
  g.lda = std::max<int64_t>(g.k, 1);
  g.ldb = g.ldc = std::max<int64_t>(g.n, 1);
  run_gemm(index, g);
}

void run_attention_forward(int index, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                           int64_t n_head, int64_t n_kv_head, double scale) {
  ladder_table(qkv.device())
      .attention_forward[rung(Op::attention, index).index](qkv, out, lse, n_head, n_kv_head, scale);
}

Selection default_selection() {
  Selection s{};
  for (Op op : kOps) s.rung[static_cast<size_t>(op)] = production_rung(op);
  return s;
}

Selection parse_selection(std::string_view text, std::string_view source) {
  Selection s = default_selection();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t colon = item.find(':');
    GLASS_CHECK(colon != std::string_view::npos,
                "{}: '{}' is not op:rung (e.g. softmax:1,layernorm:float4,matmul:0; ops: {})",
                source, item, op_list());
    const std::string_view op_text = item.substr(0, colon), rung_text = item.substr(colon + 1);
    const std::optional<Op> found = find_op(op_text);
    GLASS_CHECK(found, "{}: unknown op '{}' in '{}' (ops: {})", source, op_text, item, op_list());
    const Op op = *found;
    const int index = find_rung(op, rung_text);
    GLASS_CHECK(index >= 0, "{}: {} has no rung '{}' (rungs: {})", source, op_name(op), rung_text,
                rung_list(op));
    s.rung[static_cast<size_t>(op)] = index;
  }
  return s;
}

Selection selection_from_env() {
  const char* value = std::getenv(kVariable);
  if (value == nullptr) return default_selection();
  return parse_selection(value, fmt::format("{}={}", kVariable, value));
}

Selection active_selection() {
  Selection s{};
  for (Op op : kOps) s.rung[static_cast<size_t>(op)] = active_rung(op);
  return s;
}

void set_active_selection(const Selection& s) {
  for (Op op : kOps) rung(op, s.rung[static_cast<size_t>(op)]);  // throws for a bad index
  active().store(s);
}

std::string selection_string(const Selection& s) {
  std::string out;
  for (Op op : kOps)
    out += fmt::format("{}{}:{}", out.empty() ? "" : ",", op_name(op),
                       s.rung[static_cast<size_t>(op)]);
  return out;
}

bool rungs_selected() { return active().not_production.load(std::memory_order_relaxed); }

void selected_softmax_forward(const Tensor& x, const Tensor& y) {
  ladder_table(x.device()).softmax_forward[active_rung(Op::softmax)](x, y);
}

void selected_layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                double eps) {
  ladder_table(x.device())
      .layernorm_forward[active_rung(Op::layernorm)](x, weight, bias, y, mean, rstd, eps);
}

void selected_rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& rstd, double eps) {
  ladder_table(x.device()).rmsnorm_forward[active_rung(Op::rmsnorm)](x, weight, y, rstd, eps);
}

void selected_gemm(const GemmArgs& args) { gemm_table(args).gemm[active_rung(Op::matmul)](args); }

void selected_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                int64_t n_head, int64_t n_kv_head, double scale) {
  ladder_table(qkv.device())
      .attention_forward[active_rung(Op::attention)](qkv, out, lse, n_head, n_kv_head, scale);
}

}  // namespace glass::kernels::ladder
