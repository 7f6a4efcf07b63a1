// The `cpu` kernel table (from the kernel list, kernels/kernel_list.inc), and the dispatch point
// that picks a table by device.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/ladder.h"
#if defined(GLASS_HAS_CUDA)
#include "engine/cuda/runtime.h"
#endif

namespace glass::kernels {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::sub:
      return "sub";
    case BinaryOp::mul:
      return "mul";
    case BinaryOp::div:
      return "div";
  }
  return "?";
}

namespace {
// One entry per kernel of kernels/kernel_list.inc: cpu's function for `every`, null otherwise.
#define GLASS_KERNEL(kernel, on, params) .kernel = GLASS_CPU_ENTRY_##on(kernel),
#define GLASS_CPU_ENTRY_every(kernel) cpu::kernel
#define GLASS_CPU_ENTRY_emu_cuda(kernel) nullptr
#define GLASS_CPU_ENTRY_cudnn(kernel) nullptr
const Backend cpu_backend{
    .name = "cpu",
#include "kernels/kernel_list.inc"
};
#undef GLASS_CPU_ENTRY_every
#undef GLASS_CPU_ENTRY_emu_cuda
#undef GLASS_CPU_ENTRY_cudnn
}  // namespace

#if defined(GLASS_HAS_EMU)
const Backend& emu_backend();  // kernels/cuda/backend_table.cu, compiled for emu
#endif
#if defined(GLASS_HAS_CUDA)
const Backend& cuda_backend();  // kernels/cuda/backend_table.cu, compiled by nvcc
#endif

const Backend& backend(Device d) {
  switch (d.kind) {
    case DeviceKind::cpu: {
      // GLASS_KERNEL_VARIANT picks rungs of the emu/cuda kernel ladders, which cpu has none of.
      // It is still parsed, by the parser emu uses, so that a bad value is the same error on
      // every device instead of passing silently on cpu. Once: a bad value throws at each call.
      [[maybe_unused]] static const bool variant_checked = (ladder::selection_from_env(), true);
      return cpu_backend;
    }
    case DeviceKind::emu:
#if defined(GLASS_HAS_EMU)
      return emu_backend();
#else
      break;
#endif
    case DeviceKind::cuda:
#if defined(GLASS_HAS_CUDA)
      glass::cuda::require_device(d.index);  // the one clear error line when there is no such GPU
      return cuda_backend();
#else
      break;
#endif
    case DeviceKind::meta:
      // The emu table's host launchers, whose launches the gateway reports without running them
      // (engine/launch.h): the kernel names, grids, FLOPs and bytes of the same .cu sources that
      // the cuda table is compiled from.
#if defined(GLASS_HAS_EMU)
      return emu_backend();
#else
      break;
#endif
  }
  fail("no kernels for device {}", d.str());
}

}  // namespace glass::kernels
