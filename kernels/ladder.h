// Kernel ladders: for softmax forward, LayerNorm forward (and its RMSNorm pair), matmul and
// attention forward, a ladder of CUDA kernels from naive to fast (kernels/cuda/ladder,
// docs/kernel_ladders.md), each rung a small kernel that changes one thing. This registry lists the
// rungs, runs rung N on given tensors (device emu, or cuda where built), and selects the rung that
// training runs: the emu/cuda backend's softmax_forward, layernorm_forward, rmsnorm_forward, gemm
// and flash_attention_forward entries are selected_*() below, which run the rung
// GLASS_KERNEL_VARIANT names, while it names one other than the production kernel (otherwise the
// tables point at the production kernels themselves).
//
//   GLASS_KERNEL_VARIANT=softmax:1,layernorm:float4,rmsnorm:naive,matmul:0
//
// names a rung per op by index or name; ops not named keep their production kernel. The variable
// is read once, at the first call; a bad value throws a glass::Error naming the variable and
// listing the valid rungs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kernels/backend.h"

namespace glass::kernels::ladder {

enum class Op : uint8_t { softmax, layernorm, matmul, attention, rmsnorm };
inline constexpr std::array<Op, 5> kOps = {Op::softmax, Op::layernorm, Op::matmul, Op::attention,
                                           Op::rmsnorm};
// Rungs per ladder: 0 (naive) to 3 for softmax and layernorm; matmul and attention have a rung 4
// on the Tensor Cores (bf16 in, f32 accumulate) above their production rung: the Tensor Core GEMM,
// and FlashAttention-2 (kernels/cuda/flash_attention_mma.cu).
inline constexpr int kRungs = 4;
inline constexpr int kMatmulRungs = 5;
inline constexpr int kAttentionRungs = 5;
// RMSNorm (Llama's norm, in the LayerNorm ladder's file): a pair, naive and production.
inline constexpr int kRmsNormRungs = 2;
int rung_count(Op op);

const char* op_name(Op op);
Op parse_op(std::string_view name);  // throws listing the ops

struct Rung {
  int index;
  const char* name;         // short name, e.g. "float4"
  const char* kernel;       // the LaunchInfo kernel name of its launch
  const char* description;  // one line: what changed and why it should be faster
  bool production;          // the kernel the backend runs by default
  bool bf16;                // also takes bf16 operands (f32 accumulation), as gemm() does
  bool f32 = true;          // takes f32 operands (attention's Tensor Core rung: bf16 only; in an
                            // f32 ladder it gets the same inputs rounded to bf16)
};

std::span<const Rung> rungs(Op op);
const Rung& rung(Op op, int index);  // throws naming the op and listing its rungs
int production_rung(Op op);

// Rung N on given tensors: the backend entry's contract (kernels/backend.h). x's (or C's) device
// must be emu or cuda.
void run_softmax_forward(int rung, const Tensor& x, const Tensor& y);
void run_layernorm_forward(int rung, const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& y, const Tensor& mean, const Tensor& rstd, double eps);
// RMSNorm forward, f32 or bf16 (rstd f32): the rmsnorm_forward contract.
void run_rmsnorm_forward(int rung, const Tensor& x, const Tensor& weight, const Tensor& y,
                         const Tensor& rstd, double eps);
void run_gemm(int rung, const GemmArgs& args);
// C = A B for contiguous 2-D f32 a [M, K], b [K, N], c [M, N]: run_gemm with the plain arguments.
void run_matmul(int rung, const Tensor& a, const Tensor& b, const Tensor& c);
// Causal attention forward on qkv [B, T, (n_head + 2 n_kv_head) D]: the flash_attention_forward
// contract.
void run_attention_forward(int rung, const Tensor& qkv, const Tensor& out, const Tensor& lse,
                           int64_t n_head, int64_t n_kv_head, double scale);

// The rung of each op (indexed by Op) that the backend entries run.
struct Selection {
  std::array<int, kOps.size()> rung;
  bool operator==(const Selection&) const = default;
};
Selection default_selection();  // the production rungs
// Parses "op:rung,op:rung" (rung: index or name) over the default selection. `source` names
// where the text came from in error messages (e.g. "GLASS_KERNEL_VARIANT").
Selection parse_selection(std::string_view text, std::string_view source);
// GLASS_KERNEL_VARIANT, parsed (the default selection when unset or empty).
Selection selection_from_env();
// The selection the backend entries run: selection_from_env() at first use, or what
// set_active_selection() put there last (call it between launches, e.g. in tests or tools).
Selection active_selection();
void set_active_selection(const Selection& s);
// e.g. "softmax:2,layernorm:2,matmul:3,attention:3,rmsnorm:1"
std::string selection_string(const Selection& s);

// Whether the active selection runs a rung other than the production kernel for some op. The emu
// and cuda kernel tables point at the production kernels; only while this holds do they route
// their five ladder entries through selected_*() (kernels/cuda/backend_table.cu).
bool rungs_selected();

// The ladder's entries of the emu and cuda kernel tables: the active rung of the op.
void selected_softmax_forward(const Tensor& x, const Tensor& y);
void selected_layernorm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                const Tensor& y, const Tensor& mean, const Tensor& rstd,
                                double eps);
void selected_rmsnorm_forward(const Tensor& x, const Tensor& weight, const Tensor& y,
                              const Tensor& rstd, double eps);
void selected_gemm(const GemmArgs& args);
void selected_attention_forward(const Tensor& qkv, const Tensor& out, const Tensor& lse,
                                int64_t n_head, int64_t n_kv_head, double scale);

// One device's ladder: rung i's launcher of each op (kernels/cuda/ladder/ladder_emu.cpp for emu).
struct LadderTable {
  std::array<void (*)(const Tensor&, const Tensor&), kRungs> softmax_forward;
  std::array<void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                      const Tensor&, double),
             kRungs>
      layernorm_forward;
  std::array<void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double),
             kRmsNormRungs>
      rmsnorm_forward;
  std::array<void (*)(const GemmArgs&), kMatmulRungs> gemm;
  std::array<void (*)(const Tensor&, const Tensor&, const Tensor&, int64_t, int64_t, double),
             kAttentionRungs>
      attention_forward;
};
const LadderTable& ladder_table(Device d);  // throws for a device without ladders (cpu)

}  // namespace glass::kernels::ladder
