// The kernel tables of kernels/cuda: one source, compiled in both builds (build.h). Compiled for
// the emulator it defines emu_backend(), the `emu` table; compiled by nvcc it defines
// cuda_backend(), the `cuda` table. kernels::backend(Device) in kernels/cpu/backend_cpu.cpp hands
// them out. The entries are the host launchers of this build's production kernels: what you read
// in softmax.cu is what runs. Only while GLASS_KERNEL_VARIANT (or a test) selects a kernel-ladder
// rung other than production (kernels/ladder.h) does the table hand out a copy whose five ladder
// entries run the selected rungs.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/ladder.h"

namespace glass::kernels {

namespace {

// One entry per kernel of kernels/kernel_list.inc: this build's function, except cuDNN's attention
// (kernels/cuda/cudnn_attention.cu), which is in the table only of nvcc's build where cuDNN 9 was
// found, never on emu (its function there refuses; the null entry says "not built" up front).
#if !defined(GLASS_EMU) && defined(GLASS_HAS_CUDNN)
#define GLASS_CUDA_ENTRY_cudnn(kernel) k::kernel
#else
#define GLASS_CUDA_ENTRY_cudnn(kernel) nullptr
#endif
#define GLASS_CUDA_ENTRY_every(kernel) k::kernel
#define GLASS_CUDA_ENTRY_emu_cuda(kernel) k::kernel
Backend cuda_kernel_table(const char* name) {
  namespace k = cuda::GLASS_CUDA_BUILD;
#define GLASS_KERNEL(kernel, on, params) .kernel = GLASS_CUDA_ENTRY_##on(kernel),
  return Backend{
      .name = name,
#include "kernels/kernel_list.inc"
  };
}
#undef GLASS_CUDA_ENTRY_cudnn
#undef GLASS_CUDA_ENTRY_every
#undef GLASS_CUDA_ENTRY_emu_cuda

// `table` with its softmax forward, LayerNorm forward, RMSNorm forward, GEMM and attention forward
// entries running the selected kernel-ladder rungs instead.
Backend with_selected_rungs(Backend table) {
  table.softmax_forward = ladder::selected_softmax_forward;
  table.layernorm_forward = ladder::selected_layernorm_forward;
  table.rmsnorm_forward = ladder::selected_rmsnorm_forward;
  table.gemm = ladder::selected_gemm;
  table.flash_attention_forward = ladder::selected_attention_forward;
  return table;
}

// The production table, or its ladder copy while a rung other than production is selected.
const Backend& table_for(const char* name) {
  static const Backend production = cuda_kernel_table(name);
  static const Backend selected = with_selected_rungs(production);
  return ladder::rungs_selected() ? selected : production;
}

}  // namespace

#if defined(GLASS_EMU)
const Backend& emu_backend() { return table_for("emu"); }
#else
const Backend& cuda_backend() { return table_for("cuda"); }
#endif

}  // namespace glass::kernels
