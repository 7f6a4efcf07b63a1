// The kernel tables of kernels/cuda: one source, compiled in both builds (build.h). Compiled by
// the host compiler it defines emu_backend(), the `emu` table; compiled by nvcc it defines
// cuda_backend(), the `cuda` table, which the host compiler's build defines instead on the
// emulated CUDA runtime (the same launchers as emu's: each launch takes its device's path).
// kernels::backend(Device) in kernels/cpu/backend_cpu.cpp hands them out. The entries are the host
// launchers of this build's production kernels: what you read in softmax.cu is what runs. Only
// while GLASS_KERNEL_VARIANT (or a test) selects a kernel-ladder rung other than production
// (kernels/ladder.h) does the table hand out a copy whose five ladder entries run the selected
// rungs.
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

// A device's production table and its ladder copy.
struct Tables {
  explicit Tables(const char* name)
      : production(cuda_kernel_table(name)), selected(with_selected_rungs(production)) {}
  // The production table, or its ladder copy while a rung other than production is selected.
  const Backend& current() const { return ladder::rungs_selected() ? selected : production; }
  Backend production, selected;
};

}  // namespace

#if !defined(__CUDACC__)
const Backend& emu_backend() {
  static const Tables tables("emu");
  return tables.current();
}
#endif
#if defined(GLASS_CUDA_BUILD_SERVES_CUDA)
const Backend& cuda_backend() {
  static const Tables tables("cuda");
  return tables.current();
}
#endif

}  // namespace glass::kernels
