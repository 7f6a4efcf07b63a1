// Which build of kernels/cuda this translation unit is part of, and which devices it launches for.
//
// The same sources are compiled by nvcc for the `cuda` device and by the host compiler against
// the emulator (engine/emu/cuda_shim.h, which defines GLASS_EMU) for `emu`. Same names, different
// code: so everything they define lives in an inline namespace named after the build,
// glass::kernels::cuda::on_gpu or glass::kernels::cuda::on_emu, and the two never meet at link
// time (no ODR clash between, say, the two instantiations of launch_cuda_kernel). Source code
// still writes kernels::cuda::fill.
//
// With -DGLASS_CUDA_RUNTIME=emu the `cuda` device runs on the emulated CUDA runtime
// (GLASS_CUDA_RUNTIME_EMU), and the host compiler's build serves it as well: one compile, two
// kernel tables (emu_backend, cuda_backend), and each launch takes its device's path
// (LaunchInfo::device, kernel_launcher.h). nvcc's objects are then a compile check, not linked.
// Host C++ outside these builds (the tests that call emu kernels directly) sees on_emu.
#pragma once

#if defined(__CUDACC__)
#define GLASS_CUDA_BUILD on_gpu
#else
#define GLASS_CUDA_BUILD on_emu
#endif

// This build launches for the `cuda` device, through a CUDA runtime: nvcc's build on the real
// one, the host compiler's on the emulated one.
#if defined(__CUDACC__) || defined(GLASS_CUDA_RUNTIME_EMU)
#define GLASS_CUDA_BUILD_SERVES_CUDA 1
#endif
